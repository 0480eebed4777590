"""mlp-scratch backend `cupy`: net.py on CuPy, as the seed wrote it (numpy_xp.XpNet)."""

from __future__ import annotations

from bench.core.cell import Cell
from bench.studies.mlp_scratch import net
from bench.studies.mlp_scratch.backends.numpy_xp import XpNet


def available() -> str | None:
    return net.cupy_unavailable_reason()


def create(cell: Cell, data: None) -> XpNet:
    return XpNet("cupy", net.get_xp("cupy"), device=True)  # get_xp: BackendUnavailable with the reason
