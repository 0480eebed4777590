"""mlp-scratch backend `numpy`."""

from __future__ import annotations

from bench.studies.mlp_scratch.backends import Variant


def available() -> str | None:
    try:
        import numpy  # noqa: F401
    except ImportError as err:
        return f"numpy not installed: {err}"
    return None


def create(cell, data) -> Variant:
    return Variant("numpy")
