"""torch-cpu: torchvision models trained on the CPU (fp32)."""

from __future__ import annotations


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cpu")


def create(cell, data):
    from bench.studies.roofline.config import settings
    from bench.studies.roofline.trainer import Trainer

    return Trainer(settings(cell), data.index.n_classes, dist=data.dist)
