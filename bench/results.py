"""Rows, atomic writers, and system.json provenance.

A cell's directory: <out>/<study>/<cell id>/
    rows.partial.jsonl  appended epoch by epoch while the cell runs (progress; survives a crash)
    rows.jsonl          every row, written once at the end (temp name + rename)
    rows.csv            the same rows for people
    system.json         provenance (temp name + rename)
    log.txt             the cell process's output, when run by the matrix runner
A cell counts as done only when rows.jsonl exists and its rows say status=ok (or skipped).
"""
from __future__ import annotations

import csv
import io
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

ROW_KEYS_FIRST = ("study", "backend", "pipeline", "variant", "batch_size", "seed", "epoch", "status")
LIBS = ("torch", "torchvision", "numpy", "numba", "numba-cuda", "llvmlite", "scipy", "scikit-learn",
        "cupy-cuda12x", "cupy-cuda13x", "psutil", "rich", "typer")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for sharing
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _jsonable(v):
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    if isinstance(v, Path):
        return str(v)
    return v


def rows_to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps({k: _jsonable(v) for k, v in r.items()}, sort_keys=False) + "\n" for r in rows)


def rows_to_csv(rows: list[dict]) -> str:
    keys: list[str] = [k for k in ROW_KEYS_FIRST if any(k in r for r in rows)]
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else _jsonable(r.get(k))) for k in keys})
    return buf.getvalue()


def append_partial(cell_dir: Path, row: dict) -> None:
    cell_dir.mkdir(parents=True, exist_ok=True)
    with open(cell_dir / "rows.partial.jsonl", "a", encoding="utf-8") as fh:
        fh.write(rows_to_jsonl([row]))
        fh.flush()


def write_rows(cell_dir: Path, rows: list[dict]) -> None:
    """CSV first, JSONL last: rows.jsonl is the completion marker."""
    atomic_write_text(cell_dir / "rows.csv", rows_to_csv(rows))
    atomic_write_text(cell_dir / "rows.jsonl", rows_to_jsonl(rows))
    partial = cell_dir / "rows.partial.jsonl"
    if partial.exists():
        partial.unlink()


def write_json(path: Path, obj: dict) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


def read_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def cell_status(cell_dir: Path) -> str | None:
    """"ok" / "skipped" / "error" from a finished cell's rows, None if unfinished."""
    p = cell_dir / "rows.jsonl"
    if not p.is_file():
        return None
    statuses = {r.get("status") for r in read_rows(p)}
    for s in ("error", "ok", "skipped"):  # a study cell may mix ok rows with skipped variants
        if s in statuses:
            return s
    return None


# ---------------------------------------------------------------- provenance

def git_sha() -> str | None:
    if os.environ.get("KIT_GIT_SHA"):
        return os.environ["KIT_GIT_SHA"]
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
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


def library_versions() -> dict[str, str]:
    out = {}
    for name in LIBS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def thread_settings() -> dict:
    t = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}
    if "torch" in sys.modules:
        t["torch_threads"] = sys.modules["torch"].get_num_threads()
        t["torch_interop_threads"] = sys.modules["torch"].get_num_interop_threads()
    if "numba" in sys.modules:
        try:
            t["numba_threads"] = sys.modules["numba"].get_num_threads()
            t["numba_threading_layer"] = sys.modules["numba"].config.THREADING_LAYER
        except Exception:  # noqa: BLE001 - threading layer not initialised yet
            pass
    return t


def gpu_info() -> dict | None:
    """GPU name, driver, CUDA/cuDNN, power limit, from torch and nvidia-smi when present."""
    info: dict = {}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(name=p.name, memory_mb=round(p.total_memory / 1e6), sm_count=p.multi_processor_count,
                    capability=f"{p.major}.{p.minor}", torch_cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    elif torch is not None and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        info.update(name="Apple MPS", torch_mps=True)
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
        if q.returncode == 0 and q.stdout.strip():
            name, driver, power, clock = [s.strip() for s in q.stdout.splitlines()[0].split(",")]
            info.update(name=info.get("name", name), driver=driver, power_limit=power, max_sm_clock=clock)
    except (OSError, subprocess.SubprocessError):
        pass
    return info or None


def runtime_info() -> dict:
    """Native, or the container image this ran in (the host runner passes KIT_* env vars)."""
    return {
        "runtime": os.environ.get("KIT_RUNTIME", "native"),
        "image_id": os.environ.get("KIT_IMAGE_ID", "native"),
        "image_ref": os.environ.get("KIT_IMAGE_REF"),
        "lock_hash": os.environ.get("KIT_LOCK_HASH", "native"),
    }


def system_info(config: dict, dataset: dict | None, run_id: str, extra: dict | None = None) -> dict:
    import psutil

    info = {
        "run_id": run_id,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "kit_git_sha": git_sha(),
        **runtime_info(),
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "libraries": library_versions(),
        "cpu_model": _cpu_model(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_mb": round(psutil.virtual_memory().total / 1e6),
        "threads": thread_settings(),
        "gpu": gpu_info(),
        "dataset": dataset,
        "config": config,
    }
    if extra:
        info.update(extra)
    return info
