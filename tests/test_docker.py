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
from host import engine, images

REPO = Path(__file__).resolve().parents[1]
# What NVIDIA's own nvidia/cuda:12.8.1 images carry (their Config.Env): CUDA >= 12.8, or one of
# the driver branches 470/535/550/560/565 that CUDA 12.8 supports through forward compatibility.
_BRANDS = ("unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws", "cloudgaming")
NVIDIA_REQUIRE_CUDA = "cuda>=12.8 " + " ".join(
    f"brand={b},driver>={d},driver<{d + 1}" for d in (470, 535, 550, 560, 565) for b in _BRANDS
)


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
    # never root: started as 0 only to drop to the owner of ./results (root -> 10001) at once
    assert svc["user"] == "${KIT_UID:-0}:${KIT_GID:-0}"
    assert svc["entrypoint"] == ["python", "/opt/cnn-bench/compose-entry.py"]
    assert svc["cap_drop"] == ["ALL"] and sorted(svc["cap_add"]) == ["CHOWN", "SETGID", "SETUID"]
    assert "no-new-privileges:true" in svc["security_opt"] and svc["pids_limit"] == 4096
    assert svc["mem_limit"] == svc["memswap_limit"] == "${KIT_CONTAINER_MEMORY:-16g}"
    assert svc["pull_policy"] == "never" and svc["build"]["target"] == platform
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
    assert f'NVIDIA_REQUIRE_CUDA="{NVIDIA_REQUIRE_CUDA}"' in text
    assert "CREATED" not in text and "created" not in text, "no build timestamp may reach an image"
    assert text.count('ENTRYPOINT ["python", "-m", "bench"]') == 2 and text.count('CMD ["selfcheck"]') == 2
    assert text.count("USER 10001:10001") == 2
    for label in (
        "cnn-bench.torch-version",
        "cnn-bench.cuda-version",
        "cnn-bench.lock-hash",
        "org.opencontainers.image.revision",
        "org.opencontainers.image.source",
        "org.opencontainers.image.version",
        "org.opencontainers.image.licenses",
        "org.opencontainers.image.base.digest",
        "cnn-bench.source-hash",
        "KIT_IMAGE_CONTENT_REF=${CONTENT_REF}",
        "KIT_IMAGE_GIT_SHA=${GIT_SHA}",
    ):
        assert text.count(label) == 2, label
    # The CA bundle is a secret: nothing COPYs or ADDs a certificate into a layer.
    assert not re.search(r"^(COPY|ADD)\b.*(\.crt|\.pem|pipca)", text, re.M)


# ---- host functions: bad input is one clear line -------------------------------------------


def test_unknown_platform_is_one_line() -> None:
    for bad in ("tpu", "mps"):
        with pytest.raises(KitError) as err:
            images.check_platform(bad)
        assert "\n" not in str(err.value) and "cpu or cuda" in str(err.value)


def test_lock_hash_and_versions_come_from_the_lock() -> None:
    assert images.lock_hash("cpu") == hashlib.sha256((REPO / "requirements/cpu.txt").read_bytes()).hexdigest()
    assert images.lock_versions("cpu") == {"torch": "2.10.0", "cuda": "none"}
    assert images.lock_versions("cuda") == {"torch": "2.10.0", "cuda": "12.8"}
    assert images.image_ref("cuda") == f"cnn-bench/cuda:{images.lock_hash('cuda')[:12]}-{images.source_hash()[:12]}"


def test_source_hash_covers_what_the_image_copies() -> None:
    files = {str(p.relative_to(REPO)) for p in images._source_files()}
    assert {"docker/Dockerfile", "docker/compose-entry.py", "docker/layerdiff.py", "bench/__main__.py"} <= files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    assert not any(f.startswith(("host/", "tests/")) or f == "orchestrate.py" for f in files)


def test_oci_facts() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert f'version = "{images.kit_version()}"' in text
    if not (any(REPO.glob("LICEN[CS]E*")) or any(REPO.glob("COPYING*"))):
        assert images.licenses() == "NOASSERTION", "no LICENSE file: nothing may be claimed"


def test_torch_cpu_only_without_its_lock_is_one_line() -> None:
    import subprocess
    import sys

    if (REPO / "requirements" / "cpu-torchcpu.txt").exists():
        pytest.skip("requirements/cpu-torchcpu.txt exists here")
    proc = subprocess.run(
        [sys.executable, "orchestrate.py", "build", "cpu", "--torch-cpu-only"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the command is right; the lock it needs is missing
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "requirements/cpu-torchcpu.txt" in lines[0] and ".github/workflows/lock-cpu-only.yml" in lines[0]
    assert "docker build" not in proc.stdout, "no build may start without the lock"
    with pytest.raises(KitError):
        images.build("cuda", variant="torchcpu")


def test_container_user_is_never_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    owners: list[tuple[int, int]] = []
    monkeypatch.setattr(engine.os, "lchown", lambda p, u, g: owners.append((u, g)))
    monkeypatch.setattr(engine.os, "getuid", lambda: 0)
    monkeypatch.setattr(engine.os, "getgid", lambda: 0)
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_GID", raising=False)
    assert engine.container_user(tmp_path) == "10001:10001" and owners[0] == (10001, 10001)
    owners.clear()
    monkeypatch.setenv("SUDO_UID", "1234")
    monkeypatch.setenv("SUDO_GID", "2345")
    assert engine.container_user(tmp_path) == "1234:2345", "under sudo: the user who ran sudo"
    assert owners and set(owners) == {(1234, 2345)}
    monkeypatch.setenv("SUDO_UID", "0")
    assert engine.container_user(tmp_path) == "10001:10001", "sudo from root is still root: 10001"
    monkeypatch.setattr(engine.os, "getuid", lambda: 1000)
    monkeypatch.setattr(engine.os, "getgid", lambda: 1001)
    assert engine.container_user(tmp_path) == "1000:1001"


class _FakeImage:
    def __init__(self, iid: str, tags: list[str], labels: dict | None = None) -> None:
        self.id, self.short_id, self.tags, self.labels = iid, iid[:19], tags, labels or {}


def test_remove_superseded_touches_only_the_kits_images(monkeypatch: pytest.MonkeyPatch) -> None:
    keep = _FakeImage("sha256:" + "a" * 64, ["cnn-bench/cpu:new-new", "cnn-bench/cpu:latest"])
    old = _FakeImage("sha256:" + "b" * 64, ["cnn-bench/cpu:old-old"])
    shared = _FakeImage("sha256:" + "c" * 64, ["cnn-bench/cpu:old2-old2", "someone/else:v1"])
    kit_dangling = _FakeImage(
        "sha256:" + "d" * 64, [], {"cnn-bench.platform": "cpu", "org.opencontainers.image.title": "cnn-bench-cpu"}
    )
    other_repo_dangling = _FakeImage(
        "sha256:" + "e" * 64, [], {"cnn-bench.platform": "cpu", "org.opencontainers.image.ref.name": "cnn-bench-test/cpu:x-y"}
    )
    removed: list[str] = []

    class Images:
        def list(self, name=None, filters=None):
            if name:
                return [i for i in (keep, old, shared) if any(t.startswith(name + ":") for t in i.tags)]
            assert filters == {"dangling": True, "label": "cnn-bench.platform=cpu"}
            return [kit_dangling, other_repo_dangling]

        def remove(self, ref, noprune=False):
            removed.append(ref)

    class Client:
        images = Images()

    monkeypatch.setattr(images, "docker_client", lambda timeout=30: Client())
    said: list[str] = []
    images.remove_superseded("cnn-bench/cpu", "cpu", keep.id, keep.tags, echo=said.append)
    assert removed == ["cnn-bench/cpu:old-old", "cnn-bench/cpu:old2-old2", kit_dangling.id]
    assert "someone/else:v1" not in removed and other_repo_dangling.id not in removed and keep.id not in removed
    assert sum("removed superseded" in s for s in said) == 3


def test_daemon_down_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(KitError) as err:
        engine.engine_info()
    assert str(err.value) == images.DAEMON_DOWN
    assert engine.engine_ok() == images.DAEMON_DOWN


def test_missing_data_dir_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(KitError) as err:
        engine.run("cpu", tmp_path / "nope", tmp_path / "out", ["selfcheck"])
    assert "data dir" in str(err.value) and "\n" not in str(err.value)


# ---- the built images (need an engine) -----------------------------------------------------


def _image_or_skip(platform: str):
    reason = engine.engine_ok()
    if reason:
        pytest.skip(f"no Docker engine: {reason}")
    try:
        return engine.find_image(platform)
    except KitError as err:
        pytest.skip(str(err))


def _run(image_id: str, args: list[str], **kw) -> tuple[int, str]:
    client = images.docker_client()
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
    assert labels["cnn-bench.lock-hash"] == images.lock_hash("cpu")
    assert labels["cnn-bench.torch-version"] == "2.10.0"
    assert labels["cnn-bench.platform"] == "cpu"
    assert labels["org.opencontainers.image.title"] == "cnn-bench-cpu"
    env = dict(e.split("=", 1) for e in img.attrs["Config"]["Env"])
    assert env["KIT_LOCK_HASH"] == images.lock_hash("cpu")
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
    """engine.run end to end on a tiny dataset-free command: mounts, user, env, exit code."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "probe.txt").write_text("ro")
    chunks: list[bytes] = []
    code, image_id = engine.run("cpu", data, tmp_path / "out", ["selfcheck"], stream=chunks.append)
    assert code == 0, b"".join(chunks).decode(errors="replace")
    assert image_id == cpu_image[1].id


def test_cuda_without_gpu_is_one_line(tmp_path: Path) -> None:
    ref, _ = _image_or_skip("cuda")
    if engine.cuda_unavailable() is None:
        pytest.skip("this host has a GPU and the NVIDIA runtime")
    with pytest.raises(KitError) as err:
        engine.run("cuda", tmp_path, tmp_path / "out", ["selfcheck"])
    assert "GPU" in str(err.value) and "\n" not in str(err.value)


def test_cuda_image_selfcheck_without_gpu(tmp_path: Path) -> None:
    ref, img = _image_or_skip("cuda")
    assert img.labels["cnn-bench.cuda-version"] == "12.8"
    assert img.labels["cnn-bench.lock-hash"] == images.lock_hash("cuda")
    env = dict(e.split("=", 1) for e in img.attrs["Config"]["Env"])
    assert env["NVIDIA_REQUIRE_CUDA"] == NVIDIA_REQUIRE_CUDA
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
    """engine.run, as orchestrate.py uses it: non-root, read-only root, no network, /data read-only,
    every capability dropped, no-new-privileges, a pids limit; only /results and /tmp writable."""
    import json

    data = tmp_path / "data"
    data.mkdir()
    chunks: list[bytes] = []
    code, _ = engine.run("cpu", data, tmp_path / "out", ["selfcheck", "--sandbox"], stream=chunks.append)
    text = b"".join(chunks).decode(errors="replace")
    assert code == 0, text
    facts = json.loads(next(line for line in text.splitlines() if line.startswith("KIT SANDBOX "))[len("KIT SANDBOX ") :])
    assert facts["uid"] != 0 and facts["root_writable"] is False and facts["tmp_writable"] is True
    assert facts["interfaces"] == ["lo"], "no network: only the loopback interface"
    assert facts["data_writable"] is False and facts["results_writable"] is True
    assert int(facts["cap_eff"], 16) == 0 and int(facts["cap_bnd"], 16) == 0, "every capability dropped"
    assert facts["no_new_privs"] == "1"
    assert facts["pids_max"] == str(engine.PIDS_LIMIT)
    assert facts["memory_max"] == str(engine.container_memory()) and facts["swap_max"] in ("0", None)


@pytest.mark.docker
def test_the_kits_container_options_set_a_memory_limit_the_kernel_enforces(tmp_path: Path) -> None:
    """engine's options (what `orchestrate.py run` starts every container with) as the kernel
    reports them inside one: the memory limit, no swap beyond it, and the pids limit; a
    KIT_CONTAINER_MEMORY names another limit. Read with the image's Python, whatever its bench
    (any cpu image of the kit will do: this checkout's, else cnn-bench/cpu:latest)."""
    import docker

    try:
        _ref, img = engine.find_image("cpu")
    except KitError:
        try:
            img = images.docker_client().images.get("cnn-bench/cpu:latest")
        except (KitError, docker.errors.DockerException) as err:  # type: ignore[attr-defined]
            pytest.skip(f"no cpu image of the kit: {str(err)[:200]}")
    probe = (  # memory limit, swap allowed beyond it, pids limit: cgroup v2, else v1
        "import os\n"
        "def r(*fs):\n"
        "    return next(open('/sys/fs/cgroup/' + f).read().strip() for f in fs if os.path.exists('/sys/fs/cgroup/' + f))\n"
        "mem = r('memory.max', 'memory/memory.limit_in_bytes')\n"
        "swap = r('memory.swap.max') if os.path.exists('/sys/fs/cgroup/memory.swap.max') else "
        "str(int(r('memory/memory.memsw.limit_in_bytes')) - int(mem))\n"
        "print(mem, swap, r('pids.max', 'pids/pids.max'))\n"
    )
    data, res = tmp_path / "data", tmp_path / "res"
    data.mkdir()
    res.mkdir()
    for named, want in ((None, engine.container_memory()), ("512m", 512 << 20)):
        env = {"KIT_CONTAINER_MEMORY": named} if named else {}
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            opts = engine._container_options("cpu", ["-c", probe], {}, data, res, gpu=False)
        opts.update(entrypoint=["python"], detach=True)
        c = images.docker_client().containers.run(img.id, **opts)
        try:
            assert c.wait(timeout=120)["StatusCode"] == 0
            got = c.logs().decode().split()
        finally:
            try:
                c.remove(force=True)
            except docker.errors.DockerException:  # type: ignore[attr-defined]
                pass
        assert got == [str(want), "0", str(engine.PIDS_LIMIT)], (named, got)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_CONTAINER_MEMORY", "lots")
        with pytest.raises(KitError, match="KIT_CONTAINER_MEMORY"):
            engine.container_memory()


def test_cuda_image_nvidia_require_cuda_from_docker_image_inspect() -> None:
    """The container toolkit reads NVIDIA_REQUIRE_CUDA from the image config: read it the same way."""
    import json
    import subprocess

    ref, _ = _image_or_skip("cuda")
    out = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .Config.Env}}", ref], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    env = dict(e.split("=", 1) for e in json.loads(out.stdout))
    assert env["NVIDIA_REQUIRE_CUDA"] == NVIDIA_REQUIRE_CUDA
    conds = env["NVIDIA_REQUIRE_CUDA"].split()
    assert conds[0] == "cuda>=12.8" and "brand=tesla,driver>=535,driver<536" in conds and len(conds) == 61


def test_cpu_image_oci_labels_and_content_key(cpu_image) -> None:
    ref, img = cpu_image
    labels = img.labels
    assert ref == images.image_ref("cpu") and labels["org.opencontainers.image.ref.name"] == ref
    assert labels["cnn-bench.source-hash"] == images.source_hash()
    assert labels["org.opencontainers.image.version"] == images.kit_version()
    assert labels["org.opencontainers.image.licenses"] == images.licenses()
    assert labels["org.opencontainers.image.source"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", labels["org.opencontainers.image.base.digest"])
    assert "org.opencontainers.image.created" not in labels
    env = dict(e.split("=", 1) for e in img.attrs["Config"]["Env"])
    assert env["KIT_IMAGE_CONTENT_REF"] == ref and env["KIT_IMAGE_SOURCE_HASH"] == images.source_hash()
    assert env["KIT_IMAGE_GIT_SHA"] == labels["org.opencontainers.image.revision"]


def test_build_is_a_no_op_when_the_content_image_exists(cpu_image, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same lock, sources and base: no docker build runs, the same id comes back, nothing is
    retagged or removed (tag_latest/prune off: the user's :latest stays as it is)."""
    ref, img = cpu_image
    base = img.labels.get("org.opencontainers.image.base.name") or None
    if images.base_digest(base) != img.labels.get("org.opencontainers.image.base.digest"):
        pytest.skip(f"{ref} was built on another base than {base}")

    def no_build():
        raise AssertionError("a docker build started although the image is up to date")

    monkeypatch.setattr(images, "build_cli", no_build)
    said: list[str] = []
    image_id = images.build("cpu", base_image=base, echo=said.append, tag_latest=False, prune=False)
    assert image_id == img.id
    assert any(f"up to date (tag {ref}" in s for s in said), said


def test_doctor_names_every_missing_prerequisite_with_its_install_line(monkeypatch):
    """No engine, no client, no debootstrap, no compose: each is a row that says how to get it,
    and `docker build` is not ok while no engine answers (whatever client is on disk)."""
    from host import engine

    def no_engine():
        raise KitError("Docker daemon not running")

    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    monkeypatch.setattr(engine, "engine_info", no_engine)
    rows = {r["item"]: r for r in engine.doctor()}
    assert not rows["docker client"]["ok"] and "apt-get install docker.io" in rows["docker client"]["detail"]
    assert not rows["docker engine"]["ok"] and "not running" in rows["docker engine"]["detail"]
    assert not rows["docker build (BuildKit)"]["ok"]
    assert (
        not rows["debootstrap (for `base`)"]["ok"] and "apt-get install debootstrap" in rows["debootstrap (for `base`)"]["detail"]
    )
    assert not rows["docker compose"]["ok"] and "docker-compose" in rows["docker compose"]["detail"]
    assert not any(item.startswith("image ") for item in rows)  # images need an engine to be looked up


def test_the_base_recipe_is_what_the_bootstrap_script_labels(tmp_path: Path) -> None:
    """`orchestrate.py base` keeps an image whose recipe label is this checkout's: the label the
    script writes (its own sha256 and the suite) must be the one the host computes."""
    import subprocess

    script = images.BOOTSTRAP_SCRIPT.read_text()
    line = next(ln for ln in script.splitlines() if ln.startswith("RECIPE="))
    out = subprocess.run(
        ["bash", "-c", "SUITE=trixie; " + line.replace("${BASH_SOURCE[0]}", str(images.BOOTSTRAP_SCRIPT)) + '; echo "$RECIPE"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == images.base_recipe("trixie") and out.endswith("-trixie")
    assert "cnn-bench.base-recipe=${RECIPE}" in script


def test_base_keeps_an_image_of_its_own_recipe_only() -> None:
    """A base image of this recipe is kept (same id, no debootstrap); --rebuild would redo it."""
    if engine.engine_ok():
        pytest.skip(f"no Docker engine: {engine.engine_ok()}")
    try:
        have = images.docker_client().images.get(images.BASE_TAG)
    except Exception:  # noqa: BLE001 - not bootstrapped here
        pytest.skip(f"{images.BASE_TAG} not bootstrapped here (orchestrate.py base)")
    if have.labels.get("cnn-bench.base-recipe") != images.base_recipe("bookworm"):
        pytest.skip(f"{images.BASE_TAG} was made by another bootstrap script")
    said: list[str] = []
    assert images.bootstrap_base(echo=said.append) == have.id
    assert said and "kept" in said[0]
