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

Rows are checked, not believed (they come from other machines): `check_row` holds every line
to the rows schema (bench.core.schema: the common keys' types, and the number rule: every number
finite and bounded, a time, memory size, energy, power or frequency from 0 to its physical bound,
a rate above 0, a loss NaN or +Infinity when training diverged).
The writer never writes what this rejects: a non-finite number is stored as null (an empty
CSV cell), except a loss's NaN / +Infinity, kept as `NaN` / `Infinity`.
A rows file is read by the bounded reader (bench.core.bounded) with ROWS_CAPS: a line over
its cap is corrupt and never read whole; a file over the size or line-count cap is corrupt and
not read further.
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
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import bounded
from bench.core.errors import KitError
from bench.core.schema import SCHEMA_VERSION, STATUSES, check_row, is_loss, number_problem  # noqa: F401 - re-exported
from bench.core.text import csv_cell

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
# Rows files are small (the largest committed one is 0.2 MB and 179 lines, its longest line 4 kB):
# past these caps a file is corrupt, judged without reading it whole.
ROWS_CAPS = bounded.Caps(file_bytes=16 << 20, line_bytes=1 << 20, lines=100_000)
MAX_PROBLEMS = 20  # problem lines kept per rows file (the rest are counted)


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


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
    w = csv.writer(buf)
    w.writerow([csv_cell(k) for k in keys])
    for r in rows:
        w.writerow(["" if (v := row_value(k, r.get(k))) is None else csv_cell(v) for k in keys])
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


def read_rows_checked(path: Path) -> tuple[list[dict], list[str]]:
    """(good rows, problems 'path:line: why') of a rows file, read within ROWS_CAPS: a symlink,
    an unreadable file, one over a cap, or a line over the line cap is a problem; after
    MAX_PROBLEMS problems the rest are counted, not listed."""
    lines, why = rows_lines(path)
    if lines is None:
        return [], why
    return check_lines(path, lines, why)


def rows_lines(path: Path) -> tuple[list[tuple[int, bytes | None]] | None, list[str]]:
    """The lines of rows file PATH as read within ROWS_CAPS ((line number, bytes), or None for a
    line over the line cap), and what stopped the reading: (None, [why]) when the file is not
    read at all (a symlink, over a cap), else the lines read and [why] where reading failed
    part way."""
    if not is_regular(path):
        return None, [f"{path}: not a regular file (a symlink?): not read"]
    lines: list[tuple[int, bytes | None]] = []
    try:
        for n, raw in bounded.lines(path, ROWS_CAPS):
            lines.append((n, raw))
    except bounded.TooBig as err:
        return None, [str(err)]
    except (OSError, EOFError) as err:
        return lines, [f"{path}: cannot be read ({getattr(err, 'strerror', None) or err})"]
    except KitError as err:
        return lines, [str(err)]
    return lines, []


def check_lines(path: Path, lines: list[tuple[int, bytes | None]], after: Sequence[str] = ()) -> tuple[list[dict], list[str]]:
    """(good rows, problems) of LINES of rows file PATH (rows_lines'), each line held to the rows
    schema (check_row); AFTER: what stopped the reading, listed last."""
    rows: list[dict] = []
    problems: list[str] = []
    more = 0

    def problem(line: str) -> None:
        nonlocal more
        if len(problems) < MAX_PROBLEMS:
            problems.append(line)
        else:
            more += 1

    for n, raw in lines:
        if raw is None:
            problem(f"{path}:{n}: line longer than {bounded.mib(ROWS_CAPS.line_bytes)}: not read")
            continue
        line = raw.decode("utf-8", errors="replace")
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problem(f"{path}:{n}: not JSON ({err.msg})")
            continue
        except (ValueError, RecursionError) as err:  # an int of too many digits, nesting too deep
            problem(f"{path}:{n}: not JSON the kit can read ({type(err).__name__})")
            continue
        why = check_row(row)
        if why:
            problem(f"{path}:{n}: {why}")
        else:
            rows.append(row)
    for why in after:
        problem(why)
    if more:
        problems.append(f"{path}: {more} more line(s) that cannot be trusted")
    return rows, problems


def read_rows(path: Path) -> list[dict]:
    """Every row of a rows file; KitError (one line, naming the line) when any cannot be trusted."""
    rows, problems = read_rows_checked(path)
    if problems:
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
