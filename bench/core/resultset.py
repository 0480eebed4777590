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
named dir) or a second copy of one run (the same cell and run_id) is skipped with a line.
"""

from __future__ import annotations

import json
import os
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


def walk(top: Path, max_depth: int = MAX_DEPTH) -> Iterator[tuple[Path, list[str], list[str]]]:
    """os.walk(TOP) top-down, as (dir, subdir names, file names): symlinked dirs neither
    followed nor listed, subdirs sorted, no dir more than MAX_DEPTH levels below TOP. Callers
    may prune the subdir list in place, as with os.walk."""
    base = len(Path(top).parts)
    for root, subdirs, files in os.walk(top, followlinks=False):
        here = Path(root)
        if len(here.parts) - base >= max_depth:
            subdirs[:] = []
        else:
            subdirs[:] = sorted(s for s in subdirs if not (here / s).is_symlink())
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


def holding_results(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """(the PATHS that hold results, one line per path that holds none and why) for commands
    that merge what they are given (`report`, `export`): a shell glob such as
    results/reference/* also names README.md, baselines/ and report folders. KitError when none
    holds results."""
    keep: list[Path] = []
    why: list[str] = []
    for p in map(Path, paths):
        if p.is_symlink() or not p.is_dir():
            what = "is a symlink" if p.is_symlink() else "is not a directory" if p.exists() else "does not exist"
            why.append(f"{p} {what}")
        elif any(any(f in files for f in (*CELL_FILES, "platforms.json")) for _, _, files in walk(p)):
            keep.append(p)
        else:
            why.append(f"no results under {p} (expected <dir>/<study>/<cell>/rows.jsonl)")
    if not keep:
        one = why[0] if why[0].startswith("no results") else f"result dir {why[0]}"
        # paths that are not there (or not dirs) are a usage error; dirs that hold nothing, a failed run
        kind = KitError if any(w.startswith("no results") for w in why) else UsageError
        raise kind(one if len(why) == 1 else f"none of the {len(why)} paths holds results: {'; '.join(why)}")
    return keep, [f"skipped: {w}" for w in why]


@dataclass
class ResultSet:
    """What result dirs hold: cells, platform notes, problem lines (files that cannot be
    trusted) and skipped lines (what was read once although reached twice)."""

    cells: list[ResultCell]
    notes: list[dict]
    problems: list[str]
    skipped: list[str] = field(default_factory=list)
    read: set[Path] = field(default_factory=set)  # every cell dir read, skipped copies too (resolved)


def _inside(p: Path, q: Path) -> bool:
    return p == q or q in p.parents


def collect_set(dirs: list[Path]) -> ResultSet:
    """Every cell under DIRS, each read once. Every dir must exist; a dir with no cells and no
    notes is an error. Symlinked files and dirs are not followed, nor dirs below MAX_DEPTH. A
    dir named twice, or inside a dir named before it, is skipped; a cell dir reached again, or
    a second copy of one run (the same cell id and run ids), is skipped; one line says so."""
    rs = ResultSet([], [], [])
    named: list[tuple[Path, Path]] = []  # (as named, resolved)
    cell_dirs: set[Path] = set()
    plat_files: set[Path] = set()
    runs: dict[tuple[str, tuple[str, ...]], Path] = {}
    # the dirs to read, in order, each walked once; then every rows file read and checked at once
    todo: list[tuple[Path, str, list[tuple[Path, list[str], list[str]]]]] = []  # (dir, why it is skipped or "", its tree)
    for d in map(Path, dirs):
        if not d.is_dir():
            todo.append((d, "missing", []))
            break  # its error comes in its turn, after the dirs named before it
        real = d.resolve()
        first = next((n for n, r in named if _inside(real, r)), None)
        if first is not None:
            todo.append((d, "named twice" if first.resolve() == real else f"inside {first}", []))
            continue
        named.append((d, real))
        todo.append((d, "", list(walk(d))))
    from bench.core.columnar import read_rows_many

    read = read_rows_many([here / "rows.jsonl" for _, _, tree in todo for here, _, files in tree if "rows.jsonl" in files])
    for d, skip, tree in todo:
        if skip == "missing":
            raise UsageError(f"result dir {d} does not exist")
        if skip:
            rs.skipped.append(f"skipped: {d}: {skip}, already read (each cell is counted once)")
            continue
        real = d.resolve()
        found = False
        again: dict[Path, int] = {}  # where a cell of this dir was already read from -> how many
        for here, _subdirs, files in tree:
            if any(f in files for f in CELL_FILES):
                cell = load_cell(here, rs.problems, read)
                if cell is not None:
                    found = True
                    rs.read.add(here.resolve())
                    key = (here.name, tuple(sorted({str(r["run_id"]) for r in cell.rows if r.get("run_id")})))
                    prior = here.resolve() if here.resolve() in cell_dirs else runs.get(key) if key[1] else None
                    if prior is not None:
                        again[prior.parent.parent] = again.get(prior.parent.parent, 0) + 1
                        continue
                    cell_dirs.add(here.resolve())
                    if key[1]:
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
            raise KitError(f"no results under {d} (expected <dir>/<study>/<cell>/rows.jsonl)")
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
