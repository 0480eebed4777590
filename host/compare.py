"""`orchestrate.py compare A B`: two result sets (two hosts, two commits, two images) side by
side, as pyperf's compare_to and asv's compare do: one summary line first (how many
configurations got faster, slower, or show no significant change, and the geometric mean of
the ratios with its interval), then one row per configuration both hold, sorted by change.

What makes two cells "the same cell" across sets (`match_key`): the same study, backend,
variant, seed and parameters. Left out: the repeat (repeats are the sample), the readable
name, the device slots (`devices`: where a scheduler placed it), the host, device, image and
commit (what a comparison is *about*), and the dataset checksum (two hosts' copies of one
dataset; when the checksums differ the line says so, since accuracies then need not agree).
A parameter a cell does not record (it ran on a kit that did not have it yet) counts as the
study's current default, so a result set from before a parameter existed still matches.

Per matched configuration and part (a cell may hold several row backends): one throughput
per repeat, as the study reads its rows (Study.throughput, in Study.throughput_unit), then
`bench.core.stats.ratio(B, A)`: median(B) / median(A), > 1 when B is faster, with a 95 %
bootstrap interval that resamples the two sets independently (repeats of two sets share no
session, so they are never paired).

Verdict, for a threshold t (`--fail-on-regression`, default 5 %) and the interval [lo, hi]:

    slower           hi < 1 - t   B slower than A by more than t, the whole interval beyond it (a regression)
    faster           lo > 1 + t   B faster than A by more than t, the whole interval beyond it
    not significant  otherwise
    one repeat       a side has fewer than 2 repeats: no interval, no verdict (never a regression)
    flagged          a cell of either side carries a noise flag (bench.core.noise) and the interval
                     says slower or faster: shown (⚑, with what it would be) but not judged on its
                     own: no flagged pair is a regression or an improvement until a quiet rerun says so

Summary: the counts of each verdict and the geometric mean of every matched ratio with a 95 %
interval from `scipy.stats.bootstrap` over those ratios (`bench.core.stats.geomean`: the
configurations are resampled, so the interval says how much the set as a whole moved).

Host side: no torch or numba; scipy (through bench.core.stats) only when an interval is computed.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import KitError, UsageError
from bench.core.resultset import ResultCell, ResultSet, collect_set
from bench.core.tables import md_row, md_sep
from bench.core.text import md as md_text
from bench.core.text import md_code, short, term

DEFAULT_THRESHOLD = 0.05
# keys of a cell spec that are not part of its configuration across sets; of `devices` only its
# count above one is (`device_count`): DDP over 2 GPUs is another workload than over 4, which GPUs is free
NOT_CONFIG = ("repeat", "name", "devices", "env")


# ---------------------------------------------------------------------------- loading
def load_set(d: Path, role: str, partial_ok: bool = False) -> ResultSet:
    """The cells, platform notes, problems and skipped copies of one result dir; KitError (one line, naming ROLE) for
    a dir that is missing, empty, or written by a newer kit, and, unless PARTIAL_OK, for one
    holding cells that cannot be read (corrupt) or did not finish (partially written)."""
    d = Path(d)
    if not d.exists():
        raise UsageError(f"{role}: {d} does not exist")
    if not d.is_dir():
        raise UsageError(f"{role}: {d} is not a directory")
    try:
        rs = collect_set([d])
    except KitError as err:
        raise type(err)(f"{role}: {err}") from None
    cells, problems = rs.cells, rs.problems
    newer = [p for p in problems if "newer than this kit" in p]
    if newer:
        raise KitError(f"{role}: {newer[0]}" + (f" (and {len(newer) - 1} more)" if len(newer) > 1 else ""))
    if not cells:
        raise KitError(f"{role}: no result cells under {d} (expected <dir>/<study>/<cell>/rows.jsonl)")
    if not partial_ok:
        for state, what in (("corrupt", "cannot be read"), ("interrupted", "did not finish (partially written)")):
            bad = [c for c in cells if c.state == state]
            if bad:
                more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
                raise KitError(f"{role}: cell {bad[0].dir} {what}: {bad[0].note}{more}; rerun or remove it")
    return rs


# ---------------------------------------------------------------------------- configuration
def study_of(name: str):
    from bench.core.registry import studies

    return studies().get(name)


def workload(spec: dict) -> dict:
    """SPEC without the keys that are not configuration (NOT_CONFIG), plus `device_count` where it
    names more than one device (none or one: one device of its platform, the same work)."""
    devices = spec.get("devices")
    out = {k: v for k, v in spec.items() if k not in NOT_CONFIG}
    if isinstance(devices, (list, tuple)) and len(devices) > 1:
        out["device_count"] = len(devices)
    return out


def config_of(cell: ResultCell) -> dict:
    """The cell's configuration: its spec (cell.json, else the row's own keys) as `workload` keeps
    it, parameters completed with the study's current defaults."""
    spec = workload(dict(cell.spec)) if cell.spec else {k: cell.first.get(k) for k in ("study", "backend", "variant", "seed")}
    spec.setdefault("study", cell.study)
    spec.setdefault("seed", 0)
    spec.setdefault("variant", "default")
    spec["params"] = complete_params(str(spec.get("study")), dict(spec.get("params") or {}))
    return spec


def complete_params(study: str, params: dict) -> dict:
    s = study_of(study)
    if s is None:
        return params
    try:
        defaults = s.config_defaults()
    except TypeError:
        return params
    return {**defaults, **params}


def match_key(config: dict, keep_checksum: bool = False) -> str:
    c = json.loads(json.dumps(config, default=str))
    if not keep_checksum:
        (c.get("params") or {}).pop("dataset_sha256", None)
    return json.dumps(c, sort_keys=True)


def config_label(config: dict) -> str:
    """'numba-cpu resident default (epochs=3, limit_train=4096)': the study's label plus every
    parameter that differs from the study's default (the dataset checksum left out)."""
    from bench.core.cell import Cell

    study = str(config.get("study"))
    params = dict(config.get("params") or {})
    n = config.get("device_count")
    devices = tuple(str(i) for i in range(n)) if isinstance(n, int) and not isinstance(n, bool) and 1 < n <= 1024 else ()
    s = study_of(study)
    try:
        base = (
            s.label(Cell(study, str(config.get("backend")), str(config.get("variant") or "default"), params, devices=devices))
            if s
            else f"{config.get('backend')} {config.get('variant')}"
        )
        defaults = s.config_defaults() if s else {}
    except (KitError, TypeError):
        base, defaults = f"{config.get('backend')} {config.get('variant')}", {}
    words = base.split()
    shown = {
        k: v
        for k, v in sorted(params.items())
        if k != "dataset_sha256" and defaults.get(k, object()) != v and str(v) not in words
    }
    extra = ", ".join(f"{k}={v}" for k, v in shown.items())
    seed = f" seed {config.get('seed')}" if config.get("seed") not in (0, None) else ""
    return f"{base}{seed}" + (f" ({extra})" if extra else "")


def cell_name(cell: ResultCell) -> str:
    """'mnist-cnn numba-cpu resident default r0': how every line names a cell."""
    c = config_of(cell)
    return f"{cell.study} {config_label(c)} r{cell.repeat}"


# ---------------------------------------------------------------------------- what a cell measured
def parts(cell: ResultCell) -> list[str]:
    """The row backends a cell measured, in row order."""
    out: list[str] = []
    for r in cell.ok_rows:
        b = str(r.get("backend"))
        if b not in out:
            out.append(b)
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def throughput(cell: ResultCell) -> dict[str, float]:
    """part -> this repeat's throughput (larger = faster), as the study reads it (Study.throughput)."""
    s = study_of(cell.study)
    return s.throughput(cell.rows) if s else {}


def unit_of(study: str) -> str:
    s = study_of(study)
    return s.throughput_unit if s else "steps/s"


def final_accuracy(cell: ResultCell, part: str) -> tuple[str, float] | None:
    """(metric, value) of the cell's final accuracy for PART, as the study reads it (None when it has none)."""
    s = study_of(cell.study)
    return s.accuracy(cell.ok_rows, part) if s else None


def loss_curve(cell: ResultCell, part: str) -> tuple[str, str, list[tuple[float, float]]] | None:
    """(x key, y key, [(x, loss)]) of the cell's training-loss curve for PART, as the study reads it."""
    s = study_of(cell.study)
    return s.loss_curve(cell.ok_rows, part) if s else None


# ---------------------------------------------------------------------------- comparing
@dataclass
class Group:
    """One configuration's repeats in one set."""

    config: dict
    cells: list[ResultCell] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted({f"{c.first.get('host')} / {c.device}" for c in self.cells})


def groups_of(cells: list[ResultCell]) -> dict[str, Group]:
    out: dict[str, Group] = {}
    for c in cells:
        cfg = config_of(c)
        out.setdefault(match_key(cfg), Group(cfg)).cells.append(c)
    for g in out.values():
        g.cells.sort(key=lambda c: c.repeat)
    return out


def parse_threshold(text: str) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05; KitError otherwise (a bare '5' is ambiguous)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"threshold {text!r} is not a number: write e.g. 5% or 0.05") from None
    if not t.endswith("%") and v >= 1:
        raise UsageError(f"threshold {text!r} is ambiguous: write {t}% or {v / 100:g}")
    if not 0 < v < 1:
        raise UsageError(f"threshold {text!r} must lie between 0% and 100%")
    return v


def judge(lo: float | None, hi: float | None, threshold: float) -> str:
    """The verdict of an interval [LO, HI] of B/A at THRESHOLD (module docstring)."""
    if lo is None or hi is None:
        return "one repeat"
    if hi < 1 - threshold:
        return "slower"
    if lo > 1 + threshold:
        return "faster"
    return "not significant"


VERDICTS = ("faster", "slower", "not significant", "flagged", "one repeat")


def _side(g: Group, part: str) -> dict:
    from bench.core import stats

    per = {c.repeat: tp[part] for c in g.cells if c.status == "ok" for tp in [throughput(c)] if part in tp}
    accs = [a[1] for c in g.cells if c.status == "ok" for a in [final_accuracy(c, part)] if a]
    s = stats.summarize(list(per.values()))
    flags = [f"r{c.repeat}:{c.flags}" for c in g.cells if c.flags]
    sha = sorted({str(c.system.get("kit_git_sha") or "?")[:12] for c in g.cells})
    return {
        "per_repeat": per,
        "median": s.median,
        "lo": s.lo,
        "hi": s.hi,
        "n": s.n,
        "acc": statistics.median(accs) if accs else None,
        "acc_metric": next((a[0] for c in g.cells for a in [final_accuracy(c, part)] if a), None),
        "hosts": g.hosts,
        "environments": sorted({c.environment for c in g.cells}),
        "flags": ";".join(flags),
        "kit_git_sha": sha,
        "dataset_sha256": sorted({str((c.spec.get("params") or {}).get("dataset_sha256", "")) for c in g.cells}),
        "cells": [c.dir.name for c in g.cells],
    }


def compare(a_dir: Path, b_dir: Path, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """Everything `compare` prints and writes, as one dict. KitError on bad input or when A and
    B have no configuration in common."""
    a_set, b_set = load_set(a_dir, "A"), load_set(b_dir, "B")
    a_cells, b_cells = a_set.cells, b_set.cells
    ga, gb = groups_of(a_cells), groups_of(b_cells)
    common = [k for k in ga if k in gb]
    if not common:
        raise KitError(f"nothing in common between A ({_holds(ga)}) and B ({_holds(gb)}): {_near_miss(ga, gb)}")
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise KitError(
            "compare computes bootstrap intervals with scipy, which this environment lacks: install requirements/dev.txt"
        ) from None
    from bench.core import stats

    matched, not_compared = [], []
    for k in common:
        a, b = ga[k], gb[k]
        label = f"{a.config['study']} {config_label(a.config)}"
        if len(a.hosts) > 1 or len(b.hosts) > 1:
            not_compared.append({"config": label, "why": f"ran on several hosts in one set (A: {a.hosts}, B: {b.hosts})"})
            continue
        bad = [(side, c) for side, g in (("A", a), ("B", b)) for c in g.cells if c.status != "ok"]
        a_parts = [p for c in a.cells if c.status == "ok" for p in throughput(c)]
        b_parts = [p for c in b.cells if c.status == "ok" for p in throughput(c)]
        both = [p for p in dict.fromkeys(a_parts) if p in b_parts]
        for side, c in bad:
            not_compared.append({"config": f"{label} r{c.repeat}", "why": f"{side}: {c.status}: {c.reason[:200]}"})
        for p in dict.fromkeys(a_parts + b_parts):
            if p not in both:
                not_compared.append({"config": f"{label} [{p}]", "why": f"only {'A' if p in a_parts else 'B'} measured {p}"})
        for p in both:
            sa, sb = _side(a, p), _side(b, p)
            # repeats of two sets never pair: B's repeats are keyed apart from A's
            r = stats.ratio({1000 + i: v for i, v in sb["per_repeat"].items()}, sa["per_repeat"])
            notes = []
            if sa["dataset_sha256"] != sb["dataset_sha256"]:
                notes.append("dataset checksums differ: accuracies need not agree")
            if sa["flags"] or sb["flags"]:
                notes.append("flagged: " + "; ".join(f"{s}: {f}" for s, f in (("A", sa["flags"]), ("B", sb["flags"])) if f))
            multi = len(both) > 1 or p != a.config.get("backend")
            plain = judge(r.lo, r.hi, threshold)
            flagged = bool(sa["flags"] or sb["flags"])
            matched.append(
                {
                    "study": a.config["study"],
                    "config": label + (f" [{p}]" if multi else ""),
                    "part": p,
                    "unit": unit_of(str(a.config["study"])),
                    "a": {k2: v for k2, v in sa.items() if k2 != "per_repeat"} | {"per_repeat": _keyed(sa["per_repeat"])},
                    "b": {k2: v for k2, v in sb.items() if k2 != "per_repeat"} | {"per_repeat": _keyed(sb["per_repeat"])},
                    "ratio": r.median,
                    "ratio_lo": r.lo,
                    "ratio_hi": r.hi,
                    "ratio_interval": r.kind,  # "ci" (95% bootstrap), "range" (fewer than 6 repeats a side), "none"
                    "verdict": "flagged" if flagged and plain in ("faster", "slower") else plain,
                    "would_be": plain,  # the verdict without the flags (= verdict unless flagged)
                    "flagged": flagged,
                    "notes": notes,
                    "config_spec": a.config,
                }
            )
    only_a = [f"{g.config['study']} {config_label(g.config)}" for k, g in ga.items() if k not in gb]
    only_b = [f"{g.config['study']} {config_label(g.config)}" for k, g in gb.items() if k not in ga]
    matched.sort(key=lambda m: (m["ratio"], m["config"]))  # by change: the largest slowdown first
    return {
        "a": str(a_dir),
        "b": str(b_dir),
        "skipped": [f"A: {x}" for x in a_set.skipped] + [f"B: {x}" for x in b_set.skipped],  # copies of one run, read once
        "threshold": threshold,
        "definition": (
            f"ratio = median throughput of B / median of A over repeats (> 1: B faster), 95% bootstrap interval "
            f"[lo, hi] with the sets resampled independently (ratio_interval 'ci'; with fewer than 6 repeats a side "
            f"'range': min(B)/max(A) to max(B)/min(A)); slower (a regression): hi < {1 - threshold:g} (B slower "
            f"by more than {threshold:.0%} with the whole interval beyond it); faster: lo > {1 + threshold:g}; otherwise "
            "not significant; a side with one repeat has no interval and no verdict; flagged: a noise flag on either "
            "side, and the interval would say slower or faster: not judged until a quiet rerun; geometric mean: of "
            "every matched ratio, 95% interval from scipy.stats.bootstrap over those ratios (percentile)"
        ),
        "summary": summary(matched),
        "matched": matched,
        "not_compared": not_compared,
        "only_a": only_a,
        "only_b": only_b,
        "regressions": [m["config"] for m in matched if m["verdict"] == "slower"],
        "flagged_slower": [m["config"] for m in matched if m["verdict"] == "flagged" and m["would_be"] == "slower"],
        "unjudged": [m["config"] for m in matched if m["ratio_lo"] is None],
    }


def summary(matched: list[dict]) -> dict:
    """How many matched configuration parts got each verdict, and the geometric mean of their
    ratios with its 95 % interval (bench.core.stats.geomean: bootstrap over the ratios)."""
    from bench.core import stats

    count = {v.replace(" ", "_"): sum(m["verdict"] == v for m in matched) for v in VERDICTS}
    flagged_as = {v: sum(m["verdict"] == "flagged" and m["would_be"] == v for m in matched) for v in ("faster", "slower")}
    ratios = [m["ratio"] for m in matched if m["ratio"] and m["ratio"] > 0]
    g = stats.geomean(ratios) if ratios else None
    return {
        "n": len(matched),
        "count": count,
        "flagged_would_be": flagged_as,
        "geomean": g.median if g else None,
        "geomean_lo": g.lo if g else None,
        "geomean_hi": g.hi if g else None,
        "geomean_interval": g.kind if g else None,
        "geomean_n": len(ratios),
        "geomean_method": (
            "scipy.stats.bootstrap over the per-configuration ratios (percentile, 95%), mean of log ratios"
            if g is None or g.kind != "range"
            else "range of the per-configuration ratios (fewer than 6: too few for a 95% bootstrap interval)"
        ),
    }


def _keyed(per: dict[int, float]) -> dict[str, float]:
    return {f"r{k}": v for k, v in sorted(per.items())}


def _holds(groups: dict[str, Group]) -> str:
    by: dict[str, int] = {}
    for g in groups.values():
        by[str(g.config.get("study"))] = by.get(str(g.config.get("study")), 0) + 1
    return ", ".join(f"{s}: {n} configuration{'s' if n > 1 else ''}" for s, n in sorted(by.items()))


def _near_miss(ga: dict[str, Group], gb: dict[str, Group]) -> str:
    """Why nothing matched, in a few words: the first parameters that differ for the same backend."""
    for a in ga.values():
        for b in gb.values():
            if all(a.config.get(k) == b.config.get(k) for k in ("study", "backend", "variant")):
                pa, pb = a.config.get("params") or {}, b.config.get("params") or {}
                diff = [
                    f"{k} {pa.get(k)} vs {pb.get(k)}"
                    for k in sorted(set(pa) | set(pb))
                    if k != "dataset_sha256" and pa.get(k) != pb.get(k)
                ]
                if a.config.get("seed") != b.config.get("seed"):
                    diff.insert(0, f"seed {a.config.get('seed')} vs {b.config.get('seed')}")
                if diff:
                    return f"{a.config['study']} {a.config.get('backend')} {a.config.get('variant')} differs in " + ", ".join(
                        diff[:4]
                    )
    return "no study, backend and variant in common"


# ---------------------------------------------------------------------------- output
WIDTH = 120  # the widest line compare prints
FLAG = "⚑"


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if unit == "samples/s" or v >= 1000 else short(v)


def _si(v: float | None) -> str:
    """A throughput in 3 significant digits with an SI prefix: 1,651,772 -> 1.65M, 0.0123 -> 0.0123."""
    if v is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{short(v / scale)}{prefix}"
    return short(v)


def _ci(lo: float | None, hi: float | None, unit: str) -> str:
    return "n=1" if lo is None or hi is None else f"{_fmt(lo, unit)}-{_fmt(hi, unit)}"


def _acc(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _ratio(m: dict) -> str:
    ci = "n=1" if m["ratio_lo"] is None else f"{m['ratio_lo']:.3f}-{m['ratio_hi']:.3f}"
    return f"{m['ratio']:.3f}x [{ci}{' R' if m.get('ratio_interval') == 'range' else ''}]"


def _verdict(m: dict) -> str:
    """The verdict as a row shows it: a flagged pair says what it would be, and that it is not judged."""
    if m["verdict"] == "flagged":
        return f"{FLAG} {m['would_be']}? not judged"
    return m["verdict"] + (f" {FLAG}" if m.get("flagged") else "")


def summary_line(res: dict) -> str:
    """'5 configurations: 1 faster, 0 slower, 3 not significant, 1 flagged (not judged: ...);
    geometric mean B/A 0.978x [0.951-1.004] ...': the first line compare prints."""
    s = res["summary"]
    c = s["count"]
    n = s["n"]
    parts = [f"{c['faster']} faster", f"{c['slower']} slower", f"{c['not_significant']} not significant"]
    if c["flagged"]:
        would = ", ".join(f"{v} would be {k}" for k, v in s["flagged_would_be"].items() if v)
        parts.append(f"{c['flagged']} flagged {FLAG} not judged ({would})")
    if c["one_repeat"]:
        parts.append(f"{c['one_repeat']} with one repeat (no verdict)")
    line = f"{n} configuration{'s' if n != 1 else ''}: " + ", ".join(parts)
    if s["geomean"] is not None:
        if s["geomean_lo"] is None:
            ci = " (one ratio: no interval)"
        elif s.get("geomean_interval") == "range":
            ci = f" [range {s['geomean_lo']:.3f}-{s['geomean_hi']:.3f}: {s['geomean_n']} ratios, too few for a 95% CI]"
        else:
            ci = f" [95% CI {s['geomean_lo']:.3f}-{s['geomean_hi']:.3f}, bootstrap]"
        line += f"; geometric mean B/A {s['geomean']:.3f}x{ci}"
    return line


def _sides(res: dict) -> list[str]:
    out = []
    for side in ("a", "b"):
        hosts = sorted({str(h) for m in res["matched"] for h in m[side]["hosts"]})
        out.append(f"{side.upper()}: {term(res[side])}" + (f" ({term('; '.join(hosts))})" if hosts else ""))
    return out


_LABEL = re.compile(r"^(?P<base>.*?) \((?P<params>[^()]*)\)(?P<part> \[[^\]]*\])?$")


def shared_params(labels: list[str]) -> tuple[list[str], list[str]]:
    """(LABELS without the parameters every one of them shows, those parameters): the table
    says 'dataset=mnist' once instead of on every row."""
    found = [_LABEL.match(x) for x in labels]
    if len(labels) < 2 or not all(found):
        return labels, []
    items = [m.group("params").split(", ") for m in found if m]
    common = [i for i in items[0] if all(i in its for its in items[1:])]
    out = []
    for m, its in zip(found, items):
        assert m is not None
        rest = [i for i in its if i not in common]
        out.append(m.group("base") + (f" ({', '.join(rest)})" if rest else "") + (m.group("part") or ""))
    return out, common


def table(res: dict, width: int = WIDTH) -> str:
    """The matched configurations as a rich table (plain text, no colour), WIDTH columns at most."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    t.add_column("configuration", overflow="fold", ratio=1)
    t.add_column("unit", no_wrap=True)
    t.add_column("A", justify="right", no_wrap=True)
    t.add_column("B", justify="right", no_wrap=True)
    t.add_column("B/A [interval]", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    labels, _ = shared_params([m["config"] for m in res["matched"]])
    for m, label in zip(res["matched"], labels):
        cells = [label, m["unit"], _si(m["a"]["median"]), _si(m["b"]["median"]), _ratio(m), _verdict(m)]
        t.add_row(*(Text(term(c)) for c in cells))
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False, emoji=False, legacy_windows=False).print(t)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def _wrap(line: str, width: int = WIDTH, indent: str = "  ") -> list[str]:
    import textwrap

    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]


def _flag_lines(res: dict, verbose: bool, width: int) -> list[str]:
    """One line per flagged configuration: which repeats carry which flags (cut to WIDTH unless VERBOSE)."""
    out = []
    for m in res["matched"]:
        if not m.get("flagged"):
            continue
        line = f"{FLAG} {m['config']}: " + "; ".join(f"{s.upper()} {m[s]['flags']}" for s in ("a", "b") if m[s]["flags"])
        line = term(line)
        if verbose:
            out += _wrap(line, width, "    ")
        else:
            out.append(line if len(line) <= width else line[: width - 1] + "…")
    return out


def text(res: dict, verbose: bool = False, width: int = WIDTH) -> str:
    """What `compare` prints: the summary line, the two sets, the table sorted by change, then
    what a reader needs to trust it (flags, other environments, what was not compared, counts of
    what only one side holds: --verbose lists them). No line is wider than WIDTH."""
    lines = _wrap(summary_line(res), width)
    lines += [x for s in _sides(res) for x in _wrap(s, width)]
    common = shared_params([m["config"] for m in res["matched"]])[1]
    if common:
        lines += _wrap(term(f"every configuration below: {', '.join(common)}"), width)
    lines += ["", table(res, width), ""]
    flags = _flag_lines(res, verbose, width)
    if flags:
        lines.append(f"{FLAG} flagged (noise flags on a side; rerun on a quiet machine before trusting a verdict):")
        lines += flags
    for m in res["matched"]:
        for note in m["notes"]:
            if not note.startswith("flagged"):
                lines += _wrap(term(f"note: {m['config']}: {note}"), width)
    lines += [x for line in _lists(res, "- ", term, verbose) for x in (_wrap(line, width) if line else [""])]
    lines += _wrap(
        f"B/A: median throughput of B over A's (> 1: B faster) with its 95% bootstrap interval (from 6 repeats a "
        "side; R: fewer, the range min(B)/max(A)-max(B)/min(A) instead); slower / faster: the "
        f"whole interval beyond {res['threshold']:.0%} of 1.0; geometric mean: of every B/A above, its interval from "
        "scipy.stats.bootstrap resampling those ratios (percentile); --json for every number, --out for compare.md",
        width,
    )
    return "\n".join(lines).rstrip() + "\n"


def _lists(res: dict, bullet: str, esc: Callable[[object], str] = str, verbose: bool = True) -> list[str]:
    """The lists under the table; ESC escapes every value (markdown's `md` for compare.md). Without
    VERBOSE what only one side holds is a count."""
    out = []
    envs = {s: sorted({e for m in res["matched"] for e in m[s].get("environments", [])}) for s in ("a", "b")}
    if envs["a"] != envs["b"]:
        out.append(
            f"A and B ran in other environments (A: {esc('; '.join(envs['a']))}; B: {esc('; '.join(envs['b']))}): "
            "every ratio compares the environments as well as the work"
        )
    only = [(title, items) for title, items in (("only in A", res["only_a"]), ("only in B", res["only_b"])) if items]
    if only and verbose:
        for title, items in only:
            out.append(f"{title} ({len(items)}):")
            out += [f"{bullet}{esc(x)}" for x in items]
    elif only:
        counts = ", ".join(f"{title}: {len(items)} configuration{'s' if len(items) != 1 else ''}" for title, items in only)
        out.append(f"{counts} (--verbose lists them)")
    if res["not_compared"]:
        out.append(f"not compared ({len(res['not_compared'])}):")
        out += [f"{bullet}{esc(x['config'])}: {esc(x['why'])}" for x in res["not_compared"]]
    if res["unjudged"]:
        out.append(f"{len(res['unjudged'])} configuration(s) had one repeat on a side: no interval, no verdict (run --repeats 3)")
    if res["regressions"]:
        out.append("SLOWER (regression): " + "; ".join(esc(x) for x in res["regressions"]))
    return out + [""]


def markdown(res: dict) -> str:
    head = [
        "configuration",
        "unit",
        "A median (interval)",
        "B median (interval)",
        "B/A (interval)",
        "verdict",
        "acc A",
        "acc B",
        "notes",
    ]
    md = [f"# compare: A = {md_code(res['a'])}, B = {md_code(res['b'])}", "", md_text(summary_line(res)), ""]
    md += [md_text(side) + "  " for side in _sides(res)] + [""]
    md.append(md_row(head))
    md.append(md_sep(len(head)))
    for m in res["matched"]:
        u = m["unit"]
        md.append(
            md_row(
                [
                    m["config"],
                    u,
                    f"{_fmt(m['a']['median'], u)} ({_ci(m['a']['lo'], m['a']['hi'], u)})",
                    f"{_fmt(m['b']['median'], u)} ({_ci(m['b']['lo'], m['b']['hi'], u)})",
                    _ratio(m),
                    _verdict(m),
                    _acc(m["a"]["acc"]),
                    _acc(m["b"]["acc"]),
                    "; ".join(m["notes"]),
                ]
            )
        )
    md += [""] + _lists(res, "- ", md_text) + [res["definition"], ""]
    return "\n".join(md)


def write(res: dict, out: Path) -> list[Path]:
    """compare.json and compare.md into OUT (each under a temp name, then renamed)."""
    from bench.core.rows import atomic_write_text, write_json

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    paths = [out / "compare.json", out / "compare.md"]
    write_json(paths[0], res)
    atomic_write_text(paths[1], markdown(res))
    return paths


__all__ = [
    "DEFAULT_THRESHOLD",
    "cell_name",
    "compare",
    "config_label",
    "config_of",
    "final_accuracy",
    "judge",
    "load_set",
    "loss_curve",
    "match_key",
    "parse_threshold",
    "summary",
    "summary_line",
    "text",
    "throughput",
    "write",
]
