"""CIFAR-10 binary reader, the synthetic set, subsample, resolve/auto, fetch over 127.0.0.1, and the CLI."""

import functools
import hashlib
import http.server
import io
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest

from bench.core.errors import KitError
from bench.data import cifar10 as c10
from bench.data import fetch_dataset, present

ROOT = Path(__file__).resolve().parent.parent
BIN = c10.BATCH_DIR


def records(labels, images) -> bytes:
    """The official layout, written by hand: per image 1 label byte, then the R, G, B planes (32x32 row-major)."""
    out = bytearray()
    for lab, img in zip(labels, images):
        out.append(int(lab))
        for ch in range(3):
            out += bytes(img[ch].ravel().tolist())
    return bytes(out)


def tar_gz(path, members) -> Path:
    """MEMBERS: (name, bytes) for regular files, or a ready TarInfo (links, devices) with None."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members:
            if isinstance(name, tarfile.TarInfo):
                tar.addfile(name)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(buf.getvalue())
    return Path(path)


def official(path, sizes=(7, 3, 5, 2, 4), n_test=6, seed=0, **override):
    """A small archive in the official format, members in the official (unsorted) order. Returns
    (path, arrays); OVERRIDE maps a batch file name to its bytes (None: leave it out)."""
    rng = np.random.default_rng(seed)
    files, xs, ys = {}, [], []
    for name, n in zip((*c10.TRAIN_FILES, c10.TEST_FILE), (*sizes, n_test)):
        y, x = rng.integers(0, 10, n), rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        files[name] = records(y, x)
        xs.append(x)
        ys.append(y)
    files.update(override)
    order = ["data_batch_1.bin", "batches.meta.txt", "data_batch_3.bin", "data_batch_4.bin", "test_batch.bin"]
    order += ["readme.html", "data_batch_2.bin", "data_batch_5.bin"]
    files.setdefault("batches.meta.txt", "\n".join(c10.CLASSES).encode() + b"\n\n")
    files.setdefault("readme.html", b"<html>the real one</html>")
    members = [(f"{BIN}/{n}", files[n]) for n in order if files.get(n) is not None]
    arrays = {"x_train": np.concatenate(xs[:5]), "y_train": np.concatenate(ys[:5]), "x_test": xs[5], "y_test": ys[5]}
    return tar_gz(path, members), arrays


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No data dir named, ./data absent, the cache in tmp; the default synthetic set made small (fast)."""
    monkeypatch.chdir(tmp_path)
    for var in ("KIT_DATA_DIR", "KIT_DEFAULT_DATA_DIR", "KIT_RUNTIME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(c10, "write_synthetic", functools.partial(c10.write_synthetic, n_train=200, n_test=100))
    return tmp_path


# ---- the synthetic set ------------------------------------------------------------------


def test_synthetic_round_trip(tmp_path):
    path = c10.write_synthetic(tmp_path, n_train=200, n_test=100, seed=0)
    assert path == tmp_path / "cifar10-synthetic" / "cifar-10-binary.tar.gz"
    ds = c10.read_archive(path)
    assert ds.x_train.shape == (200, 3, 32, 32) and ds.x_test.shape == (100, 3, 32, 32)
    assert ds.x_train.dtype == np.uint8 and ds.y_train.dtype == np.int64 and ds.y_test.dtype == np.int64
    assert np.bincount(ds.y_train).tolist() == [20] * 10 and np.bincount(ds.y_test).tolist() == [10] * 10
    assert ds.name == "cifar10-synthetic" and not ds.real and len(ds.checksum) == 64
    assert ds.describe() == {
        "name": "cifar10-synthetic",
        "real": False,
        "kind": "synthetic",
        "n_train": 200,
        "n_test": 100,
        "sha256": ds.checksum,
        "source": str(path),
    }
    assert 60 < ds.x_train.mean() < 200 and ds.x_train.std() > 20  # images, not a constant
    with tarfile.open(path) as tar:  # the official member names, mtime 0, root-owned, plain modes
        names = tar.getnames()
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in tar.getmembers())
        meta = tar.extractfile(f"{BIN}/batches.meta.txt").read().decode().split()
    want = [BIN] + [f"{BIN}/{n}" for n in ("batches.meta.txt", *c10.TRAIN_FILES, "readme.html", "test_batch.bin")]
    assert names == want and meta == list(c10.CLASSES)


def test_synthetic_is_deterministic(tmp_path):
    a = c10.write_synthetic(tmp_path / "a", 200, 100, seed=1)
    b = c10.write_synthetic(tmp_path / "b", 200, 100, seed=1)
    c = c10.write_synthetic(tmp_path / "c", 200, 100, seed=2)
    d = c10.write_synthetic(tmp_path / "d", 300, 100, seed=1)
    assert a.read_bytes() == b.read_bytes()  # byte for byte: gzip and tar carry no time
    da, dc, dd = c10.read_archive(a), c10.read_archive(c), c10.read_archive(d)
    assert da.checksum == c10.read_archive(b).checksum != dc.checksum
    assert np.array_equal(da.x_test, dd.x_test)  # the test set depends on its own size and the seed only
    assert not list(a.parent.glob("*.part"))


def test_synthetic_refuses_tiny_sets_and_unwritable_dirs(tmp_path):
    with pytest.raises(KitError, match="at least 10 train"):
        c10.write_synthetic(tmp_path, n_train=9)
    (tmp_path / "file").write_text("x")
    with pytest.raises(KitError, match="cannot write into"):  # a file where the dir should be (root or not)
        c10.write_synthetic(tmp_path / "file" / "d", 20, 20)


# ---- the official format ----------------------------------------------------------------


def test_hand_built_official_archive_reads_back_exactly(tmp_path):
    path, arr = official(tmp_path / "cifar-10-binary.tar.gz")
    ds = c10.read_archive(path)
    assert ds.name == "cifar10" and ds.real and ds.source == str(path)
    for key in arr:
        assert np.array_equal(getattr(ds, key), arr[key]), key
    assert ds.x_train.shape == (21, 3, 32, 32) and ds.x_test.shape == (6, 3, 32, 32)
    # byte 1 + 1024 + 32*5 + 7 of record 0 is the green pixel at row 5, column 7
    first = records(arr["y_train"][:1], arr["x_train"][:1])
    assert ds.x_train[0, 1, 5, 7] == first[1 + 1024 + 32 * 5 + 7]
    with tarfile.open(path) as tar:  # the extracted dir reads the same
        tar.extractall(tmp_path / "x", filter="data")
    assert c10.read_dir(tmp_path / "x").checksum == ds.checksum
    assert c10.read_dir(tmp_path / "x" / BIN).checksum == ds.checksum


def _link(name, kind):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, "data_batch_1.bin" if kind != tarfile.CHRTYPE else ""
    return info


BAD = {
    "not gzip": (lambda p: p.write_bytes(b"not a gzip file at all" * 10), "not a gzip'd tar"),
    "truncated": (lambda p: p.write_bytes(official(p)[0].read_bytes()[:3000]), "truncated or corrupt"),
    "no trailer": (lambda p: p.write_bytes(official(p)[0].read_bytes()[:-4]), "truncated or corrupt"),
    "missing batch": (lambda p: official(p, **{"data_batch_3.bin": None}), "data_batch_3.bin is missing"),
    "not 3073": (lambda p: official(p, **{"test_batch.bin": bytes(3074)}), "test_batch.bin has 3074 bytes, not a multiple of"),
    "label 10": (
        lambda p: official(p, **{"data_batch_2.bin": bytes([3]) + bytes(3072) + bytes([10]) + bytes(3072)}),
        "data_batch_2.bin record 1 has label 10",
    ),
    "empty": (lambda p: official(p, **{"data_batch_5.bin": b""}), "data_batch_5.bin is empty"),
    "absolute": (lambda p: tar_gz(p, [("/etc/x", b"x")]), "member '/etc/x' has an absolute or `..` path"),
    "dotdot": (lambda p: tar_gz(p, [(f"{BIN}/../../x", b"x")]), "`..` path"),
    "symlink": (lambda p: tar_gz(p, [(_link(f"{BIN}/test_batch.bin", tarfile.SYMTYPE), None)]), "is a link or special file"),
    "hardlink": (lambda p: tar_gz(p, [(_link(f"{BIN}/test_batch.bin", tarfile.LNKTYPE), None)]), "is a link or special file"),
    "device": (lambda p: tar_gz(p, [(_link(f"{BIN}/dev", tarfile.CHRTYPE), None)]), "refused by the tar data filter"),
}


@pytest.mark.parametrize("case", BAD)
def test_every_malformed_archive_is_one_line_naming_the_file(tmp_path, case):
    make, expect = BAD[case]
    path = tmp_path / "cifar-10-binary.tar.gz"
    make(path)
    with pytest.raises(KitError) as err:
        c10.read_archive(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(path)) and expect in msg, msg


def test_malformed_extracted_dir(tmp_path):
    d = tmp_path / BIN
    d.mkdir()
    with pytest.raises(KitError, match="data_batch_1.bin is missing"):
        c10.read_dir(tmp_path)
    for name in (*c10.TRAIN_FILES, c10.TEST_FILE):
        (d / name).write_bytes(bytes(3073))
    (d / "data_batch_4.bin").write_bytes(bytes(3072))
    with pytest.raises(KitError, match="data_batch_4.bin has 3072 bytes"):
        c10.read_dir(tmp_path)


# ---- subsample --------------------------------------------------------------------------


def test_subsample_is_stratified_and_seeded(tmp_path):
    ds = c10.read_archive(c10.write_synthetic(tmp_path, 300, 200))
    a, b, c = (c10.subsample(ds, 100, 50, seed=s) for s in (0, 0, 1))
    assert np.bincount(a.y_train).tolist() == [10] * 10 and np.bincount(a.y_test).tolist() == [5] * 10
    assert a.checksum == b.checksum != c.checksum and a.checksum != ds.checksum
    assert np.array_equal(a.x_train, b.x_train) and not np.array_equal(a.y_train, c.y_train)
    assert len(set(a.y_train[:10].tolist())) > 1  # shuffled, not class by class
    rows = {bytes(x.tobytes()) + bytes([y]) for x, y in zip(ds.x_train, ds.y_train)}  # a subset, labels kept
    assert all(bytes(x.tobytes()) + bytes([y]) in rows for x, y in zip(a.x_train, a.y_train))
    assert a.name == ds.name and a.real == ds.real
    with pytest.raises(KitError, match="has 30 images of class 0 .airplane., 40 needed"):
        c10.subsample(ds, 400, 50, seed=0)
    with pytest.raises(KitError, match="multiple of 10"):
        c10.subsample(ds, 105, 50, seed=0)


# ---- resolve / load ---------------------------------------------------------------------


def test_auto_is_synthetic_without_real_data_generated_once_into_the_cache(env, capsys):
    got = c10.resolve({"dataset": "auto"}, None)
    cached = env / "cache" / f"synthetic-v{c10.GENERATOR_VERSION}" / "cifar10-synthetic" / c10.ARCHIVE
    assert got["dataset"] == "cifar10-synthetic" and cached.is_file()
    assert f"generated the default synthetic set into {cached}" in capsys.readouterr().err
    stamp = cached.stat().st_mtime_ns
    ds = c10.load_for_cell(got, None)
    assert ds.checksum == got["dataset_sha256"] and ds.source == str(cached.absolute()) and not ds.real
    assert c10.resolve({"dataset": "cifar10-synthetic"}, None) == got
    assert cached.stat().st_mtime_ns == stamp and capsys.readouterr().err == ""  # made once
    with pytest.raises(KitError, match="resolved for 000000000000"):
        c10.load_for_cell({**got, "dataset_sha256": "0" * 64}, None)
    with pytest.raises(KitError, match="unknown dataset 'cifar100'"):
        c10.resolve({"dataset": "cifar100"}, None)


def test_auto_picks_real_cifar10_when_present(env):
    path, _ = official(env / "data" / "cifar10" / c10.ARCHIVE)
    c10.write_synthetic(env / "data", n_train=20, n_test=20)  # present too, but real wins
    got = c10.resolve({"dataset": "auto"}, None)
    assert got == {"dataset": "cifar10", "dataset_sha256": c10.read_archive(path).checksum}
    assert c10.resolve({"dataset": "cifar10"}, "data") == got
    syn = c10.resolve({"dataset": "cifar10-synthetic"}, "data")  # the data dir's own synthetic set
    assert (
        syn["dataset"] == "cifar10-synthetic"
        and syn["dataset_sha256"] == c10.read(env / "data" / "cifar10-synthetic" / c10.ARCHIVE).checksum
    )
    assert not (env / "cache").exists()


def test_a_named_dir_without_cifar10_and_other_mistakes(env, monkeypatch):
    (env / "d").mkdir()
    with pytest.raises(KitError) as err:
        c10.resolve({"dataset": "cifar10"}, env / "d")
    assert "\n" not in str(err.value) and f"`python orchestrate.py data fetch cifar10 --data-dir {env / 'd'}`" in str(err.value)
    assert c10.resolve({"dataset": "auto"}, env / "d")["dataset"] == "cifar10-synthetic"  # auto: the synthetic set
    with pytest.raises(KitError, match="does not exist"):  # a typo never falls back
        c10.resolve({"dataset": "auto"}, env / "typo")
    (env / "d" / "cifar10").mkdir()
    with pytest.raises(KitError, match="lacks cifar-10-binary.tar.gz"):  # a named dir with an empty cifar10/
        c10.resolve({"dataset": "auto"}, env / "d")
    c10.write_synthetic(env / "e", n_train=20, n_test=20).rename(env / "d" / "cifar10" / c10.ARCHIVE)
    with pytest.raises(KitError, match="is the kit's synthetic set, not CIFAR-10"):
        c10.resolve({"dataset": "auto"}, env / "d")


def test_cache_dir_falls_back_when_home_is_not_writable(tmp_path, monkeypatch):
    monkeypatch.delenv("KIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert c10.cache_dir() == tmp_path / "xdg" / "cnn-bench"
    (tmp_path / "file").write_text("x")  # unusable even for root: a file where a dir should be
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    monkeypatch.setenv("HOME", str(tmp_path / "file"))
    monkeypatch.setattr(c10.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert c10.cache_dir() == tmp_path / "tmp" / f"cnn-bench-{c10.os.getuid()}"  # the kit's one cache rule (bench.core.cache)


def test_decoded_once_per_process_until_the_file_changes(tmp_path):
    path = c10.write_synthetic(tmp_path, 20, 20)
    assert c10.read(path) is c10.read(path)
    first = c10.read(path)
    c10.write_synthetic(tmp_path, 20, 20, seed=5)
    assert c10.read(path).checksum != first.checksum
    with pytest.raises(ValueError):  # shared arrays are read-only
        first.x_train[0, 0, 0, 0] = 1


# ---- fetch ------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path):
    """Serves tmp_path/www on an ephemeral loopback port; yields (base URL, www dir)."""
    www = tmp_path / "www"
    www.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request log on stderr (the CLI test reads stderr)
            pass

    handler = functools.partial(Quiet, directory=str(www))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", www
    httpd.shutdown()
    httpd.server_close()


def _serve(www, monkeypatch, data: bytes, md5: str | None = None):
    (www / c10.ARCHIVE).write_bytes(data)
    monkeypatch.setattr(c10, "ARCHIVE_MD5", md5 or hashlib.md5(data).hexdigest())


def test_fetch_verifies_and_renames(server, tmp_path, monkeypatch):
    url, www = server
    good, _ = official(tmp_path / "src.tar.gz")
    _serve(www, monkeypatch, good.read_bytes())
    paths = fetch_dataset("cifar10", tmp_path / "data", mirrors=(url + "missing/", url), allow_http=True)
    assert paths == [tmp_path / "data" / "cifar10" / c10.ARCHIVE] and paths[0].read_bytes() == good.read_bytes()
    assert sorted(p.name for p in paths[0].parent.iterdir()) == [c10.ARCHIVE]  # no .part left
    assert present(tmp_path / "data") == ["cifar10"]
    (www / c10.ARCHIVE).unlink()  # an archive already there and valid is kept: nothing is asked of the mirror
    assert c10.fetch_cifar10(tmp_path / "data", mirrors=(url,), allow_http=True) == paths


@pytest.mark.parametrize("bad", ["md5", "unreadable"])
def test_a_failed_fetch_leaves_nothing(server, tmp_path, monkeypatch, bad):
    url, www = server
    if bad == "md5":
        _serve(www, monkeypatch, official(tmp_path / "src.tar.gz")[0].read_bytes(), md5="0" * 32)
        expect = "MD5 mismatch"
    else:  # the pinned MD5 of bytes that are no archive: never renamed into place
        _serve(www, monkeypatch, b"not an archive" * 100)
        expect = "not a gzip'd tar"
    with pytest.raises(KitError, match=expect) as err:
        c10.fetch_cifar10(tmp_path / "data", mirrors=(url,), allow_http=True)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "data" / "cifar10").exists()  # no empty dir, no .part
    (tmp_path / "data" / "cifar10").mkdir(parents=True)  # a dir that was there stays, still empty
    with pytest.raises(KitError, match=expect):
        c10.fetch_cifar10(tmp_path / "data", mirrors=(url,), allow_http=True)
    assert list((tmp_path / "data" / "cifar10").iterdir()) == []


def test_fetch_refuses_plain_http_unless_allowed(tmp_path):
    with pytest.raises(KitError, match="plain http"):
        c10.fetch_cifar10(tmp_path, mirrors=("http://127.0.0.1:9/",))
    assert not (tmp_path / "cifar10").exists()


# ---- the CLI ----------------------------------------------------------------------------


def _cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), "data", *args], capture_output=True, text=True, cwd=ROOT)


def test_cli_synth_then_list_and_an_unknown_name(tmp_path):
    d = tmp_path / "d"
    out = _cli("synth", "cifar10", "--data-dir", str(d), "--n-train", "200", "--n-test", "100")
    assert out.returncode == 0 and f"wrote {d / 'cifar10-synthetic' / c10.ARCHIVE}" in out.stdout, out.stderr
    assert np.bincount(c10.read_archive(d / "cifar10-synthetic" / c10.ARCHIVE).y_train).tolist() == [20] * 10
    out = _cli("list", "--data-dir", str(d))
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in out.stdout.splitlines()}
    assert lines["cifar10-synthetic"] == f"present in {d / 'cifar10-synthetic'}", out.stdout
    assert lines["cifar10"] == "not present (`data fetch cifar10`)", out.stdout
    out = _cli("synth", "nosuch")
    assert (
        out.returncode == 2
        and out.stderr.startswith("error: unknown dataset 'nosuch' to synthesize: choose cifar10")
        and out.stderr.count("\n") == 1
    )


def test_cli_fetch_message_and_one_line_errors(tmp_path, server, monkeypatch):
    """In process (typer's runner), so the served archive's MD5 can be the pinned one."""
    from typer.testing import CliRunner

    import orchestrate

    url, www = server
    d, run = tmp_path / "d", functools.partial(CliRunner().invoke, orchestrate.app)
    (tmp_path / "file").write_text("x")
    for args, expect, code in [  # 2: the command line is wrong; 1: it is fine and the work failed
        (("synth", "cifar10", "--data-dir", str(d), "--n-test", "5"), "at least 10 train and 10 test images", 2),
        (("synth", "cifar10", "--data-dir", str(d), "--seed", "-1"), "seed -1: use a seed >= 0", 2),
        (("synth", "cifar10", "--data-dir", str(tmp_path / "file")), "cannot write into", 1),
        (("fetch", "cifar10", "--data-dir", str(d), "--mirror", url), "plain http", 2),
        (
            ("fetch", "cifar10", "--data-dir", str(d), "--mirror", url, "--allow-http"),
            "could not fetch cifar-10-binary.tar.gz",
            1,
        ),
    ]:
        out = run(["data", *args])
        err = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.exit_code == code and len(err) == 1 and err[0].startswith("error: ") and expect in err[0], (args, out.stderr)
    assert not (d / "cifar10").exists() and not (d / "cifar10-synthetic").exists()
    _serve(www, monkeypatch, official(tmp_path / "src.tar.gz")[0].read_bytes())
    out = run(["data", "fetch", "cifar10", "--data-dir", str(d), "--mirror", url, "--allow-http"])
    assert out.exit_code == 0 and f"1 file verified in {d / 'cifar10'}" in out.stdout, out.output


def test_importing_bench_data_stays_cheap():
    code = "import sys, bench.data; print(sorted(m for m in ('numpy', 'tarfile', 'bench.data.cifar10') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


# ---- learnable --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_synthetic_set_is_learnable(tmp_path):
    """A tiny CNN, 300 Adam steps of 32 on 2,000 images: well above chance (0.10). Measured: 0.418 (about 12 s in all on 2 threads, torch import included)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    torch.set_num_threads(2)
    ds = c10.subsample(c10.read_archive(c10.write_synthetic(tmp_path, 2000, 500)), 2000, 500, seed=0)
    x = torch.tensor(ds.x_train, dtype=torch.float32) / 255 - 0.5
    xt = torch.tensor(ds.x_test, dtype=torch.float32) / 255 - 0.5
    y, yt = torch.tensor(ds.y_train), torch.tensor(ds.y_test)
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        b = torch.randint(0, len(x), (32,), generator=g)
        loss = nn.functional.cross_entropy(model(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    assert 0.3 < acc, acc


def test_data_list_shows_the_synthetic_set_a_run_left_in_the_cache(env):
    """A run on no data generates cifar10-synthetic into the cache dir: `data list` says so (it
    is there, and used), instead of `not present`; a data dir's own copy is listed first."""
    c10.load(None, "auto")  # what a cell does without CIFAR-10: the default synthetic set, into the cache
    out = subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), "data", "list"], capture_output=True, text=True, cwd=env)
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in out.stdout.splitlines()}
    assert out.returncode == 0, out.stderr
    assert lines["cifar10-synthetic"] == f"in the cache dir: synthetic-v{c10.GENERATOR_VERSION}/cifar10-synthetic/{c10.ARCHIVE}"
    assert lines["catsdogs-synthetic"] == "not present (`data synth catsdogs`)", out.stdout
    assert f"cache dir: {env / 'cache'} (KIT_CACHE_DIR" in out.stdout
