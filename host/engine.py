"""Talking to a Docker engine and running containers: engine checks, GPUs and the NVIDIA
runtime, doctor(), the container's user, `run()`.

Plain functions that return data and raise `KitError` with one line saying what to do.
Runs go through the docker SDK (`pip install docker`, the client in host/images.py):
mounts, a GPU DeviceRequest, streamed logs, exit code. What an image is and how it is
built is host/images.py's business; this module imports it, never the reverse.

    engine_info()                         -> {"version": "20.10.24", "api_version": ..., ...}
    run("cpu", Path("data"), Path("results/x"), ["selfcheck"])  -> (0, "sha256:...")
"""

from __future__ import annotations

import os
import platform as _platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.core.errors import KitError
from bench.core.machine import is_macos_arm64, nvidia_smi_gpus
from bench.core.provenance import host_label, machine_identity
from host import containers, images

PIDS_LIMIT = 4096  # processes + threads: a cell's thread pools and DataLoader workers fit many times over
# memory: a container may use this share of the host's RAM (no swap beyond it), so an input that
# inflates in memory (a decompression bomb, a runaway reader) ends the container, never the host;
# the references' largest cell peaked at 3.8 GB. KIT_CONTAINER_MEMORY (docker's units: 16g, 8192m)
# names another limit.
MEMORY_SHARE = 0.9
RUN_UID = RUN_GID = 10001  # the images' own user, used when the host user is root


# ---- engine and host capabilities ----------------------------------------------------


def engine_info() -> dict:
    """The engine's version and what it can run; KitError when no daemon answers."""
    client = images.docker_client()
    v = client.version()
    info = client.info()
    return {
        "version": v.get("Version", "unknown"),
        "api_version": v.get("ApiVersion", "unknown"),
        "os": v.get("Os", ""),
        "arch": v.get("Arch", ""),
        "kernel": v.get("KernelVersion", ""),
        "runtimes": sorted((info.get("Runtimes") or {}).keys()),
        "default_runtime": info.get("DefaultRuntime", ""),
        "rootless": any("rootless" in str(o) for o in info.get("SecurityOptions") or []),
        "cpus": info.get("NCPU"),
        "memory_gib": round((info.get("MemTotal") or 0) / 2**30, 1),
    }


def engine_ok() -> str | None:
    """None when a Docker engine answers, else the one-line reason (for `all`'s fallback)."""
    try:
        engine_info()
    except KitError as err:
        return str(err)
    return None


def nvidia_runtime(info: dict | None = None) -> dict:
    """Whether the engine can hand a GPU to a container (NVIDIA container toolkit).

    {"available": bool, "how": "runtime nvidia" | "nvidia-container-runtime-hook" | "", "reason": str}
    """
    if info is None:
        info = engine_info()
    if "nvidia" in info.get("runtimes", []):
        return {"available": True, "how": "runtime nvidia", "reason": ""}
    for tool in ("nvidia-container-runtime-hook", "nvidia-container-toolkit", "nvidia-ctk"):
        if shutil.which(tool):
            return {"available": True, "how": tool, "reason": ""}
    return {
        "available": False,
        "how": "",
        "reason": "no NVIDIA container toolkit (install nvidia-container-toolkit and restart docker)",
    }


def cuda_unavailable(info: dict | None = None) -> str | None:
    """None when cuda-bench can run here, else why not (one line)."""
    if not nvidia_smi_gpus():
        return "no NVIDIA GPU on this host (nvidia-smi lists none)"
    nv = nvidia_runtime(info)
    return None if nv["available"] else nv["reason"]


def compose_command() -> tuple[list[str] | None, str]:
    """(argv prefix of the compose that answers here, its version line): `docker compose` (v2
    plugin) first, else `docker-compose` (v1); (None, why) when neither does."""
    for argv in (["docker", "compose"], ["docker-compose"]):
        if not shutil.which(argv[0]):
            continue
        try:
            q = subprocess.run([*argv, "version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if q.returncode == 0 and q.stdout.strip():
            return argv, q.stdout.strip().splitlines()[0]
    return None, "neither `docker compose` (v2) nor `docker-compose` (v1) answers"


def _row(item: str, ok: bool, detail: str, fix: str = "") -> dict:
    return {"item": item, "ok": ok, "detail": detail + (f"; {fix}" if fix and not ok else "")}


def _engine_rows() -> tuple[dict | None, list[dict]]:
    """(engine info or None, the client, engine and BuildKit rows)."""
    cli = shutil.which("docker")
    rows = [_row("docker client", bool(cli), cli or "not found", "install: apt-get install docker.io (Debian) or Docker Desktop")]
    try:
        info: dict | None = engine_info()
    except KitError as err:
        info = None
        rows.append(_row("docker engine", False, str(err)))
    else:
        assert info is not None
        detail = (
            f"{info['version']} (API {info['api_version']}, {info['os']}/{info['arch']}, runtimes: {', '.join(info['runtimes'])})"
        )
        rows.append(_row("docker engine", True, detail))
    try:
        argv = images.build_cli()[0]
        rows.append(_row("docker build (BuildKit)", info is not None, " ".join(argv), "needs the docker engine above"))
    except KitError as err:
        rows.append(_row("docker build (BuildKit)", False, str(err)))
    return info, rows


def _tool_rows() -> list[dict]:
    """What `base` and compose need: debootstrap, and a compose that answers."""
    deb = shutil.which("debootstrap")
    rows = [_row("debootstrap (for `base`)", bool(deb), deb or "not found", "install: apt-get install debootstrap")]
    argv, version = compose_command()
    fix = "the compose commands in the README need it: apt-get install docker-compose (v1) or docker-compose-plugin (v2)"
    detail = f"{' '.join(argv)}: {version}" if argv else version
    if argv == ["docker-compose"]:  # v1 answers: the README's `docker compose ...` (v2) lines will not
        detail += (
            " (v1: type `docker-compose run ...`; the README's `docker compose run ...` lines need v2, "
            "Docker's compose plugin: apt-get install docker-compose-plugin)"
        )
    rows.append(_row("docker compose", argv is not None, detail, fix))
    return rows


def _gpu_rows(info: dict | None) -> list[dict]:
    """NVIDIA runtime, compose's cuda-bench, GPUs, Apple silicon."""
    if info is not None:
        nv = nvidia_runtime(info)
        rows = [_row("NVIDIA runtime", bool(nv["available"]), str(nv["how"] or nv["reason"]))]
    else:
        rows = [_row("NVIDIA runtime", False, "unknown: no docker engine")]
    # compose cannot check this before it starts a container (it prints the daemon's raw
    # "could not select device driver" error), so doctor says it for compose.yaml's cuda-bench.
    why = cuda_unavailable(info) if info is not None else "no docker engine"
    rows.append(
        _row("compose cuda-bench", why is None, "can run here" if why is None else f"cannot run here: {why}; use cpu-bench")
    )
    found = nvidia_smi_gpus()
    none = "nvidia-smi found no GPU" if shutil.which("nvidia-smi") else "no nvidia-smi"
    rows.append(
        _row(
            "GPU (nvidia-smi)", bool(found), "; ".join(f"{g['name']}, driver {g['driver']}, {g['memory']}" for g in found) or none
        )
    )
    mac = is_macos_arm64()
    where = f"no ({sys.platform}/{_platform.machine()})"
    rows.append(_row("macOS arm64 (mps)", mac, "yes: run mps natively (docker/mps/run.sh)" if mac else where))
    return rows


def _image_rows() -> list[dict]:
    rows = []
    for plat in images.IMAGE_PLATFORMS:
        try:
            ref = images.image_ref(plat)
            img = images.docker_client().images.get(ref)
            rows.append(_row(f"image {plat}", True, f"{ref} {img.id[:19]}"))
        except KitError as err:
            rows.append(_row(f"image {plat}", False, str(err)))
        except Exception:
            rows.append(_row(f"image {plat}", False, f"not built: python orchestrate.py build {plat}"))
    return rows


def _container_rows() -> list[dict]:
    """The kit's containers: an orphan (its owner process gone) is stopped and removed here."""
    try:
        removed, left = containers.reap(images.docker_client())
    except Exception as err:  # doctor never raises
        return [_row("kit containers", False, f"could not list them: {str(err)[:200]}")]
    rows = [_row("kit containers", True, line) for line in removed + left]
    return rows or [_row("kit containers", True, "none running, no orphan")]


def doctor() -> list[dict]:
    """What this host has for every command the README shows, as rows {"item", "ok", "detail"};
    a missing prerequisite says how to install it; an orphaned kit container is removed. Never raises."""
    info, rows = _engine_rows()
    rows += _tool_rows() + _gpu_rows(info)
    return rows + (_image_rows() + _container_rows() if info is not None else [])


# ---- run ---------------------------------------------------------------------------------------


def invoking_user() -> tuple[int, int] | None:
    """The (uid, gid) the kit acts for: the caller's, or under sudo the user who ran sudo
    (SUDO_UID/SUDO_GID); None when that is root (or there are no uids here)."""
    if not hasattr(os, "getuid"):
        return None
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        try:
            uid, gid = int(os.environ.get("SUDO_UID", "0")), int(os.environ.get("SUDO_GID", "0"))
        except ValueError:
            uid, gid = 0, 0
    return None if uid == 0 else (uid, gid)


def container_user(results_dir: Path) -> str:
    """The host user's uid:gid, so results belong to whoever ran the kit (under sudo: the
    user who ran sudo, SUDO_UID:SUDO_GID); root maps to 10001. Never 0."""
    if not hasattr(os, "getuid"):
        return f"{RUN_UID}:{RUN_GID}"
    user = invoking_user()
    if user is not None:
        uid, gid = user
        if os.getuid() == 0:  # sudo: the results dir the kit made as root goes to that user
            _chown_kit_paths(results_dir, uid, gid)
        return f"{uid}:{gid}"
    _chown_kit_paths(results_dir, RUN_UID, RUN_GID)
    return f"{RUN_UID}:{RUN_GID}"


def _chown_kit_paths(results_dir: Path, uid: int, gid: int) -> None:
    # Root on the host: keep the container unprivileged and hand it what the kit writes in the
    # results dir: the dir itself, its lock, and the studies' and summaries' trees. Nothing
    # else under --out changes owner (it may be a dir that holds other things too).
    from bench.core.lock import LOCK_NAME
    from bench.core.registry import studies

    os.lchown(results_dir, uid, gid)
    for name in [LOCK_NAME, "platforms.json"]:
        if os.path.lexists(results_dir / name):
            os.lchown(results_dir / name, uid, gid)
    for sub in [*studies(), "summaries"]:
        top = results_dir / sub
        if top.is_symlink() or not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
                os.lchown(name, uid, gid)


def find_image(platform: str, image: str | None = None):
    """The docker SDK image for PLATFORM built from the current lock (or IMAGE if given)."""
    import docker

    ref = image or images.image_ref(platform)
    try:
        return ref, images.docker_client().images.get(ref)
    except docker.errors.ImageNotFound:  # type: ignore[attr-defined]
        raise KitError(f"image {ref} not found: run `python orchestrate.py build {platform}`") from None


def _checked_dirs(data_dir: Path, results_dir: Path) -> tuple[Path, Path]:
    """DATA_DIR and RESULTS_DIR as absolute paths; KitError when the data dir is missing."""
    data_dir, results_dir = Path(data_dir).expanduser().resolve(), Path(results_dir).expanduser().resolve()
    if not data_dir.is_dir():
        raise KitError(
            f"data dir {data_dir} not found: pass --data-dir (the dir holding the datasets) "
            "or fetch one with: python orchestrate.py data fetch NAME"
        )
    return data_dir, results_dir


def _check_image_lock_and_sources(platform: str, ref: str, labels: dict, image: str | None, echo: images.Echo) -> None:
    """KitError when the kit's own image was built from another lock; a note when it holds other
    bench/ sources than this checkout (it still runs)."""
    if labels.get("cnn-bench.lock-hash") and labels["cnn-bench.lock-hash"] != images.lock_hash(platform) and image is None:
        raise KitError(f"image {ref} was built from another lock: run `python orchestrate.py build {platform}`")
    if labels.get("cnn-bench.source-hash") not in (None, images.source_hash()):
        echo(
            f"note: {ref} holds other bench/ sources than this checkout: "
            f"rebuild with `python orchestrate.py build {platform}` to run these"
        )


def _container_env(img, ref: str, labels: dict, data_dir: Path) -> dict[str, str]:
    """The provenance the container's rows record: runtime, image, lock, git sha, host, data dir."""
    return {
        "KIT_RUNTIME": "container",
        "KIT_IMAGE_ID": img.id,
        "KIT_IMAGE_REF": ref,
        "KIT_IMAGE_DIGEST": (img.attrs.get("RepoDigests") or [""])[0],
        "KIT_LOCK_HASH": labels.get("cnn-bench.lock-hash", "unknown"),
        "KIT_GIT_SHA": images.git_sha(),
        "KIT_HOST_NAME": host_label(),
        "KIT_MACHINE_ID": machine_identity()["machine_id"] or "unknown",  # the container reads neither source
        "KIT_HOST_DATA_DIR": str(data_dir),  # errors name the dir the user knows, not /data
    }


def container_memory() -> int | str:
    """The memory limit of the kit's containers: $KIT_CONTAINER_MEMORY as given (docker's units),
    else MEMORY_SHARE of this host's RAM, in bytes (a multiple of 1 MiB)."""
    named = os.environ.get("KIT_CONTAINER_MEMORY", "").strip()
    if named:
        if not re.fullmatch(r"[0-9]+[bkmg]?", named.lower()):
            raise KitError(f"KIT_CONTAINER_MEMORY={named!r}: give a size in docker's units, e.g. 16g or 8192m")
        return named.lower()
    import psutil

    return int(psutil.virtual_memory().total * MEMORY_SHARE) >> 20 << 20


def _container_options(platform: str, args: list[str], env: dict[str, str], data_dir: Path, results_dir: Path, gpu: bool) -> dict:
    """containers.run() keywords: the mounts, the user, and the confinement (no network, read-only
    root, no capabilities, a pids limit, a memory limit without swap), plus every GPU when GPU."""
    import docker

    kwargs = dict(
        command=args,
        detach=True,
        environment=env,
        user=container_user(results_dir),
        volumes={str(data_dir): {"bind": "/data", "mode": "ro"}, str(results_dir): {"bind": "/results", "mode": "rw"}},
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],  # the kit needs no capability at all
        security_opt=["no-new-privileges:true"],
        pids_limit=PIDS_LIMIT,
        mem_limit=container_memory(),
        memswap_limit=container_memory(),  # the same: no swap on top
        tmpfs={"/tmp": "rw,exec,nosuid,nodev"},
        shm_size="1g",
        init=True,
        labels={"cnn-bench.platform": platform},
        hostname=socket.gethostname()[:63],  # system.json names the host, not the container id
    )
    if gpu:
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]  # type: ignore[attr-defined]
    return kwargs


def _stream_until_exit(container, stream: Callable[[bytes], None] | None) -> int:
    """Stream CONTAINER's logs (to STREAM, default stdout) until it exits; returns its exit code.
    Ctrl-C, SIGTERM and SIGHUP stop it (host/containers.py); it is removed however this ends."""
    write = stream or (lambda b: (sys.stdout.buffer.write(b), sys.stdout.flush()))
    try:
        for chunk in container.logs(stream=True, follow=True):
            write(chunk)
        return int(container.wait().get("StatusCode", 1))
    except KeyboardInterrupt:  # Ctrl-C, or containers.Stopped (SIGTERM, SIGHUP)
        containers.stop(container)
        raise
    finally:
        containers.remove(container)


def run(
    platform: str,
    data_dir: Path,
    results_dir: Path,
    args: Sequence[str],
    gpu: bool | None = None,
    image: str | None = None,
    echo: images.Echo = images.print_flush,
    stream: Callable[[bytes], None] | None = None,
) -> tuple[int, str]:
    """Run `python -m bench ARGS` in the PLATFORM image; returns (container exit code, image id).

    data_dir is mounted read-only at /data, results_dir read-write at /results; no network,
    read-only root filesystem with a tmpfs /tmp, the host user's uid:gid, and all GPUs
    when gpu (default: platform == "cuda"). Logs stream to stdout as they come.
    """
    images.check_platform(platform)
    data_dir, results_dir = _checked_dirs(data_dir, results_dir)
    gpu = (platform == "cuda") if gpu is None else gpu
    client = images.docker_client()
    info = engine_info()
    ref, img = find_image(platform, image)
    if gpu:
        why = cuda_unavailable(info)
        if why:
            raise KitError(f"{platform} needs a GPU in the container: {why}; run cpu instead")
    labels = img.labels or {}
    _check_image_lock_and_sources(platform, ref, labels, image, echo)
    results_dir.mkdir(parents=True, exist_ok=True)
    args = list(args)
    env = _container_env(img, ref, labels, data_dir)
    kwargs = _container_options(platform, args, env, data_dir, results_dir, gpu)
    containers.reap(client, echo)  # an orphan of an earlier run would hold the results dir's lock
    echo(f"run: {ref} ({img.id[:19]}) python -m bench {' '.join(args)}")
    with containers.stop_signals():
        container = containers.start(client, img.id, kwargs)
        code = _stream_until_exit(container, stream)
    echo(f"run: {ref} exited {code}")
    return code, img.id
