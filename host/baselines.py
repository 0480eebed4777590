"""Baseline files (results/reference/baselines/<study>.json): reading, checking a cell against
them, and making them (`verify --make-baseline`).

A file holds named sets; a set holds one entry per configuration (study, backend, variant,
seed and every parameter, dataset checksum included), row backend (`part`), environment and
machine class (host/speed.py defines both). An entry holds
  - the final accuracy with a band and the training-loss curve with a relative tolerance,
    made in the entry's `environment`;
  - `speed`: per metric every repeat's value, the median, the spread and the tolerance
    (host/speed.py), for the entry's `machine_class` and environment.

A cell is held to the accuracy of the entries of its own environment and machine class. Where its
configuration has entries only from other environments (another torch, native vs a container) or,
in its own environment, only from other CPUs, it is held to them at the cross-environment tolerance
instead (CROSS_ENV_ACC_MARGIN around the band, CROSS_ENV_LOSS_RTOL per loss point, or the entry's
own where wider), and its line says so: the same work under another torch build, or on another
CPU's kernels, rounds differently; it is not broken. (The ci-smoke image's torch on the 2-core
AMD EPYC and on a 2-core Intel Xeon with AVX-512 VM: cifar-opt's MobileNetV2 smoke loss 2.3483
against 2.3407 after one epoch, profile's fine-tune 0.8166 against 0.8752 after two; so a set
holds an entry per CPU that CI runs on: `--make-baseline ... --keep-other-classes`.) Its speed is
held only to entries of its own environment and machine class (host/speed.py).

Every file is validated at load (pydantic, `BaselineFile`): a file that does not fit is one
line naming the file and the key.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.core.errors import KitError, UsageError
from bench.core.resultset import ResultCell
from host import speed
from host.compare import config_label, config_of, final_accuracy, load_set, loss_curve, match_key, parts, study_of, workload

ROOT = Path(__file__).resolve().parent.parent
BASELINES_DIR = ROOT / "results" / "reference" / "baselines"
FORMAT = 2
DEFAULT_ACC_MARGIN = 0.005  # absolute, around the reference's min-max over repeats
DEFAULT_LOSS_RTOL = 0.01  # relative, per point of the loss curve
# Across environments: the band widened by this much on each side, and this relative tolerance
# per loss point (the entry's own where wider). Measured: torch 2.10.0 (cpu image) and 2.14.1
# (native) on one 2-core EPYC gave the same ci-smoke curves to 1e-7 (every study's smoke);
# torch 2.11 on the H100 host's Xeon and 2.14.1 on the EPYC differ by up to 0.73 % per point
# over mnist-cnn's 10 epochs and 0.0002 in accuracy. The margin leaves room for other CPUs'
# kernels and for a smoke's near-chance accuracy (1 epoch on a few hundred images) to flip.
CROSS_ENV_ACC_MARGIN = 0.05
CROSS_ENV_LOSS_RTOL = 0.05

Pos = Annotated[float, Field(gt=0)]
Point = tuple[float, float]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class MachineClass(_Strict):
    cpu: str = Field(min_length=1)
    cores: int = Field(ge=1)
    gpu: str | None
    gpus: int = Field(ge=0)


class Environment(_Strict):
    runtime: str = Field(min_length=1)
    libraries: dict[str, str]


class SpeedMetric(_Strict):
    unit: str
    higher_is_better: bool
    values: list[Pos] = Field(min_length=1)
    median: Pos
    spread: float = Field(ge=0)
    spread_from: str
    tolerance: float = Field(ge=1)
    floor: float | None = Field(default=None, ge=1)  # the set's --speed-floor, where not speed.FLOOR


class Entry(_Strict):
    label: str
    part: str
    config: dict
    environment: Environment
    machine_class: MachineClass | None
    repeats: int = Field(ge=1)
    cells: list[str]
    kit_git_sha: list[str]
    libraries: dict[str, str]
    acc_metric: str | None = None
    acc: float | None = None
    acc_band: tuple[float, float] | None = None
    curve_x: str | None = None
    curve_y: str | None = None
    loss_rtol: Pos | None = None
    curve: list[Point] | None = None
    curves: dict[str, list[Point]] | None = None
    speed: dict[str, SpeedMetric]
    speed_note: str | None = None


class BaselineSet(_Strict):
    sources: list[str] = Field(min_length=1)
    command: str
    also: list[str] = []  # the commands that made the entries of the set's other machine classes (--keep-other-classes)
    acc_margin: float
    loss_rtol: Pos
    speed_floor: float | None = Field(default=None, ge=1)
    entries: list[Entry]


class BaselineFile(_Strict):
    format: Literal[2]
    study: str
    about: str
    sets: dict[str, BaselineSet]


# ---------------------------------------------------------------------------- reading
def _validate(p: Path, obj: object) -> None:
    if isinstance(obj, dict) and obj.get("format") != FORMAT:
        raise KitError(
            f"baseline file {p} is format {obj.get('format')!r}, this kit reads format {FORMAT}: "
            "regenerate it (results/reference/README.md)"
        )
    try:
        BaselineFile.model_validate(obj)
    except ValidationError as err:
        e = err.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "(top)"
        raise KitError(f"baseline file {p}: {where}: {e['msg']}") from None


def load_baselines(bdir: Path = BASELINES_DIR) -> dict[str, dict]:
    """study -> its baseline file's content; KitError (one line naming file and key) for a file
    that cannot be used."""
    out: dict[str, dict] = {}
    if not bdir.is_dir():
        return out
    for p in sorted(bdir.glob("*.json")):
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise KitError(f"baseline file {p} cannot be read: {err}") from None
        _validate(p, obj)
        out[str(obj["study"])] = obj
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


# ---------------------------------------------------------------------------- checking
def check_accuracy(cell: ResultCell, part: str, e: dict, cross: str | bool = False) -> tuple[list[str], list[str]]:
    """(failures, what passed) of CELL's final accuracy and loss curve for PART against entry E;
    CROSS: E was made in another environment or on another CPU (the cross-environment tolerance,
    see above; a string says which)."""
    why, info = [], []
    tag = f"[{e['set']}]"
    margin = CROSS_ENV_ACC_MARGIN if cross else 0.0
    acc = final_accuracy(cell, part)
    if e.get("acc_band"):  # an entry of a cell that scores nothing (synthetic-gpu: no evaluation) has only a curve
        lo, hi = e["acc_band"]
        lo, hi = max(lo - margin, 0.0), min(hi + margin, 1.0)
        if acc is None:
            why.append(f"no final accuracy to check against baseline {tag}")
        elif not lo <= acc[1] <= hi:
            why.append(f"{acc[0]} {acc[1]:.4g} outside baseline band {lo:.4g}-{hi:.4g} {tag}")
        else:
            info.append(f"{acc[0]} {acc[1]:.4g} in {lo:.4g}-{hi:.4g} {tag}")
    curve = loss_curve(cell, part)
    if e.get("curve"):
        got = dict(curve[2]) if curve else {}
        xk, yk = e["curve_x"], e["curve_y"]
        rtol = max(float(e["loss_rtol"]), CROSS_ENV_LOSS_RTOL) if cross else float(e["loss_rtol"])
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
    if cross:
        where = (
            f"on {speed.class_label(e.get('machine_class') or {})}, not this cell's CPU"
            if cross == "class"
            else f"in {speed.env_label(e['environment'])}, not this cell's environment"
        )
        info.append(
            f"baseline made {where}: held at the cross-environment tolerance (band +-{CROSS_ENV_ACC_MARGIN:g},"
            f" loss {CROSS_ENV_LOSS_RTOL:.0%}) {tag}"
        )
    return why, info


def check_part(
    cell: ResultCell, part: str, es: list[dict], with_speed: bool = True, repeats: list[ResultCell] | None = None
) -> tuple[list[str], list[str]]:
    """(failures, notes) of CELL's PART against ES, the entries of its configuration and part:
    accuracy against its own environment's and CPU's (else its environment's other CPUs', else every
    other environment's, both at the cross tolerance), speed against its own class's (host/speed.py;
    REPEATS: the median of the configuration's repeats)."""
    env = speed.key(speed.environment(cell))
    own = [e for e in es if speed.key(e.get("environment")) == env]
    mc = speed.machine_class_or_none(cell)
    mine = [e for e in own if mc is None or e.get("machine_class") is None or same_cpu(e["machine_class"], mc)]
    why, info = [], []
    for e in mine or own or es:
        w, i = check_accuracy(cell, part, e, cross=False if mine else ("class" if own else "env"))
        why += w
        info += i
    if with_speed:
        w, i = speed.check(cell, part, es, repeats)
        why += w
        info += i
    return why, info


def same_cpu(a: dict, b: dict) -> bool:
    """Two machine classes whose CPUs run the same kernels: the same CPU model and core count (a
    loss curve depends on both: the model's kernels and the threads that split the work)."""
    return (a.get("cpu"), a.get("cores")) == (b.get("cpu"), b.get("cores"))


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


def _entry(
    group: list[ResultCell], p: str, bands: dict, acc_margin: float, loss_rtol: float, floor: float = speed.FLOOR
) -> dict | None:
    c0 = group[0]
    accs = [a for c in group for a in [final_accuracy(c, p)] if a]
    curves = [cv for c in group for cv in [loss_curve(c, p)] if cv]
    spd, skipped = speed.record(group, p, floor)
    if not accs and not curves and not spd:
        return None
    raw = {k: v for k, v in workload(c0.spec).items() if k != "study"}
    e: dict = {"label": config_label(config_of(c0)), "part": p, "config": raw}
    if accs:
        lo, hi = bands.get(c0.study, bands.get("*", (min(a[1] for a in accs) - acc_margin, max(a[1] for a in accs) + acc_margin)))
        e.update(
            acc_metric=accs[0][0],
            acc=statistics.median(a[1] for a in accs),
            acc_band=[round(max(lo, 0.0), 6), round(min(hi, 1.0), 6)],
        )
    e.update(
        {
            "repeats": len(group),
            "cells": sorted({c.dir.name for c in group}),
            "kit_git_sha": sorted({str(c.system.get("kit_git_sha")) for c in group}),
            "libraries": {
                k: v for k, v in sorted((c0.system.get("libraries") or {}).items()) if k in ("torch", "numba", "numpy", "cupy")
            },
            "environment": speed.environment(c0),
            "machine_class": speed.machine_class(c0),
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
            e["curves"] = {str(c.repeat): [list(pt) for pt in cv[2]] for c in group if (cv := loss_curve(c, p))}
    e["speed"] = spd
    if skipped:
        e["speed_note"] = "; ".join(skipped)
    return e


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
    the others (one set for every CPU that CI runs on); the set then names each class's command."""
    from host.verify import verify

    dirs = [Path(d) for d in dirs]
    name = set_name(name or str(dirs[0]))
    if not name or name in (".", ".."):
        raise UsageError("a baseline set needs a name: pass --name")
    if not (0 <= acc_margin < 1 and 0 < loss_rtol < 1):
        raise UsageError("--acc-margin must be in [0, 1) and --loss-rtol in (0, 1)")
    if not 1 <= speed_floor <= 100:
        raise UsageError(f"--speed-floor {speed_floor:g}: a tolerance factor, between 1 and 100")
    bands = _band_overrides(acc_bands or [])
    groups: dict[str, list[ResultCell]] = {}
    for d in dirs:
        res = verify(d, strict=False, use_baselines=False)
        bad = [v for v in res["verdicts"] if v.status == "FAIL"]
        if bad:
            raise KitError(f"{d} does not pass verify ({len(bad)} failing), so it cannot be a baseline: {bad[0].line()}")
        cells = load_set(d, "verify", partial_ok=True).cells
        for c in cells:
            if c.status == "ok" and not c.state:
                k = match_key(config_of(c), keep_checksum=True)
                groups.setdefault(f"{k}|{speed.key(speed.environment(c))}|{speed.key(speed.machine_class(c))}", []).append(c)
    new: dict[str, list[dict]] = {}
    for group in groups.values():
        for p in parts(group[0]):
            e = _entry(group, p, bands, acc_margin, loss_rtol, speed_floor)
            if e is not None:
                new.setdefault(group[0].study, []).append(e)
    if not new:
        raise KitError(
            f"{', '.join(map(str, dirs))}: no finished cell with an accuracy, a loss curve or a speed to make a baseline of"
        )
    from bench.core.rows import write_json

    written = []
    args = f" --acc-margin {acc_margin:g} --loss-rtol {loss_rtol:g}" + "".join(f" --acc-band {b}" for b in acc_bands or [])
    args += f" --speed-floor {speed_floor:g}" if speed_floor != speed.FLOOR else ""
    args += " --keep-other-classes" if keep_other_classes else ""
    command = f"python orchestrate.py verify --make-baseline {' '.join(map(str, dirs))} --name {name}{args}"
    old_all = load_baselines(bdir)
    for study, es in sorted(new.items()):
        path = bdir / f"{study}.json"
        sets = dict((old_all.get(study) or {}).get("sets") or {})
        old = sets.get(name) or {}
        made = {speed.key(e["machine_class"]) for e in es}
        kept = [e for e in old.get("entries", []) if speed.key(e.get("machine_class")) not in made] if keep_other_classes else []
        floor = speed_floor if speed_floor != speed.FLOOR else None
        if kept and (old.get("acc_margin"), old.get("loss_rtol"), old.get("speed_floor")) != (acc_margin, loss_rtol, floor):
            raise UsageError(
                f"--keep-other-classes: set {name} of {study} was made with --acc-margin {old.get('acc_margin')} --loss-rtol "
                f"{old.get('loss_rtol')} --speed-floor {old.get('speed_floor') or speed.FLOOR}: make the new class's entries with the same"
            )
        # each remakes its class beside the others (with the flag; without it, it would replace them)
        flagged = (
            c if c.endswith(" --keep-other-classes") else c + " --keep-other-classes"
            for c in [old.get("command"), *old.get("also", [])]
            if c
        )
        also = [c for c in dict.fromkeys(flagged) if c != command] if kept else []
        sets[name] = {
            "sources": list(dict.fromkeys([*(old.get("sources", []) if kept else []), *(str(d) for d in dirs)])),
            "command": command,
            **({"also": also} if also else {}),
            "acc_margin": acc_margin,
            "loss_rtol": loss_rtol,
            **({"speed_floor": speed_floor} if speed_floor != speed.FLOOR else {}),
            "entries": sorted(
                es + kept, key=lambda e: (e["label"], e["part"], speed.key(e["environment"]), speed.key(e["machine_class"]))
            ),
        }
        obj = {
            "format": FORMAT,
            "study": study,
            "about": "Per configuration, environment and machine class: the expected final accuracy (band), training-loss "
            "curve (relative tolerance) and speed (median, spread, tolerance); checked by `orchestrate.py verify`. "
            "Regenerate a set with its `command`; see results/reference/README.md.",
            "sets": sets,
        }
        _validate(path, json.loads(json.dumps(obj)))
        write_json(path, obj)
        no_speed = sum(not e["speed"] for e in es)
        written.append({"path": str(path), "set": name, "entries": len(es), "without_speed": no_speed})
    return {"set": name, "written": written}


__all__ = [
    "BASELINES_DIR",
    "BaselineFile",
    "check_accuracy",
    "check_part",
    "entries",
    "entry_key",
    "load_baselines",
    "make_baseline",
    "set_name",
]
