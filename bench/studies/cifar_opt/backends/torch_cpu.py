"""torch-cpu: torchvision models trained and served on the CPU."""

from __future__ import annotations


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cpu")


def create(cell, data):
    from bench.studies.cifar_opt.trainer import Trainer

    return Trainer(data.cfg, data.split, data.batch_size, data.lr, data.seed, data.variant, data.dist)
