"""torch-cpu: torchvision models trained on the CPU (fp32)."""

from __future__ import annotations


def available() -> str | None:
    try:
        import psutil  # noqa: F401  (CPU utilisation)
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision/psutil not installed: {err}"
    return None


def create(cell, data):
    from bench.studies.roofline.config import settings
    from bench.studies.roofline.trainer import Trainer

    return Trainer(settings(cell), data.n_classes)
