"""Colour by device, the same in every plot: CPUs in blues, NVIDIA GPUs in greens, Apple GPUs
(MPS) in purples, anything else in greys. Series of one family get its shades in order (the
markers and line styles the plots already vary keep series of one shade apart), so a reader
tells CPU from GPU at a glance in any figure of the report.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

SHADES = {
    "cpu": ("#1f5fae", "#6baed6", "#08306b", "#4292c6", "#9ecae1", "#2171b5", "#0b4f8a", "#c6dbef"),
    "nvidia": ("#2e7d32", "#74c476", "#00441b", "#41ab5d", "#a1d99b", "#238b45", "#006d2c", "#c7e9c0"),
    "apple": ("#6a1b9a", "#9e9ac8", "#3f007d", "#807dba", "#bcbddc", "#54278f", "#756bb1", "#dadaeb"),
    "other": ("#525252", "#969696", "#252525", "#737373", "#bdbdbd"),
}
FAMILY_NAMES = {"cpu": "CPU", "nvidia": "NVIDIA GPU", "apple": "Apple GPU (MPS)", "other": "other"}


def family(device: object, backend: object = "") -> str:
    """'cpu', 'nvidia', 'apple' or 'other', from a cell's backend (torch-cuda, numba-cuda, cupy,
    torch-mps, ...) or, without one, its device name."""
    b, d = str(backend or "").lower(), str(device or "").lower()
    if any(t in b for t in ("cuda", "cupy")) or any(t in d for t in ("nvidia", "h100", "h200", "a100", "rtx")):
        return "nvidia"
    if "mps" in b or "apple" in d:
        return "apple"
    if b.endswith("cpu") or b in ("numpy", "numba", "python") or any(t in d for t in ("cpu", "xeon", "epyc", "core", "ryzen")):
        return "cpu"
    return "other"


def colors(series: Sequence[tuple[K, str]]) -> dict[K, str]:
    """KEY -> colour for SERIES of (key, family), in order: each family's shades in turn."""
    used: dict[str, int] = {}
    out: dict[K, str] = {}
    for key, fam in series:
        if key in out:
            continue
        shades = SHADES.get(fam, SHADES["other"])
        out[key] = shades[used.get(fam, 0) % len(shades)]
        used[fam] = used.get(fam, 0) + 1
    return out


__all__ = ["FAMILY_NAMES", "SHADES", "colors", "family"]
