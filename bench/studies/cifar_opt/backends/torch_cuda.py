"""torch-cuda: torchvision models on an NVIDIA GPU (AMP, bf16, channels_last, compile, CUDA graphs)."""

from __future__ import annotations

from bench.studies.cifar_opt.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (torch.cuda.is_available() is False)"
    return None
