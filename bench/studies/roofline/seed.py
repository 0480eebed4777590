"""Seed 003's tables, transcribed from /work/shared/seeds/003_*.txt (its numbering: Tables 1-8).

Devices as the seed names them: "MPS" (Apple M3 Pro GPU), "CPU" (cloud e2-standard-4, 4
vCPUs; its Table 3 row says "CPU" under the local/cloud heading, its Table 7 says cloud CPU),
"T4" (cloud Tesla T4). The seed's FLOPs/Image are at 224x224 and are multiply-accumulates
(1.824 G for ResNet-18: bench/measure/flops.py shows the 64-px FLOP count is 2 x that x
(64/224)^2); its AI divides them by the model's size in bytes (its eq. 2), not by bytes moved.
"""

from __future__ import annotations

DEVICES = ("MPS", "CPU", "T4")
KIND = {"cpu": "CPU", "cuda": "T4", "mps": "MPS"}  # our platform -> the seed's device of the same kind

# Table 1 (per 224x224 input) and Table 2 (AI = FLOPs/Image / model size)
COMPLEXITY = {  # model: (params M, "FLOPs"/image G at 224 (MACs), model size MB, AI FLOP/B)
    "resnet18": (11.69, 1.824, 44.67, 0.0408),
    "mobilenet_v2": (3.50, 0.328, 13.63, 0.0240),
    "resnet50": (25.56, 4.134, 97.81, 0.0423),
    "squeezenet1_1": (1.24, 0.349, 8.90, 0.0392),
}

# Table 3: train img/s, val img/s, TFLOP/s train, TFLOP/s val, peak GPU MB (None: N/A)
PERF = {
    ("resnet18", "MPS"): (110.07, 189.56, 0.306, 0.850, None),
    ("resnet18", "CPU"): (8.88, 27.64, 0.016, 0.050, None),
    ("resnet18", "T4"): (315.74, 412.36, 0.592, 0.775, 3135),
    ("mobilenet_v2", "MPS"): (99.64, 177.36, 0.047, 0.131, None),
    ("mobilenet_v2", "CPU"): (11.71, 47.94, 0.004, 0.016, None),
    ("mobilenet_v2", "T4"): (250.47, 379.06, 0.082, 0.128, 10278),
    ("resnet50", "MPS"): (50.60, 92.13, 0.249, 0.535, None),
    ("resnet50", "CPU"): (3.37, 11.78, 0.014, 0.049, None),
    ("resnet50", "T4"): (98.45, 312.44, 0.407, 1.297, 11345),
    ("squeezenet1_1", "MPS"): (178.03, 228.73, 0.140, 0.281, None),
    ("squeezenet1_1", "CPU"): (24.32, 60.35, 0.0085, 0.0211, None),
    ("squeezenet1_1", "T4"): (346.57, 407.77, 0.124, 0.148, 1503),
}

# Table 4: train epoch s, val epoch s
EPOCH = {
    ("resnet18", "MPS"): (58.15, 33.76),
    ("resnet18", "CPU"): (720.89, 231.59),
    ("resnet18", "T4"): (20.27, 15.52),
    ("mobilenet_v2", "MPS"): (64.23, 36.09),
    ("mobilenet_v2", "CPU"): (546.57, 133.51),
    ("mobilenet_v2", "T4"): (25.55, 16.88),
    ("resnet50", "MPS"): (126.49, 69.47),
    ("resnet50", "CPU"): (1899.62, 543.22),
    ("resnet50", "T4"): (65.01, 20.48),
    ("squeezenet1_1", "MPS"): (35.95, 27.98),
    ("squeezenet1_1", "CPU"): (263.17, 106.05),
    ("squeezenet1_1", "T4"): (9.23, 7.85),
}

# The seed's "epoch" is its max-batch control (section 1.4), not Tiny-ImageNet's 100,000 training
# images: Table 4's seconds x Table 3's img/s (train x train, val x val) is 6,400 images (50
# batches of 128) in 22 of its 24 entries, each within 2 images (ResNet-18 on the CPU: 720.89 s
# x 8.88 img/s = 6,401.5); the other two are SqueezeNet1.1 on the T4, 9.23 s x 346.57 = 3,198.8
# and 7.85 s x 407.77 = 3,201.0: 50 batches of 64, the batch it fell back to "to avoid NaNs".
# tests/test_roofline_report.py recomputes all 24.
EPOCH_BATCHES = 50
EPOCH_IMAGES = 6400
EPOCH_IMAGES_EXCEPT = {("squeezenet1_1", "T4"): 3200}


def epoch_images(model: str, device: str) -> int:
    """Images in the seed's epoch of MODEL on its DEVICE ("MPS" | "CPU" | "T4"), train or val."""
    return EPOCH_IMAGES_EXCEPT.get((model, device), EPOCH_IMAGES)


# Table 5: GPU util %, CPU util % (None: N/A)
UTIL = {
    ("resnet18", "MPS"): (None, 14.8),
    ("resnet18", "CPU"): (None, 2.4),
    ("resnet18", "T4"): (0, 5),
    ("mobilenet_v2", "MPS"): (None, 21.7),
    ("mobilenet_v2", "CPU"): (None, 0),
    ("mobilenet_v2", "T4"): (1, 0),
    ("resnet50", "MPS"): (None, 17.9),
    ("resnet50", "CPU"): (None, 0),
    ("resnet50", "T4"): (3, 0),
    ("squeezenet1_1", "MPS"): (None, 13.2),
    ("squeezenet1_1", "CPU"): (None, 0),
    ("squeezenet1_1", "T4"): (0, 10.5),
}

# Table 6: SqueezeNet1.1 batch sweep (its text says MPS, its caption says GPU/T4): batch, ~img/s, ~GFLOP/s
SWEEP = [(32, "~160", "~50"), (64, "~300", "~80"), (128, "NaNs / unstable", "invalid")]

# Table 7: peak FP32 GFLOP/s, memory bandwidth GB/s ("approximate" for the CPU)
PEAKS = {"Apple M3 Pro (MPS)": (5700, 150), "Cloud CPU (4 vCPU, approx.)": (160, 30), "NVIDIA Tesla T4 (CUDA)": (8100, 320)}

# Table 8: speedups (throughput ratios): GPU/M3, GPU/CPU, M3/CPU
SPEEDUP = {
    "resnet18": (2.87, 35.5, 12.4),
    "mobilenet_v2": (2.51, 21.4, 8.5),
    "resnet50": (1.93, 29.2, 15.0),
    "squeezenet1_1": (1.95, 14.2, 7.3),
}
