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


@pytest.mark.parametrize("target", pairs())
def test_lock_is_fresh(target: str) -> None:
    lock = REQ / f"{target}.txt"
    assert lock.is_file(), f"requirements/{target}.txt missing: run requirements/lock.sh"
    recorded = dict(INPUT_RE.findall(lock.read_text()))
    assert recorded, f"requirements/{target}.txt has no '# input:' header: run requirements/lock.sh"
    missing = includes(REQ / f"{target}.in") - set(recorded)
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


@pytest.mark.parametrize("target", pairs())
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
    versions = {t: (pins(t).get("torch"), pins(t).get("torchvision")) for t in IMAGE_TARGETS}
    assert len(set(versions.values())) == 1, f"torch/torchvision differ across targets: {versions}"
    assert versions["cpu"] == ("2.10.0", "0.25.0")


def test_cpu_lock_is_a_subset_of_cuda_lock() -> None:
    """The cuda image adds a layer on top of the cpu venv: shared packages must be identical."""
    cpu, cuda = pins("cpu"), pins("cuda")
    assert {k: (v, cuda.get(k)) for k, v in cpu.items() if cuda.get(k) != v} == {}


def test_shared_packages_match_on_mps() -> None:
    cpu, mps = pins("cpu"), pins("mps")
    assert {k: (cpu[k], v) for k, v in mps.items() if k in cpu and cpu[k] != v} == {}


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
    for t in IMAGE_TARGETS:
        assert need <= set(pins(t)), f"{t}.txt lacks {sorted(need - set(pins(t)))}"
