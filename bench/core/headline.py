"""The report's first table: for each comparison a seed made (GPU over CPU, a framework over
a hand-written kernel, tuned over default, 2 GPUs over 1), the ratio of our throughputs with
its interval (95 % bootstrap, or the range below `stats.MIN_CI_REPEATS` repeats), a verdict, the seed's own figure beside it, and the data it ran on.

A study declares its comparisons (`Study.comparisons`): two sets of facets a cell must have
(backend, variant, platform, `gpus`, or any of its params), the seed's figure, and the
params that may differ between the two sides. Every other param must be equal, so a ratio
is never formed between two workloads. Each side's value per repeat is the study's own
throughput (`Study.throughput`, larger = faster); the ratio is `bench.core.stats.ratio`,
paired by repeat only when both sides ran in one result dir (one run: the repeats were
interleaved and shared the machine's noise), resampled independently otherwise.

Where a run holds both sides, that pair is reported; a side with no partner in its own
result dir is paired with every dir that has one (another host: "this GPU vs that CPU").
A comparison no cell can form is listed, with what is missing, under "what to trust".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.core import stats

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

# params that never make two workloads different: how many threads or loader workers a
# host gave, which devices by index, and the file checksum (the dataset name stays)
ALWAYS_FREE = ("threads", "num_workers", "devices", "dataset_sha256")
# params that set how much work a cell does (epochs, step caps, warm-up, sweep and profiler
# settings), not what one step computes: a throughput does not depend on them, so a study
# may let them differ (a reduced CPU protocol beside the GPU's full one)
WORK_AMOUNT = (
    "epochs",
    "max_steps",
    "max_train_batches",
    "max_val_batches",
    "max_eval_batches",
    "warmup_steps",
    "warmup_batches",
    "idle_s",
    "overhead_blocks",
    "overhead_steps",
    "prof_active",
    "prof_warmup",
    "roof_sizes",
    "sweep_batches",
    "sweep_max_batch",
    "sweep_min_batch",
    "sweep_mem_fraction",
    "synthetic_train_per_class",
    "synthetic_val_per_class",
    "trials",
    "calib_batches",
    "latency_calls",
    "latency_warmup",
    "n_train",
    "n_test",
)


@dataclass(frozen=True)
class Comparison:
    name: str  # "GPU over CPU (PyTorch)": numerator over denominator, larger = numerator faster
    a: dict[str, Any]  # facets of the numerator's cells
    b: dict[str, Any]  # facets of the denominator's cells
    seed: float | tuple[float, float] | None = None  # the seed's own ratio of the two throughputs (or its range)
    seed_text: str = ""  # how the seed put it ("71,758 / 30,501 samples/s", "~10x")
    free: tuple[str, ...] = ()  # params that may differ between the sides besides a's and b's keys
    note: str = ""  # one line under the table, e.g. what the seed's figure measured


@dataclass
class Row:
    study: str
    comparison: str
    numerator: str  # what ran: configuration, device, result dir
    denominator: str
    ratio: stats.Summary
    verdict: str
    seed: float | tuple[float, float] | None
    seed_text: str
    versus_seed: str
    data: str  # dataset names, "(synthetic)" where not the real data
    synthetic: bool
    flagged: int  # cells of the pair with noise or validity flags
    paired: bool
    workload: dict = field(default_factory=dict)  # the params both sides share
    others: list[tuple[float, str]] = field(default_factory=list)  # (ratio, where) of the same comparison in other runs


def facets(study: Study, c: ResultCell, part: str | None = None) -> dict[str, Any]:
    """What a comparison can match on: backend (PART: the row backend, where one cell holds
    several, e.g. mlp-scratch's numpy+cupy), variant, platform, gpus (devices the cell used, at
    least 1 on a GPU platform, 0 on a CPU), and every param of the cell's spec (a param the
    cell predates reads as the study's default)."""
    given = c.spec.get("params")
    params: dict[str, Any] = {**_defaults(study), **(given if isinstance(given, dict) else {})}
    backend = part or str(c.first.get("backend"))
    spec = study.backends.get(backend)
    platform = spec.platform if spec else "?"
    devs = c.spec.get("devices") or params.get("devices") or []
    n = len(devs) if isinstance(devs, list) else len([d for d in str(devs).split(",") if d])
    out: dict[str, Any] = dict(params)
    out.update(
        backend=backend,
        variant=str(c.first.get("variant")),
        platform=platform,
        gpus=0 if platform == "cpu" else max(1, n),
    )
    return out


def _defaults(study: Study) -> dict:
    try:
        return study.config_defaults()
    except Exception:  # noqa: BLE001 - a study without a Config compares on what its cells say
        return {}


def _matches(f: dict, want: dict) -> bool:
    return all(f.get(k) == v for k, v in want.items())


def _join(f: dict, comp: Comparison) -> str:
    skip = set(comp.a) | set(comp.b) | set(comp.free) | set(ALWAYS_FREE) | {"platform", "gpus"}
    return json.dumps({k: v for k, v in f.items() if k not in skip}, sort_keys=True, default=str)


@dataclass
class _Side:
    part: str = ""  # the row backend it measured
    cells: list = field(default_factory=list)
    per: dict = field(default_factory=dict)  # repeat -> throughput


def _sides(study: Study, cells: list[ResultCell], want: dict, comp: Comparison) -> dict[tuple[str, str], _Side]:
    """(result dir, join key) -> the cells matching WANT there, with their per-repeat throughput."""
    out: dict[tuple[str, str], _Side] = {}
    for c in cells:
        for part, v in study.throughput(c.rows).items():
            f = facets(study, c, part)
            if not _matches(f, want) or not v or v <= 0:
                continue
            s = out.setdefault((c.run_label, _join(f, comp)), _Side(part=part))
            s.cells.append(c)
            s.per[c.repeat] = v
    return out


def _what(side: _Side, want: dict) -> str:
    c = side.cells[0]
    bits = [side.part, str(c.first.get("variant"))]
    bits += [f"{k}={v}" for k, v in want.items() if k not in ("backend", "variant", "platform")]
    return f"{' '.join(bits)} on {c.device} [{c.run_label}, n={len(side.per)}]"


def verdict(r: stats.Summary) -> str:
    """faster / slower / no clear difference, from the interval; no verdict without one."""
    if r.lo is None or r.hi is None:
        return "one repeat: no verdict"
    if r.lo > 1.0:
        return "faster"
    if r.hi < 1.0:
        return "slower"
    return stats.undecided(r, "no clear difference")


def _data(cells: list[ResultCell]) -> tuple[str, bool]:
    names: dict[str, bool] = {}
    for c in cells:
        r = c.first
        real = next((x.get("dataset_real") for x in c.rows if "dataset_real" in x), None)
        name = str(r.get("dataset") or (c.spec.get("params") or {}).get("dataset") or "?")
        names[name] = names.get(name, True) and real is True
    text = ", ".join(n if real else f"{n} (synthetic)" for n, real in sorted(names.items()))
    return text, not all(names.values())


def versus_seed(r: stats.Summary, seed: float | tuple[float, float] | None) -> str:
    """Where the seed's figure (or range) sits against our interval."""
    if seed is None:
        return "seed gave no figure"
    lo_s, hi_s = seed if isinstance(seed, tuple) else (seed, seed)
    mid = (lo_s * hi_s) ** 0.5
    if r.lo is None or r.hi is None:
        return f"ours {r.median / mid:.2g}x the seed's (one repeat)"
    if r.lo <= hi_s and lo_s <= r.hi:
        return "agrees: the seed's figure is inside our interval"
    return f"differs: ours {r.median / mid:.2g}x the seed's"


def best(rows: list[Row]) -> list[Row]:
    """One row per comparison: the pair with the strongest evidence (an interval at all, then
    both sides in one run, most repeats, fewest flagged cells); the others' ratios ride along
    in `others`."""
    by: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by.setdefault((r.study, r.comparison), []).append(r)
    out = []
    for group in by.values():
        group.sort(key=lambda r: (r.ratio.lo is None, not r.paired, -r.ratio.n, r.flagged))
        top = group[0]
        top.others = [(r.ratio.median, f"{r.numerator} / {r.denominator}") for r in group[1:]]
        out.append(top)
    return out


def rows(study: Study, cells: list[ResultCell]) -> tuple[list[Row], list[str]]:
    """(every pair of STUDY's comparisons that CELLS can form, one line per comparison they
    cannot); `best` keeps one row per comparison."""
    ok = [c for c in cells if c.status == "ok"]
    out: list[Row] = []
    missing: list[str] = []
    for comp in study.comparisons:
        a_sides = _sides(study, ok, comp.a, comp)
        b_sides = _sides(study, ok, comp.b, comp)
        formed: list[Row] = []
        for (dir_a, key), a in sorted(a_sides.items()):
            partners = [((dir_b, k), b) for (dir_b, k), b in sorted(b_sides.items()) if k == key]
            same = [p for p in partners if p[0][0] == dir_a]
            for (dir_b, _), b in same or partners:
                paired = dir_a == dir_b
                ratio = stats.ratio(a.per, b.per, paired=paired)
                data, synthetic = _data(a.cells + b.cells)
                formed.append(
                    Row(
                        study=study.name,
                        comparison=comp.name,
                        numerator=_what(a, comp.a),
                        denominator=_what(b, comp.b),
                        ratio=ratio,
                        verdict=verdict(ratio),
                        seed=comp.seed,
                        seed_text=comp.seed_text,
                        versus_seed=versus_seed(ratio, comp.seed),
                        data=data,
                        synthetic=synthetic,
                        flagged=sum(1 for c in a.cells + b.cells if c.flags),
                        paired=paired,
                        workload=json.loads(key),
                    )
                )
        # the params that tell this comparison's workloads apart (model, batch size) join its name
        varying = sorted({k for row in formed for k in row.workload if len({json.dumps(x.workload.get(k)) for x in formed}) > 1})
        for row in formed:
            if varying:
                row.comparison += " (" + ", ".join(f"{k}={row.workload.get(k)}" for k in varying) + ")"
        out += formed
        if not formed:
            why = []
            if not a_sides:
                why.append("no finished cell with " + _facet_text(comp.a))
            if not b_sides:
                why.append("no finished cell with " + _facet_text(comp.b))
            if not why:
                why.append("the two sides never ran the same workload (their other params differ)")
            missing.append(f"{study.name}: {comp.name}: " + "; ".join(why))
    return out, missing


def _facet_text(f: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in f.items())


__all__ = ["ALWAYS_FREE", "WORK_AMOUNT", "Comparison", "Row", "best", "facets", "rows", "verdict", "versus_seed"]
