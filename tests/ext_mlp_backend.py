"""An mlp-scratch backend kept outside the kit, to prove a new backend is one module plus one
registry entry: `numpy-view`, net.py on NumPy with XT a transposed view of X ((784, m),
Fortran order) instead of the C-contiguous copy net.prepare_data makes (does that copy pay?).

Its entry is added to MlpScratch.backends at run time, nothing else: by a test with
monkeypatch, or, where KIT_STUDY_MODULES names this module (with tests/ on PYTHONPATH: the
processes of `bench matrix`, which import it after the kit's studies), on import.
"""

from __future__ import annotations

import os

import numpy as np

from bench.core.cell import Cell
from bench.core.study import BackendSpec
from bench.studies.mlp_scratch import MlpScratch, net
from bench.studies.mlp_scratch.backends.numpy_xp import XpNet

NAME = "numpy-view"
SPEC = BackendSpec(__name__, "cpu", family="numpy", about="net.py on NumPy, XT a view of X (no transposed copy)")


class ViewNet(XpNet):
    def prepare(self, X, y, dtype: str) -> tuple:
        """XT (784, m): X in DTYPE (a copy only where the dtype differs), transposed as a view."""
        return np.asarray(X, dtype=net.resolve_dtype(dtype)).T, np.asarray(y, dtype=np.int64)


def available() -> str | None:
    return None


def create(cell: Cell, data: None) -> ViewNet:
    return ViewNet(NAME, np)


if __name__ in (m.strip() for m in os.environ.get("KIT_STUDY_MODULES", "").split(",")):
    MlpScratch.backends = {**MlpScratch.backends, NAME: SPEC}
