"""Cells under any number of result dirs, with their provenance: what the report and the
matrix summary read. Standard library only (the host side uses it).

Reading never trusts the tree: symlinks are not followed (files or dirs), nothing deeper
than MAX_DEPTH levels below a named dir is looked at (`walk`), every row is checked
(bench.core.rows.check_row: types, finite and possible numbers, bounded line and file sizes;
plus the study's own check), and a cell with a line that cannot be trusted is reported as
`corrupt` with the line named, never half-read. A cell dir with no rows.jsonl (killed,
Ctrl-C, disk full) is reported as `interrupted`. JSON side files (system.json, cell.json,
platforms.json) over MAX_JSON_BYTES, or that cannot be parsed, read as empty.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import KitError, UsageError
from bench.core.rows import is_regular, read_rows_checked, status_of

CELL_FILES = ("rows.jsonl", "rows.partial.jsonl", "cell.json")
# How deep a result tree is read, in directory levels below each named dir. A result dir is
# <dir>/<study>/<cell>/ (a cell may hold a folder of its own, e.g. profile's trace/: 3 levels);
# sets of runs add levels: results/reference/<set>/<run>/<study>/<cell>/trace/ is 6 below
# results/. Nothing deeper is looked at: a tree thousands of levels deep costs nothing.
MAX_DEPTH = 8
MAX_JSON_BYTES = 16 << 20  # system.json is under 0.1 MB


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
        host and device it ran on and the run (one configuration on two hosts, or in two runs of
        one host, is two groups: repeat 0 of one run is not repeat 0 of another)."""
        spec = dict(self.spec) if self.spec else {k: self.first.get(k) for k in ("study", "backend", "variant", "seed")}
        spec.pop("repeat", None)
        spec.pop("name", None)
        where = {"host": self.first.get("host"), "device": self.device, "run": self.run_label}
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
    if not is_regular(path):
        return {}
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_JSON_BYTES:
                return {}
            obj = json.loads(fh.read(MAX_JSON_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return {}
    return obj if isinstance(obj, dict) else {}


def _study_check(rows: list[dict]) -> str | None:
    """The study's own row check (required metrics and their types), when the study is known here."""
    from bench.core.registry import studies

    study = studies().get(str(rows[0].get("study")))
    return study.check_rows(rows) if study else None


def load_cell(d: Path, problems: list[str] | None = None) -> ResultCell | None:
    """The cell in dir D (None when D holds no cell). Bad lines are appended to PROBLEMS."""
    problems = problems if problems is not None else []
    system = json_file(d / "system.json")
    spec = json_file(d / "cell.json")
    rows_path = d / "rows.jsonl"
    if os.path.lexists(rows_path):
        rows, bad = read_rows_checked(rows_path)
        if not bad and rows:
            why = _study_check(rows)
            if why:
                bad = [f"{rows_path}: {why}"]
        if bad:
            problems += bad
            note = f"rows.jsonl cannot be trusted: {bad[0]}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
            return ResultCell(d, rows, system, "corrupt", note, spec)
        return ResultCell(d, rows, system, spec=spec) if rows else None
    partial, bad = read_rows_checked(d / "rows.partial.jsonl") if os.path.lexists(d / "rows.partial.jsonl") else ([], [])
    problems += bad
    if not partial and not is_regular(d / "cell.json"):
        return None
    steps = len(partial)
    note = f"did not finish (killed, interrupted or out of disk) after {steps} step(s); rerun to resume"
    return ResultCell(d, [{**r, "status": "incomplete"} for r in partial], system, "interrupted", note, spec)


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


def collect(dirs: list[Path]) -> tuple[list[ResultCell], list[dict], list[str]]:
    """(cells, platform notes, problems). Every dir must exist; a dir with no cells and no
    notes is an error. Symlinked files and dirs are not followed, nor dirs below MAX_DEPTH."""
    cells: list[ResultCell] = []
    notes: list[dict] = []
    problems: list[str] = []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise UsageError(f"result dir {d} does not exist")
        found = False
        for here, _subdirs, files in walk(d):
            if any(f in files for f in CELL_FILES):
                cell = load_cell(here, problems)
                if cell is not None:
                    run = here.parent.parent
                    try:
                        cell.origin = str(Path(d.resolve().name) / run.resolve().relative_to(d.resolve()))
                    except ValueError:
                        cell.origin = run.name
                    cell.origin = cell.origin.removesuffix("/.")
                    cells.append(cell)
                    found = True
            if "platforms.json" in files:
                plat = json_file(here / "platforms.json")
                for name, info in plat.items():
                    if isinstance(info, dict):
                        notes.append({"platform": name, **info, "source": str(here)})
                found = found or bool(plat)
        if not found:
            raise KitError(f"no results under {d} (expected <dir>/<study>/<cell>/rows.jsonl)")
    return cells, notes, problems


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
