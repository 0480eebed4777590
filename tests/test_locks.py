"""The hash-locked requirements are fresh against their .in files and follow the kit's rules.

Offline and fast: requirements/lock.sh writes `# input: PATH sha256:HEX` header lines
naming every file a lock was resolved from (the .in, what it includes with -r, the lock
it is constrained to); here we recompute those sha256s. Fix a failure with
`requirements/lock.sh` (needs PyPI).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQ = REPO / "requirements"
IMAGE_TARGETS = ("cpu", "cuda", "mps")
INPUT_RE = re.compile(r"^# input: (\S+) sha256:([0-9a-f]{64})$", re.M)
PIN_RE = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^ ;\\\n]+)", re.M)


def pairs() -> list[str]:
    """Targets with an .in file (host, dev, cpu, cuda, mps as they exist)."""
    return sorted(p.stem for p in REQ.glob("*.in"))


def mps_locks() -> dict[str, str]:
    """Python minor -> lock stem of the mps target: mps (3.11), mps-py3.12, ... (one lock per
    minor, all resolved from mps.in: lock.sh's MPS_PYTHONS)."""
    out = {"3.11": "mps"}
    for p in REQ.glob("mps-py*.txt"):
        out[p.stem.removeprefix("mps-py")] = p.stem
    return out


def lock_targets() -> list[tuple[str, str]]:
    """(lock stem, .in stem) of every lock: each .in's own, and mps's per-minor locks."""
    return sorted({(t, t) for t in pairs()} | {(stem, "mps") for stem in mps_locks().values()})


def pins(target: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in PIN_RE.finditer((REQ / f"{target}.txt").read_text())}


def includes(path: Path) -> set[str]:
    """Repo-relative paths of PATH and the files it pulls in with -r/-c, recursively."""
    out = {str(path.relative_to(REPO))}
    for line in path.read_text().splitlines():
        m = re.match(r"^(?:-r|-c|--requirement|--constraint)\s+(\S+)", line.strip())
        if m:
            out |= includes((path.parent / m.group(1)).resolve())
    return out


@pytest.mark.parametrize(("target", "source"), lock_targets())
def test_lock_is_fresh(target: str, source: str) -> None:
    lock = REQ / f"{target}.txt"
    assert lock.is_file(), f"requirements/{target}.txt missing: run requirements/lock.sh"
    recorded = dict(INPUT_RE.findall(lock.read_text()))
    assert recorded, f"requirements/{target}.txt has no '# input:' header: run requirements/lock.sh"
    missing = includes(REQ / f"{source}.in") - set(recorded)
    assert not missing, f"requirements/{target}.txt was not resolved from {sorted(missing)}: run requirements/lock.sh"
    stale = [
        path
        for path, digest in recorded.items()
        if not (REPO / path).is_file() or hashlib.sha256((REPO / path).read_bytes()).hexdigest() != digest
    ]
    assert not stale, f"requirements/{target}.txt is stale against {stale}: run requirements/lock.sh"


def entries(text: str) -> list[str]:
    """Requirement entries: a line starting a name, with its continuation lines."""
    out: list[str] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            out.append(line)
        elif out and line.startswith("    --hash"):
            out[-1] += "\n" + line
    return out


@pytest.mark.parametrize("target", [t for t, _ in lock_targets()])
def test_lock_pins_with_hashes_and_no_local_urls(target: str) -> None:
    text = (REQ / f"{target}.txt").read_text()
    assert "file://" not in text and "/opt/" not in text, f"{target}.txt names a local path or file:// URL"
    assert not re.search(r"^--(index-url|extra-index-url|find-links)", text, re.M), f"{target}.txt pins an index"
    found = entries(text)
    assert found, f"{target}.txt pins nothing"
    for entry in found:
        first = entry.splitlines()[0]
        assert "==" in first, f"{target}.txt: unpinned {first!r}"
        assert "--hash=sha256:" in entry, f"{target}.txt: no hash for {first!r}"


def test_one_torch_across_image_targets() -> None:
    targets = [*IMAGE_TARGETS, *mps_locks().values()]
    versions = {t: (pins(t).get("torch"), pins(t).get("torchvision")) for t in targets}
    assert len(set(versions.values())) == 1, f"torch/torchvision differ across targets: {versions}"
    assert versions["cpu"] == ("2.10.0", "0.25.0")


def test_cpu_lock_is_a_subset_of_cuda_lock() -> None:
    """The cuda image adds a layer on top of the cpu venv: shared packages must be identical."""
    cpu, cuda = pins("cpu"), pins("cuda")
    assert {k: (v, cuda.get(k)) for k, v in cpu.items() if cuda.get(k) != v} == {}


@pytest.mark.parametrize("target", sorted(mps_locks().values()))
def test_shared_packages_match_on_mps(target: str) -> None:
    cpu, mps = pins("cpu"), pins(target)
    assert {k: (cpu[k], v) for k, v in mps.items() if k in cpu and cpu[k] != v} == {}


def test_mps_locks_cover_every_supported_python() -> None:
    """One macOS arm64 lock per Python minor from the kit's floor up, each resolved for its
    minor, wheels only, with the host side in it (docker/mps/run.sh, setup.sh mps)."""
    import tomllib

    floor = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"].removeprefix(">=")
    minors = sorted(mps_locks(), key=lambda v: tuple(map(int, v.split("."))))
    assert minors[0] == floor, f"mps locks start at {minors[0]}, the kit's floor is {floor}"
    nums = [int(v.split(".")[1]) for v in minors]
    assert nums == list(range(nums[0], nums[-1] + 1)), f"a minor is missing among {minors}"
    m = re.search(r'^MPS_PYTHONS="([^"]+)"', (REQ / "lock.sh").read_text(), re.M)
    assert m and m.group(1).split() == minors, "lock.sh's MPS_PYTHONS and the mps locks differ: run requirements/lock.sh mps"
    host = {re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower() for line in (REQ / "host.in").read_text().splitlines()}
    host.discard("")
    host = {h for h in host if not h.startswith(("#", "-"))}
    for v, stem in mps_locks().items():
        head = (REQ / f"{stem}.txt").read_text().split("\n", 3)[2]
        assert head.startswith(f"# lock-target: mps, python {v},"), head
        assert "aarch64-apple-darwin" in head and "--only-binary :all:" in head, head
        assert host <= set(pins(stem)), f"{stem}.txt lacks the host side: {sorted(host - set(pins(stem)))}"


def test_cuda_lock_is_one_cuda_minor() -> None:
    """torch's nvidia-*-cu12 wheels, cupy-cuda12x and numba-cuda[cu12] on one CUDA 12.x."""
    cuda = pins("cuda")
    assert "cupy-cuda12x" in cuda and "numba-cuda" in cuda
    assert "[cu12]" in (REQ / "cuda.txt").read_text()
    minors = {
        ".".join(v.split(".")[:2])
        for k, v in cuda.items()
        if k
        in (
            "nvidia-cuda-runtime-cu12",
            "nvidia-cuda-nvrtc-cu12",
            "nvidia-cuda-nvcc-cu12",
            "nvidia-cuda-cupti-cu12",
            "nvidia-nvjitlink-cu12",
        )
    }
    assert minors == {"12.8"}, minors
    assert cuda.get("cuda-toolkit", "12.8").startswith("12.8")
    assert not any(k.endswith("-cu13") for k in cuda)


def test_each_image_target_has_the_common_packages() -> None:
    need = {"torch", "torchvision", "numpy", "numba", "scipy", "scikit-learn", "psutil", "rich", "typer", "pillow"}
    for t in [*IMAGE_TARGETS, *mps_locks().values()]:
        assert need <= set(pins(t)), f"{t}.txt lacks {sorted(need - set(pins(t)))}"
