"""The 28x28 handwritten-digit family: real MNIST (bench.data.mnist) or the embedded default
(bench.data.embedded), picked by a cell's `dataset` ("auto": MNIST when the data dir holds it).
Studies reach it through bench.data.digit_params / digit_data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.core.errors import KitError
from bench.data import check_resolved, data_dir_named, fetch_hint, resolve_data_dir, shown
from bench.data.embedded import load_digits_28
from bench.data.mnist import Dataset, load_mnist


def _nonempty(d: Path) -> bool:
    try:
        return any(d.iterdir())
    except OSError:
        return True  # unreadable: let load_mnist say so


def load_dataset(data_dir: str | os.PathLike | None, dataset: str = "auto") -> Dataset:
    """dataset: "auto" (MNIST if present, else the embedded default), "mnist" (required), "digits".
    The rule every dataset follows (bench.data.images.select, cifar10.load): a named data dir
    must exist; 'auto' on one without the real data falls back to the embedded default and says
    so on stderr (one data dir serves every study, and rows record which data ran); only a
    dataset asked for by name must be there."""
    if dataset not in ("auto", "mnist", "digits"):
        raise KitError(f"unknown dataset {dataset!r}: choose auto, mnist or digits")
    root = resolve_data_dir(data_dir)
    named = data_dir_named(data_dir)
    # a data dir someone named must exist and hold the data: a typo never silently falls back to the digits
    if (named or dataset == "mnist") and not root.is_dir():
        raise KitError(
            f"data dir {shown(root)} does not exist; pass --data-dir, set KIT_DATA_DIR, or fetch it: {fetch_hint('mnist', root)}"
        )
    if dataset == "digits":  # asked for by name
        return load_digits_28()
    if root.is_dir() and not os.access(root, os.R_OK | os.X_OK):
        raise KitError(f"cannot read data dir {shown(root)} as uid {os.getuid()} (permission denied): make it readable")
    held = root / "mnist"
    # an empty mnist/ (what an interrupted fetch could leave) holds nothing: as if absent
    if dataset == "mnist" or (held.is_dir() and (named or _nonempty(held))):
        return load_mnist(root)  # a partial or corrupt mnist/ is an error, never a silent fallback
    if named:
        print(
            f"mnist: no mnist/ in {shown(root)}: using the embedded digits (not MNIST; rows say so); "
            f"fetch it: {fetch_hint('mnist', root)}",
            file=sys.stderr,
        )
    return load_digits_28()  # nothing was asked for: the embedded default (rows and the report say so)


_CACHE: dict[tuple[str, str], Dataset] = {}


def load_cached(data_dir: str | os.PathLike | None, dataset: str) -> Dataset:
    """load_dataset, once per (resolved dir, dataset) in this process (a matrix resolves many cells)."""
    key = (str(resolve_data_dir(data_dir).absolute()), dataset)
    if key not in _CACHE:
        _CACHE[key] = load_dataset(data_dir, dataset)
    return _CACHE[key]


def resolve_params(params: dict, data_dir: str | os.PathLike | None) -> dict:
    """The data identity a cell records: dataset 'mnist' or 'digits' (never 'auto') and the
    checksum of exactly the arrays it will train on, so other data is another cell."""
    ds = load_cached(data_dir, params.get("dataset", "auto"))
    return {"dataset": "mnist" if ds.real_mnist else "digits", "dataset_sha256": ds.checksum}


def load_for_cell(params: dict, data_dir: str | os.PathLike | None) -> Dataset:
    """The cell's dataset; a checksum other than the one the cell was resolved for is an error."""
    ds = load_cached(data_dir, params.get("dataset", "auto"))
    check_resolved(ds.name, ds.source, ds.checksum, params.get("dataset_sha256"))
    return ds
