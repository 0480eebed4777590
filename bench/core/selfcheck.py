"""`python -m bench selfcheck`: is this image (or host) what it claims to be?"""

from __future__ import annotations

import os

from bench.core.provenance import library_versions, runtime_info
from bench.core.registry import studies


def _gpu_kernels(echo) -> bool:
    """Compile and run one numba-cuda and one CuPy kernel; True when both gave the right answer."""
    import numpy as np

    ok = True
    try:
        from numba import cuda

        @cuda.jit
        def add_one(a):
            i = cuda.grid(1)  # type: ignore[call-arg,var-annotated]
            if i < a.size:
                a[i] += 1.0

        d = cuda.to_device(np.arange(256, dtype=np.float32))
        add_one[1, 256](d)
        good = np.array_equal(d.copy_to_host(), np.arange(256, dtype=np.float32) + 1)
        echo(f"  numba-cuda kernel: {'ok' if good else 'WRONG RESULT'}")
        ok &= good
    except Exception as err:  # noqa: BLE001
        echo(f"  numba-cuda kernel: FAILED: {type(err).__name__}: {err}")
        ok = False
    try:
        import cupy as cp

        k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2.0f", "kit_double")
        good = bool((k(cp.arange(256, dtype=cp.float32)) == cp.arange(256, dtype=cp.float32) * 2).all())
        echo(f"  cupy kernel: {'ok' if good else 'WRONG RESULT'}")
        ok &= good
    except Exception as err:  # noqa: BLE001
        echo(f"  cupy kernel: FAILED: {type(err).__name__}: {err}")
        ok = False
    return ok


def gpu_visible() -> str | None:
    """None when an NVIDIA GPU is usable from here, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU visible (torch.cuda.is_available() is False; no --gpus / NVIDIA runtime?)"
    return None


def run_selfcheck(platform: str, echo=print) -> bool:
    rt = runtime_info()
    if rt["runtime"] == "native":
        where = "runtime native (no image)"
    else:  # the image id is known only when the runner passes it (orchestrate does; a bare docker run does not)
        ident = rt["image_id"] if rt["image_id"] not in (None, "", "native", "unknown") else "id not passed by the runner"
        where = f"runtime {rt['runtime']}, image {rt.get('image_ref') or os.environ.get('KIT_IMAGE_TAG') or '?'} ({ident})"
    echo(f"cnn-bench selfcheck: platform {platform}, {where}, lock {rt['lock_hash']}")
    libs = library_versions()
    echo("  " + ", ".join(f"{k} {v}" for k, v in libs.items()))
    ok = True
    gpu_reason = gpu_visible() if platform == "cuda" else None
    for study in studies().values():
        for b, spec in study.backends.items():
            if spec.platform != platform:
                continue
            reason = study.why_unavailable(b)
            what = f"{study.name} {b}"
            if reason is None:
                echo(f"  {what}: available")
            elif platform == "cuda" and gpu_reason and "cannot import" not in reason:
                echo(f"  {what}: importable; not runnable here: {reason}")
            else:
                echo(f"  {what}: UNAVAILABLE: {reason}")
                ok = False
    if platform == "cuda":
        if gpu_reason:
            echo(f"  GPU: {gpu_reason}; kernel compile skipped")
        else:
            ok &= _gpu_kernels(echo)
    echo("selfcheck: " + ("ok" if ok else "FAILED"))
    return ok


def sandbox_facts() -> dict:
    """What confines this process (for tests of the container runtime): user, read-only
    root, network interfaces, /data and /results writability, capabilities, no_new_privs,
    the pids and memory limits. Each fact is read from the kernel, not assumed."""
    import os
    import socket

    def writable(path: str) -> bool:
        probe = os.path.join(path, f".cnn-bench-probe-{os.getpid()}")
        try:
            with open(probe, "w") as fh:
                fh.write("x")
            os.unlink(probe)
            return True
        except OSError:
            return False

    status = {}
    try:
        for line in open("/proc/self/status", encoding="utf-8"):
            k, _, v = line.partition(":")
            status[k] = v.strip()
    except OSError:
        pass

    def first(*paths: str) -> str | None:
        for p in paths:
            try:
                return open(p, encoding="utf-8").read().strip()
            except OSError:
                continue
        return None

    pids_max = first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")
    memory_max = first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # cgroup v2, v1
    swap_max = first("/sys/fs/cgroup/memory.swap.max")
    memsw = first("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")  # v1: memory + swap
    if swap_max is None and memsw is not None and memory_max is not None and memsw.isdigit() and memory_max.isdigit():
        swap_max = str(int(memsw) - int(memory_max))
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "root_writable": writable("/opt") or writable("/"),
        "tmp_writable": writable("/tmp"),
        "data_writable": writable("/data") if os.path.isdir("/data") else None,
        "results_writable": writable("/results") if os.path.isdir("/results") else None,
        "interfaces": sorted(n for _, n in socket.if_nameindex()),
        "cap_eff": status.get("CapEff"),
        "cap_bnd": status.get("CapBnd"),
        "no_new_privs": status.get("NoNewPrivs"),
        "pids_max": pids_max,
        "memory_max": memory_max,
        "swap_max": swap_max,
    }
