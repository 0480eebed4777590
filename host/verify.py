"""`orchestrate.py verify DIR`: the reproducibility check CI runs on a result dir.

Every cell is checked for
  - schema: every row's `schema` is an integer from 1 to this kit's SCHEMA_VERSION (a newer
    one is an error: this kit cannot judge it);
  - provenance: cell.json present and its id (the hash of the spec) is the dir's name and the
    rows' `cell`; every row's `command` is, compared whole, the command rebuilt from cell.json
    (`python -m bench cell '<spec>' --out DIR [--data-dir DIR]` as bench.run.cell.reproduce_command
    writes it, its paths by the one rule for spliced values, host/cluster/splice.py): a word
    added anywhere (`; curl ... | sh`) fails the cell; host, device, image_id, lock_hash and dataset set; system.json present,
    with a kit git sha that is not "unknown" and the rows' image id and lock hash;
  - completeness: every dir holding a cell.json has rows; corrupt, empty and error cells fail;
    skipped cells pass when they say why; a cell stopped before it finished (Ctrl-C, SIGTERM or
    SIGHUP to the run, a kill of the scheduler, a full disk: rows with status `interrupted`, or
    cell.json and finished steps without rows.jsonl) is `interrupted`, with its reason, and is
    not a failure: a rerun of the same command finishes it (its provenance is still checked:
    cell.json, rows' schema, cell, study and command); a platform that failed (platforms.json)
    fails; with `--baseline NAME` every configuration of that baseline set must be present, and
    one whose only cells were interrupted is named as such;
  - equivalence and invariants: the checks a study records against a reference
    (Study.equivalence: present and passed) and what must hold in any honest run of it
    (Study.invariants: e.g. no point above its roof, latencies ordered);
  - baselines (results/reference/baselines/<study>.json, host/baselines.py): the final
    accuracy inside the band and the training-loss curve within the relative tolerance of the
    baseline entries for the cell's configuration (study, backend, variant, seed and every
    parameter, dataset name and checksum and epochs included) made on its own machine class in
    its own environment (else its class's in other environments, at the cross-environment
    tolerance; else every other class's, at the study's cross-class tolerance, measured on the
    baselines: host/baselines.py; the line says which, how much and why); its speed within the
    tolerance of the entries of its own machine class and
    environment (host/speed.py; another class: "no speed baseline for this class" on its
    line; `--speed off` skips it). A cell with no entry is listed as "no baseline" (a failure
    unless --allow-unbaselined is given: a check that checks nothing must not pass).

Output: one line per cell ("ok", "skipped", "no baseline", "interrupted" or "FAIL" with every
reason), then a summary naming the interrupted cells. Exit 0 when nothing failed (interrupted
cells are not failures, unless no cell finished at all: then nothing was verified), 1 when a cell
failed, 2 when DIR cannot be verified.

`--make-baseline DIR... --name NAME` writes NAME's entries into the baseline files from the
DIRs (which must each pass every check but the baselines); results/reference/README.md gives
the procedure. No scipy: the host venv (requirements/host.txt) runs it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.cell import Cell
from bench.core.errors import KitError, UsageError
from bench.core.request import Paths
from bench.core.resultset import ResultCell, json_file, walk
from bench.core.rows import SCHEMA_VERSION, is_regular
from host import speed
from host.baselines import (
    BASELINES_DIR,
    DEFAULT_ACC_MARGIN,
    DEFAULT_LOSS_RTOL,
    amount_free,
    band_overrides,
    check_part,
    cross_class_tolerances,
    entries,
    entry_key,
    load_baselines,
    set_name,
    write_set,
)
from host.compare import cell_name, config_label, config_of, load_set, match_key, parts

PROVENANCE_KEYS = ("host", "device", "image_id", "lock_hash", "dataset")


@dataclass
class CellVerdict:
    name: str
    dir: str
    status: str  # ok | skipped | no baseline | interrupted | FAIL
    why: list[str] = field(default_factory=list)  # failures
    info: list[str] = field(default_factory=list)  # what passed

    def line(self) -> str:
        text = "; ".join(self.why if self.status == "FAIL" else self.info)
        return f"{self.status:<11} {self.name} ({self.dir})" + (f": {text}" if text else "")


# ---------------------------------------------------------------------------- checks
COMMAND_FORM = "`python -m bench cell '<spec>' --out DIR [--data-dir DIR]`"


def _parse_command(cmd: object) -> tuple[dict | None, list[str], str]:
    """(the spec CMD holds, the words after it, '') or (None, [], why)."""
    if not isinstance(cmd, str) or not cmd.strip():
        return None, [], "no command"
    try:
        argv = shlex.split(cmd)
    except ValueError as err:
        return None, [], f"command cannot be parsed ({err})"
    if argv[:4] != ["python", "-m", "bench", "cell"] or len(argv) < 5:
        return None, [], "command is not `python -m bench cell '<spec>' ...`"
    try:
        spec = json.loads(argv[4])
    except (json.JSONDecodeError, RecursionError):
        return None, [], "command's cell spec is not JSON"
    return (spec, argv[5:], "") if isinstance(spec, dict) else (None, [], "command's cell spec is not an object")


def _spec_of(d: dict) -> Cell:
    return Cell.from_json(json.dumps(d))


def recorded_paths(words: list[str]) -> tuple[Paths | None, str]:
    """The --out and --data-dir of a recorded command's words after its spec: exactly `--out DIR`
    or `--out DIR --data-dir DIR`, each a path by the one rule for spliced values
    (host/cluster/splice.py); else (None, why)."""
    from host.cluster import splice

    if len(words) not in (2, 4) or words[0] != "--out" or (len(words) == 4 and words[2] != "--data-dir"):
        return None, f"command is not {COMMAND_FORM}: it holds other words after the spec"
    try:
        out = splice.check(words[1], "command's --out")
        data = splice.check(words[3], "command's --data-dir") if len(words) == 4 else None
    except KitError as err:
        return None, str(err)
    return Paths(Path(out), data), ""


def rebuilt_command(spec: Cell, recorded: object) -> tuple[str | None, str]:
    """(the command that reruns SPEC, cell.json's cell, as the kit writes it: bench.run.cell.
    reproduce_command with the --out and --data-dir RECORDED names, '') when RECORDED (a row's
    `command`) is exactly that command, compared whole: nothing before, inside or after it (`; cmd`,
    `| sh`, `$(...)`, a line break) that the rebuilt one has not; else (None, why). A recorded
    command is never run or shown: only the rebuilt one (host/export.py)."""
    from bench.run.cell import reproduce_command

    cmd_spec, words, bad = _parse_command(recorded)
    if cmd_spec is None:
        return None, bad
    try:
        same = _spec_of(cmd_spec).spec() == spec.spec()
    except KitError as err:
        return None, f"command's cell spec is invalid: {err}"
    if not same:
        return None, "command reruns a different spec than cell.json"
    paths, bad = recorded_paths(words)
    if paths is None:
        return None, bad
    rebuilt = reproduce_command(spec, paths)
    if recorded != rebuilt:
        return None, f"command is not the one cell.json rebuilds ({COMMAND_FORM}, as the kit writes it, and nothing else)"
    return rebuilt, ""


def check_provenance(cell: ResultCell, stopped: bool = False) -> list[str]:
    """What CELL's provenance lacks. STOPPED: an interrupted cell, whose settling row names no device
    or dataset and which wrote no system.json; everything it did write is checked."""
    why: list[str] = []
    if not is_regular(cell.dir / "cell.json") or not cell.spec:
        return ["no readable cell.json: the cell cannot be identified"]
    try:
        spec = _spec_of(cell.spec)
    except KitError as err:
        return [f"cell.json is not a cell spec: {err}"]
    if spec.id != cell.dir.name:
        why.append(f"cell.json hashes to {spec.id}, not the dir name")
    skipped = cell.status == "skipped"
    seen: set[str] = set()

    def add(msg: str) -> None:
        if msg not in seen:
            seen.add(msg)
            why.append(msg)

    for r in cell.rows:
        s = r.get("schema")
        if not isinstance(s, int) or isinstance(s, bool) or not 1 <= s <= SCHEMA_VERSION:
            add(f"row schema {s!r} is not 1..{SCHEMA_VERSION}")
        if r.get("cell") != cell.dir.name:
            add(f"row names cell {r.get('cell')!r}, not its dir")
        if r.get("study") != spec.study:
            add(f"row study {r.get('study')!r} is not cell.json's {spec.study!r}")
        rebuilt, bad = rebuilt_command(spec, r.get("command"))
        if rebuilt is None:
            add(bad)
        if not skipped and not (stopped and r.get("status") == "interrupted"):
            for k in PROVENANCE_KEYS:
                if not isinstance(r.get(k), str) or not r.get(k):
                    add(f"row lacks {k}")
    statuses = [r.get("status") for r in cell.rows]
    if (
        stopped
        and not cell.state
        and (statuses.count("interrupted") != 1 or statuses[-1] != "interrupted" or set(statuses) - {"incomplete", "interrupted"})
    ):
        why.append("rows are not a stopped cell's (its finished steps marked incomplete, then one interrupted row)")
    sysinfo = cell.system
    if not sysinfo:
        if not stopped:
            why.append("no system.json")
    else:
        sha = str(sysinfo.get("kit_git_sha") or "")
        if not sha or sha.startswith("unknown"):
            why.append(f"kit git sha is {sha or 'missing'!r}")
        for k in ("image_id", "lock_hash"):
            vals = {r.get(k) for r in cell.rows if r.get(k)}
            if not skipped and sysinfo.get(k) and vals and vals != {sysinfo.get(k)}:
                why.append(f"rows' {k} {sorted(map(str, vals))} is not system.json's {sysinfo.get(k)!r}")
    return why


def check_equivalence(cell: ResultCell) -> tuple[list[str], list[str]]:
    """(failures, what passed) of the checks the study records (Study.equivalence) and of what
    must hold in any honest run of it (Study.invariants)."""
    from host.compare import study_of

    s = study_of(cell.study)
    if s is None:
        return [], []
    why, info = s.equivalence(cell.rows)
    held = []
    for name, broken in s.invariants(cell.rows, cell.dir):
        if broken:
            why.append(f"{name} does not hold: {broken}")
        else:
            held.append(name)
    if held:
        info.append(f"{len(held)} invariant(s) hold")
    return why, info


# ---------------------------------------------------------------------------- verify
def unlisted_cell_dirs(d: Path, read: set[Path]) -> list[Path]:
    """Dirs holding a cell.json that no cell read covers (READ: resolved cell dirs; e.g. an empty rows.jsonl)."""
    have = read
    out = []
    for here, _subdirs, files in walk(d):  # as deep as collect() reads, symlinks not followed
        if "cell.json" in files and here.resolve() not in have:
            out.append(here)
    return out


def _key_or_none(c: ResultCell) -> str:
    try:
        return match_key(config_of(c), keep_checksum=True)
    except (KitError, TypeError, ValueError):
        return ""


def _amounts_differ(cell: ResultCell, es: list[dict]) -> str:
    """The line of a cell held to entries ES of its work at other measured amounts ("" for none)."""
    if not es:
        return ""
    mine = config_of(cell).get("params") or {}
    theirs: dict[str, set] = {}
    for e in es:
        for k, v in (e["config"].get("params") or {}).items():
            if k in mine and v != mine[k]:
                theirs.setdefault(k, set()).add(str(v))
    said = ", ".join(f"{k}={'/'.join(sorted(v))} (this cell {mine[k]})" for k, v in sorted(theirs.items()))
    return f"held to the entry of the same work measured at {said or 'another amount'}: no entry of its own amounts"


def verify(
    d: Path,
    baseline: str | None = None,
    strict: bool = True,
    bdir: Path = BASELINES_DIR,
    use_baselines: bool = True,
    with_speed: bool = True,
    speed_median: bool = False,
    speed_peers: list[Path] | None = None,
) -> dict:
    """Every check of the module docstring on DIR. KitError when DIR cannot be verified.
    SPEED_MEDIAN: each configuration's speed is the median over its repeats in DIR and in the
    SPEED_PEERS dirs (the same cells run again, each checked on its own first), each repeat's
    line giving that median, held to the baseline's median at the same tolerance: CI's recheck
    of a speed failure with fresh containers (.ci/speed-gate.sh)."""
    d = Path(d)
    rs = load_set(d, "verify", partial_ok=True)
    cells, notes = rs.cells, rs.notes
    baselines = load_baselines(bdir) if use_baselines else {}
    only = set_name(baseline) if baseline else None
    if only is not None:
        known = sorted({n for obj in baselines.values() for n in obj["sets"]})
        if only not in known:
            raise UsageError(f"no baseline set {only!r} in {bdir} (sets: {', '.join(known) or 'none'})")
    ents = entries(baselines, only) if use_baselines else []
    by_key: dict[str, list[dict]] = {}
    near: dict[str, list[dict]] = {}  # the same, without the measured amounts (baselines.amount_free)
    for e in ents:
        by_key.setdefault(entry_key(e) + "|" + e["part"], []).append(e)
        by_key.setdefault(entry_key(e), []).append(e)
        near.setdefault(entry_key(e, amounts=False) + "|" + e["part"], []).append(e)

    verdicts: list[CellVerdict] = []
    matched: set[int] = set()
    interrupted: dict[str, list[CellVerdict]] = {}  # configuration key -> its interrupted cells' verdicts
    cross = cross_class_tolerances(baselines) if use_baselines else {}
    for cdir in unlisted_cell_dirs(d, rs.read):  # a cell.json with an empty rows.jsonl: not silently dropped
        note = "cell.json but no rows (rows.jsonl empty)"
        cells.append(ResultCell(cdir, [], json_file(cdir / "system.json"), "empty", note, json_file(cdir / "cell.json")))
    peers: dict[str, list[ResultCell]] = {}
    if speed_peers and not speed_median:
        raise UsageError("--speed-peers pools repeats into a configuration's median: it needs --speed median")
    if speed_median:
        pooled = list(cells)
        for pd in speed_peers or []:
            if Path(pd).resolve() == d.resolve():
                raise UsageError(f"--speed-peers {pd}: the dir verified itself; name other runs of its cells")
            pooled += load_set(Path(pd), "verify --speed-peers", partial_ok=True).cells
        for c in pooled:
            if c.status == "ok" and not c.state:
                peers.setdefault(match_key(config_of(c), keep_checksum=True), []).append(c)
    for c in sorted(cells, key=lambda c: (c.study, str(c.dir))):
        try:
            name = cell_name(c)
        except KitError:
            name = f"{c.study} {c.dir.name}"
        v = CellVerdict(name, c.dir.name, "ok")
        stopped = c.status == "interrupted"  # the kit's settling row, or cell.json and steps without rows.jsonl
        if c.state in ("corrupt", "empty"):
            v.why.append(f"{c.state}: {c.note}")
        elif c.status == "error":
            v.why.append(f"error: {c.reason[:300] or 'no reason given'}")
        v.why += check_provenance(c, stopped)
        if not (stopped and not v.why):  # a failing cell is reported as itself, not also as missing
            matched.update(id(e) for e in by_key.get(_key_or_none(c), []))
        if stopped and not v.why:  # not a failure: the same command finishes it
            done = sum(r.get("status") == "incomplete" for r in c.rows) if not c.state else 0
            v.status = "interrupted"
            v.info = [f"stopped: {c.reason[:300] or 'no reason given'}" + (f"; {done} finished step row(s) kept" if done else "")]
            interrupted.setdefault(_key_or_none(c), []).append(v)
        elif c.status == "skipped" and not v.why:
            if not c.reason:
                v.why.append("skipped without a reason")
            v.status, v.info = "skipped", [f"skipped: {c.reason[:200]}"]
        elif c.status == "ok" and not c.state:
            eq_why, eq_info = check_equivalence(c)
            v.why += eq_why
            v.info += eq_info
            key = match_key(config_of(c), keep_checksum=True)
            unbased = []
            for p in parts(c):
                es = by_key.get(key + "|" + p, [])
                matched.update(id(e) for e in es)
                held_near = ""
                if not es:  # no entry of its own configuration: one that measured another amount of the same work
                    es = near.get(match_key(amount_free(config_of(c)), keep_checksum=True) + "|" + p, [])
                    held_near = _amounts_differ(c, es)
                if not es:
                    unbased.append(p)
                if es:
                    w, i = check_part(c, p, es, with_speed, peers.get(key), cross)
                    i = ([held_near] if held_near else []) + i
                    pre = f"[{p}] " if len(parts(c)) > 1 else ""
                    v.why += [pre + x for x in w]
                    v.info += [pre + x for x in i]
            if unbased and not v.why:
                if strict:
                    v.why.append("no baseline for " + ", ".join(unbased) + " (--allow-unbaselined lists it instead)")
                elif len(unbased) == len(parts(c)):
                    v.status = "no baseline"
                else:
                    v.info.append("no baseline for " + ", ".join(unbased))
        if v.why:
            v.status = "FAIL"
        verdicts.append(v)
    for n in notes:  # paused: a run that ended at --stop-after, whose finished cells are checked above
        if n.get("status") not in ("ran", "skipped", "paused"):
            verdicts.append(
                CellVerdict(
                    f"platform {n.get('platform')}",
                    Path(str(n.get("source", d))).name,
                    "FAIL",
                    [f"{n.get('status')}: {n.get('reason', '')}"],
                )
            )
    if only is not None:
        for e in ents:
            if id(e) not in matched:
                cfg = {**e["config"], "study": e["study"]}
                halted = interrupted.get(entry_key(e), [])
                why = (
                    f"{d} has no finished cell of it: its cell(s) {', '.join(v.dir for v in halted)} were interrupted"
                    f" ({halted[0].info[0].removeprefix('stopped: ')}); rerun the same command to finish them"
                    if halted
                    else f"{d} has no finished cell of it"
                )
                verdicts.append(
                    CellVerdict(
                        f"{e['study']} {config_label(cfg)}",
                        "incomplete" if halted else "missing",
                        "FAIL",
                        [f"baseline {only} expects this configuration ({e['part']}); {why}"],
                    )
                )
    counts = {s: sum(v.status == s for v in verdicts) for s in ("ok", "FAIL", "no baseline", "skipped", "interrupted")}
    stopped_ids = [v.dir for v in verdicts if v.status == "interrupted"]
    if stopped_ids and len(stopped_ids) == len(cells):  # a check of nothing never passes
        verdicts.append(
            CellVerdict(
                "nothing verified",
                d.name,
                "FAIL",
                [f"every cell of {d} was interrupted: no finished cell to verify; rerun the same command to finish them"],
            )
        )
        counts["FAIL"] += 1
    cross_noted = sum(any("(cross-class:" in i for i in v.info) for v in verdicts if v.status == "ok")
    no_speed = sum(any("no speed baseline for this class" in i for i in v.info) for v in verdicts if v.status == "ok")
    cross_speed = sum(any("held cross-class" in i for i in v.info + v.why) for v in verdicts if v.status in ("ok", "FAIL"))
    busy = sum(any(i.startswith("speed not judged:") for i in v.info) for v in verdicts if v.status == "ok")
    return {
        "dir": str(d),
        "baseline": only,
        "cells": len(cells),
        "verdicts": verdicts,
        "counts": counts,
        "failed": counts["FAIL"] > 0,
        "skipped": rs.skipped,
        "summary": f"verify {d}: {len(cells)} cells: {counts['ok']} ok, {counts['FAIL']} FAIL, "
        f"{counts['no baseline']} without a baseline, {counts['skipped']} skipped"
        + (f" (baseline set {only})" if only else "")
        + (f"; {no_speed} ok cell(s) with no speed baseline for their class" if no_speed else "")
        + (f"; {cross_speed} cell(s) whose speed was held to other classes' entries (no entry for theirs)" if cross_speed else "")
        + (f"; {busy} ok cell(s) whose speed was not judged (cpu-shared)" if busy else "")
        + (f"; {cross_noted} ok cell(s) held to another machine class's baseline (cross-class)" if cross_noted else "")
        + ("" if with_speed else "; speed not checked (--speed off)")
        + (
            "; speed judged on each configuration's median over its repeats (--speed median)"
            if with_speed and speed_median
            else ""
        )
        + (
            f"; {len(stopped_ids)} cell(s) interrupted (not failures): {_listed(stopped_ids)}; "
            "rerun the same command to finish them"
            if stopped_ids
            else ""
        ),
        "no_speed_baseline": no_speed,
        "speed_not_judged": busy,
        "interrupted": stopped_ids,
        "cross_class": cross_noted,
    }


def _listed(ids: list[str], most: int = 20) -> str:
    return ", ".join(ids[:most]) + (f" (+{len(ids) - most} more)" if len(ids) > most else "")


def make_baseline(
    dirs: list[Path],
    name: str | None = None,
    acc_margin: float = DEFAULT_ACC_MARGIN,
    loss_rtol: float = DEFAULT_LOSS_RTOL,
    acc_bands: list[str] | None = None,
    bdir: Path = BASELINES_DIR,
    speed_floor: float = speed.FLOOR,
    keep_other_classes: bool = False,
) -> dict:
    """Write baseline set NAME (default: the first DIR's name) from DIRS into BDIR/<study>.json,
    replacing that set's entries and keeping every other set. Every DIR must pass every check but
    the baselines. The repeats of one configuration, environment and machine class in all DIRS
    make one entry (several smoke runs: one entry whose spread spans the runs).
    KEEP_OTHER_CLASSES: replace only the set's entries of the machine classes DIRS ran on and keep
    the others (one set for every CPU that CI runs on); the set then names each class's command.
    Here the cells are picked; host/baselines.py's `write_set` makes the entries and writes them."""
    dirs = [Path(d) for d in dirs]
    name = set_name(name or str(dirs[0]))
    if not name or name in (".", ".."):
        raise UsageError("a baseline set needs a name: pass --name")
    if not (0 <= acc_margin < 1 and 0 < loss_rtol < 1):
        raise UsageError("--acc-margin must be in [0, 1) and --loss-rtol in (0, 1)")
    if not 1 <= speed_floor <= 100:
        raise UsageError(f"--speed-floor {speed_floor:g}: a tolerance factor, between 1 and 100")
    bands = band_overrides(acc_bands or [])
    groups: dict[str, list[ResultCell]] = {}
    for d in dirs:
        res = verify(d, strict=False, use_baselines=False)
        bad = [v for v in res["verdicts"] if v.status == "FAIL"]
        if bad:
            raise KitError(f"{d} does not pass verify ({len(bad)} failing), so it cannot be a baseline: {bad[0].line()}")
        stopped = [v for v in res["verdicts"] if v.status == "interrupted"]
        if stopped:  # a baseline of part of a run would hold a set that lacks the stopped configurations
            raise KitError(
                f"{d} has {len(stopped)} interrupted cell(s), so it cannot be a baseline yet: {stopped[0].line()}; "
                "rerun the command that made it to finish them"
            )
        cells = load_set(d, "verify", partial_ok=True).cells
        for c in cells:
            if c.status == "ok" and not c.state:
                k = match_key(config_of(c), keep_checksum=True)
                groups.setdefault(f"{k}|{speed.key(speed.environment(c))}|{speed.key(speed.machine_class(c))}", []).append(c)
    return write_set(
        list(groups.values()),
        dirs=dirs,
        name=name,
        bands=bands,
        acc_margin=acc_margin,
        loss_rtol=loss_rtol,
        acc_bands=acc_bands,
        bdir=bdir,
        speed_floor=speed_floor,
        keep_other_classes=keep_other_classes,
    )


__all__ = ["BASELINES_DIR", "CellVerdict", "entry_key", "load_baselines", "make_baseline", "verify"]
