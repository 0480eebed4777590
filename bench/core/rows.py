"""Rows: the one schema every study writes, and the atomic writers and readers.

A cell's directory (one place computes it: `Cell.dir(out)`): <out>/<study>/<cell id>/
    cell.json           the Cell spec this directory holds (written first)
    rows.partial.jsonl  appended step by step while the cell runs (progress; survives a crash)
    rows.jsonl          every row, written once at the end (temp name + rename): the completion marker
    rows.csv            the same rows for people
    system.json         provenance and the resolved config (temp name + rename)
    log.txt             the cell process's stderr, when a scheduler ran it

Every row is flat: the COMMON_KEYS below (filled by the cell entry point, never by a
study), then the study's own metrics with units in their names (`epoch_s`, `rss_peak_mb`).

Rows are checked, not believed (they come from other machines): `check_row` rejects a line
whose numbers are impossible, by one rule (see `number_problem`):
  - every number is finite (Python's json reads `NaN`, `Infinity`, `-Infinity` and `1e400`,
    none of which a measurement is), nested values included; the one exception is a loss
    (`loss`, `*_loss`), which may be NaN or +Infinity: a diverged training is a result the
    study flags (`loss_finite` False, `diverged`), never -Infinity;
  - a key whose name ends in a unit of something that cannot be below zero is >= 0:
    NONNEGATIVE_UNITS (times `_s` `_ms` `_us` `_ns`, rates `*_per_s`, memory `_mb` `_gb`
    `_kb` `_bytes`, energy `_j`, power `_w`, frequency `_hz` `_mhz`), except a key naming a
    difference or a remainder: a word of MAY_BE_NEGATIVE_WORDS in its name (`energy_net_j`,
    `framework_overhead_bytes`, `mean_other_ms`, ...) or a key of MAY_BE_NEGATIVE_KEYS
    (`memory_total_bytes`: memory growth). Keys without such a unit (`sampler_cost`,
    `profiler_overhead`, `acc_drop_pts`, ratios, accuracies) are checked for finiteness only.
The writer never writes what this rejects: a non-finite number is stored as null (an empty
CSV cell), except a loss's NaN / +Infinity, kept as `NaN` / `Infinity`.
A line over MAX_LINE_BYTES, or a rows file over MAX_ROWS_FILE_BYTES, is corrupt and never
read whole.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2  # 2: `flags`
# Keys every row carries, in this order (None where a key does not apply).
COMMON_KEYS = (
    "schema",  # SCHEMA_VERSION of the writer
    "study",  # registry name of the study
    "cell",  # Cell.id: readable prefix + hash of the full spec
    "backend",  # registry name within the study (a row may narrow it to one part of a '+' backend)
    "variant",  # backend tuning label
    "seed",  # weights and data order
    "repeat",  # 0, 1, ...: repeats of the same spec, each in a fresh process
    "run_id",  # one per cell process
    "status",  # ok | skipped | error | incomplete
    "reason",  # why not ok ("" when ok)
    "flags",  # noise and validity flags of the cell (bench.core.noise), ";"-joined; "" when clean
    "host",  # hostname the cell ran on (the host's, also in a container)
    "device",  # what the work ran on: CPU model (+ cores) or GPU name
    "image_id",  # container image id, or "native"
    "lock_hash",  # sha256 of the lock the environment was built from, or "native"
    "dataset",  # dataset name actually used
    "dataset_real",  # True for the real dataset, False for embedded/synthetic data
    "command",  # the exact command that reruns this cell
)
STATUSES = ("ok", "skipped", "error", "incomplete", "interrupted")
# types every row's common keys must have when present (None is allowed for all but these)
REQUIRED: dict[str, type] = {"study": str, "status": str}
TYPES = {
    "schema": int,
    "cell": str,
    "backend": str,
    "variant": str,
    "seed": int,
    "repeat": int,
    "run_id": str,
    "reason": str,
    "flags": str,
    "host": str,
    "device": str,
    "image_id": str,
    "lock_hash": str,
    "dataset": str,
    "dataset_real": bool,
    "command": str,
    # under a cluster scheduler only (bench.core.provenance.scheduler_row_fields): slurm | kubernetes,
    # the job, the task (Slurm: <array job>_<task>, as squeue names it), the node
    "scheduler": str,
    "scheduler_job": str,
    "scheduler_task": str,
    "scheduler_node": str,
}


# Rows files are small (the largest committed one is 0.2 MB, its longest line 4 kB): a line or a
# file past these limits is corrupt, judged without reading it whole.
MAX_LINE_BYTES = 1 << 20
MAX_ROWS_FILE_BYTES = 64 << 20

# unit suffix -> what it measures: a key ending in one of these cannot be negative
NONNEGATIVE_UNITS = {
    "_s": "a time",
    "_ms": "a time",
    "_us": "a time",
    "_ns": "a time",
    "_mb": "a memory size",
    "_gb": "a memory size",
    "_kb": "a memory size",
    "_bytes": "a memory size",
    "_j": "an energy",
    "_w": "a power",
    "_hz": "a frequency",
    "_mhz": "a frequency",
}
# ... unless it is a difference or a remainder, which its name says with one of these words
# (`energy_net_j`: energy minus the idle baseline; `framework_overhead_bytes`: growth minus the
# arrays; `mean_other_ms` / `mean_idle_ms`: step minus the parts, which float rounding can take
# a hair below zero) ...
MAY_BE_NEGATIVE_WORDS = frozenset({"net", "overhead", "delta", "diff", "drop", "change", "gain", "cost", "other", "idle"})
# ... or is one of these keys
MAY_BE_NEGATIVE_KEYS = frozenset({"memory_total_bytes"})  # mlp-scratch: growth of process memory (end - start)


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file beside PATH, fsync, rename over PATH (never through a symlink)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
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


def jsonable(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict)):  # numpy scalars
        return v.item()
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def is_loss(key: str) -> bool:
    """A loss (`loss`, `train_loss`, ...): may be NaN or +Infinity when training diverged."""
    return key == "loss" or key.endswith("_loss")


def _finite_or_none(v: Any) -> Any:
    """V with numpy scalars as Python numbers, tuples as lists, and every non-finite float,
    nested ones too, as None."""
    v = jsonable(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list):
        return [_finite_or_none(x) for x in v]
    if isinstance(v, dict):
        return {k: _finite_or_none(x) for k, x in v.items()}
    return v


def row_value(key: str, v: Any) -> Any:
    """V as a row stores it under KEY: what check_row accepts. A non-finite number becomes None
    (null), except a loss's NaN / +inf (a diverged training, kept as NaN / Infinity)."""
    v = jsonable(v)
    if isinstance(v, float) and is_loss(key) and (math.isnan(v) or v > 0):
        return v
    return _finite_or_none(v)


def rows_to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps({k: row_value(k, v) for k, v in r.items()}, default=jsonable) + "\n" for r in rows)


def rows_to_csv(rows: list[dict]) -> str:
    keys: list[str] = [k for k in COMMON_KEYS if any(k in r for r in rows)]
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        cells = {k: row_value(k, r.get(k)) for k in keys}
        w.writerow({k: ("" if v is None else v) for k, v in cells.items()})
    return buf.getvalue()


def ordered(row: dict) -> dict:
    """COMMON_KEYS first (None where missing), then the study's keys in their order."""
    return {**{k: row.get(k) for k in COMMON_KEYS}, **{k: v for k, v in row.items() if k not in COMMON_KEYS}}


def open_nofollow(path: Path, mode: str):
    """open() for writing that refuses to follow a symlink planted at PATH ("w" truncates, "a" appends)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if os.path.islink(path):
            from bench.core.errors import KitError

            raise KitError(f"{path} is a symlink: results are never written through one; remove it") from None
        raise err
    return os.fdopen(fd, mode, encoding="utf-8")


def append_partial(cell_dir: Path, row: dict) -> None:
    cell_dir.mkdir(parents=True, exist_ok=True)
    with open_nofollow(cell_dir / "rows.partial.jsonl", "a") as fh:
        fh.write(rows_to_jsonl([row]))
        fh.flush()


def write_rows(cell_dir: Path, rows: list[dict]) -> None:
    """CSV first, JSONL last: rows.jsonl is the completion marker."""
    atomic_write_text(cell_dir / "rows.csv", rows_to_csv(rows))
    atomic_write_text(cell_dir / "rows.jsonl", rows_to_jsonl(rows))
    partial = cell_dir / "rows.partial.jsonl"
    if partial.exists():
        partial.unlink()


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=jsonable) + "\n")


def is_regular(path: Path) -> bool:
    """A regular file, not a symlink (results are read only from the results tree itself)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _name(key: str) -> str:
    return repr(key) if len(key) <= 80 else repr(key[:77] + "...")


def _not_finite(v: Any) -> str | None:
    """Why number V is not a finite one (None: it is, or V is not a number)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v}"
    if isinstance(v, int):
        try:
            float(v)
        except OverflowError:
            return "too large"
    return None


def number_problem(key: str, v: Any) -> str | None:
    """Why the value V of row key KEY is impossible (None: it is not). The one rule: every
    number finite (a loss may be NaN or +inf), and >= 0 under a NONNEGATIVE_UNITS suffix unless
    the key is a difference or remainder (MAY_BE_NEGATIVE_WORDS / MAY_BE_NEGATIVE_KEYS)."""
    if isinstance(v, (list, dict)):
        stack: list[Any] = [v]
        while stack:  # iterative: json nests up to the interpreter's recursion limit
            x = stack.pop()
            if isinstance(x, (list, dict)):
                stack.extend(x.values() if isinstance(x, dict) else x)
            elif (why := _not_finite(x)) is not None:
                return f"{_name(key)} holds {why}: not a finite number"
        return None
    why = _not_finite(v)
    if why is not None:
        if is_loss(key) and isinstance(v, float) and (math.isnan(v) or v > 0):
            return None  # a diverged training: the study flags it
        return f"{_name(key)} is {why}: not a finite number"
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v >= 0:
        return None
    unit = next((u for u in sorted(NONNEGATIVE_UNITS, key=len, reverse=True) if key.endswith(u)), None)
    if unit is None or key in MAY_BE_NEGATIVE_KEYS or MAY_BE_NEGATIVE_WORDS & set(key.split("_")):
        return None
    what = "a rate" if "_per_" in key else NONNEGATIVE_UNITS[unit]
    return f"{_name(key)} is {v}: {what} ({unit}) cannot be negative"


def check_row(row: object) -> str | None:
    """Why ROW cannot be trusted (None: it can): the common keys' presence and types, and every
    number possible (number_problem)."""
    if not isinstance(row, dict):
        return f"not an object ({type(row).__name__})"
    for k, t in REQUIRED.items():
        if not isinstance(row.get(k), t):
            return f"{k!r} missing or not a {t.__name__}"
    if row["status"] not in STATUSES:
        return f"unknown status {row['status']!r}"
    for k, t in TYPES.items():
        v = row.get(k)
        if v is not None and not (isinstance(v, t) and not (t is int and isinstance(v, bool))):
            return f"{k!r} is {type(v).__name__}, expected {t.__name__}"
    if (row.get("schema") or 0) > SCHEMA_VERSION:
        return f"schema {row['schema']} is newer than this kit's {SCHEMA_VERSION}: update the kit"
    for k, v in row.items():
        why = number_problem(k, v)
        if why:
            return why
    return None


def _lines(fh: Any, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, the line's bytes, or None for a line longer than LIMIT bytes) of binary file
    FH; never holds more than LIMIT + 1 bytes of one line."""
    n = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # skip the rest of the line, a block at a time
                rest = fh.readline(limit)
                if not rest or rest.endswith(b"\n"):
                    break
            yield n, None
        else:
            yield n, line


def read_rows_checked(path: Path) -> tuple[list[dict], list[str]]:
    """(good rows, problems 'path:line: why') of a rows file; a symlink or unreadable file, or one
    over MAX_ROWS_FILE_BYTES, is one problem; a line over MAX_LINE_BYTES is one, unread."""
    if not is_regular(path):
        return [], [f"{path}: not a regular file (a symlink?): not read"]
    rows, problems = [], []
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_ROWS_FILE_BYTES:
                mib = MAX_ROWS_FILE_BYTES >> 20
                return [], [f"{path}: {size / 2**20:.0f} MiB, over the {mib} MiB a rows file may have: not read"]
            for n, raw in _lines(fh, MAX_LINE_BYTES):
                if raw is None:
                    problems.append(f"{path}:{n}: line longer than {MAX_LINE_BYTES >> 20} MiB: not read")
                    continue
                line = raw.decode("utf-8", errors="replace")
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    problems.append(f"{path}:{n}: not JSON ({err.msg})")
                    continue
                except (ValueError, RecursionError) as err:  # an int of too many digits, nesting too deep
                    problems.append(f"{path}:{n}: not JSON the kit can read ({type(err).__name__})")
                    continue
                why = check_row(row)
                if why:
                    problems.append(f"{path}:{n}: {why}")
                else:
                    rows.append(row)
    except OSError as err:
        problems.append(f"{path}: cannot be read ({err.strerror or err})")
    return rows, problems


def read_rows(path: Path) -> list[dict]:
    """Every row of a rows file; KitError (one line, naming the line) when any cannot be trusted."""
    rows, problems = read_rows_checked(path)
    if problems:
        from bench.core.errors import KitError

        raise KitError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return rows


def status_of(rows: list[dict]) -> str | None:
    statuses = {r.get("status") for r in rows}
    for s in ("error", "interrupted", "ok", "skipped"):  # a cell may mix ok rows with skipped variants
        if s in statuses:
            return s
    return None


def cell_status(cell_dir: Path) -> str | None:
    """ok / skipped / error / interrupted from a finished cell's rows; None if unfinished or
    unreadable (a corrupt rows.jsonl is never reused: the cell runs again)."""
    p = cell_dir / "rows.jsonl"
    if not p.exists() and not p.is_symlink():
        return None
    rows, problems = read_rows_checked(p)
    return None if problems else status_of(rows)
