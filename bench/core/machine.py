"""Machine facts and settings every part of the kit shares (one place each):

    usable_cores()            the cores this process may run on (its affinity mask)
    thread_count(n, share)    the thread rule: N, or the usable cores split over SHARE processes
    pin_threads(n, family)    apply a count to a backend family's runtime (torch | numba | numpy | cupy)
    seed_family(family, s)    seed a family's global generator (torch.manual_seed)
    cpu_model()               the CPU's name
    cpu_arch()                its microarchitecture and vector ISA (/proc/cpuinfo), where a VM's name hides them
    nvidia_smi_gpus()         what nvidia-smi lists (no torch import)
    visible_gpus()            GPU ids this process may use (CUDA_VISIBLE_DEVICES, else nvidia-smi)
    is_macos_arm64()          Apple silicon (the mps platform)

Frameworks are imported inside the functions that need them, never at import time: the
host side, `bench list` and every study package import this module.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

FAMILIES = ("torch", "numba", "numpy", "cupy")  # BackendSpec.family: whose threads and seed the core sets


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask; the CPU count where there is none)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def thread_count(requested: int = 0, share: int = 1) -> int:
    """The kit's one thread rule: REQUESTED when > 0, else the usable cores split evenly over
    SHARE processes on this host (DDP ranks), at least 1."""
    if requested:
        return int(requested)
    return max(usable_cores() // max(int(share), 1), 1)


def pin_threads(requested: int, family: str, share: int = 1) -> int:
    """Set the intra-op threads of FAMILY's runtime to thread_count(REQUESTED, SHARE) and
    OMP/MKL's defaults for libraries loaded later; returns the count. Unknown or empty
    family: only the environment."""
    n = thread_count(requested, share)
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    os.environ.setdefault("MKL_NUM_THREADS", str(n))
    if family == "torch":
        import torch

        torch.set_num_threads(n)
    elif family == "numba":
        import numba

        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    elif family in ("numpy", "cupy"):  # the host BLAS (cupy backends still do host work in NumPy)
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return n
        threadpool_limits(limits=n, user_api="blas")  # not as a context: holds for the process
    return n


def seed_family(family: str, seed: int) -> None:
    """Seed FAMILY's global generator (torch: CPU and every GPU); the kit's own arrays are
    seeded explicitly (numpy default_rng), so other families need nothing."""
    if family == "torch":
        import torch

        torch.manual_seed(seed)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
    return platform.processor() or platform.machine()


# the widest vector extension a flag names, widest first: what torch's CPU kernels dispatch on
ISA_FLAGS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"))


def arch_of(cpuinfo: str) -> str | None:
    """'<vendor> family F model M, <ISA>' of the first processor in CPUINFO (the text of
    /proc/cpuinfo on x86), or None where it names no vendor, family and model (ARM, another OS).
    Two VMs whose CPU reads only "AMD EPYC" are told apart by it: a Zen 3 (family 25 model 1, AVX2)
    and another EPYC ran the same smoke 1.7-3.3x apart (2026-11-30)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block only
            continue
        k, sep, v = line.partition(":")
        if sep:
            fields.setdefault(k.strip(), v.strip())
    vendor, family, model = fields.get("vendor_id"), fields.get("cpu family"), fields.get("model")
    if not (vendor and family and family.isdigit() and model and model.isdigit()):
        return None
    flags = set(fields.get("flags", "").split())
    isa = next((name for flag, name in ISA_FLAGS if flag in flags), "no AVX")
    return f"{vendor} family {int(family)} model {int(model)}, {isa}"


def cpu_arch() -> str | None:
    """This machine's `arch_of` (None where /proc/cpuinfo is not there or says too little)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return arch_of(f.read())
    except OSError:
        return None


def is_macos_arm64() -> bool:
    return sys.platform == "darwin" and platform.machine() == "arm64"


def nvidia_smi_gpus() -> list[dict]:
    """GPUs nvidia-smi lists ([] without nvidia-smi or a GPU): index, name, driver, memory,
    power limit, max SM clock."""
    try:
        q = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,driver_version,memory.total,power.limit,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if q.returncode != 0:
        return []
    keys = ("index", "name", "driver", "memory", "power_limit", "max_sm_clock")
    rows = ([s.strip() for s in line.split(",")] for line in q.stdout.splitlines())
    return [dict(zip(keys, parts)) for parts in rows if len(parts) >= 6]


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else nvidia-smi's indices."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    return [g["index"] for g in nvidia_smi_gpus()]


def allocated_gpus(ids: list[str]) -> list[str]:
    """The GPUs a cell's GPU IDS name, as this process must bind them. Under a cluster
    scheduler (KIT_GPU_ALLOCATION=1, set by the kit's Slurm scripts and Kubernetes Jobs) the ids
    are positions in the task's allocation, the GPUs the scheduler left visible (Slurm's
    CUDA_VISIBLE_DEVICES may name physical GPUs 2,3): a cell of devices 0,1 runs on the
    allocation's first two. Elsewhere the ids are the host's own."""
    if os.environ.get("KIT_GPU_ALLOCATION") != "1":
        return list(ids)
    have = visible_gpus()
    if all(i.isdigit() and int(i) < len(have) for i in ids):
        return [have[int(i)] for i in ids]
    return list(ids)  # more than allocated: devices_missing says so
