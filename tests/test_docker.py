"""Containers: compose.yaml's shape (always), the host docker functions' bad-input lines
(always), and the built images themselves (only where a Docker engine answers and the
image is built: `python orchestrate.py build cpu`; skipped with the reason otherwise).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from bench.core.errors import KitError
from host import docker as dk

REPO = Path(__file__).resolve().parents[1]


# ---- compose.yaml: pure structure --------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "compose.yaml").read_text())


def test_compose_services_and_profiles(compose: dict) -> None:
    services = compose["services"]
    assert set(services) >= {"cpu-bench", "cuda-bench"}
    assert "profiles" not in services["cpu-bench"], "cpu-bench must run on every host"
    assert services["cuda-bench"]["profiles"] == ["cuda"]
    devices = services["cuda-bench"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    assert "deploy" not in services["cpu-bench"]


@pytest.mark.parametrize("name,platform", [("cpu-bench", "cpu"), ("cuda-bench", "cuda")])
def test_compose_service_is_locked_down(compose: dict, name: str, platform: str) -> None:
    svc = compose["services"][name]
    assert svc["network_mode"] == "none"
    assert svc["read_only"] is True
    assert any(str(t).split(":")[0] == "/tmp" for t in svc["tmpfs"])
    assert svc["user"] == "${UID:-10001}:${GID:-10001}"
    mounts = {v["target"]: v for v in svc["volumes"]}
    assert mounts["/data"]["read_only"] is True and mounts["/data"]["type"] == "bind"
    assert "KIT_DATA_DIR" in mounts["/data"]["source"]
    assert not mounts["/results"].get("read_only", False)
    # the service names no study and no study's arguments: every study's matrix for the platform
    assert svc["command"] == ["matrix", "--platform", platform]
    assert svc["image"].startswith("${KIT_") and f"cnn-bench/{platform}:" in svc["image"]


def test_dockerfile_contract() -> None:
    text = (REPO / "docker" / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11[\w.-]*-slim-bookworm@sha256:[0-9a-f]{64}$", text, re.M)
    assert "--require-hashes --no-deps" in text
    assert "--mount=type=secret,id=pipca" in text and "PIP_CERT=/run/secrets/pipca" in text
    assert "--mount=type=cache" in text
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.8"' in text
    assert text.count('ENTRYPOINT ["python", "-m", "bench"]') == 2 and text.count('CMD ["selfcheck"]') == 2
    assert text.count("USER 10001:10001") == 2
    for label in (
        "cnn-bench.torch-version",
        "cnn-bench.cuda-version",
        "cnn-bench.lock-hash",
        "org.opencontainers.image.revision",
    ):
        assert text.count(label) == 2, label
    # The CA bundle is a secret: nothing COPYs or ADDs a certificate into a layer.
    assert not re.search(r"^(COPY|ADD)\b.*(\.crt|\.pem|pipca)", text, re.M)


# ---- host functions: bad input is one clear line -------------------------------------------


def test_unknown_platform_is_one_line() -> None:
    for bad in ("tpu", "mps"):
        with pytest.raises(KitError) as err:
            dk.check_platform(bad)
        assert "\n" not in str(err.value) and "cpu or cuda" in str(err.value)


def test_lock_hash_and_versions_come_from_the_lock() -> None:
    assert dk.lock_hash("cpu") == hashlib.sha256((REPO / "requirements/cpu.txt").read_bytes()).hexdigest()
    assert dk.lock_versions("cpu") == {"torch": "2.10.0", "cuda": "none"}
    assert dk.lock_versions("cuda") == {"torch": "2.10.0", "cuda": "12.8"}
    assert dk.image_ref("cuda") == f"cnn-bench/cuda:{dk.lock_hash('cuda')[:12]}"


def test_daemon_down_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(KitError) as err:
        dk.engine_info()
    assert str(err.value) == dk.DAEMON_DOWN
    assert dk.engine_ok() == dk.DAEMON_DOWN


def test_missing_data_dir_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(KitError) as err:
        dk.run("cpu", tmp_path / "nope", tmp_path / "out", ["selfcheck"])
    assert "data dir" in str(err.value) and "\n" not in str(err.value)


# ---- the built images (need an engine) -----------------------------------------------------


def _image_or_skip(platform: str):
    reason = dk.engine_ok()
    if reason:
        pytest.skip(f"no Docker engine: {reason}")
    try:
        return dk.find_image(platform)
    except KitError as err:
        pytest.skip(str(err))


def _run(image_id: str, args: list[str], **kw) -> tuple[int, str]:
    client = dk._client()
    opts = dict(network_mode="none", read_only=True, tmpfs={"/tmp": "rw,exec,nosuid,nodev"})
    opts.update(kw)
    c = client.containers.run(image_id, args, detach=True, **opts)
    try:
        code = c.wait(timeout=600)["StatusCode"]
        return code, c.logs().decode(errors="replace")
    finally:
        c.remove(force=True)


@pytest.fixture(scope="module")
def cpu_image():
    return _image_or_skip("cpu")


def test_cpu_image_labels_match_the_lock(cpu_image) -> None:
    ref, img = cpu_image
    labels = img.labels
    assert labels["cnn-bench.lock-hash"] == dk.lock_hash("cpu")
    assert labels["cnn-bench.torch-version"] == "2.10.0"
    assert labels["cnn-bench.platform"] == "cpu"
    assert labels["org.opencontainers.image.title"] == "cnn-bench-cpu"
    env = dict(e.split("=", 1) for e in img.attrs["Config"]["Env"])
    assert env["KIT_LOCK_HASH"] == dk.lock_hash("cpu")
    assert img.attrs["Config"]["User"] == "10001:10001"
    assert img.attrs["Config"]["Entrypoint"] == ["python", "-m", "bench"]
    assert img.attrs["Config"]["Cmd"] == ["selfcheck"]


def test_cpu_image_runs_unprivileged_read_only_without_network(cpu_image) -> None:
    _, img = cpu_image
    code, out = _run(
        img.id,
        [
            "-c",
            "import os, socket, torch, numba, sklearn; "
            "print(os.getuid(), torch.__version__, torch.get_num_threads()); "
            "open('/tmp/ok', 'w').write('x'); "
            "print(sorted(n for _, n in socket.if_nameindex())); "
            "open('/opt/venv/x', 'w')",
        ],
        entrypoint=["python", "-u"],
    )
    assert code == 1 and "Read-only file system" in out, out
    # docker interleaves the stdout and stderr streams in no fixed order: find our line
    first = next(line.split() for line in out.splitlines() if line.split()[:1] and line.split()[0].isdigit())
    assert first[0] == "10001" and first[1].startswith("2.10.0"), out
    assert "['lo']" in out, "network_mode none leaves only the loopback interface"


def test_cpu_image_selfcheck(cpu_image) -> None:
    _, img = cpu_image
    code, out = _run(img.id, ["selfcheck"])
    assert code == 0, out
    assert "torch" in out.lower()


def test_cpu_image_matrix_runs_through_host_run(cpu_image, tmp_path: Path) -> None:
    """dk.run end to end on a tiny dataset-free command: mounts, user, env, exit code."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "probe.txt").write_text("ro")
    chunks: list[bytes] = []
    code, image_id = dk.run("cpu", data, tmp_path / "out", ["selfcheck"], stream=chunks.append)
    assert code == 0, b"".join(chunks).decode(errors="replace")
    assert image_id == cpu_image[1].id


def test_cuda_without_gpu_is_one_line(tmp_path: Path) -> None:
    ref, _ = _image_or_skip("cuda")
    if dk.cuda_unavailable() is None:
        pytest.skip("this host has a GPU and the NVIDIA runtime")
    with pytest.raises(KitError) as err:
        dk.run("cuda", tmp_path, tmp_path / "out", ["selfcheck"])
    assert "GPU" in str(err.value) and "\n" not in str(err.value)


def test_cuda_image_selfcheck_without_gpu(tmp_path: Path) -> None:
    ref, img = _image_or_skip("cuda")
    assert img.labels["cnn-bench.cuda-version"] == "12.8"
    assert img.labels["cnn-bench.lock-hash"] == dk.lock_hash("cuda")
    env = dict(e.split("=", 1) for e in img.attrs["Config"]["Env"])
    assert env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.8"
    code, out = _run(img.id, ["selfcheck"])
    assert code == 0, out


def test_cuda_image_shares_the_cpu_venv_layer() -> None:
    _, cpu = _image_or_skip("cpu")
    _, cuda = _image_or_skip("cuda")
    cpu_layers = cpu.attrs["RootFS"]["Layers"]
    cuda_layers = cuda.attrs["RootFS"]["Layers"]
    # base + user + venv (the multi-GB one) are common; each image adds only its own top.
    shared = [a for a, b in zip(cpu_layers, cuda_layers) if a == b]
    assert len(shared) >= 3, (cpu_layers, cuda_layers)


def test_the_kits_own_run_path_confines_the_container(cpu_image, tmp_path: Path) -> None:
    """dk.run, as orchestrate.py uses it: non-root, read-only root, no network, /data read-only,
    every capability dropped, no-new-privileges, a pids limit; only /results and /tmp writable."""
    import json

    data = tmp_path / "data"
    data.mkdir()
    chunks: list[bytes] = []
    code, _ = dk.run("cpu", data, tmp_path / "out", ["selfcheck", "--sandbox"], stream=chunks.append)
    text = b"".join(chunks).decode(errors="replace")
    assert code == 0, text
    facts = json.loads(next(line for line in text.splitlines() if line.startswith("KIT SANDBOX "))[len("KIT SANDBOX ") :])
    assert facts["uid"] != 0 and facts["root_writable"] is False and facts["tmp_writable"] is True
    assert facts["interfaces"] == ["lo"], "no network: only the loopback interface"
    assert facts["data_writable"] is False and facts["results_writable"] is True
    assert int(facts["cap_eff"], 16) == 0 and int(facts["cap_bnd"], 16) == 0, "every capability dropped"
    assert facts["no_new_privs"] == "1"
    assert facts["pids_max"] == str(dk.PIDS_LIMIT)
