"""Datasets: readers of each dataset's official format, checksum-verified fetch, and the
embedded defaults. Studies and the host reach data only through this module's names.

Data dir: --data-dir, else $KIT_DATA_DIR, else ./data; each dataset lives in its own
subdirectory (<data dir>/<name>/), a synthetic set in <data dir>/<name>-synthetic/.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from bench.core.errors import KitError, UsageError

# name -> (module, function(data_dir, mirrors, timeout_s, progress) -> list[Path], default mirrors attr)
FETCHERS = {
    "mnist": ("bench.data.fetch", "fetch_mnist", "MIRRORS"),
    "tinyimagenet": ("bench.data.tinyimagenet", "fetch_tinyimagenet", "MIRRORS"),
    "cifar10": ("bench.data.cifar10", "fetch_cifar10", "MIRRORS"),
}
# datasets a user puts into <data dir>/<name>/ by hand (no official archive with a checksum to fetch)
PLACED = {"catsdogs": "bench.data.imagefolder"}
# name -> (module, function(root, **kw) -> Path): writes <root>/<name>-synthetic/..., the dataset's
# official format or layout with synthetic, learnable content
SYNTHESIZERS = {
    "cifar10": ("bench.data.cifar10", "write_synthetic"),
    "tinyimagenet": ("bench.data.tinyimagenet", "write_synthetic"),
    "catsdogs": ("bench.data.imagefolder", "write_synthetic"),
}
# the 28x28 handwritten-digit family: the real dataset, or the embedded default (auto: real when present)
DIGIT_DATASETS = ("auto", "mnist", "digits")


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """--data-dir, else $KIT_DATA_DIR, else $KIT_DEFAULT_DATA_DIR (the images: /data), else ./data.
    It need not exist."""
    if data_dir:
        return Path(data_dir)
    for env in ("KIT_DATA_DIR", "KIT_DEFAULT_DATA_DIR"):
        if os.environ.get(env):
            return Path(os.environ[env])
    return Path("data")


def data_dir_named(data_dir: str | os.PathLike | None) -> bool:
    """True when the user named the data dir (--data-dir or $KIT_DATA_DIR): then a dataset
    missing there is an error. Only an unnamed default may fall back to the embedded data."""
    return bool(data_dir) or bool(os.environ.get("KIT_DATA_DIR"))


def in_container() -> bool:
    return os.environ.get("KIT_RUNTIME") == "container"


def shown(root: Path) -> str:
    """ROOT as the person reading an error knows it: in a container, /data is the mount of a
    host dir (orchestrate and compose pass its host path as KIT_HOST_DATA_DIR)."""
    host = os.environ.get("KIT_HOST_DATA_DIR")
    if in_container() and str(root).startswith(os.environ.get("KIT_DEFAULT_DATA_DIR") or "/data"):
        return f"{host or 'the data dir'} (mounted in the container at {root})"
    return str(root)


def fetch_hint(name: str, root: Path) -> str:
    """The command that fetches NAME into ROOT, in the terms of where the reader runs commands."""
    if in_container():
        host = os.environ.get("KIT_HOST_DATA_DIR")
        where = f" --data-dir {host}" if host else " --data-dir <the dir you mount at /data>"
        return f"on the host: `python orchestrate.py data fetch {name}{where}`"
    return f"`python orchestrate.py data fetch {name} --data-dir {root}`"


def synthetic_name(name: str) -> str:
    """The subdirectory (and dataset name) of NAME's synthetic set: cifar10 -> cifar10-synthetic."""
    return f"{name}-synthetic"


def present(root: Path) -> list[str]:
    """Names of the datasets (fetched, placed by hand, synthetic) whose subdirectory exists under ROOT."""
    names = [*FETCHERS, *PLACED, *(synthetic_name(n) for n in SYNTHESIZERS)]
    return sorted(n for n in dict.fromkeys(names) if (root / n).is_dir())


def cached(name: str) -> list[Path]:
    """NAME's synthetic sets that runs generated into the kit's cache dir (what a run uses when
    the data dir holds no <name>-synthetic/), newest generator version only; creates nothing."""
    if name not in SYNTHESIZERS:
        return []
    return importlib.import_module(SYNTHESIZERS[name][0]).cached_synthetic()


def fetch_dataset(
    name: str,
    data_dir: str | os.PathLike | None,
    mirrors: tuple[str, ...] | None = None,
    progress: Any = None,
    allow_http: bool = False,
) -> list[Path]:
    """Download NAME into <data dir>/<name>/ with checksums; KitError (one line) on failure."""
    if name not in FETCHERS:
        raise UsageError(f"unknown dataset {name!r} to fetch: choose {', '.join(FETCHERS)}")
    mod_name, fn, default_mirrors = FETCHERS[name]
    mod = importlib.import_module(mod_name)
    return getattr(mod, fn)(
        resolve_data_dir(data_dir), mirrors or getattr(mod, default_mirrors), progress=progress, allow_http=allow_http
    )


def synthesize_dataset(name: str, data_dir: str | os.PathLike | None, **kw: Any) -> Path:
    """Write NAME's synthetic set under the data dir (<data dir>/<name>-synthetic/...; kw: the
    generator's sizes and seed); returns what was written. KitError (one line) on an unknown name."""
    if name not in SYNTHESIZERS:
        raise UsageError(f"unknown dataset {name!r} to synthesize: choose {', '.join(SYNTHESIZERS)}")
    mod_name, fn = SYNTHESIZERS[name]
    return getattr(importlib.import_module(mod_name), fn)(resolve_data_dir(data_dir), **kw)


def check_resolved(name: str, source: object, checksum: str, want: str | None) -> None:
    """KitError (one line) when the data a cell loaded is not the data it was resolved for
    (WANT: its dataset_sha256; unset: nothing to check)."""
    if want and want != checksum:
        raise KitError(
            f"the {name} data in {source} has checksum {checksum[:12]}…, but this cell was "
            f"resolved for {want[:12]}…: other data is other work (rerun the matrix to resolve it)"
        )


def digit_params(params: dict, data_dir: str | os.PathLike | None) -> dict:
    """Data identity of a cell on the digit family: {'dataset': real name or 'digits', 'dataset_sha256'}."""
    from bench.data.digits import resolve_params

    return resolve_params(params, data_dir)


def digit_data(params: dict, data_dir: str | os.PathLike | None):
    """The cell's digit dataset (uint8 images (N,28,28), int64 labels), checksum-checked."""
    from bench.data.digits import load_for_cell

    return load_for_cell(params, data_dir)
