"""torch-cpu: torchvision models trained and served on the CPU."""

from __future__ import annotations


def available() -> str | None:
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    return None


def create(cell, data):
    from bench.studies.cifar_opt.trainer import Trainer

    return Trainer(data.cfg, data.split, data.batch_size, data.lr, data.cfg.seed)
