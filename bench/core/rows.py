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
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
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
    "host",  # hostname the cell ran on (the host's, also in a container)
    "device",  # what the work ran on: CPU model (+ cores) or GPU name
    "image_id",  # container image id, or "native"
    "lock_hash",  # sha256 of the lock the environment was built from, or "native"
    "dataset",  # dataset name actually used
    "dataset_real",  # True for the real dataset, False for embedded/synthetic data
    "command",  # the exact command that reruns this cell
)
STATUSES = ("ok", "skipped", "error", "incomplete")


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


def rows_to_jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps({k: jsonable(v) for k, v in r.items()}, default=jsonable) + "\n" for r in rows)


def rows_to_csv(rows: list[dict]) -> str:
    keys: list[str] = [k for k in COMMON_KEYS if any(k in r for r in rows)]
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else jsonable(r.get(k))) for k in keys})
    return buf.getvalue()


def ordered(row: dict) -> dict:
    """COMMON_KEYS first (None where missing), then the study's keys in their order."""
    return {**{k: row.get(k) for k in COMMON_KEYS}, **{k: v for k, v in row.items() if k not in COMMON_KEYS}}


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


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=jsonable) + "\n")


def read_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def cell_status(cell_dir: Path) -> str | None:
    """ "ok" / "skipped" / "error" from a finished cell's rows, None if unfinished."""
    p = cell_dir / "rows.jsonl"
    if not p.is_file():
        return None
    statuses = {r.get("status") for r in read_rows(p)}
    for s in ("error", "ok", "skipped"):  # a study cell may mix ok rows with skipped variants
        if s in statuses:
            return s
    return None
