"""The tidy results table: every row of every cell in one long-format table, for pandas.

One table row per result row, as the study wrote it (mnist-cnn: one per cell x repeat x
epoch; mlp-scratch: one per cell x variant x phase row: plain runs, per-op timings, memory,
convergence points), all studies in one table with a `study` column. Every column is flat
(a number, a boolean or a string; never a list, a dict or a formatted range):

- where it ran: host, device, runtime, image, lock hash, kit git sha, python and library
  versions (from the cell's system.json, flattened);
- what it was: study, cell id, backend, variant, seed, repeat, dataset, and every
  parameter of the cell as `param_<name>` (from cell.json);
- what was measured: the study's metrics, whose names end in their unit.

Unit convention (column-name suffixes): `_s` seconds, `_ms` milliseconds, `_mb` megabytes
(10^6 bytes), `_bytes` bytes, `_per_s` per second, `_pct` percent (0-100). An accuracy that
a row stores as a fraction (`test_acc`, `val_acc`, ...) becomes `<name>_pct` (x100) here.
A name with no unit suffix is a count (`epoch`, `samples`, `iteration`), a label, or
dimensionless (`train_loss`).

One change to what a row holds: an energy per sample (`energy_j_per_sample`, the profile's
`j_per_img`) from a window the kit's rule rejects (bench.measure.energy.window_check: shorter than
1 s, not from the counter, or above the power limit) is left empty, and `energy_figure_withheld`
says why; the window's raw fields (joules, its length) stay.

Written by `orchestrate.py report` as `<report>/tidy.csv` and (when pyarrow is installed)
`<report>/tidy.parquet`. tidy.csv holds every string as bench.core.text.csv_cell shows it (one
line, control characters as escapes, a leading `=`, `+`, `-` or `@` behind a `'`: never a
spreadsheet formula); tidy.parquet holds the values as read. Host side only: pandas, never
torch or numba.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from bench.core.resultset import ResultCell
from bench.core.rows import COMMON_KEYS, atomic_write_text
from bench.core.text import csv_cell
from bench.measure import energy as E

# library versions (system.json "libraries") that get their own column: <name>_version
LIBRARIES = {
    "torch": ("torch",),
    "torchvision": ("torchvision",),
    "numba": ("numba",),
    "numba_cuda": ("numba-cuda",),
    "cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"),
    "numpy": ("numpy",),
}
# identity columns, in this order (then param_*, then the study's metrics, then `command`)
IDENTITY = (
    "study",
    "host",
    "device",
    "runtime",
    "image_ref",
    "image_id",
    "lock_hash",
    "kit_git_sha",
    "kit_source_dirty",
    "kit_version",
    "python_version",
    *(f"{lib}_version" for lib in LIBRARIES),
    "os",
    "cpu_model",
    "cpu_cores",
    "memory_total_mb",
    "gpu_name",
    "gpu_driver",
    "gpu_memory_mb",
    "cuda_version",
    "dataset",
    "dataset_real",
    "dataset_sha256",
    "cell",
    "cell_name",
    "backend",
    "variant",
    "seed",
    "repeat",
    "devices",
    "run_id",
    "created_utc",
    "status",
    "reason",
    "schema",
    "result_dir",
    "row",
)
# identity columns that are not strings (the rest are strings, even when every value is missing)
IDENTITY_TYPES = {
    **dict.fromkeys(("cpu_cores", "memory_total_mb", "gpu_memory_mb", "seed", "repeat", "schema", "row"), "Int64"),
    **dict.fromkeys(("kit_source_dirty", "dataset_real"), "boolean"),
}
# common row keys this module has no place for above (a newer row schema): columns after IDENTITY
EXTRA_COMMON = tuple(k for k in COMMON_KEYS if k not in IDENTITY and k != "command")
ACC = re.compile(r"(?:.+_)?acc")  # a fraction in [0, 1] in the rows; percent in the tidy table

SNIPPET = """\
import pandas as pd

df = {load}
ep = df[(df.study == "mnist-cnn") & (df.status == "ok") & df.epoch.notna()]
config = ["host", "device", "backend", "pipeline", "variant"]
# median throughput per cell and repeat (the report's table1.csv):
per_repeat = ep.groupby(config + ["repeat"]).samples_per_s.median()
# then the median over repeats (table1_summary.csv, which adds the bootstrap intervals):
per_repeat.groupby(level=config).median()"""


def _flat(v: Any) -> Any:
    """A value as one flat cell: lists joined by commas, dicts as JSON, numpy scalars as Python."""
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict, str, bytes)):
        v = v.item()
    if isinstance(v, (list, tuple)):
        return ",".join(str(_flat(x)) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def _library(libs: dict, names: tuple[str, ...]) -> str | None:
    for n in names:
        if libs.get(n):
            return str(libs[n])
    if "cupy" in names:  # any other cupy-cudaNNx wheel
        return next((str(v) for k, v in sorted(libs.items()) if k.startswith("cupy-") and v), None)
    return None


def _spec(cell: ResultCell) -> dict:
    if cell.spec:
        return cell.spec
    sc = cell.system.get("cell")
    return sc if isinstance(sc, dict) else {}


def cell_columns(cell: ResultCell) -> dict:
    """The columns every row of CELL shares: provenance from system.json, the cell's keys and params."""
    s = cell.system
    spec = _spec(cell)

    def obj(v: Any) -> dict:
        return v if isinstance(v, dict) else {}

    gpu, ds, libs, src = obj(s.get("gpu")), obj(s.get("dataset")), obj(s.get("libraries")), obj(s.get("kit_source"))
    params = obj(spec.get("params") if isinstance(spec.get("params"), dict) else s.get("config"))
    out: dict[str, Any] = {
        "study": cell.study,
        "host": s.get("hostname"),
        "device": cell.device,
        "runtime": s.get("runtime"),
        "image_ref": s.get("image_ref"),
        "image_id": s.get("image_id"),
        "lock_hash": s.get("lock_hash"),
        "kit_git_sha": s.get("kit_git_sha"),
        "kit_source_dirty": bool(src.get("dirty")) if src or s.get("kit_git_sha") else None,
        "kit_version": s.get("kit_version"),
        "python_version": s.get("python"),
        **{f"{lib}_version": _library(libs, names) for lib, names in LIBRARIES.items()},
        "os": s.get("os"),
        "cpu_model": s.get("cpu_model"),
        "cpu_cores": s.get("cpu_affinity") or s.get("cpu_logical_cores"),
        "memory_total_mb": s.get("memory_total_mb"),
        "gpu_name": gpu.get("name"),
        "gpu_driver": gpu.get("driver"),
        "gpu_memory_mb": gpu.get("memory_mb"),
        "cuda_version": gpu.get("torch_cuda"),
        "dataset": ds.get("name"),
        "dataset_real": ds.get("real"),
        "dataset_sha256": ds.get("sha256") or params.get("dataset_sha256"),
        "cell": cell.dir.name,
        "cell_name": spec.get("name"),
        "backend": spec.get("backend"),
        "variant": spec.get("variant"),
        "seed": spec.get("seed"),
        "repeat": spec.get("repeat"),
        "devices": _flat(spec.get("devices")) if spec.get("devices") is not None else None,
        "run_id": s.get("run_id"),
        "created_utc": s.get("created_utc"),
        "status": cell.status,
        "reason": cell.reason or None,
        "result_dir": str(cell.dir),
    }
    for k, v in sorted(params.items()):
        out[f"param_{k}"] = _flat(v)
    return out


_PLAIN = (str, int, float, bool, type(None))
_COMMON = frozenset(COMMON_KEYS)
_IDENTITY = frozenset(IDENTITY)


def _column(k: str, number: bool) -> tuple[str, bool]:
    """(the column a row's key K lands in, whether its value is a fraction shown as percent);
    NUMBER: the value is a number (an accuracy that is not one keeps its name)."""
    acc = number and bool(ACC.fullmatch(k))
    name = f"{k}_pct" if acc else k
    if name in _IDENTITY or name.startswith("param_") or name == "command":
        name = f"{name}_row"  # a study metric never shadows an identity column
    return name, acc


WITHHELD = "energy_figure_withheld"  # why a row's energy per sample is left out (energy.window_check)


def energy_withheld(cell: ResultCell, row: dict) -> str | None:
    """Why ROW's energy per sample (a number it carries) is no figure under the kit's one rule for a
    window (bench.measure.energy.row_energy: a counter, 1 s or more, within the power limit), or None.
    Rows written before the rule, or by a study's own sampler, carry figures the rule rejects."""
    if not any(isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool) for k in E.PER_SAMPLE_KEYS):
        return None
    dev = f"{row.get('device') or ''} {row.get('backend') or ''}".lower()
    platform = "cuda" if any(t in dev for t in ("cuda", "cupy", "nvidia")) else "mps" if "mps" in dev else "cpu"
    devices = _spec(cell).get("devices")
    gpus = len(devices) if isinstance(devices, list) and devices else 1
    got = E.row_energy(row, cell.system, gpus, platform)
    if got.j_per_sample is not None:
        return None
    return got.why or "no figure"


def tidy_records(cells: list[ResultCell]) -> tuple[list[dict], list[str]]:
    """(records, column order): one record per row of every cell (a cell with no rows: one
    record saying why). Row values win over the cell's where both have a key (a row of a
    multi-variant cell names its own backend, a row its own device and status)."""
    records: list[dict] = []
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}  # in the order first seen
    columns: dict[tuple[str, bool], tuple[str, bool]] = {}
    for cell in cells:
        base = cell_columns(cell)
        params.update((k, None) for k in base if k.startswith("param_"))
        for i, row in enumerate(cell.rows or [{}]):
            rec = dict(base, row=i)
            for k, v in row.items():
                if type(v) not in _PLAIN:
                    v = _flat(v)
                if k in _COMMON:
                    if k == "reason":
                        rec[k] = v or None
                    elif (v is not None and v != "") or k not in rec:  # an empty host/device keeps the cell's
                        rec[k] = v
                    continue
                number = isinstance(v, (int, float)) and not isinstance(v, bool)
                got = columns.get((k, number))
                if got is None:
                    got = columns[(k, number)] = _column(k, number)
                name, acc = got
                rec[name] = 100 * v if acc else v
                metrics[name] = None
            why = energy_withheld(cell, row)
            if why:  # the one rule for a window's figure: never a number from a window it rejects, in any column
                for k in E.per_sample_keys(row):
                    name = columns.get((k, True), (k, False))[0]
                    if name in rec:
                        rec[name] = None
                rec[WITHHELD] = why
                metrics[WITHHELD] = None
            if cell.state:  # corrupt / interrupted: the cell's state, whatever its rows say
                rec["status"], rec["reason"] = cell.status, cell.reason
            rec.setdefault("command", row.get("command") or None)
            records.append(rec)
    return records, [*IDENTITY, *EXTRA_COMMON, *params, *metrics, "command"]


def _dtype(kinds: set[type]) -> str:
    """One dtype per column, from the types of its Python values (None left out): numbers stay numbers."""
    if not kinds:
        return "float64"  # all missing
    if kinds == {bool}:
        return "boolean"
    if kinds == {int}:
        return "Int64"
    if kinds <= {int, float}:
        return "float64"
    return "string"


def tidy_frame(cells: list[ResultCell]):
    """The tidy table as a pandas DataFrame (columns in IDENTITY, param_*, metrics, command order)."""
    import numpy as np
    import pandas as pd

    records, columns = tidy_records(cells)
    n = len(records)
    where: dict[str, list[int]] = {col: [] for col in columns}  # the records that hold a value, per column
    held: dict[str, list] = {col: [] for col in columns}
    kinds: dict[str, set[type]] = {col: set() for col in columns}
    for i, rec in enumerate(records):  # one pass over what the records hold
        for col, v in rec.items():
            if v is not None and col in held:
                where[col].append(i)
                held[col].append(v)
                kinds[col].add(type(v))
    data = {}
    for col in columns:
        idx, vals = where[col], held[col]
        dt = _dtype(kinds[col])
        if col in IDENTITY or col in EXTRA_COMMON or col == "command":  # a fixed type: every report's schema is the same
            fixed = IDENTITY_TYPES.get(col) or "string"
            dt = fixed if dt == fixed or not kinds[col] else "string"
        if dt == "float64":
            arr = np.full(n, np.nan)
            arr[idx] = [float(v) for v in vals]
            data[col] = pd.array(arr, dtype=dt)
        elif dt in ("Int64", "boolean"):
            raw = np.zeros(n, dtype="int64" if dt == "Int64" else "bool")
            raw[idx] = vals
            mask = np.ones(n, dtype=bool)
            mask[idx] = False
            data[col] = pd.arrays.IntegerArray(raw, mask) if dt == "Int64" else pd.arrays.BooleanArray(raw, mask)
        else:
            obj = np.full(n, None, dtype=object)
            obj[idx] = [str(v) for v in vals]
            data[col] = pd.array(obj, dtype=dt)
    return pd.DataFrame(data, columns=columns)


def csv_frame(df):
    """DF as tidy.csv holds it: every string, column names too, through bench.core.text.csv_cell
    (shown one line, control and bidi characters as escapes, a formula's first character behind
    a `'`)."""
    out = df.copy()
    for col in out.columns:
        if str(out[col].dtype) == "string":
            shown = {v: csv_cell(v) for v in out[col].dropna().unique()}  # each distinct text once
            out[col] = out[col].map(shown, na_action="ignore").astype("string")
    out.columns = [csv_cell(c) for c in out.columns]  # a row's key is a column name: foreign text too
    return out


def _shown(col) -> list[str]:
    """A column's values as pandas' to_csv writes them (floats as numpy prints them, missing as '')."""
    import numpy as np

    dt = str(col.dtype)
    if dt == "float64":
        a = col.to_numpy()
        text = a.astype(str).astype(object)
        text[np.isnan(a)] = ""
        return text.tolist()
    if dt in ("Int64", "boolean"):
        mask = col.isna().to_numpy()
        raw = col.to_numpy(dtype="int64" if dt == "Int64" else "bool", na_value=0)
        text = (raw.astype(str) if dt == "Int64" else np.where(raw, "True", "False")).astype(object)
        text[mask] = ""
        return text.tolist()
    return col.to_numpy(dtype=object, na_value="").tolist()


def csv_text(df) -> str:
    """DF (csv_frame's: strings already shown) as CSV text, byte for byte what `df.to_csv(index=False)`
    writes, in a fraction of its time: each column formatted at once, the rows written by the csv
    module's writer (QUOTE_MINIMAL, as pandas uses it)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([str(c) for c in df.columns])
    w.writerows(zip(*(_shown(df[c]) for c in df.columns)))
    return buf.getvalue()


def write_tidy(cells: list[ResultCell], out: Path) -> dict:
    """Write OUT/tidy.csv and OUT/tidy.parquet (each under a temp name, then renamed).
    Returns what was written: {"rows", "columns", "csv", "parquet" (None without pyarrow), "note"}."""
    df = tidy_frame(cells)
    out = Path(out)
    atomic_write_text(out / "tidy.csv", csv_text(csv_frame(df)))
    info: dict[str, Any] = {"rows": len(df), "columns": len(df.columns), "csv": str(out / "tidy.csv"), "parquet": None}
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        info["note"] = "tidy.parquet not written: pyarrow is not installed (`pip install pyarrow`); tidy.csv holds the same table"
        stale = out / "tidy.parquet"
        if stale.is_file() and not stale.is_symlink():
            stale.unlink()  # never leave a parquet from an earlier report beside this csv
        return info
    fd, tmp = tempfile.mkstemp(prefix=".tidy.parquet.", suffix=".tmp", dir=out)
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False, engine="pyarrow")
        os.chmod(tmp, 0o644)
        os.replace(tmp, out / "tidy.parquet")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    info["parquet"] = str(out / "tidy.parquet")
    return info


def report_lines(info: dict) -> list[str]:
    """REPORT.md's section on the tidy table."""
    files = "`tidy.csv`" + (" and `tidy.parquet`" if info.get("parquet") else "")
    md = [
        "## Tidy results (for pandas)",
        "",
        f"{files}: every result row of this report in one long-format table, {info['rows']} rows x "
        f"{info['columns']} flat columns (mnist-cnn: one row per cell x repeat x epoch; mlp-scratch: one per "
        "variant x phase row). Provenance (host, device, runtime, image, git sha, library versions, dataset) "
        "and every cell parameter (`param_*`) are columns; metric names end in their unit (`_s`, `_ms`, `_mb`, "
        '`_bytes`, `_per_s`, `_pct`); accuracies are percent (`test_acc_pct`). Filter on `status == "ok"`.',
        "",
    ]
    if info.get("note"):
        md += [f"> {info['note']}", ""]
    load = 'pd.read_parquet("tidy.parquet")  # or pd.read_csv("tidy.csv")' if info.get("parquet") else 'pd.read_csv("tidy.csv")'
    return md + ["```python", SNIPPET.format(load=load), "```", ""]
