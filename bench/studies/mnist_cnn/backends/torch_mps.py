"""torch-mps: the seed CNN through PyTorch on an Apple-silicon GPU (native runtime only)."""

from __future__ import annotations


def available() -> str | None:
    try:
        import torch
    except ImportError as err:
        return f"torch not installed: {err}"
    if not torch.backends.mps.is_available():
        return "no Apple MPS device (needs macOS on Apple silicon, run natively)"
    return None


def create(cell, data):
    from bench.studies.mnist_cnn.backends.torch_common import TorchTrainer

    return TorchTrainer(data.cfg, data.params, data.dataset, device="mps")
