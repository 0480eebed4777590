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
The writer never writes what this rejects (`fit_rows`): each value is held to the reader's own
test (schema.value_problem: the ROW model's types, the number rule's bounds, one copy of them),
and a value it would refuse is stored as null (an empty CSV cell) with a note beside it,
`<key>_note`, naming the key, the value's kind and the bound ("'energy_j' is 3.2e+12: an energy
(_j) must be from 0 to 1e+12: not kept (null)"); a loss's NaN / +Infinity is kept as `NaN` /
`Infinity`. A value that is no JSON (bytes, an object) or nested deeper than MAX_NESTING is
null with a note too; a line longer than ROWS_CAPS' line cap (or a file past its size cap) has
its largest values nulled, with a note, until it fits. Where the row's study is registered, a
row its `check_rows` refuses (a required measurement that is null, 0 or not a number) is kept as
an `error` row saying why, never dropped. rows.jsonl is checked by the reader before it is
written and read back after; only then is rows.partial.jsonl deleted: a finished step is never
lost to the writer's own file.
A rows file is read by the bounded reader (bench.core.bounded) with ROWS_CAPS: a line over
its cap is corrupt and never read whole; a file over the size or line-count cap is corrupt and
not read further.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import bounded, schema
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


# ---------------------------------------------------------------------------- the writer's side
MAX_NESTING = 64  # levels of lists and objects a written value may hold: far under json.loads' limit (~1000)
NOTES_PER_KEY = 3  # notes kept for one key's nested values (the rest are counted)
NOTE_BYTES = 512  # a value shorter than this (as JSON) is never nulled to fit a line: its note would be as long
_NOT_KEPT = "not kept (null)"


def _plain(path: str, v: Any, notes: list[tuple[str, str]], depth: int = 0) -> Any:
    """V as JSON types only (numpy scalars and arrays as Python values, tuples and sets as lists,
    a Path as text, an object's keys as text); a value that is no JSON, or nested deeper than
    MAX_NESTING, is None with (its path, a note) in NOTES. Numbers are not judged here."""
    if v is None or type(v) in (bool, int, float, str):
        return v
    for plain in (bool, int, float, str):  # subclasses (numpy.float64, an IntEnum) as the plain type
        if isinstance(v, plain):
            return plain(v)
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, (list, tuple, set, frozenset, dict)) and depth >= MAX_NESTING:
        notes.append((path, f"{schema._key(path)} is nested deeper than {MAX_NESTING} levels: {_NOT_KEPT}"))
        return None
    if isinstance(v, dict):
        return {_text_key(k): _plain(f"{path}.{k}" if path else _text_key(k), x, notes, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(f"{path}[{i}]", x, notes, depth + 1) for i, x in enumerate(v)]
    if hasattr(v, "tolist"):  # a numpy scalar or array
        try:
            return _plain(path, v.tolist(), notes, depth)
        except (TypeError, ValueError):
            pass
    notes.append((path, f"{schema._key(path)} is a {type(v).__name__}, not a JSON value: {_NOT_KEPT}"))
    return None


def _text_key(k: Any) -> str:
    """An object's key as JSON writes it (1 -> '1', True -> 'true', None -> 'null'), anything else as str()."""
    if isinstance(k, str):
        return str(k)
    return json.dumps(k) if k is None or isinstance(k, (bool, int, float)) else str(k)


def _nested_fit(path: str, v: Any, notes: list[str]) -> Any:
    """V (plain JSON) with every nested number the number rule refuses as None, each with a note."""
    if isinstance(v, dict):
        return {k: _nested_fit(f"{path}.{k}", x, notes) for k, x in v.items()}
    if isinstance(v, list):
        return [_nested_fit(f"{path}[{i}]", x, notes) for i, x in enumerate(v)]
    why = schema.nested_number_problem(path, v)
    if why:
        notes.append(f"{why}: {_NOT_KEPT}")
        return None
    return v


def _value_fit(key: str, v: Any) -> tuple[Any, list[str]]:
    """(V as a row stores it under KEY, a note for each part of it not kept): a value check_row
    reads (schema.value_problem passes it)."""
    found: list[tuple[str, str]] = []
    v = _plain(key, v, found)
    notes = [n for _, n in found]
    if isinstance(v, (list, dict)):
        v = _nested_fit(key, v, notes)
    why = schema.value_problem(key, v)
    if why:
        notes.append(f"{why}: {_NOT_KEPT}")
        return None, notes
    return v, notes


def row_value(key: str, v: Any) -> Any:
    """V as a row stores it under KEY: what check_row accepts. A value it would refuse (a
    non-finite number, one past its unit's bound) becomes None (null), except a loss's NaN /
    +inf (a diverged training, kept as NaN / Infinity)."""
    return _value_fit(key, v)[0]


def _add_note(row: dict, key: str, note: str) -> None:
    """NOTE in ROW's `<KEY>_note` (joined to a note already there; a name taken by another value
    gets a '_' more)."""
    name = f"{key}_note"
    while name in row and not (isinstance(row[name], str) and name.endswith("_note")):
        name += "_"
    old = row.get(name)
    row[name] = f"{old}; {note}" if old else note


def _shown(notes: list[str]) -> str:
    more = len(notes) - NOTES_PER_KEY
    return "; ".join(notes[:NOTES_PER_KEY]) + (f"; and {more} more value(s) {_NOT_KEPT}" if more > 0 else "")


def _study_of(row: dict) -> Any:
    """ROW's study where it is registered here (None: unknown here, or the registry cannot load)."""
    from bench.core.registry import studies

    try:
        return studies().get(str(row.get("study")))
    except KitError:
        return None


def _study_check(rows: list[dict]) -> str | None:
    """Why ROWS' own study (when registered here) refuses them (Study.check_rows: a required
    measurement missing, null, 0 or not a number), as the report runs it; None when it does not."""
    study = _study_of(rows[0]) if rows else None
    return study.check_rows(rows) if study is not None else None


def fit_row(row: dict, study: bool = True) -> dict:
    """ROW as the writer stores it: a row check_row reads (and, with STUDY, one its study's
    check_rows reads), nothing of it dropped but the values it would refuse, each null with a
    note in `<key>_note`. A status the schema does not know becomes `error`; a row its study
    refuses is kept as an `error` row whose reason says why. KitError where no row can be made
    (its study not named)."""
    out: dict[str, Any] = {}
    notes: dict[str, list[str]] = {}
    for k, v in row.items():
        key = _text_key(k)
        out[key], why = _value_fit(key, v)
        if why:
            notes[key] = why
    if schema.value_problem("study", out.get("study")):
        raise KitError(f"a row without a study name ({schema.show(row.get('study'))}) cannot be written")
    if out.get("status") is None:  # missing, or not one of STATUSES (its note says which)
        said = notes.pop("status", [f"'status' is missing: {_NOT_KEPT}"])
        notes["status"] = [n.replace(_NOT_KEPT, "written as error") for n in said]
        out["status"] = "error"
    for key, why in notes.items():
        _add_note(out, key, _shown(why))
    refused = _study_check([out]) if study else None
    if refused:
        reason = out.get("reason") if isinstance(out.get("reason"), str) else ""
        reason = f"{reason}; " if reason else ""
        out["reason"] = (reason + f"{refused}: kept as an error row, not as a measurement")[-schema.MAX_TEXT :]
        out["status"] = "error"
    return _fit_line(out)


_KEEP = frozenset({"study", "status"})


def _line(row: dict) -> str:
    return json.dumps(row) + "\n"


def _largest(row: dict) -> str | None:
    """The key of ROW's largest value (as JSON) that nulling shortens (one longer than the note
    that says so), not study or status; None when there is none."""
    sizes = [(n, k) for k, v in row.items() if k not in _KEEP and (n := len(json.dumps(v))) > NOTE_BYTES]
    return max(sizes)[1] if sizes else None


def _drop_largest(row: dict, why: str) -> bool:
    key = _largest(row)
    if key is None:
        return False
    v = row[key]
    size = len(json.dumps(v).encode())
    kind = f"a string of {len(v):,} characters" if isinstance(v, str) else f"{schema.show(v)} of {size:,} bytes as JSON"
    row[key] = None
    _add_note(row, key, f"{schema._key(key)} is {kind}: {why}: {_NOT_KEPT}")
    return True


def _fit_line(row: dict) -> dict:
    """ROW with its largest values nulled (each with a note) until its line fits ROWS_CAPS."""
    why = f"a rows line is at most {bounded.mib(ROWS_CAPS.line_bytes)}"
    while len(_line(row).encode()) > ROWS_CAPS.line_bytes:
        if not _drop_largest(row, why):
            raise KitError(
                f"a row of study {schema.show(row.get('study'))} cannot fit one rows line ({why}): its keys are too many or too long"
            )
    return row


def fit_rows(rows: list[dict], study: bool = True) -> list[dict]:
    """ROWS as the writer stores them (fit_row each), the file within ROWS_CAPS: past its size
    cap the largest values of all rows are nulled, each with a note. KitError for more rows than
    the line cap (nothing written: no study makes a hundredth of them)."""
    if len(rows) > ROWS_CAPS.lines:
        raise KitError(f"{len(rows):,} rows are more than a rows file holds ({ROWS_CAPS.lines:,} lines): nothing written")
    out = [fit_row(r, study) for r in rows]
    total = sum(len(_line(r).encode()) for r in out)
    why = f"a rows file is at most {bounded.mib(ROWS_CAPS.file_bytes)}"
    while total > ROWS_CAPS.file_bytes:
        sized = [(len(json.dumps(r[k])), i) for i, r in enumerate(out) if (k := _largest(r)) is not None]
        if not sized:
            raise KitError(f"the rows cannot fit one rows file ({why}): nothing written")
        i = max(sized)[1]
        before = len(_line(out[i]).encode())
        _drop_largest(out[i], why)
        total += len(_line(out[i]).encode()) - before
    return out


def rows_to_jsonl(rows: list[dict]) -> str:
    """The rows file of ROWS, fit as the writer stores them (fit_rows, without the study check)."""
    return "".join(_line(r) for r in fit_rows(rows, study=False))


def rows_to_csv(rows: list[dict]) -> str:
    """The CSV of ROWS as stored (call with fit_rows' rows: values are written as they are)."""
    keys: list[str] = [k for k in COMMON_KEYS if any(k in r for r in rows)]
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([csv_cell(k) for k in keys])
    for r in rows:
        w.writerow(["" if (v := r.get(k)) is None else csv_cell(v) for k in keys])
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
    """Append ROW (as the writer stores it: fit_row) to CELL_DIR/rows.partial.jsonl."""
    line = _line(fit_row(row, study=False))
    cell_dir.mkdir(parents=True, exist_ok=True)
    with open_nofollow(cell_dir / "rows.partial.jsonl", "a") as fh:
        fh.write(line)
        fh.flush()


def _reads_back(path: Path, rows: list[dict], text: str) -> str | None:
    """Why TEXT, the rows file of ROWS about to be written at PATH, would not read back whole
    (check_lines, and the study's check_rows as the report runs it), or None."""
    lines: list[tuple[int, bytes | None]] = list(enumerate(text.encode().splitlines(keepends=True), 1))
    got, problems = check_lines(path, lines)
    if problems or len(got) != len(rows):
        return problems[0] if problems else f"{path}: {len(got)} of {len(rows)} rows read back"
    return _study_check(rows)


def write_rows(cell_dir: Path, rows: list[dict]) -> None:
    """CSV first, JSONL last: rows.jsonl is the completion marker. The rows are fit first
    (fit_rows: every value the reader would refuse null, with a note), checked by the reader
    before they are written and read back after; rows.partial.jsonl is deleted only then.
    KitError (one line; rows.jsonl and rows.partial.jsonl as they were) when they would not read."""
    fitted = fit_rows(rows)
    path = cell_dir / "rows.jsonl"
    text = "".join(_line(r) for r in fitted)
    why = _reads_back(path, fitted, text)
    if why:
        raise KitError(f"the cell's rows would not read back ({why}): rows.jsonl not written, rows.partial.jsonl kept")
    atomic_write_text(cell_dir / "rows.csv", rows_to_csv(fitted))
    atomic_write_text(path, text)
    back, problems = read_rows_checked(path)
    if problems or len(back) != len(fitted):
        why = problems[0] if problems else f"{len(back)} of {len(fitted)} rows"
        raise KitError(f"{path} did not read back as written ({why}): rows.partial.jsonl kept")
    partial = cell_dir / "rows.partial.jsonl"
    if partial.exists() or partial.is_symlink():
        partial.unlink()


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=jsonable) + "\n")


def write_checked_json(path: Path, obj: dict, kind: str) -> None:
    """OBJ as side file PATH of schema KIND (system.json: "system"), every value the reader
    (schema.check) would refuse written as null, each named with why in `values_not_kept`
    ({path: why}); KitError (one line, nothing written) when it still would not read."""
    found: list[tuple[str, str]] = []
    plain = _plain("", obj, found)
    if not isinstance(plain, dict):
        raise KitError(f"{path}: a {type(obj).__name__}, not an object: not written")
    kept = dict(found)
    kept |= {where: f"{why}: {_NOT_KEPT}" for where, why in schema.fit(kind, plain).items()}
    if kept:
        plain["values_not_kept"] = {k[:200]: v[:1000] for k, v in kept.items()}
    why = schema.check(kind, plain)
    if why:
        raise KitError(f"{path} would not read back ({why}): not written")
    atomic_write_text(path, json.dumps(plain, indent=2, sort_keys=True, allow_nan=False) + "\n")


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
