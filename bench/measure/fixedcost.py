"""What a cell pays once before its first timed step, measured phase by phase: one set of fields
in every study's system.json (`fixed_costs`), which the break-even work is computed from.

    start_s        process creation (the kernel's start time) to the cell entry point: the
                   interpreter, `python -m bench` and its imports
    imports_s      the backend families' libraries (torch + torchvision, numba, cupy, numpy)
    device_init_s  the device's context: CUDA (torch, CuPy or Numba), MPS; None on a CPU
    data_s         the dataset read, decoded and, where the study puts it there, copied to the device
                   (timed by the study inside open(); None where it does not time it apart)
    warmup_s       JIT / compile and the first steps' autotune: the study's warm-up steps
    other_s        the rest of open(): model build, weights, checks (open_s less data and warm-up)
    total_s        start + imports + device init + open: everything before the first timed step

The idle baseline the energy meter takes (bench.measure.energy) is the kit's own, not the
workload's: it is recorded as `idle_baseline_s`, outside total_s. The cell entry point times
start, imports and device init; a study marks its data phase with `phase("data_s")`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FAMILY_MODULES = {"torch": ("torch", "torchvision"), "numba": ("numba",), "numpy": ("numpy",), "cupy": ("cupy",)}
_PHASES: dict[str, float] = {}  # what the study timed inside open() in this process


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time a phase of open() (NAME: 'data_s'); repeated phases add up."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _PHASES[name] = _PHASES.get(name, 0.0) + time.perf_counter() - t0


def study_phases() -> dict[str, float]:
    return dict(_PHASES)


def reset() -> None:
    _PHASES.clear()


_FORKED: dict[str, Any] = {}  # set in a cell forked warm (bench/run/warm.py): its warm process's cold start


def forked_from(cold_start_s: float | None, pid: int, preloaded: list[str]) -> None:
    """This process is a cell forked from the warm process PID, whose own start (creation to PRELOADED
    imported) took COLD_START_S: what this cell would have paid as a new interpreter."""
    _FORKED.update(cold_start_s=cold_start_s, pid=pid, preloaded=list(preloaded))


def since_process_start() -> float | None:
    """Seconds since this process was created (psutil's create_time: /proc's start time, 10 ms ticks).
    A cell forked warm: its warm process's cold start plus the time since its fork, so the fixed
    costs stay what a new interpreter pays (start_note() says so)."""
    try:
        import psutil

        here = max(0.0, time.time() - psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - no /proc or no psutil: not measured
        return None
    if _FORKED:
        cold = _FORKED.get("cold_start_s")
        return None if cold is None else cold + here
    return here


def start_note() -> str | None:
    """The note beside start_s of a cell forked warm (None: a new interpreter, nothing to say)."""
    if not _FORKED:
        return None
    return (
        f"forked warm from pid {_FORKED['pid']}, which had imported {', '.join(_FORKED['preloaded']) or 'nothing'}: "
        "start_s is that process's own cold start (creation to those imports, measured once) plus this cell's "
        "time from its fork to its entry point; the imports it saved are not in imports_s"
    )


def import_families(families: list[str]) -> float:
    """Import the families' libraries now (the study would on open) and return the seconds it took."""
    t0 = time.perf_counter()
    for fam in families:
        for mod in FAMILY_MODULES.get(fam, ()):
            try:
                importlib.import_module(mod)
            except Exception:  # noqa: BLE001 - a library that fails to import: the backend says so on open
                continue
    return time.perf_counter() - t0


def init_device(platform: str, families: list[str]) -> tuple[float | None, str | None]:
    """(seconds to create the device's context and sync once, None) or (None, why not measured)."""
    if platform == "cpu":
        return None, "no device to initialise on a CPU"
    t0 = time.perf_counter()
    try:
        if "torch" in families:
            import torch

            if platform == "cuda":
                torch.cuda.init()
                torch.empty(1, device="cuda")
                torch.cuda.synchronize()
            else:
                torch.empty(1, device="mps")
                torch.mps.synchronize()
        elif "cupy" in families:
            import cupy

            cupy.empty(1)
            cupy.cuda.runtime.deviceSynchronize()
        elif "numba" in families and platform == "cuda":
            from numba import cuda

            cuda.current_context()
        else:
            return None, f"no device initialisation known for {'+'.join(families)} on {platform}"
    except Exception as err:  # noqa: BLE001 - the backend reports its own failure on open; this is only a timing
        return None, f"device init failed here ({type(err).__name__}): the study's open() did it"
    return time.perf_counter() - t0, None


def assemble(pre: dict[str, Any], open_s: float, warmup_s: float | None, notes: dict[str, str]) -> dict[str, Any]:
    """system.json's `fixed_costs` from the entry point's PRE phases, OPEN_S and the study's phases."""
    got = study_phases()
    data = got.get("data_s")
    warm = warmup_s if isinstance(warmup_s, (int, float)) and warmup_s >= 0 else None
    other = open_s - (data or 0.0) - (warm or 0.0)
    out: dict[str, Any] = {
        "start_s": pre.get("start_s"),
        "imports_s": pre.get("imports_s"),
        "device_init_s": pre.get("device_init_s"),
        "data_s": data,
        "warmup_s": warm,
        "other_s": other if other >= 0 else None,
        "open_s": open_s,
        "idle_baseline_s": pre.get("idle_baseline_s"),
    }
    if data is None:
        notes.setdefault("data_s", "not timed apart by the study: inside other_s")
    if other < 0:
        notes["other_s"] = f"open() took {open_s:.3f} s, less than its data and warm-up phases: not formed"
    parts = [out[k] for k in ("start_s", "imports_s", "device_init_s")]
    out["total_s"] = sum(p for p in parts if isinstance(p, (int, float))) + open_s
    if pre.get("start_s") is None:
        notes.setdefault("start_s", "the process start time was not readable: total_s leaves it out")
    elif (why := start_note()) is not None:
        notes.setdefault("start_s", why)
    out["notes"] = notes
    return out


__all__ = [
    "FAMILY_MODULES",
    "assemble",
    "forked_from",
    "import_families",
    "init_device",
    "phase",
    "reset",
    "since_process_start",
    "start_note",
]
