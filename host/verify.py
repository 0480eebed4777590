"""`orchestrate.py verify DIR`: the reproducibility check CI runs on a result dir.

Every cell is checked for
  - schema: every row's `schema` is an integer from 1 to this kit's SCHEMA_VERSION (a newer
    one is an error: this kit cannot judge it);
  - provenance: cell.json present and its id (the hash of the spec) is the dir's name and the
    rows' `cell`; every row's `command` is `python -m bench cell '<spec>' ...` with exactly the
    spec of cell.json; host, device, image_id, lock_hash and dataset set; system.json present,
    with a kit git sha that is not "unknown" and the rows' image id and lock hash;
  - completeness: every dir holding a cell.json has rows; interrupted, corrupt and error
    cells fail; skipped cells pass when they say why; a platform that failed (platforms.json)
    fails; with `--baseline NAME` every configuration of that baseline set must be present;
  - equivalence and invariants: the checks a study records against a reference
    (Study.equivalence: present and passed) and what must hold in any honest run of it
    (Study.invariants: e.g. no point above its roof, latencies ordered);
  - baselines (results/reference/baselines/<study>.json): the final accuracy inside the
    band and the training-loss curve within the relative tolerance of every baseline entry
    for the cell's configuration (study, backend, variant, seed and every parameter,
    dataset name and checksum and epochs included). A cell with no entry is listed as
    "no baseline" (a failure unless --allow-unbaselined is given: a check that checks
    nothing must not pass).

Output: one line per cell ("ok", "skipped", "no baseline" or "FAIL" with every reason), then
a summary. Exit 0 when nothing failed, 1 when a cell failed, 2 when DIR cannot be verified.

`--make-baseline DIR --name NAME` writes NAME's entries into the baseline files from DIR
(which must itself pass every check but the baselines); results/reference/README.md gives
the procedure. Standard library only (no scipy): CI runs it from the host venv.
"""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import KitError, UsageError
from bench.core.resultset import ResultCell, json_file, walk
from bench.core.rows import SCHEMA_VERSION, is_regular
from host.compare import (
    cell_name,
    config_label,
    config_of,
    final_accuracy,
    load_set,
    loss_curve,
    match_key,
    parts,
    study_of,
    workload,
)

ROOT = Path(__file__).resolve().parent.parent
BASELINES_DIR = ROOT / "results" / "reference" / "baselines"
FORMAT = 1
DEFAULT_ACC_MARGIN = 0.005  # absolute, around the reference's min-max over repeats
DEFAULT_LOSS_RTOL = 0.01  # relative, per point of the loss curve
PROVENANCE_KEYS = ("host", "device", "image_id", "lock_hash", "dataset")


@dataclass
class CellVerdict:
    name: str
    dir: str
    status: str  # ok | skipped | no baseline | FAIL
    why: list[str] = field(default_factory=list)  # failures
    info: list[str] = field(default_factory=list)  # what passed

    def line(self) -> str:
        text = "; ".join(self.why if self.status == "FAIL" else self.info)
        return f"{self.status:<11} {self.name} ({self.dir})" + (f": {text}" if text else "")


# ---------------------------------------------------------------------------- baseline files
def load_baselines(bdir: Path = BASELINES_DIR) -> dict[str, dict]:
    """study -> its baseline file's content; KitError (one line) for a file that cannot be used."""
    out: dict[str, dict] = {}
    if not bdir.is_dir():
        return out
    for p in sorted(bdir.glob("*.json")):
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise KitError(f"baseline file {p} cannot be read: {err}") from None
        if not isinstance(obj, dict) or obj.get("format") != FORMAT or not isinstance(obj.get("sets"), dict):
            raise KitError(
                f"baseline file {p} is not a format-{FORMAT} baseline (regenerate it: see results/reference/README.md)"
            )
        out[str(obj.get("study") or p.stem)] = obj
    return out


def set_name(baseline: str) -> str:
    """`--baseline results/reference/cpu-2core-epyc` or `--baseline cpu-2core-epyc` -> 'cpu-2core-epyc'."""
    return Path(baseline.rstrip("/")).name


def entries(baselines: dict[str, dict], only: str | None) -> list[dict]:
    out = []
    for study, obj in sorted(baselines.items()):
        for name, s in sorted(obj["sets"].items()):
            if only is None or name == only:
                out += [{**e, "set": name, "study": study} for e in s.get("entries", [])]
    return out


def entry_key(e: dict) -> str:
    from host.compare import complete_params

    cfg = {**e["config"], "study": e["study"]}
    cfg["params"] = complete_params(e["study"], dict(cfg.get("params") or {}))
    return match_key(cfg, keep_checksum=True)


# ---------------------------------------------------------------------------- checks
def _parse_command(cmd: object) -> tuple[dict | None, str]:
    if not isinstance(cmd, str) or not cmd.strip():
        return None, "no command"
    try:
        argv = shlex.split(cmd)
    except ValueError as err:
        return None, f"command cannot be parsed ({err})"
    if argv[:4] != ["python", "-m", "bench", "cell"] or len(argv) < 5:
        return None, "command is not `python -m bench cell '<spec>' ...`"
    try:
        spec = json.loads(argv[4])
    except json.JSONDecodeError:
        return None, "command's cell spec is not JSON"
    return (spec, "") if isinstance(spec, dict) else (None, "command's cell spec is not an object")


def _spec_of(d: dict):
    from bench.core.cell import Cell

    return Cell.from_json(json.dumps(d))


def check_provenance(cell: ResultCell) -> list[str]:
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
        cmd_spec, bad = _parse_command(r.get("command"))
        if cmd_spec is None:
            add(bad)
        else:
            try:
                same = _spec_of(cmd_spec).spec() == spec.spec()
            except KitError as err:
                add(f"command's cell spec is invalid: {err}")
            else:
                if not same:
                    add("command reruns a different spec than cell.json")
        if not skipped:
            for k in PROVENANCE_KEYS:
                if not isinstance(r.get(k), str) or not r.get(k):
                    add(f"row lacks {k}")
    sysinfo = cell.system
    if not sysinfo:
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


def check_baseline(cell: ResultCell, part: str, e: dict) -> tuple[list[str], list[str]]:
    why, info = [], []
    tag = f"[{e['set']}]"
    acc = final_accuracy(cell, part)
    if "acc_band" in e:  # an entry of a cell that scores nothing (synthetic-gpu: no evaluation) has only a curve
        lo, hi = e["acc_band"]
        if acc is None:
            why.append(f"no final accuracy to check against baseline {tag}")
        elif not lo <= acc[1] <= hi:
            why.append(f"{acc[0]} {acc[1]:.4g} outside baseline band {lo:.4g}-{hi:.4g} {tag}")
        else:
            info.append(f"{acc[0]} {acc[1]:.4g} in {lo:.4g}-{hi:.4g} {tag}")
    curve = loss_curve(cell, part)
    if e.get("curve"):
        got = dict(curve[2]) if curve else {}
        xk, yk, rtol = e["curve_x"], e["curve_y"], float(e["loss_rtol"])
        ref_curve = (e.get("curves") or {}).get(str(cell.repeat)) or e["curve"]  # this repeat's seed's own, where kept
        for x, ref in ref_curve:
            v = got.get(float(x))
            if v is None:
                why.append(f"{yk} lacks {xk} {x:g} {tag}")
                break
            if abs(v - ref) > rtol * abs(ref) + 1e-12:
                why.append(f"{yk} {v:.5g} at {xk} {x:g} off baseline {ref:.5g} by more than {rtol:.2%} {tag}")
                break
        else:
            info.append(f"{yk} within {rtol:.2%} at {len(e['curve'])} points")
    return why, info


# ---------------------------------------------------------------------------- verify
def unlisted_cell_dirs(d: Path, cells: list[ResultCell]) -> list[Path]:
    """Dirs holding a cell.json that no collected cell covers (e.g. an empty rows.jsonl)."""
    have = {c.dir.resolve() for c in cells}
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


def verify(
    d: Path, baseline: str | None = None, strict: bool = True, bdir: Path = BASELINES_DIR, use_baselines: bool = True
) -> dict:
    """Every check of the module docstring on DIR. KitError when DIR cannot be verified."""
    d = Path(d)
    cells, notes, _ = load_set(d, "verify", partial_ok=True)
    baselines = load_baselines(bdir) if use_baselines else {}
    only = set_name(baseline) if baseline else None
    if only is not None:
        known = sorted({n for obj in baselines.values() for n in obj["sets"]})
        if only not in known:
            raise UsageError(f"no baseline set {only!r} in {bdir} (sets: {', '.join(known) or 'none'})")
    ents = entries(baselines, only) if use_baselines else []
    by_key: dict[str, list[dict]] = {}
    for e in ents:
        by_key.setdefault(entry_key(e) + "|" + e["part"], []).append(e)
        by_key.setdefault(entry_key(e), []).append(e)

    verdicts: list[CellVerdict] = []
    matched: set[int] = set()
    for cdir in unlisted_cell_dirs(d, cells):  # a cell.json with an empty rows.jsonl: not silently dropped
        note = "cell.json but no rows (rows.jsonl empty)"
        cells.append(ResultCell(cdir, [], json_file(cdir / "system.json"), "empty", note, json_file(cdir / "cell.json")))
    for c in sorted(cells, key=lambda c: (c.study, str(c.dir))):
        try:
            name = cell_name(c)
        except KitError:
            name = f"{c.study} {c.dir.name}"
        v = CellVerdict(name, c.dir.name, "ok")
        for e in by_key.get(_key_or_none(c), []):  # a failing cell is reported as itself, not also as missing
            matched.add(id(e))
        if c.state in ("corrupt", "interrupted", "empty"):
            v.why.append(f"{c.state}: {c.note}")
        elif c.status == "error":
            v.why.append(f"error: {c.reason[:300] or 'no reason given'}")
        v.why += check_provenance(c)
        if c.status == "skipped" and not v.why:
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
                if not es:
                    unbased.append(p)
                for e in es:
                    matched.add(id(e))
                    w, i = check_baseline(c, p, e)
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
    for n in notes:
        if n.get("status") not in ("ran", "skipped"):
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
                verdicts.append(
                    CellVerdict(
                        f"{e['study']} {config_label(cfg)}",
                        "missing",
                        "FAIL",
                        [f"baseline {only} expects this configuration ({e['part']}); {d} has no finished cell of it"],
                    )
                )
    counts = {s: sum(v.status == s for v in verdicts) for s in ("ok", "FAIL", "no baseline", "skipped")}
    return {
        "dir": str(d),
        "baseline": only,
        "cells": len(cells),
        "verdicts": verdicts,
        "counts": counts,
        "failed": counts["FAIL"] > 0,
        "summary": f"verify {d}: {len(cells)} cells: {counts['ok']} ok, {counts['FAIL']} FAIL, "
        f"{counts['no baseline']} without a baseline, {counts['skipped']} skipped" + (f" (baseline set {only})" if only else ""),
    }


# ---------------------------------------------------------------------------- making baselines
def _band_overrides(specs: list[str]) -> dict[str, tuple[float, float]]:
    """['mnist-cnn=0.25-0.60', '0.3-0.5'] -> {'mnist-cnn': (0.25, 0.6), '*': (0.3, 0.5)}."""
    out = {}
    for s in specs:
        study, _, band = s.rpartition("=")
        try:
            lo, hi = (float(x) for x in band.split("-"))
        except ValueError:
            raise UsageError(f"--acc-band {s!r}: write [STUDY=]LO-HI, e.g. mnist-cnn=0.25-0.60") from None
        if not 0 <= lo < hi <= 1:
            raise UsageError(f"--acc-band {s!r}: need 0 <= LO < HI <= 1")
        out[study or "*"] = (lo, hi)
    return out


def make_baseline(
    d: Path,
    name: str | None = None,
    acc_margin: float = DEFAULT_ACC_MARGIN,
    loss_rtol: float = DEFAULT_LOSS_RTOL,
    acc_bands: list[str] | None = None,
    bdir: Path = BASELINES_DIR,
) -> dict:
    """Write baseline set NAME (default: DIR's name) from DIR into BDIR/<study>.json, replacing
    that set's entries and keeping every other set. DIR must pass every non-baseline check."""
    d = Path(d)
    name = set_name(name or str(d))
    if not name or name in (".", ".."):
        raise UsageError("a baseline set needs a name: pass --name")
    if not (0 <= acc_margin < 1 and 0 < loss_rtol < 1):
        raise UsageError("--acc-margin must be in [0, 1) and --loss-rtol in (0, 1)")
    bands = _band_overrides(acc_bands or [])
    res = verify(d, strict=False, use_baselines=False)
    bad = [v for v in res["verdicts"] if v.status == "FAIL"]
    if bad:
        raise KitError(f"{d} does not pass verify ({len(bad)} failing), so it cannot be a baseline: {bad[0].line()}")
    cells, _, _ = load_set(d, "verify", partial_ok=True)
    groups: dict[str, list[ResultCell]] = {}
    for c in cells:
        if c.status == "ok" and not c.state:
            groups.setdefault(match_key(config_of(c), keep_checksum=True), []).append(c)
    new: dict[str, list[dict]] = {}
    for group in groups.values():
        c0 = group[0]
        raw = {k: v for k, v in workload(c0.spec).items() if k != "study"}
        for p in parts(c0):
            accs = [a for c in group for a in [final_accuracy(c, p)] if a]
            curves = [cv for c in group for cv in [loss_curve(c, p)] if cv]
            if not accs and not curves:
                continue
            e: dict = {"label": config_label(config_of(c0)), "part": p, "config": raw}
            if accs:
                lo, hi = bands.get(
                    c0.study, bands.get("*", (min(a[1] for a in accs) - acc_margin, max(a[1] for a in accs) + acc_margin))
                )
                e.update(
                    acc_metric=accs[0][0],
                    acc=statistics.median(a[1] for a in accs),
                    acc_band=[round(max(lo, 0.0), 6), round(min(hi, 1.0), 6)],
                )
            e.update(
                {
                    "repeats": len(group),
                    "cells": sorted(c.dir.name for c in group),
                    "kit_git_sha": sorted({str(c.system.get("kit_git_sha")) for c in group}),
                    "libraries": {
                        k: v
                        for k, v in sorted((c0.system.get("libraries") or {}).items())
                        if k in ("torch", "numba", "numpy", "cupy")
                    },
                }
            )
            if curves:
                xs = sorted(set.intersection(*(set(x for x, _ in cv[2]) for cv in curves)))
                e.update(
                    curve_x=curves[0][0],
                    curve_y=curves[0][1],
                    loss_rtol=loss_rtol,
                    curve=[[x, statistics.median(dict(cv[2])[x] for cv in curves)] for x in xs],
                )
                s = study_of(c0.study)
                if s is not None and s.repeat_is_seed:  # each repeat trained from its own seed: its own curve
                    e["curves"] = {str(c.repeat): [list(p) for p in cv[2]] for c in group if (cv := loss_curve(c, p))}
            new.setdefault(c0.study, []).append(e)
    if not new:
        raise KitError(f"{d} has no finished cell with an accuracy or a loss curve to make a baseline of")
    from bench.core.rows import write_json

    written = []
    args = f" --acc-margin {acc_margin:g} --loss-rtol {loss_rtol:g}" + "".join(f" --acc-band {b}" for b in acc_bands or [])
    for study, es in sorted(new.items()):
        path = bdir / f"{study}.json"
        old = load_baselines(bdir).get(study) or {}
        sets = dict(old.get("sets") or {})
        sets[name] = {
            "source": str(d),
            "command": f"python orchestrate.py verify --make-baseline {d} --name {name}{args}",
            "acc_margin": acc_margin,
            "loss_rtol": loss_rtol,
            "entries": sorted(es, key=lambda e: (e["label"], e["part"])),
        }
        write_json(
            path,
            {
                "format": FORMAT,
                "study": study,
                "about": "Expected final accuracy (band) and training-loss curve (relative tolerance) per configuration; "
                "checked by `orchestrate.py verify`. Regenerate a set with its `command`; see results/reference/README.md.",
                "sets": sets,
            },
        )
        written.append({"path": str(path), "set": name, "entries": len(es)})
    return {"set": name, "written": written}


__all__ = ["BASELINES_DIR", "CellVerdict", "load_baselines", "make_baseline", "verify"]
