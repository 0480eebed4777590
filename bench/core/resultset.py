"""Cells under any number of result dirs, with their provenance: what the report and the
matrix summary read. The standard library and the schemas (bench.core.schema, pydantic) only:
the host side uses it.

Reading never trusts the tree: symlinks are not followed (files or dirs), nothing deeper
than MAX_DEPTH levels below a named dir is looked at (`walk`), every file is held to its
schema (bench.core.schema: rows line by line, and the study's required measurements;
system.json, cell.json, platforms.json whole, read within JSON_CAPS), and a cell with a line or
a side file that cannot be trusted is reported as `corrupt` with the file, line and key named,
never half-read. A cell dir with no rows.jsonl (killed, Ctrl-C, disk full) is reported as
`interrupted`. One cell is read once: a dir reached twice (named twice, or inside another
named dir) or a second copy of one run is skipped with a line. A measurement has one identity, its
rows' own cell id and run ids (`ResultCell.identity`), never its dir's name or its run's label: a
copy under renamed dirs, another label or another parent is the same measurement.

What is read is bounded as a whole, not only file by file (`Budget`): a cell whose files hold more
than MAX_CELL_BYTES, the cells past MAX_READ_BYTES of one set, and those that would make the
report's one long table (rows x distinct keys) larger than MAX_TABLE_VALUES are left out, listed
`corrupt` with the reason, and one `skipped:` line names them. A name that is not UTF-8 (a dir or
file named in another encoding) is never read: `walk` leaves it out and one line names it, its
bytes that are not UTF-8 shown as `\\xNN` (`shown_name`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import bounded, schema
from bench.core.errors import KitError, UsageError
from bench.core.rows import is_regular, read_rows_checked, status_of

CELL_FILES = ("rows.jsonl", "rows.partial.jsonl", "cell.json")
# How deep a result tree is read, in directory levels below each named dir. A result dir is
# <dir>/<study>/<cell>/ (a cell may hold a folder of its own, e.g. profile's trace/: 3 levels);
# sets of runs add levels: results/reference/<set>/<run>/<study>/<cell>/trace/ is 6 below
# results/. Nothing deeper is looked at: a tree thousands of levels deep costs nothing.
MAX_DEPTH = 8
MAX_JSON_BYTES = 16 << 20  # system.json is under 0.1 MB
JSON_CAPS = bounded.Caps(file_bytes=MAX_JSON_BYTES)

# What one set of result dirs may cost to read (`Budget`). Measured: a cell's rows, system.json and
# cell.json read into Python take 10x their bytes for the kit's rows, up to 30x for a file of empty
# lists; the report's long table holds rows x distinct keys values (35 bytes each in pandas), and
# pyarrow's reader is quadratic in distinct keys (32 MB of rows of 40 new keys each took 21 GB;
# bench.core.columnar now reads such a batch line by line). The committed references, 22 runs and
# 356 cells, read 14 MB (the largest cell 0.3 MB) and make a table of 11,000 rows x 480 keys.
MAX_CELL_BYTES = 16 << 20  # a cell's rows.jsonl, rows.partial.jsonl, system.json and cell.json together (each
# file has its own cap of 16 MB too: a rows file past it, or one of a line past 1 MB, is corrupt as it always was)
MAX_READ_BYTES = 64 << 20  # every cell of one set
MAX_TABLE_VALUES = 16_000_000  # rows x distinct row and parameter keys over the set's cells
READ_GROUP_BYTES = 4 << 20  # rows files read (and checked) together: what is held unparsed at once


def utf8(name: object) -> bool:
    """Whether NAME (a str from the file system) is UTF-8: a name in another encoding comes back
    from os.listdir with surrogate escapes, which no UTF-8 output (a file, JSON for SQLite,
    Arrow) can hold."""
    try:
        str(name).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(p: object) -> str:
    """P as text any output can hold: the bytes of its name that are not UTF-8 as `\\xNN`."""
    return os.fsencode(str(p)).decode("utf-8", "backslashreplace")


def walk(
    top: Path, max_depth: int = MAX_DEPTH, not_utf8: list[Path] | None = None
) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk(TOP) top-down, as (dir, subdir names, file names): symlinked dirs neither
    followed nor listed, subdirs sorted, no dir more than MAX_DEPTH levels below TOP, and no dir
    or file whose name is not UTF-8 (each appended to NOT_UTF8 when given). Callers may prune the
    subdir list in place, as with os.walk."""
    base = len(Path(top).parts)
    for root, subdirs, files in os.walk(top, followlinks=False):
        here = Path(root)
        bad = [n for n in (*subdirs, *files) if not utf8(n)]
        if bad:
            if not_utf8 is not None:
                not_utf8 += [here / n for n in sorted(bad)]
            files = [f for f in files if utf8(f)]
        if len(here.parts) - base >= max_depth:
            subdirs[:] = []
        else:
            subdirs[:] = sorted(s for s in subdirs if utf8(s) and not (here / s).is_symlink())
        yield here, subdirs, files


@dataclass
class ResultCell:
    dir: Path
    rows: list[dict]
    system: dict = field(default_factory=dict)
    state: str | None = None  # corrupt | interrupted: overrides what the rows say
    note: str = ""  # why, for those states
    spec: dict = field(default_factory=dict)  # cell.json, when the dir has one
    origin: str = ""  # its run's folder as named from the dir a report was given (collect sets it)

    @property
    def status(self) -> str:
        return self.state or status_of(self.rows) or "skipped"

    @property
    def study(self) -> str:
        return str(self.first.get("study") or self.dir.parent.name)

    @property
    def first(self) -> dict:
        if self.rows:
            return self.rows[0]
        return {
            "study": self.spec.get("study"),
            "backend": self.spec.get("backend"),
            "variant": self.spec.get("variant"),
            "cell": self.dir.name,
        }

    @property
    def ok_rows(self) -> list[dict]:
        return [r for r in self.rows if r.get("status") == "ok"]

    @property
    def reason(self) -> str:
        if self.note:
            return self.note
        return next((str(r.get("reason") or "") for r in self.rows if r.get("status") in ("error", "skipped", "interrupted")), "")

    @property
    def device(self) -> str:
        """What the cell ran on: the row's device, else the GPU for GPU backends or the CPU model."""
        dev = next((r.get("device") for r in self.rows if r.get("device")), None)
        if dev:
            return str(dev)
        backend = str(self.first.get("backend", ""))
        gpu = (self.system.get("gpu") or {}).get("name")
        if any(t in backend for t in ("cuda", "mps", "cupy")) and gpu:
            return str(gpu)
        cores = self.system.get("cpu_affinity") or self.system.get("cpu_logical_cores")
        return str(self.system.get("cpu_model") or "unknown CPU") + (f", {cores} cores" if cores else "")

    @property
    def repeat(self) -> int:
        r = self.first.get("repeat", self.spec.get("repeat", 0))
        return r if isinstance(r, int) and not isinstance(r, bool) else 0

    @property
    def flags(self) -> str:
        """The cell's noise/validity flags (bench.core.noise), "" when clean or not recorded."""
        return str(next((r.get("flags") for r in self.rows if r.get("flags")), "") or "")

    @property
    def config_key(self) -> str:
        """What repeats of one configuration share: the cell spec without its repeat, plus the
        host and device it ran on, the run and the environment (one configuration on two hosts, in
        two runs of one host, or natively and in a container in one results dir, is two groups:
        repeat 0 of one is not repeat 0 of the other)."""
        spec = dict(self.spec) if self.spec else {k: self.first.get(k) for k in ("study", "backend", "variant", "seed")}
        spec.pop("repeat", None)
        spec.pop("name", None)
        where = {"host": self.first.get("host"), "device": self.device, "run": self.run_label, "env": self.environment}
        return json.dumps({"spec": spec, **where}, sort_keys=True, default=str)

    @property
    def environment(self) -> str:
        """Where it ran: the label the matrix put into the cell (Cell.env: runtime, image or
        Python, the timing libraries' versions), else the runtime and image system.json names
        (cells made before environments were told apart)."""
        env = self.spec.get("env")
        if isinstance(env, str) and env:
            return env
        img = str(self.system.get("image_id") or self.first.get("image_id") or "native")
        runtime = str(self.system.get("runtime") or "native")
        return runtime if img == "native" else f"{runtime} {img[:19]}"

    @property
    def env_name(self) -> str:
        """The environment as a reader tells two apart: `native torch 2.14.1`, `container torch
        2.10.0` (the runtime and torch's version from system.json, else from Cell.env); where
        neither says, the runtime alone."""
        runtime = str(self.system.get("runtime") or "").strip()
        libs = self.system.get("libraries")
        torch = str(libs.get("torch") or "") if isinstance(libs, dict) else ""
        env = self.spec.get("env")
        if isinstance(env, str) and env and not (runtime and torch):
            head = env.split("-")
            runtime = runtime or head[0]
            torch = torch or next((h.removeprefix("torch") for h in head[1:] if h.startswith("torch")), "")
        return f"{runtime or 'native'}" + (f" torch {torch}" if torch else "")

    @property
    def run_label(self) -> str:
        """Which run it came from: the label the run recorded in system.json, else its run's
        folder (<run>/<study>/<cell>) as named from the dir the report was given
        (`H100-80GB-HBM3-rerun/run1`), else that folder's name."""
        label = self.system.get("run_label")
        if isinstance(label, str) and label.strip():
            return label.strip()
        return self.origin or self.dir.parent.parent.name or str(self.dir.parent.parent)

    @property
    def identity(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The measurement this is: its rows' own cell ids and run ids (None when its rows carry no
        run id). Never the dir's name, the run's label or where it lies: two copies of one run under
        other names are one measurement, and a cell run again (another run id) is another."""
        runs = tuple(sorted({str(r["run_id"]) for r in self.rows if r.get("run_id")}))
        if not runs:
            return None
        ids = tuple(sorted({str(r["cell"]) for r in self.rows if r.get("cell")})) or (self.dir.name,)
        return ids, runs

    @property
    def cell_id(self) -> str:
        """The cell's id as its rows name it (the dir's name only where no row does)."""
        return str(next((r["cell"] for r in self.rows if r.get("cell")), "") or self.dir.name)

    @property
    def unclean_source(self) -> bool:
        src = self.system.get("kit_source") or {}
        return bool(src.get("dirty")) or str(self.system.get("kit_git_sha") or "").endswith("-dirty")


def json_file(path: Path) -> dict:
    """The JSON object in PATH; {} for a symlink, a file over MAX_JSON_BYTES, or anything that
    is not a JSON object (unreadable, not JSON, nested past the parser's limit)."""
    obj, _why = _json_object(path)
    return obj


def _json_object(path: Path) -> tuple[dict, str | None]:
    """(the JSON object in PATH, None), or ({}, why it is not one)."""
    try:
        raw = bounded.read_bytes(path, JSON_CAPS)
    except KitError as err:
        return {}, str(err)
    except (OSError, EOFError) as err:
        return {}, f"{path}: cannot be read ({err})"
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return {}, f"{path}: not JSON the kit can read ({type(err).__name__})"
    if not isinstance(obj, dict):
        return {}, f"{path}: not a JSON object"
    return obj, None


def checked_json(path: Path, kind: str) -> tuple[dict, str | None]:
    """(the object in side file PATH, None) when it fits schema KIND (bench.core.schema.check);
    ({}, 'path: why') when it does not; ({}, None) when there is no such file."""
    if not os.path.lexists(path):
        return {}, None
    obj, why = _json_object(path)
    if why is None:
        bad = schema.check(kind, obj)
        why = f"{path}: {bad}" if bad else None
    return (obj, None) if why is None else ({}, why)


def _study_check(rows: list[dict]) -> str | None:
    """The study's own row check (required metrics and their types), when the study is known here."""
    from bench.core.registry import studies

    study = studies().get(str(rows[0].get("study")))
    return study.check_rows(rows) if study else None


def _here(d: Path, line: str) -> str:
    """A problem LINE about a file of cell dir D, naming the file by its name alone."""
    return line.removeprefix(f"{d}{os.sep}")


def load_cell(
    d: Path, problems: list[str] | None = None, read: dict[Path, tuple[list[dict], list[str]]] | None = None
) -> ResultCell | None:
    """The cell in dir D (None when D holds no cell). Lines and side files that cannot be
    trusted are appended to PROBLEMS; the cell is then `corrupt`. READ: rows files already read
    and checked ({path: (rows, problems)}, bench.core.columnar), taken instead of reading them."""
    problems = problems if problems is not None else []
    system, sys_bad = checked_json(d / "system.json", "system")
    spec, spec_bad = checked_json(d / "cell.json", "cell_spec")
    side = [w for w in (spec_bad, sys_bad) if w]
    rows_path = d / "rows.jsonl"
    if os.path.lexists(rows_path):
        rows, bad = read[rows_path] if read is not None and rows_path in read else read_rows_checked(rows_path)
        if not bad and rows:
            why = _study_check(rows)
            if why:
                bad = [f"{rows_path}: {why}"]
        bad += side
        if bad:
            problems += bad
            note = f"cannot be trusted: {_here(d, bad[0])}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
            return ResultCell(d, rows, system, "corrupt", note, spec)
        return ResultCell(d, rows, system, spec=spec) if rows else None
    partial, bad = read_rows_checked(d / "rows.partial.jsonl") if os.path.lexists(d / "rows.partial.jsonl") else ([], [])
    problems += bad + side
    if not partial and not is_regular(d / "cell.json"):
        return None
    marked = [{**r, "status": "incomplete"} for r in partial]
    if side:
        return ResultCell(d, marked, system, "corrupt", f"cannot be trusted: {_here(d, side[0])}", spec)
    steps = len(partial)
    note = f"did not finish (killed, interrupted or out of disk) after {steps} step(s); rerun to resume"
    return ResultCell(d, marked, system, "interrupted", note, spec)


def not_utf8_line(top: Path, names: list[Path]) -> str:
    """The one line for the names under TOP that were not read because they are not UTF-8."""
    shown = ", ".join(shown_name(n) for n in names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return (
        f"skipped: {len(names)} name(s) under {shown_name(top)} that are not UTF-8, not read: {shown}; rename them to read them"
    )


def no_results(d: Path, not_utf8: list[Path]) -> str:
    """Why D holds no results: none there, or (NOT_UTF8) only under names that are not UTF-8."""
    unread = f"; {len(not_utf8)} name(s) there are not UTF-8 and not read, e.g. {shown_name(not_utf8[0])}" if not_utf8 else ""
    return f"no results under {d} (expected <dir>/<study>/<cell>/rows.jsonl{unread})"


def holding_results(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """(the PATHS that hold results, one line per path that holds none and why) for commands
    that merge what they are given (`report`, `export`): a shell glob such as
    results/reference/* also names README.md, baselines/ and report folders. A path whose name
    is not UTF-8 is not read. KitError when none holds results."""
    keep: list[Path] = []
    why: list[str] = []
    for p in map(Path, paths):
        if not utf8(p):
            why.append(f"{shown_name(p)} has a name that is not UTF-8 (not read: rename it)")
        elif p.is_symlink() or not p.is_dir():
            what = "is a symlink" if p.is_symlink() else "is not a directory" if p.exists() else "does not exist"
            why.append(f"{p} {what}")
        else:
            bad: list[Path] = []
            if any(any(f in files for f in (*CELL_FILES, "platforms.json")) for _, _, files in walk(p, not_utf8=bad)):
                keep.append(p)
            else:
                why.append(no_results(p, bad))
    if not keep:
        one = why[0] if why[0].startswith("no results") else f"result dir {why[0]}"
        # paths that are not there (or not dirs) are a usage error; dirs that hold nothing, a failed run
        kind = KitError if any(w.startswith("no results") for w in why) else UsageError
        raise kind(one if len(why) == 1 else f"none of the {len(why)} paths holds results: {'; '.join(why)}")
    return keep, [f"skipped: {w}" for w in why]


@dataclass
class ResultSet:
    """What result dirs hold: cells, platform notes, problem lines (files that cannot be
    trusted) and skipped lines (what was read once although reached twice, or left out)."""

    cells: list[ResultCell]
    notes: list[dict]
    problems: list[str]
    skipped: list[str] = field(default_factory=list)
    read: set[Path] = field(default_factory=set)  # every cell dir read, skipped copies too (resolved)


def _file_bytes(d: Path, files: list[str]) -> int:
    """The bytes of cell dir D's files that are read (regular files only: a link is not read)."""
    total = 0
    for f in (*CELL_FILES, "system.json"):
        if f in files:
            try:
                st = os.lstat(d / f)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def _mb(n: float) -> str:
    return f"{n / (1 << 20):.1f} MB"


@dataclass
class Budget:
    """What one set may cost to read (the MAX_* bounds above): bytes of files per cell and per set,
    and values of the report's long table (rows x distinct keys). A cell past one is left out: not
    read (bytes), or read and dropped (table), listed `corrupt` with the reason; `line()` is the one
    line that names them."""

    cell_bytes: int = MAX_CELL_BYTES
    read_bytes: int = MAX_READ_BYTES
    table_values: int = MAX_TABLE_VALUES
    spent: int = 0
    rows: int = 0
    keys: set[str] = field(default_factory=set)
    left: list[tuple[Path, str]] = field(default_factory=list)  # (cell dir, why)

    def bytes_ok(self, d: Path, n: int) -> str | None:
        """Why cell dir D, whose files hold N bytes, is not read (None: it is, and N is spent)."""
        if n > self.cell_bytes:
            return f"its files hold {_mb(n)}, past a cell's read budget of {_mb(self.cell_bytes)}"
        if self.spent + n > self.read_bytes:
            return f"past the read budget of {_mb(self.read_bytes)} for one set (report fewer dirs at once)"
        self.spent += n
        return None

    def table_ok(self, cell: ResultCell) -> str | None:
        """Why CELL's rows are dropped (None: they are kept, and counted)."""
        keys = {k for r in cell.rows for k in r} | {f"param_{k}" for k in (cell.spec.get("params") or {})}
        new = keys - self.keys
        if (self.rows + len(cell.rows)) * (len(self.keys) + len(new)) > self.table_values:
            return (
                f"its {len(cell.rows)} rows and {len(keys)} keys would take the report's table past "
                f"{self.table_values:,} values (rows x keys; report fewer dirs at once)"
            )
        self.rows += len(cell.rows)
        self.keys |= new
        return None

    def line(self) -> str | None:
        if not self.left:
            return None
        names = ", ".join(shown_name(d) for d, _ in self.left[:3]) + (
            f" (+{len(self.left) - 3} more)" if len(self.left) > 3 else ""
        )
        return f"skipped: {len(self.left)} cell(s) left out, past the read budget: {names}: {self.left[0][1]}"


def collect_set(dirs: list[Path], budget: Budget | None = None) -> ResultSet:
    """Every cell under DIRS, each read once, within BUDGET (default: the MAX_* bounds). Every dir
    must exist; a dir with no cells and no notes is an error. Symlinked files and dirs are not
    followed, nor dirs below MAX_DEPTH, nor names that are not UTF-8. A dir named twice, or inside a
    dir named before it, is skipped; a cell dir reached again, or a second copy of one measurement
    (ResultCell.identity: the same cell id and run ids, under any dir name, label or parent), is
    skipped; one line says so. Linear in the dirs and cells (a set of the named dirs, not a scan)."""
    rs = ResultSet([], [], [])
    budget = budget or Budget()
    named: dict[Path, Path] = {}  # resolved -> as named
    plat_files: set[Path] = set()
    runs: dict[tuple, Path] = {}  # identity -> the cell dir it was first read from
    # the dirs to read, in order, each walked once (DIR, why it is skipped or "", its tree, names not UTF-8)
    todo: list[tuple[Path, str, list[tuple[Path, list[str], list[str]]], list[Path]]] = []
    for d in map(Path, dirs):
        if not utf8(d):
            raise UsageError(f"result dir {shown_name(d)} has a name that is not UTF-8: rename it to read it")
        if not d.is_dir():
            todo.append((d, "missing", [], []))
            break  # its error comes in its turn, after the dirs named before it
        real = d.resolve()
        first = next((named[a] for a in (real, *real.parents) if a in named), None)
        if first is not None:
            todo.append((d, "named twice" if first.resolve() == real else f"inside {first}", [], []))
            continue
        named[real] = d
        bad: list[Path] = []
        todo.append((d, "", list(walk(d, not_utf8=bad)), bad))
    # which cells are read at all (bytes), in the order they are met; their rows files in groups
    left: dict[Path, str] = {}  # resolved cell dir -> why it is not read
    groups: list[list[Path]] = [[]]
    group_of: dict[Path, int] = {}  # resolved cell dir -> its group of rows files
    size = 0
    for _d, _skip, tree, _bad in todo:
        for here, _subdirs, files in tree:
            if not any(f in files for f in CELL_FILES):
                continue
            real = here.resolve()
            if real in left or real in group_of:
                continue
            n = _file_bytes(here, files)
            why = budget.bytes_ok(here, n)
            if why is not None:
                left[real] = why
                continue
            if size and size + n > READ_GROUP_BYTES:
                groups.append([])
                size = 0
            group_of[real] = len(groups) - 1
            if "rows.jsonl" in files:
                groups[-1].append(here / "rows.jsonl")
                size += n
    read: dict[Path, tuple[list[dict], list[str]]] = {}
    done_group = -1
    met: set[Path] = set()  # cell dirs met in this pass (resolved)
    from bench.core.columnar import read_rows_many

    for d, skip, tree, bad in todo:
        if skip == "missing":
            raise UsageError(f"result dir {d} does not exist")
        if skip:
            rs.skipped.append(f"skipped: {d}: {skip}, already read (each cell is counted once)")
            continue
        if bad:
            rs.skipped.append(not_utf8_line(d, bad))
        real = d.resolve()
        found = False
        again: dict[Path, int] = {}  # where a cell of this dir was already read from -> how many
        for here, _subdirs, files in tree:
            if any(f in files for f in CELL_FILES):
                here_real = here.resolve()
                if here_real in met:  # a cell dir reached again (a dir named after one inside it)
                    if here_real in rs.read:
                        found = True
                        again[here_real.parent.parent] = again.get(here_real.parent.parent, 0) + 1
                    continue
                met.add(here_real)
                if here_real in left:
                    found = True
                    rs.read.add(here_real)
                    budget.left.append((here, left[here_real]))
                    rs.cells.append(ResultCell(here, [], {}, "corrupt", f"not read: {left[here_real]}"))
                    continue
                g = group_of.get(here_real, -1)
                if g > done_group:  # the next group of rows files, read and checked at once
                    read = read_rows_many(groups[g])
                    done_group = g
                cell = load_cell(here, rs.problems, read)
                read.pop(here / "rows.jsonl", None)
                if cell is not None:
                    found = True
                    rs.read.add(here_real)
                    key = cell.identity
                    prior = runs.get(key) if key else None
                    if prior is not None:
                        again[prior.parent.parent] = again.get(prior.parent.parent, 0) + 1
                        continue
                    why = budget.table_ok(cell)
                    if why is not None:
                        budget.left.append((here, why))
                        rs.cells.append(ResultCell(here, [], {}, "corrupt", f"not read: {why}", cell.spec))
                        continue
                    if key:
                        runs[key] = here
                    run = here.parent.parent
                    try:
                        cell.origin = str(Path(real.name) / run.resolve().relative_to(real))
                    except ValueError:
                        cell.origin = run.name
                    cell.origin = cell.origin.removesuffix("/.")
                    rs.cells.append(cell)
            if "platforms.json" in files and (here / "platforms.json").resolve() not in plat_files:
                plat_files.add((here / "platforms.json").resolve())
                plat, why = checked_json(here / "platforms.json", "platforms")
                if why:
                    rs.problems.append(why)
                for name, info in plat.items():
                    rs.notes.append({"platform": name, **info, "source": str(here)})
                found = found or bool(plat) or bool(why)
        for where, n in again.items():
            rs.skipped.append(f"skipped: {n} cell(s) under {d}: the same runs were already read from {where}")
        if not found:
            raise KitError(no_results(d, bad))
    line = budget.line()
    if line:
        rs.skipped.append(line)
    return rs


def collect(dirs: list[Path]) -> tuple[list[ResultCell], list[dict], list[str]]:
    """(cells, platform notes, problems) of collect_set(DIRS)."""
    rs = collect_set(dirs)
    return rs.cells, rs.notes, rs.problems


def load_cells(dirs: list[Path]) -> list[ResultCell]:
    """ResultCells of exactly these cell dirs (those holding a cell)."""
    return [c for c in (load_cell(Path(d)) for d in dirs) if c is not None]


def group_repeats(cells: list[ResultCell]) -> list[list[ResultCell]]:
    """Cells grouped by configuration (ResultCell.config_key), each group sorted by repeat;
    groups in the order their first cell appears."""
    groups: dict[str, list[ResultCell]] = {}
    for c in cells:
        groups.setdefault(c.config_key, []).append(c)
    return [sorted(g, key=lambda c: c.repeat) for g in groups.values()]
