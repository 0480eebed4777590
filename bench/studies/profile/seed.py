"""What seed 004 (Gyawali, "Comparative Analysis of CPU and GPU Profiling for Deep Learning
Models") reported, transcribed: DenseNet-121 transfer learning, cats vs dogs (8,005 training
and 2,023 test images), Adam, 20 epochs, on an Intel Xeon Gold 6256 and two NVIDIA RTX A6000s
(Windows 11; nvidia-smi screenshots). Its GPU figures are single nvidia-smi readings. The
claims it makes from them are declared in claims.py."""

from __future__ import annotations

SETUP = {
    "train_images": 8005,
    "test_images": 2023,
    "epochs": 20,
    "gpus": "2x NVIDIA RTX A6000 (300 W)",
    "cpu": "Intel Xeon Gold 6256",
}

# per batch size (global: spread over both GPUs by nn.DataParallel): GPU:0 / GPU:1 readings from
# its Figs. 4 and 7 (nvidia-smi at one moment; memory in nvidia-smi's MiB)
GPU = {
    64: {"util_pct": (3, 14), "mem_mb": (3564, 2374), "temp_c": (59, 38), "power_w": (77, 23)},
    128: {"util_pct": (69, 14), "mem_mb": (5060, 1838), "temp_c": (69, 41), "power_w": (152, 23)},
}
CPU = {"util_pct": "60-63", "processes": 307, "threads": 5410, "clock_ghz": 4.10, "memory_gb": 32, "temp_c": "60-70"}
TRAINING_TIME_H = {"cpu": 13.0, "gpu_b64": 2.0, "gpu_b128": 1.25}  # 20 epochs
CPU_OVER_GPU = TRAINING_TIME_H["cpu"] / TRAINING_TIME_H["gpu_b64"]  # 6.5
B128_OVER_B64 = TRAINING_TIME_H["gpu_b64"] / TRAINING_TIME_H["gpu_b128"]  # 1.6
INFERENCE_S_CPU, INFERENCE_S_GPU = 5.0, (2.0, 3.0)  # "the testing time for one image"
TEST_ACC = "98-99 %"  # CPU and GPU alike
TOP_OPERATOR = "'t' (its reading: copying data to the GPU)"  # Fig. 11; aten::t is in fact a transpose (a view)
