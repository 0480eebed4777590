"""torch-cpu: DenseNet-121 transfer learning on the CPU (ddp over gloo ranks)."""

from __future__ import annotations


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cpu")


def create(cell, data):
    """The Trainer for CELL (its model facts in .facts); DATA has n_classes, data_dir, device and wrap (None | a wrapper)."""
    from bench.studies.profile.config import settings
    from bench.studies.profile.trainer import Trainer, build_model

    cfg = settings(cell)
    model, facts = build_model(cfg, data.n_classes, data.data_dir)
    return Trainer(cfg, model, data.device, data.wrap, facts)
