"""mlp-scratch backend `cupy`."""

from __future__ import annotations

from bench.studies.mlp_scratch.backends import Variant


def available() -> str | None:
    from bench.studies.mlp_scratch.net import cupy_unavailable_reason

    return cupy_unavailable_reason()


def create(cell, data) -> Variant:
    return Variant("cupy")
