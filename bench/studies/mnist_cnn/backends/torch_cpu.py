"""torch-cpu: the seed CNN through PyTorch on the CPU (pipelines seed and resident)."""

from __future__ import annotations


def available() -> str | None:
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    return None


def create(cell, data):
    from bench.studies.mnist_cnn.backends.torch_common import TorchTrainer

    return TorchTrainer(data.cfg, data.params, data.dataset, device="cpu", dist=data.dist)
