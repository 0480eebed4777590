"""MNIST IDX reader (raw and .gz), every malformed-file case, and the embedded default."""

import gzip
import struct

import numpy as np
import pytest

from bench.core.errors import KitError
from bench.data.digits import load_dataset
from bench.data.embedded import load_digits_28
from bench.data.mnist import FILES, load_mnist, read_idx


def write_idx(path, arr, magic, gz=False):
    header = struct.pack(">II", magic, arr.shape[0]) + (struct.pack(">II", *arr.shape[1:]) if arr.ndim == 3 else b"")
    data = header + arr.astype(np.uint8).tobytes()
    (gzip.open if gz else open)(path, "wb").write(data)


def make_mnist(root, n_train=20, n_test=10, gz=False, **override):
    d = root / "mnist"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 28, 28)),
        "train_labels": rng.integers(0, 10, n_train),
        "test_images": rng.integers(0, 256, (n_test, 28, 28)),
        "test_labels": rng.integers(0, 10, n_test),
    }
    arrays.update(override)
    for key, stem in FILES.items():
        write_idx(d / (stem + (".gz" if gz else "")), arrays[key], 2051 if "images" in key else 2049, gz)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_reads_raw_and_gz(tmp_path, gz):
    arrays = make_mnist(tmp_path, gz=gz)
    ds = load_mnist(tmp_path)
    assert ds.x_train.shape == (20, 28, 28) and ds.x_train.dtype == np.uint8
    assert np.array_equal(ds.x_train, arrays["train_images"]) and np.array_equal(ds.y_test, arrays["test_labels"])
    assert ds.real_mnist and len(ds.checksum) == 64


def test_wrong_magic(tmp_path):
    make_mnist(tmp_path)
    p = tmp_path / "mnist" / "train-labels-idx1-ubyte"
    raw = bytearray(p.read_bytes())
    raw[:4] = struct.pack(">I", 1234)
    p.write_bytes(raw)
    with pytest.raises(KitError, match="wrong IDX magic 1234"):
        load_mnist(tmp_path)


def test_truncated_file(tmp_path):
    make_mnist(tmp_path)
    p = tmp_path / "mnist" / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(KitError, match="truncated or corrupt"):
        load_mnist(tmp_path)


def test_truncated_gzip_stream(tmp_path):
    make_mnist(tmp_path, gz=True)
    p = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    p.write_bytes(p.read_bytes()[:50])
    with pytest.raises(KitError, match="cannot read"):
        load_mnist(tmp_path)


def test_images_labels_length_mismatch(tmp_path):
    make_mnist(tmp_path, train_labels=np.zeros(19))
    with pytest.raises(KitError, match="20 images but 19 labels"):
        load_mnist(tmp_path)


def test_header_count_wrong(tmp_path):
    p = tmp_path / "x-idx1"
    p.write_bytes(struct.pack(">II", 2049, 50) + bytes(10))
    with pytest.raises(KitError, match="header says 50 items"):
        read_idx(p, 2049)


def test_missing_file_says_how_to_fetch(tmp_path):
    make_mnist(tmp_path)
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(KitError, match="orchestrate.py data fetch mnist"):
        load_mnist(tmp_path)


def test_missing_data_dir_is_an_error_not_a_fallback(tmp_path):
    with pytest.raises(KitError, match="does not exist"):
        load_dataset(tmp_path / "nope", "auto")


def test_auto_falls_back_to_embedded_only_without_explicit_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KIT_DATA_DIR", raising=False)
    ds = load_dataset(None, "auto")
    assert ds.name == "digits-embedded" and not ds.real_mnist


def test_embedded_default_is_fixed_real_digits():
    ds = load_digits_28()
    assert ds.x_train.shape == (1497, 28, 28) and ds.x_test.shape == (300, 28, 28)
    assert set(np.unique(ds.y_train)) == set(range(10))
    assert ds.x_train[:, :4].max() == 0 and ds.x_train[:, 4:24, 4:24].max() == 255  # centred 20x20 in 28x28
    assert load_digits_28.__wrapped__().checksum == ds.checksum  # deterministic split


def test_real_mnist(real_mnist_dir):
    ds = load_mnist(real_mnist_dir)
    assert ds.x_train.shape == (60000, 28, 28) and ds.x_test.shape == (10000, 28, 28)
    assert abs(ds.x_train.mean() - 33.318) < 0.01  # the dataset README's checked figure
