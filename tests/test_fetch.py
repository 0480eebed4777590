"""`data fetch mnist` against a local HTTP server on 127.0.0.1 serving good and bad files."""

import functools
import gzip
import http.server
import subprocess
import sys
import threading

import pytest

from bench.core.errors import KitError
from bench.data import fetch

ROOT = fetch.Path(__file__).resolve().parent.parent


@pytest.fixture
def server(tmp_path):
    """Serves tmp_path/www on an ephemeral loopback port; yields (base URL, www dir)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", www
    httpd.shutdown()


def _serve_fake(www, monkeypatch, corrupt=None):
    """Four small gz files; their content hashes become the expected ones (RAW_SHA256 patched)."""
    import hashlib

    want = {}
    for i, stem in enumerate(fetch.RAW_SHA256):
        raw = bytes([i]) * 1000
        want[stem] = hashlib.sha256(raw).hexdigest()
        served = raw if stem != corrupt else raw[:-1] + b"X"
        (www / f"{stem}.gz").write_bytes(gzip.compress(served))
    monkeypatch.setattr(fetch, "RAW_SHA256", want)


def test_good_files_are_verified_and_renamed(server, tmp_path, monkeypatch):
    url, www = server
    _serve_fake(www, monkeypatch)
    paths = fetch.fetch_mnist(tmp_path / "data", mirrors=(url,), allow_http=True)
    assert sorted(p.name for p in paths) == sorted(f"{s}.gz" for s in fetch.RAW_SHA256)
    assert not list((tmp_path / "data" / "mnist").glob("*.part"))


def test_checksum_mismatch_is_an_error_and_leaves_nothing(server, tmp_path, monkeypatch):
    url, www = server
    _serve_fake(www, monkeypatch, corrupt="t10k-images-idx3-ubyte")
    with pytest.raises(KitError, match="SHA-256 mismatch"):
        fetch.fetch_mnist(tmp_path / "data", mirrors=(url,), allow_http=True)
    left = sorted(p.name for p in (tmp_path / "data" / "mnist").iterdir())
    assert "t10k-images-idx3-ubyte.gz" not in left
    assert not [n for n in left if n.endswith(".part")], left


def test_falls_over_to_the_next_mirror(server, tmp_path, monkeypatch):
    url, www = server
    _serve_fake(www, monkeypatch)
    paths = fetch.fetch_mnist(tmp_path / "data", mirrors=(url + "missing/", url), allow_http=True)
    assert len(paths) == 4


def test_real_mnist_files_verify(server, tmp_path, real_mnist_dir):
    """The pinned content hashes match real MNIST, served gzip'd as the mirrors do."""
    import shutil

    url, www = server
    for p in (real_mnist_dir / "mnist").glob("*.gz"):
        shutil.copy(p, www / p.name)
    paths = fetch.fetch_mnist(tmp_path / "data", mirrors=(url,), allow_http=True)
    assert len(paths) == 4


def test_cli_reports_mismatch_in_one_line(server, tmp_path, monkeypatch):
    url, www = server
    (www / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"not mnist"))
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "orchestrate.py"),
            "data",
            "fetch",
            "mnist",
            "--data-dir",
            str(tmp_path / "d"),
            "--mirror",
            url,
            "--allow-http",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode != 0
    err = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and "SHA-256 mismatch" in err[0], out.stderr
    assert not list((tmp_path / "d" / "mnist").glob("*.gz"))


def test_unknown_dataset_and_data_list(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "data", "fetch", "imagenet", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        out.returncode == 2 and out.stderr.count("\n") == 1 and "unknown dataset 'imagenet' to fetch: choose mnist" in out.stderr
    )
    (tmp_path / "mnist").mkdir()
    out = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "data", "list", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0 and f"present in {tmp_path / 'mnist'}" in out.stdout


def test_a_failed_fetch_leaves_no_empty_dataset_dir_and_the_default_still_runs(server, tmp_path, monkeypatch):
    """Nothing served at all: the fetch fails, and no empty mnist/ is left for the next run to trip over."""
    from bench.data.digits import load_dataset

    url, _www = server
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KIT_DATA_DIR", raising=False)
    monkeypatch.delenv("KIT_DEFAULT_DATA_DIR", raising=False)
    with pytest.raises(KitError, match="could not fetch"):
        fetch.fetch_mnist(tmp_path / "data", mirrors=(url + "nothing-here/",), allow_http=True)
    assert not (tmp_path / "data" / "mnist").exists()
    # an empty mnist/ from elsewhere (an older kit, a killed fetch) is as good as absent when nothing was named
    (tmp_path / "data" / "mnist").mkdir()
    assert not load_dataset(None).real_mnist
    with pytest.raises(KitError, match="lacks"):  # but a dir the user named must hold the data
        load_dataset(tmp_path / "data")


def test_in_a_container_errors_name_the_host_dir_not_data(tmp_path, monkeypatch, capsys):
    from bench.data.digits import load_dataset

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("KIT_RUNTIME", "container")
    monkeypatch.setenv("KIT_DEFAULT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("KIT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("KIT_HOST_DATA_DIR", "/home/me/datasets")
    assert load_dataset(None).name == "digits-embedded"  # auto: the embedded default, and a note naming the host dir
    note = capsys.readouterr().err
    assert "/home/me/datasets (mounted in the container at" in note and "--data-dir /home/me/datasets" in note
    with pytest.raises(KitError) as err:
        load_dataset(None, "mnist")  # asked for by name: one line, naming the host dir
    msg = str(err.value)
    assert "/home/me/datasets (mounted in the container at" in msg
    assert "on the host: `python orchestrate.py data fetch mnist --data-dir /home/me/datasets`" in msg


def test_offline_fetch_is_one_line_naming_the_offline_route(tmp_path):
    """No network (every mirror refuses: here a proxy on a closed loopback port stands in for a
    host without a route out, for the default mirrors): one line that names the way to run from
    a copy, exit 1 (a runtime failure, not a usage error), and no mnist/ left behind."""
    env = {k: v for k, v in __import__("os").environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    out = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "data", "fetch", "mnist", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    err = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1 and len(err) == 1, out.stderr
    assert err[0].startswith("error: could not fetch train-images-idx3-ubyte.gz: no mirror reachable"), err[0]
    assert "ossci-datasets.s3.amazonaws.com" in err[0] and "--data-dir" in err[0] and "KIT_DATA_DIR" in err[0], err[0]
    assert "urlopen" not in err[0] and "Traceback" not in out.stderr and "HTTPSConnectionPool" not in err[0]
    assert not (tmp_path / "d" / "mnist").exists()


def test_pooch_is_the_download_path_and_its_version_is_recorded():
    from bench.core.provenance import library_versions

    assert "pooch" in library_versions()
    for mod in ("fetch", "archive", "cifar10", "tinyimagenet"):
        src = (ROOT / "bench" / "data" / f"{mod}.py").read_text()
        assert "urlopen" not in src and "urllib.request" not in src, mod
