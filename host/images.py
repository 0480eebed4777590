"""What an image is and how it is made: locks, content tags, labels, the base, `build()`.

Plain functions that return data and raise `KitError` with one line saying what to do.
Builds go through the docker CLI (BuildKit: secrets, cache mounts); the docker SDK client
(`pip install docker`) that both this module and host/engine.py (running containers) use
lives here, so that host/engine.py imports this module and never the reverse.

    image_ref("cpu")                      -> "cnn-bench/cpu:<lock[:12]>-<sources[:12]>"
    build("cpu", ca_cert=Path(...))       -> "sha256:..."   (image id; no build when one exists for
                                             the lock, the sources and the base that records a
                                             commit where this checkout knows one: stands_in)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import KitError
from bench.core.provenance import known_sha

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


def daemon_down(
    system: str | None = None, dockerd: bool | None = None, systemd: bool | None = None, root: bool | None = None
) -> str:
    """Why no engine answers and how to start one on this host: systemd's unit where systemd runs,
    Docker Desktop on macOS, else dockerd itself (a container or WSL without systemd), or how to
    install one where there is no dockerd at all. The arguments say what this host is (detected
    when None)."""
    system = system or sys.platform
    if dockerd is None:
        dockerd = bool(shutil.which("dockerd")) or any(Path(p).exists() for p in ("/usr/sbin/dockerd", "/usr/bin/dockerd"))
    if systemd is None:
        systemd = Path("/run/systemd/system").is_dir()  # systemd is PID 1 here (sd_booted's test)
    if root is None:
        root = os.name == "posix" and os.geteuid() == 0
    tail = " or use --runtime native"
    if system == "darwin":
        return "Docker daemon not running: start Docker Desktop (open -a Docker)" + tail
    if not dockerd:
        return "no Docker daemon on this host: install one (Debian: apt-get install docker.io)" + tail
    if systemd:
        return f"Docker daemon not running: start it ({'' if root else 'sudo '}systemctl start docker)" + tail
    how = "dockerd > /var/log/dockerd.log 2>&1 &" if root else "sudo dockerd > /tmp/dockerd.log 2>&1 &"
    return f"Docker daemon not running and no systemd here: start it ({how})" + tail


Echo = Callable[[str], None]


def print_flush(msg: str) -> None:
    """The default Echo: one line on stdout, flushed."""
    print(msg, flush=True)


# ---- locks and image names ---------------------------------------------------------


def checkout() -> Path | None:
    """The kit checkout this code runs from (host/'s parent, REPO), or None
    when it is installed without one (a wheel in site-packages)."""
    root = REPO
    return root if (root / "docker" / "Dockerfile").is_file() and (root / "requirements").is_dir() else None


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


# ---- the docker SDK client (host/engine.py uses it too) --------------------------------


def docker_client(timeout: int = 30):
    """A docker SDK client whose engine answered a ping; KitError (one line) when none does."""
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
        raise KitError(daemon_down()) from None
    return client


# ---- base image ------------------------------------------------------------------------


def base_recipe(suite: str) -> str:
    """What a bootstrapped base is made from: the bootstrap script's hash and the suite (the
    image's `cnn-bench.base-recipe` label, written by the script)."""
    return hashlib.sha256(BOOTSTRAP_SCRIPT.read_bytes()).hexdigest()[:16] + "-" + suite


def bootstrap_base(
    tag: str = BASE_TAG, mirror: str | None = None, suite: str = "bookworm", echo: Echo = print_flush, rebuild: bool = False
) -> str:
    """debootstrap a Debian base with python3 + venv and `docker import` it as TAG; returns its id.
    An image TAG made by the same recipe is kept unless REBUILD (a new base id would make every
    image above it build again: minutes and gigabytes)."""
    client = docker_client()
    if not rebuild:
        try:
            have = client.images.get(tag)
        except Exception:  # noqa: BLE001 - docker SDK: not found (or unreadable): bootstrap it
            have = None
        labels = (have.attrs.get("Config") or {}).get("Labels") or {} if have is not None else {}
        if have is not None and labels.get("cnn-bench.base-recipe") == base_recipe(suite):
            echo(
                f"base: {tag} exists, made by this checkout's bootstrap script (python "
                f"{labels.get('cnn-bench.base-python', '?')}): kept (--rebuild bootstraps it again)"
            )
            return have.id
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
    code = _run_showing_log(cmd, "base")
    if code != 0:
        raise KitError(f"base image bootstrap failed (exit {code}): see the lines above")
    return docker_client().images.get(tag).id


def _run_showing_log(cmd: list[str], title: str) -> int:
    """Run CMD (the bootstrap script) with its debootstrap log's last line as the progress
    (host.progress: `base: I: Unpacking libc6...`, the time so far); its own lines pass through.
    Returns its exit code."""
    import tempfile
    import threading

    from host.progress import follow_log, stages

    fd, log = tempfile.mkstemp(prefix="cnn-bench-debootstrap.", suffix=".log")
    os.close(fd)
    env = {**os.environ, "KIT_DEBOOTSTRAP_LOG": log}
    if cmd[0] == "sudo":  # the log's name must reach the script through sudo
        cmd = [cmd[0], cmd[1] + ",KIT_DEBOOTSTRAP_LOG", *cmd[2:]]
    try:
        with stages(title) as say:
            say("starting debootstrap (downloads and unpacks about 100 Debian packages)")
            proc = subprocess.Popen(cmd, text=True, env=env)
            done = threading.Event()
            watcher = threading.Thread(target=follow_log, args=(log, say, done.is_set), daemon=True)
            watcher.start()
            try:
                code = proc.wait()
            finally:
                done.set()
                watcher.join(timeout=5)
        return code
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log)


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


def default_base_image(echo: Echo = print_flush) -> str | None:
    """KIT_BASE_IMAGE, else the locally bootstrapped base when present, else None (the Dockerfile's pin)."""
    if os.environ.get("KIT_BASE_IMAGE"):
        return os.environ["KIT_BASE_IMAGE"]
    try:
        docker_client().images.get(BASE_TAG)
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


def download_wheelhouse(platform: str, wheelhouse: Path, echo: Echo = print_flush, variant: str | None = None) -> list[Path]:
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
        img = docker_client().images.get(ref)
    except KitError:
        raise
    except Exception:
        return ref.split("@", 1)[1] if "@sha256:" in ref else "unknown"
    digests = img.attrs.get("RepoDigests") or []
    return digests[0].split("@", 1)[1] if digests else img.id


def _dockerfile_base() -> str:
    m = re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.M)
    return m.group(1) if m else "unknown"


def recorded_commit(img) -> str | None:
    """The commit image IMG says it was built from: its KIT_IMAGE_GIT_SHA, what a container's
    system.json records when the runner passes no KIT_GIT_SHA (compose, Kubernetes pods); None
    when it records none (built from a copy without .git, or by compose without GIT_SHA)."""
    env = ((img.attrs or {}).get("Config") or {}).get("Env") or []
    values = dict(e.split("=", 1) for e in env if "=" in e)
    return known_sha(values.get("KIT_IMAGE_GIT_SHA"))


def stands_in(labels: Mapping[str, str], want: Mapping[str, str], image_commit: str | None, checkout_commit: str | None) -> bool:
    """Whether an existing image (its LABELS, the IMAGE_COMMIT it records) can stand in for a build
    of WANT (lock, sources, base) from a checkout at CHECKOUT_COMMIT: the same content, and a
    commit recorded whenever the checkout knows its own, since pods and compose runs record the
    image's commit and nothing else. A checkout without git reuses any image of its content; an
    image from another commit with the same content stays (the bench/ code it runs is this commit's
    too, and `orchestrate.py run` passes the host's KIT_GIT_SHA, which wins)."""
    if not all(labels.get(k) == v for k, v in want.items()):
        return False
    return known_sha(image_commit) is not None or known_sha(checkout_commit) is None


def _local_image(ref: str):
    """The docker SDK image tagged REF, None when there is none; KitError when no engine answers."""
    try:
        return docker_client().images.get(ref)
    except KitError:
        raise
    except Exception:
        return None


def _find_current(
    ref: str,
    want: dict[str, str],
    commit: str | None,
    echo: Echo = print_flush,
    get_image: Callable[[str], Any] = _local_image,
):
    """The image tagged REF when it can stand in for a build of WANT at COMMIT (stands_in), else None.
    GET_IMAGE (ref -> image or None) is the one look-up at the engine."""
    img = get_image(ref)
    if img is None:
        return None
    labels = img.labels or {}
    if stands_in(labels, want, recorded_commit(img), commit):
        return img
    if stands_in(labels, want, None, None):  # the same content: it records no commit, this checkout does
        echo(f"image {ref}: records no git commit (built without .git): built again to record {commit}")
    return None


def remove_superseded(repo: str, platform: str, keep_id: str, keep_tags: Sequence[str], echo: Echo = print_flush) -> list[str]:
    """Remove REPO's other images (other content tags, or dangling ones labelled as kit
    images of PLATFORM from REPO) after a build; never any other image. Returns what went."""
    client = docker_client()
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


# ---- build() and its steps ---------------------------------------------------------------


@dataclass(frozen=True)
class ImageBuild:
    """What one build of REPO/PLATFORM[-VARIANT] is made from, and the tags it gets."""

    platform: str
    variant: str | None
    name: str  # the image repository: cnn-bench/cpu, cnn-bench/cpu-torchcpu, ...
    lock_hash: str
    source_hash: str
    versions: dict[str, str]  # lock_versions(): torch, cuda
    base_image: str | None  # None: the Dockerfile's pinned default
    base_digest: str

    @property
    def ref(self) -> str:
        """The content tag: NAME:<lock[:12]>-<sources[:12]>."""
        return f"{self.name}:{self.lock_hash[:12]}-{self.source_hash[:12]}"

    @property
    def latest(self) -> str:
        return f"{self.name}:latest"

    def labels(self) -> dict[str, str]:
        """The labels an existing image must carry to be this build's result."""
        return {
            "cnn-bench.lock-hash": self.lock_hash,
            "cnn-bench.source-hash": self.source_hash,
            "org.opencontainers.image.base.digest": self.base_digest,
        }


def _checked_ca_cert(ca_cert: Path | None) -> Path | None:
    """--ca-cert expanded (~), or KitError when it names no file."""
    if ca_cert is None:
        return None
    ca_cert = Path(ca_cert).expanduser()
    if not ca_cert.is_file():
        raise KitError(f"--ca-cert {ca_cert}: no such file")
    return ca_cert


def _describe_build(
    platform: str, variant: str | None, repo: str, lock_sha: str, base_image: str | None, echo: Echo
) -> ImageBuild:
    """The build's inputs: the lock's hash and versions, the sources' hash, the base and its digest."""
    if base_image is None:
        base_image = default_base_image(echo)
    versions = lock_versions(platform, variant)
    return ImageBuild(
        platform=platform,
        variant=variant,
        name=image_repo(platform, variant, repo),
        lock_hash=lock_sha,
        source_hash=source_hash(),
        versions=versions,
        base_image=base_image,
        base_digest=base_digest(base_image),
    )


def _reuse_current_image(
    target: ImageBuild, tag_latest: bool, echo: Echo, commit: str | None, get_image: Callable[[str], Any] = _local_image
) -> str | None:
    """The id of the image already built from TARGET's inputs that can stand in for a build at COMMIT
    (stands_in; tagged :latest too when asked), else None."""
    current = _find_current(target.ref, target.labels(), known_sha(commit), echo, get_image)
    if current is None:
        return None
    if tag_latest and target.latest not in current.tags:
        current.tag(target.name, "latest")
    echo(f"image {image_repo(target.platform, target.variant)}: up to date (tag {target.ref}, {current.id[:19]}): not rebuilt")
    return str(current.id)


def _provenance_build_args(target: ImageBuild) -> list[str]:
    """--build-arg pairs for the image's labels and environment: lock, torch, git sha, sources, version, base."""
    values = {
        "LOCK_HASH": target.lock_hash,
        "TORCH_VERSION": target.versions["torch"],
        "GIT_SHA": git_sha(),
        "SOURCE_HASH": target.source_hash,
        "CONTENT_REF": target.ref,
        "KIT_VERSION": kit_version(),
        "LICENSES": licenses(),
        "SOURCE_URL": source_url(),
        "BASE_DIGEST": target.base_digest,
    }
    return [arg for key, value in values.items() for arg in ("--build-arg", f"{key}={value}")]


def _build_command(
    prefix: Sequence[str],
    target: ImageBuild,
    iidfile: Path,
    progress: str | None,
    tag_latest: bool,
    ca_cert: Path | None,
) -> list[str]:
    """The docker build command line, up to (not including) the wheelhouse options and the context."""
    platform, variant = target.platform, target.variant
    args = list(prefix) + ["-f", str(DOCKERFILE), "--target", platform, "-t", target.ref, "--iidfile", str(iidfile)]
    args += ["--progress", progress or ("auto" if sys.stdout.isatty() else "plain")]
    args += _provenance_build_args(target)
    if tag_latest:
        args += ["-t", target.latest]
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
        args += ["--build-arg", f"CUDA_VERSION={target.versions['cuda']}"]
    args += ["--build-arg", f"BASE_IMAGE={target.base_image or _dockerfile_base()}"]
    if ca_cert is not None:
        args += ["--secret", f"id=pipca,src={ca_cert.resolve()}"]
    cache = os.environ.get("KIT_BUILDX_CACHE", "")
    if cache and "buildx" in prefix:  # e.g. "gha" in GitHub Actions: layers cached between workflow runs
        scope = f"cnn-bench-{platform}{'-' + variant if variant else ''}"
        args += ["--cache-from", f"type={cache},scope={scope}", "--cache-to", f"type={cache},mode=max,scope={scope}"]
    return args


def _prepare_wheelhouse(platform: str, wheelhouse: Path, variant: str | None, echo: Echo) -> list[Path]:
    """Fill WHEELHOUSE with the lock's wheels (pip download) when it lacks some, then stage them
    where the build bind-mounts them; returns the staged files (removed after the build)."""
    missing = missing_wheels(platform, wheelhouse, variant)
    if missing:
        echo(f"wheelhouse: {len(missing)} of the lock's wheels missing in {wheelhouse} (e.g. {missing[0]})")
        download_wheelhouse(platform, wheelhouse, echo, variant)
        missing = missing_wheels(platform, wheelhouse, variant)
        if missing:
            raise KitError(f"wheelhouse {wheelhouse} still lacks {', '.join(missing[:3])}: pip download could not fetch them")
    return _stage_wheelhouse(wheelhouse)


def _run_docker_build(args: list[str], env_extra: dict, iidfile: Path, staged: list[Path], platform: str) -> str:
    """Run the build, its log streamed to stdout; returns the image id. The iidfile and the staged
    wheels are removed however it ends; a failed build raises KitError with a hint from the log's tail."""
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
        return iidfile.read_text().strip()
    finally:
        iidfile.unlink(missing_ok=True)
        for p in staged:
            p.unlink(missing_ok=True)


def build(
    platform: str,
    base_image: str | None = None,
    ca_cert: Path | None = None,
    wheelhouse: Path | None = None,
    echo: Echo = print_flush,
    progress: str | None = None,
    variant: str | None = None,
    repo: str = KIT_REPO,
    tag_latest: bool = True,
    prune: bool = True,
) -> str:
    """Build REPO/PLATFORM[-VARIANT] from its lock with BuildKit, unless an image for the
    same lock, sources and base exists (and records a commit, when this checkout knows its own:
    stands_in); returns the image id.

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
    lock_sha = lock_hash(platform, variant)  # a missing variant lock is the first thing said
    docker_client()
    ca_cert = _checked_ca_cert(ca_cert)
    target = _describe_build(platform, variant, repo, lock_sha, base_image, echo)
    current_id = _reuse_current_image(target, tag_latest, echo, git_sha())
    if current_id is not None:
        return current_id
    prefix, env_extra = build_cli()
    iidfile = REPO / "docker" / f".iid-{platform}-{os.getpid()}"
    args = _build_command(prefix, target, iidfile, progress, tag_latest, ca_cert)
    staged: list[Path] = []
    if wheelhouse is not None:
        wheelhouse = Path(wheelhouse).expanduser()
        staged = _prepare_wheelhouse(platform, wheelhouse, variant, echo)
        # No network for RUN steps: proves the install used the wheelhouse alone.
        args += ["--build-arg", "WHEELHOUSE=1", "--network", "none"]
    args.append(str(REPO))
    echo(
        f"build: {target.ref} (lock {lock_sha[:12]}, sources {target.source_hash[:12]}, torch {target.versions['torch']}, "
        f"cuda {target.versions['cuda']}, base {target.base_image or 'Dockerfile default'}"
        f"{', offline wheelhouse' if wheelhouse else ''})"
    )
    image_id = _run_docker_build(args, env_extra, iidfile, staged, platform)
    echo(f"build: {target.ref} = {image_id}")
    if prune:
        remove_superseded(target.name, platform, image_id, [target.ref, target.latest], echo)
    return image_id
