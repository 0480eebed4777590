"""Host side of the container runtime: engine checks, base bootstrap, image build, container run.

Plain functions that return data and raise `KitError` with one line saying what to do.
Builds go through the docker CLI (BuildKit: secrets, cache mounts); runs go through the
docker SDK (`pip install docker`): mounts, a GPU DeviceRequest, streamed logs, exit code.

    engine_info()                         -> {"version": "20.10.24", "api_version": ..., ...}
    build("cpu", ca_cert=Path(...))       -> "sha256:..."   (image id; no build when one exists for
                                             the lock, the sources and the base)
    run("cpu", Path("data"), Path("results/x"), ["selfcheck"])  -> (0, "sha256:...")
"""

from __future__ import annotations

import hashlib
import os
import platform as _platform
import re
import shutil
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.core.errors import KitError
from bench.core.machine import is_macos_arm64
from bench.core.provenance import host_label

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "docker" / "Dockerfile"
BOOTSTRAP_SCRIPT = REPO / "docker" / "bootstrap-base.sh"
BUILD_WHEELHOUSE = REPO / "docker" / "wheelhouse"  # bind-mounted at /wheels by the Dockerfile
IMAGE_PLATFORMS = ("cpu", "cuda")  # mps runs natively: docker/mps/run.sh
# Image variants: name -> (platform, lock file stem, the Dockerfile's VENV_STAGE).
# torchcpu: torch's CPU-only wheel (download.pytorch.org/whl/cpu), ~6 GB smaller.
VARIANTS = {"torchcpu": ("cpu", "cpu-torchcpu", "builder-cpu-torchcpu")}
LOCK_WORKFLOW = ".github/workflows/lock-cpu-only.yml"
KIT_REPO = "cnn-bench"  # images are KIT_REPO/<platform>[-<variant>]:<lock[:12]>-<sources[:12]>
BASE_TAG = "cnn-bench/base:bookworm"
PIDS_LIMIT = 4096  # processes + threads: a cell's thread pools and DataLoader workers fit many times over
RUN_UID = RUN_GID = 10001  # the images' own user, used when the host user is root
DAEMON_DOWN = "Docker daemon not running: start it (sudo systemctl start docker) or use --runtime native"

Echo = Callable[[str], None]


def _echo(msg: str) -> None:
    print(msg, flush=True)


# ---- locks and image names ---------------------------------------------------------


def check_platform(platform: str) -> str:
    if platform not in IMAGE_PLATFORMS:
        hint = " (mps runs natively on macOS: docker/mps/run.sh)" if platform == "mps" else ""
        raise KitError(f"unknown platform {platform!r} for images: choose cpu or cuda{hint}")
    return platform


def check_variant(platform: str, variant: str | None) -> str | None:
    check_platform(platform)
    if variant is None:
        return None
    if variant not in VARIANTS or VARIANTS[variant][0] != platform:
        known = ", ".join(f"{v} ({p})" for v, (p, _, _) in VARIANTS.items())
        raise KitError(f"unknown image variant {variant!r} for {platform}: known variants: {known}")
    return variant


def lock_path(platform: str, variant: str | None = None) -> Path:
    if check_variant(platform, variant):
        return REPO / "requirements" / f"{VARIANTS[variant][1]}.txt"  # type: ignore[index]
    return REPO / "requirements" / f"{platform}.txt"


def lock_hash(platform: str, variant: str | None = None) -> str:
    """sha256 of the platform's lock file: the image's cnn-bench.lock-hash label."""
    path = lock_path(platform, variant)
    if not path.is_file():
        if variant:
            raise KitError(
                f"{path.relative_to(REPO)} missing: the {variant} variant installs torch from "
                "https://download.pytorch.org/whl/cpu, which this host cannot reach; run the GitHub "
                f"workflow {LOCK_WORKFLOW} (it locks and commits it), then pull"
            )
        raise KitError(f"{path.relative_to(REPO)} missing: run requirements/lock.sh")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_pins(platform: str, variant: str | None = None) -> dict[str, str]:
    """name -> version pinned in the platform's lock (local versions like +cpu dropped)."""
    text = re.sub(r"\+[A-Za-z0-9.]+(?=[ ;\\\n])", "", lock_path(platform, variant).read_text())
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^ ;\\\n]+)", text, re.M)}


def lock_versions(platform: str, variant: str | None = None) -> dict[str, str]:
    """torch and CUDA versions the lock installs ("12.8" from nvidia-cuda-runtime-cu12)."""
    pins = lock_pins(platform, variant)
    cudart = pins.get("nvidia-cuda-runtime-cu12", "")
    return {
        "torch": pins.get("torch", "unknown"),
        "cuda": ".".join(cudart.split(".")[:2]) if platform == "cuda" and cudart else "none",
    }


def image_repo(platform: str, variant: str | None = None, repo: str = KIT_REPO) -> str:
    """cnn-bench/cpu, cnn-bench/cuda, cnn-bench/cpu-torchcpu."""
    return f"{repo}/{platform}-{variant}" if check_variant(platform, variant) else f"{repo}/{platform}"


def content_tag(platform: str, variant: str | None = None) -> str:
    """<lock sha256[:12]>-<source_hash()[:12]>: what the image is built from, as a tag."""
    return f"{lock_hash(platform, variant)[:12]}-{source_hash()[:12]}"


def image_ref(platform: str, variant: str | None = None, repo: str = KIT_REPO) -> str:
    """The tag an image built from the current lock and sources has:
    cnn-bench/cpu:<lock sha256[:12]>-<source hash[:12]>."""
    return f"{image_repo(platform, variant, repo)}:{content_tag(platform, variant)}"


def _source_files() -> list[Path]:
    """What the images COPY besides the lock: bench/ (as .dockerignore leaves it), the
    Dockerfile and docker/*.py."""
    ignored = {"__pycache__", ".pytest_cache"}
    bench = [p for p in (REPO / "bench").rglob("*") if p.is_file() and not ignored & set(p.parts) and p.suffix != ".pyc"]
    return sorted(bench) + [DOCKERFILE] + sorted((REPO / "docker").glob("*.py"))


def source_hash() -> str:
    """sha256 over the image's inputs besides the lock and the base: bench/ sources, the
    Dockerfile, docker/*.py and the kit version (a label). host/ and orchestrate.py are
    not in the image: editing them leaves images fresh."""
    h = hashlib.sha256(f"version {kit_version()}\0".encode())
    for p in _source_files():
        h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def kit_version() -> str:
    """[project] version from pyproject.toml (the image's org.opencontainers.image.version)."""
    try:
        text = (REPO / "pyproject.toml").read_text()
    except OSError:
        return "unknown"
    m = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
    return m.group(1) if m else "unknown"


def licenses() -> str:
    """SPDX expression for org.opencontainers.image.licenses: NOASSERTION while the repository
    has no LICENSE file (nobody has declared one)."""
    return "NOASSERTION" if not any(REPO.glob("LICEN[CS]E*")) and not any(REPO.glob("COPYING*")) else _license_id()


def _license_id() -> str:
    for p in sorted(REPO.glob("LICEN[CS]E*")) + sorted(REPO.glob("COPYING*")):
        head = p.read_text(errors="replace")[:400]
        for spdx, marker in (
            ("MIT", "MIT License"),
            ("Apache-2.0", "Apache License"),
            ("BSD-3-Clause", "BSD 3-Clause"),
            ("GPL-3.0-or-later", "GNU GENERAL PUBLIC LICENSE"),
        ):
            if marker in head:
                return spdx
    return "NOASSERTION"


def source_url() -> str:
    """org.opencontainers.image.source: KIT_SOURCE_URL, the GitHub Actions repository, the
    checkout's origin remote (as https), else 'unknown'."""
    if os.environ.get("KIT_SOURCE_URL"):
        return os.environ["KIT_SOURCE_URL"]
    if os.environ.get("GITHUB_REPOSITORY"):
        return f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ['GITHUB_REPOSITORY']}"
    try:
        url = subprocess.run(
            ["git", "-C", str(REPO), "remote", "get-url", "origin"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        url = ""
    m = re.match(r"^git@([^:]+):(.+?)(?:\.git)?$", url)
    if m:
        return f"https://{m.group(1)}/{m.group(2)}"
    return re.sub(r"\.git$", "", url) if url.startswith("https://") else "unknown"


def git_sha() -> str:
    """The host checkout's commit ('-dirty' when it is unclean); 'unknown' outside git."""
    from bench.core.provenance import git_sha as _sha

    return _sha() or "unknown"


# ---- engine and host capabilities ----------------------------------------------------


def _client(timeout: int = 30):
    try:
        import docker
    except ImportError:
        raise KitError("the docker Python package is missing: pip install docker, or use --runtime native") from None
    try:
        client = docker.from_env(timeout=timeout)  # type: ignore[attr-defined]  # (mypy sees ./docker/)
        client.ping()
    except Exception:  # DockerException, requests' ConnectionError, PermissionError on the socket
        sock = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").removeprefix("unix://")
        if Path(sock).exists() and not os.access(sock, os.W_OK):
            raise KitError(
                f"no permission on {sock}: add yourself to the docker group "
                "(sudo usermod -aG docker $USER, then log in again) or use --runtime native"
            ) from None
        raise KitError(DAEMON_DOWN) from None
    return client


def engine_info() -> dict:
    """The engine's version and what it can run; KitError when no daemon answers."""
    client = _client()
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


def gpus() -> list[dict]:
    """GPUs nvidia-smi lists on this host ([] when there is no nvidia-smi or no GPU)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return [{"name": r[0], "driver": r[1], "memory": r[2]} for r in rows if out.returncode == 0 and len(r) >= 3]


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
    if not gpus():
        return "no NVIDIA GPU on this host (nvidia-smi lists none)"
    nv = nvidia_runtime(info)
    return None if nv["available"] else nv["reason"]


def doctor() -> list[dict]:
    """What this host has, as rows {"item", "ok", "detail"} (never raises)."""
    rows = []
    try:
        info = engine_info()
        rows.append(
            {
                "item": "docker engine",
                "ok": True,
                "detail": f"{info['version']} (API {info['api_version']}, {info['os']}/{info['arch']}, "
                f"runtimes: {', '.join(info['runtimes'])})",
            }
        )
    except KitError as err:
        info = None
        rows.append({"item": "docker engine", "ok": False, "detail": str(err)})
    try:
        cli = build_cli()
        rows.append({"item": "docker build", "ok": True, "detail": " ".join(cli[0]) + " (BuildKit)"})
    except KitError as err:
        rows.append({"item": "docker build", "ok": False, "detail": str(err)})
    if info is not None:
        nv = nvidia_runtime(info)
        rows.append({"item": "NVIDIA runtime", "ok": nv["available"], "detail": nv["how"] or nv["reason"]})
    else:
        rows.append({"item": "NVIDIA runtime", "ok": False, "detail": "unknown: no docker engine"})
    # compose cannot check this before it starts a container (it prints the daemon's raw
    # "could not select device driver" error), so doctor says it for compose.yaml's cuda-bench.
    why = cuda_unavailable(info) if info is not None else "no docker engine"
    rows.append(
        {
            "item": "compose cuda-bench",
            "ok": why is None,
            "detail": "can run here" if why is None else f"cannot run here: {why}; use cpu-bench",
        }
    )
    found = gpus()
    rows.append(
        {
            "item": "GPU (nvidia-smi)",
            "ok": bool(found),
            "detail": "; ".join(f"{g['name']}, driver {g['driver']}, {g['memory']}" for g in found)
            or ("nvidia-smi found no GPU" if shutil.which("nvidia-smi") else "no nvidia-smi"),
        }
    )
    mac = is_macos_arm64()
    rows.append(
        {
            "item": "macOS arm64 (mps)",
            "ok": mac,
            "detail": "yes: run mps natively (docker/mps/run.sh)" if mac else f"no ({sys.platform}/{_platform.machine()})",
        }
    )
    if info is not None:
        for plat in IMAGE_PLATFORMS:
            try:
                ref = image_ref(plat)
                img = _client().images.get(ref)
                rows.append({"item": f"image {plat}", "ok": True, "detail": f"{ref} {img.id[:19]}"})
            except KitError as err:
                rows.append({"item": f"image {plat}", "ok": False, "detail": str(err)})
            except Exception:
                rows.append({"item": f"image {plat}", "ok": False, "detail": f"not built: python orchestrate.py build {plat}"})
    return rows


# ---- base image ------------------------------------------------------------------------


def bootstrap_base(tag: str = BASE_TAG, mirror: str | None = None, suite: str = "bookworm", echo: Echo = _echo) -> str:
    """debootstrap a Debian base with python3 + venv and `docker import` it as TAG; returns its id."""
    _client()
    cmd = ["bash", str(BOOTSTRAP_SCRIPT), "--tag", tag, "--suite", suite]
    if mirror:
        cmd += ["--mirror", mirror]
    if os.name == "posix" and os.geteuid() != 0:
        if not shutil.which("sudo"):
            raise KitError("bootstrapping the base needs root (debootstrap): rerun as root")
        echo("base: debootstrap needs root: running it with sudo")
        cmd = ["sudo", "--preserve-env=KIT_DOCKER_CLI,DEBIAN_MIRROR"] + cmd
    if not shutil.which("debootstrap") and not Path("/usr/sbin/debootstrap").exists():
        raise KitError("debootstrap not installed: sudo apt-get install -y debootstrap")
    echo(f"base: debootstrap {suite} (python3, python3-venv, ca-certificates) -> {tag}")
    proc = subprocess.run(cmd, text=True)
    if proc.returncode != 0:
        raise KitError(f"base image bootstrap failed (exit {proc.returncode}): see the lines above")
    return _client().images.get(tag).id


# ---- build -----------------------------------------------------------------------------------


def _client_version(cli: str) -> tuple[int, ...]:
    try:
        out = subprocess.run(
            [cli, "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ()
    m = re.match(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else ()


def build_cli() -> tuple[list[str], dict]:
    """The command prefix that builds with BuildKit here, and the env it needs.

    `docker buildx build --load` where the buildx plugin exists; otherwise a docker CLI
    older than 23 (Debian bookworm's docker.io 20.10), whose `docker build` embeds BuildKit
    with DOCKER_BUILDKIT=1. Newer CLIs without buildx refuse BuildKit builds.
    KIT_DOCKER_CLI picks the binary.
    """
    cands = [os.environ.get("KIT_DOCKER_CLI"), shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker"]
    seen = []
    for cli in cands:
        if not cli or cli in seen or not (Path(cli).exists() or shutil.which(cli)):
            continue
        seen.append(cli)
        try:
            if subprocess.run([cli, "buildx", "version"], capture_output=True, timeout=30).returncode == 0:
                return [cli, "buildx", "build", "--load"], {}
        except (OSError, subprocess.SubprocessError):
            continue
        ver = _client_version(cli)
        if ver and ver < (23,):
            return [cli, "build"], {"DOCKER_BUILDKIT": "1"}
    if not seen:
        raise KitError("docker CLI not found: install Docker (Debian: apt-get install docker.io) or use --runtime native")
    raise KitError(
        "no docker CLI here can build with BuildKit: install the buildx plugin "
        "(docker-buildx) or Debian's docker.io, or set KIT_DOCKER_CLI"
    )


def default_base_image(echo: Echo = _echo) -> str | None:
    """KIT_BASE_IMAGE, else the locally bootstrapped base when present, else None (the Dockerfile's pin)."""
    if os.environ.get("KIT_BASE_IMAGE"):
        return os.environ["KIT_BASE_IMAGE"]
    try:
        _client().images.get(BASE_TAG)
    except KitError:
        raise
    except Exception:
        return None
    echo(f"base: using the local {BASE_TAG} (bootstrapped from Debian); --base-image picks another")
    return BASE_TAG


PIP_PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(36, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]


def download_wheelhouse(platform: str, wheelhouse: Path, echo: Echo = _echo, variant: str | None = None) -> list[Path]:
    """`pip download` every wheel the platform's lock names (linux x86_64, CPython 3.11), hash-checked."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--require-hashes",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--abi",
        "abi3",
        "--abi",
        "none",
        "-d",
        str(wheelhouse),
        "-r",
        str(lock_path(platform, variant)),
    ]
    for p in PIP_PLATFORMS:
        cmd += ["--platform", p]
    echo(f"wheelhouse: pip download {lock_path(platform, variant).relative_to(REPO)} -> {wheelhouse}")
    if subprocess.run(cmd).returncode != 0:
        raise KitError(
            f"pip download into {wheelhouse} failed: see pip's message above "
            "(behind a proxy: set PIP_CERT or pip's `cert` to its CA bundle)"
        )
    return sorted(wheelhouse.glob("*.whl"))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_wheels(platform: str, wheelhouse: Path, variant: str | None = None) -> list[str]:
    """name==version pins of the platform's lock with no wheel file in WHEELHOUSE."""
    have = set()
    for whl in wheelhouse.glob("*.whl") if wheelhouse.is_dir() else []:
        parts = whl.name.split("-")
        if len(parts) >= 5:
            have.add((_norm(parts[0]), parts[1].split("+")[0]))  # torch-2.10.0+cpu-...: lock_pins drops +cpu
    return [f"{n}=={v}" for n, v in sorted(lock_pins(platform, variant).items()) if (_norm(n), v) not in have]


def _stage_wheelhouse(src: Path) -> list[Path]:
    """Link (or copy) SRC's wheels into docker/wheelhouse, the folder the build bind-mounts."""
    if src.resolve() == BUILD_WHEELHOUSE.resolve():
        return []
    staged = []
    for whl in sorted(src.glob("*.whl")):
        dst = BUILD_WHEELHOUSE / whl.name
        if dst.exists():
            continue
        try:
            os.link(whl, dst)
        except OSError:
            shutil.copy2(whl, dst)
        staged.append(dst)
    return staged


def _build_hint(lines: Sequence[str]) -> str:
    text = "\n".join(lines)
    if re.search(r"CERTIFICATE_VERIFY_FAILED|x509|SSLError|certificate verify failed", text):
        return ": TLS to the package index failed: pass --ca-cert PATH (your proxy's CA bundle)"
    if re.search(
        r"pull access denied|failed to resolve source metadata|failed to do request|"
        r"no such host|dial tcp|i/o timeout|not found: manifest unknown",
        text,
    ):
        return (
            f": the base image cannot be fetched here: run `python orchestrate.py base`, then build with --base-image {BASE_TAG}"
        )
    if re.search(r"THESE PACKAGES DO NOT MATCH THE HASHES", text):
        return ": a downloaded file does not match the lock's hash (corrupt wheelhouse or a changed upload)"
    return ": see the build log above"


def base_digest(base_image: str | None) -> str:
    """The base image as the host has it: its RepoDigest when pulled from a registry, else
    its local id (a bootstrapped base has no registry digest); the digest pinned in the
    Dockerfile's default when the base is not present yet."""
    ref = base_image or _dockerfile_base()
    try:
        img = _client().images.get(ref)
    except KitError:
        raise
    except Exception:
        return ref.split("@", 1)[1] if "@sha256:" in ref else "unknown"
    digests = img.attrs.get("RepoDigests") or []
    return digests[0].split("@", 1)[1] if digests else img.id


def _dockerfile_base() -> str:
    m = re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M)
    return m.group(1) if m else "unknown"


def _find_current(ref: str, want: dict[str, str]):
    """The image tagged REF when its labels match WANT (lock, sources, base), else None."""
    try:
        img = _client().images.get(ref)
    except KitError:
        raise
    except Exception:
        return None
    labels = img.labels or {}
    return img if all(labels.get(k) == v for k, v in want.items()) else None


def remove_superseded(repo: str, platform: str, keep_id: str, keep_tags: Sequence[str], echo: Echo = _echo) -> list[str]:
    """Remove REPO's other images (other content tags, or dangling ones labelled as kit
    images of PLATFORM from REPO) after a build; never any other image. Returns what went."""
    client = _client()
    removed = []
    for img in client.images.list(name=repo):
        if img.id == keep_id:
            continue
        tags = [t for t in img.tags if t.rsplit(":", 1)[0] == repo and t not in keep_tags]
        for tag in tags:
            try:
                client.images.remove(tag, noprune=False)
                removed.append(f"{tag} ({img.short_id.removeprefix('sha256:')})")
            except Exception as err:  # in use by a container, or tagged elsewhere too
                echo(f"build: kept {tag}: {str(err).splitlines()[0][:120]}")
    # Dangling images this builder left with the same repo name in their ref.name label
    for img in client.images.list(filters={"dangling": True, "label": f"cnn-bench.platform={platform}"}):
        ref_name = (img.labels or {}).get("org.opencontainers.image.ref.name", "")
        title = (img.labels or {}).get("org.opencontainers.image.title", "")
        ours = (
            ref_name.rsplit(":", 1)[0] == repo
            if ref_name and ref_name != "unknown"
            else (repo == f"{KIT_REPO}/{platform}" and title == f"cnn-bench-{platform}")
        )
        if img.id == keep_id or not ours:
            continue
        try:
            client.images.remove(img.id, noprune=False)
            removed.append(f"<none> ({img.short_id.removeprefix('sha256:')})")
        except Exception as err:
            echo(f"build: kept dangling {img.short_id}: {str(err).splitlines()[0][:120]}")
    for r in removed:
        echo(f"build: removed superseded {r}")
    if not removed:
        echo(f"build: no superseded {repo} image to remove")
    return removed


def build(
    platform: str,
    base_image: str | None = None,
    ca_cert: Path | None = None,
    wheelhouse: Path | None = None,
    echo: Echo = _echo,
    progress: str | None = None,
    variant: str | None = None,
    repo: str = KIT_REPO,
    tag_latest: bool = True,
    prune: bool = True,
) -> str:
    """Build REPO/PLATFORM[-VARIANT] from its lock with BuildKit, unless an image for the
    same lock, sources and base exists; returns the image id.

    The image is tagged by content (image_ref: <lock[:12]>-<sources[:12]>) and :latest;
    after a build, the repository's superseded images (other content tags, dangling kit
    images) are removed (prune=False keeps them).
    base_image: FROM for both stages (default: KIT_BASE_IMAGE, the local bootstrapped base
    if there is one, else the Dockerfile's digest-pinned python:3.11-slim-bookworm).
    ca_cert: CA bundle for pip in the build, as BuildKit secret `pipca` (never in a layer).
    wheelhouse: install offline from this dir (`pip download`ed first when it has no wheels).
    variant: "torchcpu" (cpu only): torch's CPU wheel from requirements/cpu-torchcpu.txt.
    """
    check_variant(platform, variant)
    lh = lock_hash(platform, variant)  # a missing variant lock is the first thing said
    _client()
    if ca_cert is not None:
        ca_cert = Path(ca_cert).expanduser()
        if not ca_cert.is_file():
            raise KitError(f"--ca-cert {ca_cert}: no such file")
    if base_image is None:
        base_image = default_base_image(echo)
    versions = lock_versions(platform, variant)
    sh = source_hash()
    name = image_repo(platform, variant, repo)
    ref = f"{name}:{lh[:12]}-{sh[:12]}"
    latest = f"{name}:latest"
    bdigest = base_digest(base_image)
    want = {"cnn-bench.lock-hash": lh, "cnn-bench.source-hash": sh, "org.opencontainers.image.base.digest": bdigest}
    current = _find_current(ref, want)
    if current is not None:
        if tag_latest and latest not in current.tags:
            current.tag(name, "latest")
        echo(f"image {image_repo(platform, variant)}: up to date (tag {ref}, {current.id[:19]}): not rebuilt")
        return str(current.id)
    prefix, env_extra = build_cli()
    iidfile = REPO / "docker" / f".iid-{platform}-{os.getpid()}"
    args = list(prefix) + [
        "-f",
        str(DOCKERFILE),
        "--target",
        platform,
        "-t",
        ref,
        "--iidfile",
        str(iidfile),
        "--progress",
        progress or ("auto" if sys.stdout.isatty() else "plain"),
        "--build-arg",
        f"LOCK_HASH={lh}",
        "--build-arg",
        f"TORCH_VERSION={versions['torch']}",
        "--build-arg",
        f"GIT_SHA={git_sha()}",
        "--build-arg",
        f"SOURCE_HASH={sh}",
        "--build-arg",
        f"CONTENT_REF={ref}",
        "--build-arg",
        f"KIT_VERSION={kit_version()}",
        "--build-arg",
        f"LICENSES={licenses()}",
        "--build-arg",
        f"SOURCE_URL={source_url()}",
        "--build-arg",
        f"BASE_DIGEST={bdigest}",
    ]
    if tag_latest:
        args += ["-t", latest]
    if variant:
        _, stem, stage = VARIANTS[variant]
        args += [
            "--build-arg",
            f"VENV_STAGE={stage}",
            "--build-arg",
            f"LOCK_FILE={stem}.txt",
            "--build-arg",
            f"VARIANT={variant}",
        ]
    if platform == "cuda":
        args += ["--build-arg", f"CUDA_VERSION={versions['cuda']}"]
    args += ["--build-arg", f"BASE_IMAGE={base_image or _dockerfile_base()}"]
    if ca_cert is not None:
        args += ["--secret", f"id=pipca,src={ca_cert.resolve()}"]
    cache = os.environ.get("KIT_BUILDX_CACHE", "")
    if cache and "buildx" in prefix:  # e.g. "gha" in GitHub Actions: layers cached between workflow runs
        scope = f"cnn-bench-{platform}{'-' + variant if variant else ''}"
        args += ["--cache-from", f"type={cache},scope={scope}", "--cache-to", f"type={cache},mode=max,scope={scope}"]
    staged: list[Path] = []
    if wheelhouse is not None:
        wheelhouse = Path(wheelhouse).expanduser()
        missing = missing_wheels(platform, wheelhouse, variant)
        if missing:
            echo(f"wheelhouse: {len(missing)} of the lock's wheels missing in {wheelhouse} (e.g. {missing[0]})")
            download_wheelhouse(platform, wheelhouse, echo, variant)
            missing = missing_wheels(platform, wheelhouse, variant)
            if missing:
                raise KitError(f"wheelhouse {wheelhouse} still lacks {', '.join(missing[:3])}: pip download could not fetch them")
        staged = _stage_wheelhouse(wheelhouse)
        # No network for RUN steps: proves the install used the wheelhouse alone.
        args += ["--build-arg", "WHEELHOUSE=1", "--network", "none"]
    args.append(str(REPO))
    echo(
        f"build: {ref} (lock {lh[:12]}, sources {sh[:12]}, torch {versions['torch']}, cuda {versions['cuda']}, "
        f"base {base_image or 'Dockerfile default'}{', offline wheelhouse' if wheelhouse else ''})"
    )
    tail: deque[str] = deque(maxlen=80)
    try:
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env={**os.environ, **env_extra},
            cwd=REPO,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line)
        rc = proc.wait()
        if rc != 0:
            raise KitError(f"docker build of {platform} failed (exit {rc}){_build_hint(list(tail))}")
        image_id = iidfile.read_text().strip()
    finally:
        iidfile.unlink(missing_ok=True)
        for p in staged:
            p.unlink(missing_ok=True)
    echo(f"build: {ref} = {image_id}")
    if prune:
        remove_superseded(name, platform, image_id, [ref, latest], echo)
    return image_id


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

    ref = image or image_ref(platform)
    try:
        return ref, _client().images.get(ref)
    except docker.errors.ImageNotFound:  # type: ignore[attr-defined]
        raise KitError(f"image {ref} not found: run `python orchestrate.py build {platform}`") from None


def run(
    platform: str,
    data_dir: Path,
    results_dir: Path,
    args: Sequence[str],
    gpu: bool | None = None,
    image: str | None = None,
    echo: Echo = _echo,
    stream: Callable[[bytes], None] | None = None,
) -> tuple[int, str]:
    """Run `python -m bench ARGS` in the PLATFORM image; returns (container exit code, image id).

    data_dir is mounted read-only at /data, results_dir read-write at /results; no network,
    read-only root filesystem with a tmpfs /tmp, the host user's uid:gid, and all GPUs
    when gpu (default: platform == "cuda"). Logs stream to stdout as they come.
    """
    check_platform(platform)
    data_dir, results_dir = Path(data_dir).expanduser().resolve(), Path(results_dir).expanduser().resolve()
    if not data_dir.is_dir():
        raise KitError(
            f"data dir {data_dir} not found: pass --data-dir (the dir holding the datasets) "
            "or fetch one with: python orchestrate.py data fetch NAME"
        )
    gpu = (platform == "cuda") if gpu is None else gpu
    client = _client()
    info = engine_info()
    ref, img = find_image(platform, image)
    if gpu:
        why = cuda_unavailable(info)
        if why:
            raise KitError(f"{platform} needs a GPU in the container: {why}; run cpu instead")
    labels = img.labels or {}
    if labels.get("cnn-bench.lock-hash") and labels["cnn-bench.lock-hash"] != lock_hash(platform) and image is None:
        raise KitError(f"image {ref} was built from another lock: run `python orchestrate.py build {platform}`")
    if labels.get("cnn-bench.source-hash") not in (None, source_hash()):
        echo(
            f"note: {ref} holds other bench/ sources than this checkout: "
            f"rebuild with `python orchestrate.py build {platform}` to run these"
        )
    results_dir.mkdir(parents=True, exist_ok=True)
    import docker

    args = list(args)
    env = {
        "KIT_RUNTIME": "container",
        "KIT_IMAGE_ID": img.id,
        "KIT_IMAGE_REF": ref,
        "KIT_IMAGE_DIGEST": (img.attrs.get("RepoDigests") or [""])[0],
        "KIT_LOCK_HASH": labels.get("cnn-bench.lock-hash", "unknown"),
        "KIT_GIT_SHA": git_sha(),
        "KIT_HOST_NAME": host_label(),
        "KIT_HOST_DATA_DIR": str(data_dir),  # errors name the dir the user knows, not /data
    }
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
        tmpfs={"/tmp": "rw,exec,nosuid,nodev"},
        shm_size="1g",
        init=True,
        labels={"cnn-bench.platform": platform},
        hostname=socket.gethostname()[:63],  # system.json names the host, not the container id
    )
    if gpu:
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]  # type: ignore[attr-defined]
    echo(f"run: {ref} ({img.id[:19]}) python -m bench {' '.join(args)}")
    container = client.containers.run(img.id, **kwargs)
    write = stream or (lambda b: (sys.stdout.buffer.write(b), sys.stdout.flush()))
    try:
        for chunk in container.logs(stream=True, follow=True):
            write(chunk)
        code = int(container.wait().get("StatusCode", 1))
    except KeyboardInterrupt:
        container.stop(timeout=10)
        raise
    finally:
        try:
            container.remove(force=True)
        except Exception:
            pass
    echo(f"run: {ref} exited {code}")
    return code, img.id
