"""What seed 004 (Gyawali, "Comparative Analysis of CPU and GPU Profiling for Deep Learning
Models") reported, transcribed: DenseNet-121 transfer learning, cats vs dogs (8,005 training
and 2,023 test images), Adam, 20 epochs, on an Intel Xeon Gold 6256 and two NVIDIA RTX A6000s
(Windows 11; nvidia-smi screenshots). Its GPU figures are single nvidia-smi readings."""

from __future__ import annotations

SETUP = {
    "train_images": 8005,
    "test_images": 2023,
    "epochs": 20,
    "gpus": "2x NVIDIA RTX A6000 (300 W)",
    "cpu": "Intel Xeon Gold 6256",
}

# per batch size: GPU:0 / GPU:1 readings from its Figs. 4 and 7 (nvidia-smi at one moment)
GPU = {
    64: {"util_pct": (3, 14), "mem_mb": (3564, 2374), "temp_c": (59, 38), "power_w": (77, 23)},
    128: {"util_pct": (69, 14), "mem_mb": (5060, 1838), "temp_c": (69, 41), "power_w": (152, 23)},
}
CPU = {"util_pct": "60-63", "processes": 307, "threads": 5410, "clock_ghz": 4.10, "memory_gb": 32, "temp_c": "60-70"}
TRAINING_TIME_H = {"cpu": 13.0, "gpu_b64": 2.0, "gpu_b128": 1.25}  # 20 epochs
TEST_ACC = "98-99 %"  # CPU and GPU alike
TOP_OPERATOR = "'t' (its reading: copying data to the GPU)"  # Fig. 11; aten::t is in fact a transpose (a view)

# (key, the seed's claim, what the kit reads it from, what checking it needs); claims.py gives
# each key its verdict from the cells of a report
CLAIMS = [
    (
        "gpu-vs-cpu",
        "GPU training is far faster than CPU: 13 h vs 2 h for 20 epochs at batch 64 (6.5x)",
        "CPU and GPU cells at 224 px, batch 64, each projected to the seed's 20 epochs x 8,005 images",
        "a CPU cell at 224 px (the CPU's default profile: a reduced protocol, projected); timing is data-independent",
    ),
    (
        "b128-vs-b64",
        "On the GPU, batch 128 trains faster than 64: 1 h 15 min vs 2 h (1.6x)",
        "GPU cells at batch 128 and 64 on the same pipeline and variant, projected the same way",
        "none",
    ),
    (
        "gpu0-memory",
        "GPU:0 uses much more memory than GPU:1 (3.4 vs 2.2 GB at b64; 5 vs 1.7 GB at b128)",
        "per-GPU memory under DataParallel vs DDP",
        "a 2-GPU host",
    ),
    (
        "low-util-b64",
        "Low GPU utilisation at batch 64 (3 % / 14 %), higher at 128 (69 %)",
        "NVML utilisation sampled at >= 10 Hz over the timed epochs",
        "none for GPU:0; a 2-GPU host for GPU:1",
    ),
    (
        "power-b128",
        "Power 152 W of 300 W at batch 128",
        "NVML power and the energy counter, idle baseline subtracted",
        "an RTX A6000 for the figure itself (another GPU draws its own)",
    ),
    (
        "copy-dominates",
        "The most time goes to copying data to the GPU ('t' operator)",
        "operator table by self device time; step breakdown's memcpy share",
        "none: aten::t is a transpose, not a copy; memcpy is measured apart",
    ),
    (
        "accuracy",
        "Test accuracy 98-99 % on CPU and GPU",
        "test_acc per epoch, the whole split",
        "the real cats-vs-dogs images and the ImageNet weights (densenet121-a639ec97.pth)",
    ),
]
