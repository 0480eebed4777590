"""MNIST from IDX files (raw or .gz); the Dataset both digit datasets return (bench.data.digits picks one).

Layout: <data dir>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
Data dir: --data-dir, else $KIT_DATA_DIR, else ./data.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.core import bounded
from bench.core.errors import KitError
from bench.data import fetch_hint, shown

FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# SHA-256 of each file's *decompressed* IDX bytes. Mirrors serve gzip streams whose bytes
# differ (compression level, header timestamps) while the content is the same, so the
# content is what we pin. Evidence: computed from the checked copy in ../shared/datasets
# (60,000 + 10,000 images, mean pixel 33.318), 2026-11-21.
RAW_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
_MAGIC_IMAGES = 2051
_MAGIC_LABELS = 2049
# An IDX file is read header first: its 8 or 16 bytes say how much follows, checked against these
# caps before the rest is read (a .gz decompressed as it streams, never past what the header
# promised): MNIST's train images are 60,000 (47 MB raw, 9.9 MB gzip'd); EMNIST's largest split 698k.
MAX_IDX_ITEMS = 1_000_000
IDX_CAPS = bounded.Caps(file_bytes=1 << 30, out_bytes=16 + MAX_IDX_ITEMS * 28 * 28 + 1)


@dataclass(frozen=True)
class Dataset:
    """Images as uint8 (N,28,28), labels as int64 (N,); plus where they came from."""

    name: str  # "mnist" | "digits-embedded"
    real_mnist: bool
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    checksum: str  # sha256 over the arrays' bytes, so any change to the data shows
    source: str  # path or package it was read from

    def describe(self) -> dict:
        return {
            "name": self.name,
            "real": self.real_mnist,
            "real_mnist": self.real_mnist,
            "kind": "real" if self.real_mnist else "embedded",
            "n_train": int(len(self.y_train)),
            "n_test": int(len(self.y_test)),
            "sha256": self.checksum,
            "source": self.source,
        }


def _find(mnist_dir: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (mnist_dir / name).is_file():
            return mnist_dir / name
    return None


def read_idx(path: Path, magic: int) -> np.ndarray:
    """Read one IDX file (raw or .gz): the header first, checked (magic, 28x28, at most
    MAX_IDX_ITEMS items), then exactly the bytes it promises, and nothing after them. Every way
    it can be malformed is a KitError naming the file."""
    what = "image" if magic == _MAGIC_IMAGES else "label"
    try:
        with bounded.open_stream(path, IDX_CAPS, follow=True) as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise KitError(f"{path}: truncated IDX file ({len(head)} bytes)")
            got_magic, count = struct.unpack(">II", head)
            if got_magic != magic:
                raise KitError(f"{path}: wrong IDX magic {got_magic} (expected {magic}); not an MNIST {what} file")
            shape: tuple[int, ...] = (count,)
            if magic == _MAGIC_IMAGES:
                dims = fh.read(8)
                if len(dims) < 8:
                    raise KitError(f"{path}: truncated or corrupt IDX header ({8 + len(dims)} bytes)")
                rows, cols = struct.unpack(">II", dims)
                if (rows, cols) != (28, 28):
                    raise KitError(f"{path}: images are {rows}x{cols}, expected 28x28")
                shape = (count, rows, cols)
            if count > MAX_IDX_ITEMS:
                raise KitError(f"{path}: header says {count:,} {what}s, over the {MAX_IDX_ITEMS:,} an IDX file may hold here")
            header = 16 if magic == _MAGIC_IMAGES else 8
            need = header + int(np.prod(shape))
            body = fh.read(need - header)
            extra = len(body) == need - header and fh.read(1) != b""
            if len(body) != need - header or extra:
                have = f"more than {need}" if extra else str(header + len(body))
                raise KitError(
                    f"{path}: header says {count} items ({need} bytes) but the file has {have} bytes (truncated or corrupt)"
                )
    except KitError:
        raise
    except (OSError, EOFError, zlib.error) as err:  # gzip raises these for truncated/corrupt streams
        raise KitError(f"{path}: cannot read ({err}); delete it and run `python orchestrate.py data fetch mnist`") from None
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def load_mnist(data_dir: Path) -> Dataset:
    mnist_dir = data_dir / "mnist"
    paths = {}
    for key, stem in FILES.items():
        p = _find(mnist_dir, stem)
        if p is None:
            raise KitError(f"{shown(data_dir)}: mnist/ lacks {stem}[.gz]; fetch it: {fetch_hint('mnist', data_dir)}")
        paths[key] = p
    arrays = {}
    for key, p in paths.items():
        arrays[key] = read_idx(p, _MAGIC_IMAGES if "images" in key else _MAGIC_LABELS)
    for split in ("train", "test"):
        n_img, n_lab = len(arrays[f"{split}_images"]), len(arrays[f"{split}_labels"])
        if n_img != n_lab:
            raise KitError(f"{mnist_dir}: {split} has {n_img} images but {n_lab} labels")
    for split in ("train", "test"):
        if len(arrays[f"{split}_labels"]) == 0:
            raise KitError(f"{mnist_dir}: the {split} set has 0 images (valid headers, no data)")
    if arrays["train_labels"].max(initial=0) > 9 or arrays["test_labels"].max(initial=0) > 9:
        raise KitError(f"{mnist_dir}: labels outside 0..9")
    return Dataset(
        name="mnist",
        real_mnist=True,
        x_train=arrays["train_images"],
        y_train=arrays["train_labels"].astype(np.int64),
        x_test=arrays["test_images"],
        y_test=arrays["test_labels"].astype(np.int64),
        checksum=checksum(arrays.values()),
        source=str(mnist_dir),
    )


def checksum(arrays) -> str:
    """sha256 over the arrays' bytes, in order."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
