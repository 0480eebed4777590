"""torch-cuda: torchvision models on an NVIDIA GPU (fp32, tf32, bf16 autocast + channels_last)."""

from __future__ import annotations

from bench.studies.roofline.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (torch.cuda.is_available() is False)"
    return None
