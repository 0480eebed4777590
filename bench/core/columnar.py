"""Many rows files read at once: the rows schema checked column by column (pyarrow), line by line
only where a batch holds something the columnar check cannot clear.

    read_rows_many(paths) -> {path: (rows, problems)}    what rows.read_rows_checked gives each

Each file is read once, within rows.ROWS_CAPS (`rows.rows_lines`); a file that did not read
cleanly (a symlink, over a cap, a line over the line cap) goes line by line at once. The lines of
the others are parsed together, one batch per study folder (the folder above each cell's), by
pyarrow's JSON reader, and every column is held to what `schema.check_row` asks of its key: the
common keys' types (a text's length, a count's range, a status among STATUSES), and for every
number, nested ones too, the number rule's range for its key (`schema.number_bounds`). A column
is cleared only when its type is the expected one and its smallest and largest values lie in
range; anything else (a batch pyarrow cannot parse, a key named twice in a row, another type,
NaN, a value out of range, a float past 2**53 that may stand for an integer it cannot hold)
sends that batch line by line (`rows.check_lines`, on the lines already read), which names every
bad line as it always has. The rows handed on are json.loads of each line either way, so a
cleared batch gives exactly what the line-by-line check gives.

pyarrow's reader holds a column per distinct key (nested ones too) for every line, so its memory
is lines x distinct keys: 0.2 MB of rows of one new key each took 0.4 GB, 0.8 MB more than 4 GB.
So each batch's lines are parsed first, and a batch naming more than MAX_COLUMNS distinct keys
goes line by line (whose memory is linear in the bytes) without ever reaching pyarrow.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core import rows as R
from bench.core import schema

TEXT_KEYS = frozenset(
    {
        "cell", "backend", "variant", "run_id", "reason", "flags", "host", "device", "image_id", "lock_hash",
        "dataset", "command", "scheduler", "scheduler_job", "scheduler_task", "scheduler_node",
    }
)  # fmt: skip
COUNT_KEYS = frozenset({"seed", "repeat"})
TYPED_KEYS = TEXT_KEYS | COUNT_KEYS | {"study", "status", "schema", "dataset_real"}  # = schema.row_keys()
EXACT = 2**53  # a float column past this may hold an integer the JSON wrote exactly and a float cannot
MAX_COLUMNS = 1000  # distinct keys of a batch pyarrow may read (the references: at most 155 a cell)

Lines = list[tuple[int, bytes | None]]


def read_rows_many(paths: list[Path]) -> dict[Path, tuple[list[dict], list[str]]]:
    """(good rows, problems) of every rows file in PATHS, as rows.read_rows_checked gives them."""
    out: dict[Path, tuple[list[dict], list[str]]] = {}
    batches: dict[str, list[tuple[Path, Lines]]] = {}
    for path in paths:
        lines, why = R.rows_lines(path)
        if lines is None:
            out[path] = ([], why)
        elif why or any(raw is None for _, raw in lines):
            out[path] = R.check_lines(path, lines, why)
        else:
            batches.setdefault(Path(path).parent.parent.name, []).append((path, lines))
    for files in batches.values():
        cleared = _batch(files)
        for path, lines in files:
            out[path] = cleared[path] if path in cleared else R.check_lines(path, lines)
    return out


def _batch(files: list[tuple[Path, Lines]]) -> dict[Path, tuple[list[dict], list[str]]]:
    """The files of one batch whose every line the columnar check clears, with their rows ({}: none)."""
    body = [(path, [raw for _, raw in lines if raw is not None and raw.strip()]) for path, lines in files]
    out: dict[Path, tuple[list[dict], list[str]]] = {}
    for path, b in body:
        got = []
        for raw in b:
            try:
                row = json.loads(raw.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError):
                return {}
            if not isinstance(row, dict):
                return {}
            got.append(row)
        out[path] = (got, [])
    if _columns_past([row for rows, _ in out.values() for row in rows], MAX_COLUMNS):
        return {}
    n = sum(len(b) for _, b in body)
    if n and not _clears(b"\n".join(raw for _, b in body for raw in b) + b"\n", n):
        return {}
    return out


def _columns_past(rows: list[dict], cap: int) -> bool:
    """Whether ROWS name more than CAP distinct keys, nested objects' keys (by their path) too: the
    columns pyarrow would hold for every line."""
    seen: set[tuple[str, str]] = set()
    todo: list[tuple[str, Any]] = [("", r) for r in rows]
    while todo:
        where, v = todo.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                seen.add((where, k))
                if isinstance(x, (dict, list)):
                    todo.append((f"{where}/{k}", x))
            if len(seen) > cap:
                return True
        elif isinstance(v, list):
            todo += [(where + "[]", x) for x in v if isinstance(x, (dict, list))]
    return False


def _clears(buf: bytes, n: int) -> bool:
    """Whether every one of the N lines in BUF is a row check_row would pass."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(use_threads=False, block_size=len(buf) + 1))
    except (pa.ArrowException, ValueError, OverflowError):
        return False
    if table.num_rows != n or not {"study", "status"} <= set(table.column_names):
        return False
    if len(set(table.column_names)) != table.num_columns:
        return False
    return all(_column_clears(name, table.column(name)) for name in table.column_names)


def _column_clears(name: str, col: Any) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if name in schema.row_keys() and name not in TYPED_KEYS:
        return False  # a key the rows schema types and this check does not know: line by line
    if name in ("study", "status", *TEXT_KEYS):
        if pa.types.is_null(t):
            return name not in ("study", "status")
        if not pa.types.is_string(t):
            return False
        if name in ("study", "status") and col.null_count:
            return False
        lengths = pc.min_max(pc.utf8_length(col))
        if lengths["max"].as_py() is not None and lengths["max"].as_py() > schema.MAX_TEXT:
            return False
        if name == "study" and (lengths["min"].as_py() or 0) < 1:
            return False
        return name != "status" or bool(pc.all(pc.is_in(col, value_set=pa.array(schema.STATUSES))).as_py())
    if name in COUNT_KEYS or name == "schema":
        if pa.types.is_null(t):
            return True
        if not pa.types.is_int64(t):
            return False
        low, high = (1, schema.SCHEMA_VERSION) if name == "schema" else (0, schema.MAX_MAGNITUDE)
        return _within(col, low, False, high)
    if name == "dataset_real":
        return pa.types.is_null(t) or pa.types.is_boolean(t)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _within(col, *schema.number_bounds(name))
    if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return all(_leaf_clears(leaf) for chunk in col.chunks for leaf in _leaves(chunk))
    return pa.types.is_string(t) or pa.types.is_boolean(t) or pa.types.is_null(t) or pa.types.is_timestamp(t)


def _within(col: Any, low: float, above: bool, high: float) -> bool:
    """Every value of numeric COL (nulls aside) in [LOW, HIGH] (above LOW where ABOVE), none NaN,
    and a float column's values exact as integers too."""
    import pyarrow as pa
    import pyarrow.compute as pc

    floating = pa.types.is_floating(col.type)
    if floating and pc.any(pc.is_nan(col)).as_py():
        return False
    mm = pc.min_max(col)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is None:
        return True  # every value null
    if floating and max(abs(lo), abs(hi)) > EXACT:
        return False
    return (lo > low if above else lo >= low) and hi <= high


def _leaves(arr: Any) -> Iterator[Any]:
    """The arrays of scalars inside a list or struct array, at any depth."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _leaves(arr.flatten())
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _leaves(arr.field(i))
    else:
        yield arr


def _leaf_clears(arr: Any) -> bool:
    """A nested value's numbers: finite and at most MAX_MAGNITUDE in size (the number rule's nested part)."""
    import pyarrow as pa

    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _within(pa.chunked_array([arr], type=t), -schema.MAX_MAGNITUDE, False, schema.MAX_MAGNITUDE)
    return pa.types.is_string(t) or pa.types.is_boolean(t) or pa.types.is_null(t) or pa.types.is_timestamp(t)
