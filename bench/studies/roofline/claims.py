"""Seed 003's claims, each with a verdict computed from the cells and the numbers it rests on.

A verdict is one of VERDICTS: `holds`, `does not hold`, `unclear` (the 95 % intervals of the
numbers it compares overlap), `needs real data` (our cells ran on the synthetic tree, and the
claim is about the data: a loss, the loader's decode cost), `not measured here` (no cell of the
kind the claim needs), or `figures, not a claim` (Table 4's epoch times, which only restate
Table 3's throughputs). A verdict that rests on numbers with no interval (one repeat) says so.

The verdicts are about OUR devices: the seed's are a T4, an M3 Pro and a 4-vCPU e2-standard-4;
a ratio between two other devices tests the claim's shape (which model gains most, which side
of the ridge a point lies), and its size only for those two devices.

Host side (no torch): reads the rows through report.py's helpers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from bench.core.claims import faster
from bench.core.stats import MIN_CI_REPEATS, Summary
from bench.core.study import number
from bench.studies.roofline import seed
from bench.studies.roofline.report import MODELS, SEED_DEVICE, Cell, Speedup, _ok, _p, gap_table

HOLDS = "holds"
FAILS = "does not hold"
UNCLEAR = "unclear"
NEEDS_REAL = "needs real data"
NOT_MEASURED = "not measured here"
FIGURES = "figures, not a claim"
VERDICTS = (HOLDS, FAILS, UNCLEAR, NEEDS_REAL, NOT_MEASURED, FIGURES)
ONE_REPEAT = " (1 repeat: no interval)"

LIGHT = ("mobilenet_v2", "squeezenet1_1")  # the seed's memory-bound, light models
HEAVY = ("resnet18", "resnet50")
POINT_PHASES = ("train", "val", "sweep")


@dataclass(frozen=True)
class Verdict:
    claim: str  # the seed's claim, with where it makes it
    verdict: str  # one of VERDICTS, maybe followed by ONE_REPEAT
    evidence: str  # our numbers
    rule: str  # how the verdict is decided, or what would settle it


# ---- small helpers -------------------------------------------------------------------------
def _x(v: float) -> str:
    return f"{v:.3g}x"


def _ratio_text(s: Summary) -> str:
    return _x(s.median) + s.bracket()


def _above(a: Summary, b: Summary) -> bool | None:
    """A clearly above B: by the intervals where both have one (None: they overlap), else by the medians."""
    if a.lo is not None and a.hi is not None and b.lo is not None and b.hi is not None:
        if a.lo > b.hi:
            return True
        if a.hi < b.lo:
            return False
        return None
    return a.median > b.median


def _in_range(s: Summary, lo: float, hi: float) -> bool:
    if s.lo is not None and s.hi is not None:
        return s.hi >= lo and s.lo <= hi
    return lo <= s.median <= hi


def _combine(results: Iterable[bool | None]) -> str:
    res = list(results)
    if any(r is False for r in res):
        return FAILS
    if any(r is None for r in res):
        return UNCLEAR
    return HOLDS


def _qual(verdict: str, one_repeat: bool) -> str:
    return verdict + (ONE_REPEAT if one_repeat and verdict in (HOLDS, FAILS, UNCLEAR) else "")


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.2g}%"


def _n(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _gpu_cpu(sp: list[Speedup], pipeline: str = "loader") -> dict[tuple[str, str, str, str], dict[str, Summary]]:
    """fp32 GPU/CPU ratios of PIPELINE per pair of sides (GPU device, run, CPU device, run): model -> ratio."""
    out: dict[tuple[str, str, str, str], dict[str, Summary]] = {}
    for x in sp:
        if x.a.platform == "cuda" and x.b.platform == "cpu" and x.precision == "fp32" and x.pipeline == pipeline:
            out.setdefault((x.a.device, x.a.run, x.b.device, x.b.run), {})[x.model] = x.ratio
    return out


def _ordered(d: dict[str, Summary]) -> list[tuple[str, Summary]]:
    return sorted(d.items(), key=lambda kv: -kv[1].median)


def _pair_name(key: tuple[str, str, str, str]) -> str:
    return f"{key[0]} / {key[2]}"


def _synthetic(cells: list[Cell], pipeline: str | None = None) -> bool:
    return any(not c.first.get("dataset_real") for c in cells if pipeline is None or _p(c)["pipeline"] == pipeline)


# ---- the claims ----------------------------------------------------------------------------
def gpu_over_cpu(sp: list[Speedup]) -> Verdict:
    claim = "GPUs outperform CPUs by ~10x on light models up to ~50x on compute-heavy ones (7.1 #1, 7.3, Table 8)"
    rule = (
        "holds when every model's GPU/CPU training img/s ratio (fp32, the loader: the seed's set-up) lies in 10-50x "
        f"(its interval, a 95 % CI or the range below {MIN_CI_REPEATS} repeats, overlaps it); the size of a ratio belongs to the two devices, not to GPUs and CPUs"
    )
    pairs = _gpu_cpu(sp) or _gpu_cpu(sp, "synthetic-gpu")
    if not pairs:
        return Verdict(claim, NOT_MEASURED, "no GPU and CPU cells of one model at fp32", rule + "; needs a GPU run and a CPU run")
    texts, results, one = [], [], False
    syn = _gpu_cpu(sp, "synthetic-gpu")
    for key, by in pairs.items():
        results += [_in_range(s, 10, 50) for s in by.values()]
        one = one or any(s.lo is None for s in by.values())
        text = f"{_pair_name(key)}, fp32 loader: " + ", ".join(f"{m} {_ratio_text(s)}" for m, s in _ordered(by))
        if key in syn and syn[key] is not by:
            text += "; synthetic-gpu: " + ", ".join(f"{m} {_ratio_text(s)}" for m, s in _ordered(syn[key]))
        texts.append(text)
    return Verdict(claim, _qual(HOLDS if all(results) else FAILS, one), "; ".join(texts) + " (seed T4 / e2: 14.2-35.5x)", rule)


def heavy_gains_most(sp: list[Speedup]) -> Verdict:
    claim = (
        "ResNet50 (compute-heavy) gains most from the GPU; MobileNetV2 and SqueezeNet (memory-bound) gain least "
        "(7.1 #3, 7.3, 7.4)"
    )
    rule = (
        "holds when resnet50's GPU/CPU ratio (fp32, loader) is above every other model's and both light models' are "
        "below both ResNets'; above means the intervals do not overlap (unclear when they do; medians with 1 repeat)"
    )
    pairs = _gpu_cpu(sp) or _gpu_cpu(sp, "synthetic-gpu")
    usable = {k: by for k, by in pairs.items() if "resnet50" in by and any(m in by for m in LIGHT)}
    if not usable:
        return Verdict(claim, NOT_MEASURED, "needs GPU and CPU cells of resnet50 and a light model", rule)
    texts, results, one = [], [], False
    for key, by in usable.items():
        r50 = by["resnet50"]
        results += [_above(r50, s) for m, s in by.items() if m != "resnet50"]
        results += [_above(by[h], by[lt]) for h in HEAVY for lt in LIGHT if h in by and lt in by]
        one = one or any(s.lo is None for s in by.values())
        texts.append(f"{_pair_name(key)}, largest first: " + ", ".join(f"{m} {_ratio_text(s)}" for m, s in _ordered(by)))
    s = seed.SPEEDUP
    texts.append(f"(the seed's own Table 8 ranks resnet18 {s['resnet18'][1]}x above resnet50 {s['resnet50'][1]}x)")
    return Verdict(claim, _qual(_combine(results), one), "; ".join(texts), rule)


def _ai_points(cells: list[Cell]) -> dict[str, dict[float, list[tuple[float, float]]]]:
    """model -> batch -> [(AI unfused, AI compulsory)] of fp32 training points (train and sweep rows)."""
    out: dict[str, dict[float, list[tuple[float, float]]]] = {}
    for c in cells:
        p = _p(c)
        if p["precision"] != "fp32":
            continue
        for r in _ok(c, "train") + _ok(c, "sweep"):
            lo, hi, b = (number(r.get(k)) for k in ("ai_low_flops_per_byte", "ai_high_flops_per_byte", "batch_size"))
            if lo and hi and b:
                out.setdefault(str(p["model"]), {}).setdefault(int(b) if b.is_integer() else b, []).append((lo, hi))
    return out


def _ridges(cells: list[Cell], precision: str = "fp32") -> dict[str, float]:
    """device -> the ridge point (FLOP/B) its PRECISION points were held against."""
    out: dict[str, float] = {}
    for c in cells:
        if _p(c)["precision"] != precision:
            continue
        for r in c.ok_rows:
            v = number(r.get("ridge_flops_per_byte"))
            if v and r.get("phase") in POINT_PHASES:
                out.setdefault(c.device, v)
    return out


def lowest_ai(cells: list[Cell]) -> Verdict:
    claim = "MobileNetV2 has the lowest arithmetic intensity: the most memory-bound model (3.2, 6.4)"
    rule = (
        "holds when mobilenet_v2's counted training AI is the lowest at both bounds (unfused op-by-op traffic and "
        "compulsory bytes) at one batch; counts are data-independent (the seed divided FLOPs by the model's size instead)"
    )
    pts = _ai_points(cells)
    if "mobilenet_v2" not in pts or len(pts) < 2:
        return Verdict(claim, NOT_MEASURED, "needs fp32 training points of mobilenet_v2 and another model", rule)
    common = set.intersection(*(set(b) for b in pts.values()))
    batch = 128 if 128 in common else max(common) if common else None
    ai: dict[str, tuple[float, float, object]] = {}
    for m, by in pts.items():
        b = batch if batch is not None else next(iter(by))
        vals = by[b]
        ai[m] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals), b)
    low = min(ai, key=lambda m: ai[m][0])
    high = min(ai, key=lambda m: ai[m][1])
    verdict = HOLDS if low == high == "mobilenet_v2" else FAILS if "mobilenet_v2" not in (low, high) else UNCLEAR
    at = f"b{batch}" if batch is not None else "each model's own batch (none common to all)"
    order = sorted(ai, key=lambda m: ai[m][0])
    text = f"fp32 training AI at {at}, unfused .. compulsory FLOP/B: " + ", ".join(
        f"{m} {_n(ai[m][0])} .. {_n(ai[m][1])}" + (f" (b{ai[m][2]})" if batch is None else "") for m in order
    )
    ridges = _ridges(cells)
    if ridges:
        text += "; fp32 ridge points: " + ", ".join(f"{d} {_n(v)}" for d, v in sorted(ridges.items()))
    if verdict == UNCLEAR:
        text += f" (lowest unfused: {low}; lowest compulsory: {high})"
    return Verdict(claim, verdict, text, rule)


def cpu_memory_bound(cells: list[Cell]) -> Verdict:
    claim = "The cloud CPU is always memory-bound: every model on the bandwidth slope, even ResNet50 (6.4, 8 #5)"
    rule = (
        "per CPU point (train, val, sweep): right of its ridge even at its unfused AI = compute side; left of it even at "
        "its compulsory AI = memory side; between = straddles. Holds when every point is on the memory side; does not "
        "hold when any is on the compute side"
    )
    pts = [(c, r) for c in cells if _p(c)["platform"] == "cpu" for r in c.ok_rows if r.get("phase") in POINT_PHASES]
    by_dev: dict[str, list[tuple[str, float, float, float, float | None]]] = {}
    for c, r in pts:
        lo, hi, ridge = (number(r.get(k)) for k in ("ai_low_flops_per_byte", "ai_high_flops_per_byte", "ridge_flops_per_byte"))
        if lo and hi and ridge:
            frac = number(r.get("roof_fraction")) if r.get("phase") == "train" else None
            by_dev.setdefault(c.device, []).append((str(_p(c)["model"]), lo, hi, ridge, frac))
    if not by_dev:
        return Verdict(claim, NOT_MEASURED, "no CPU cell with roofs", rule)
    texts, results = [], []
    for dev, ps in sorted(by_dev.items()):
        ridge = statistics.median(p[3] for p in ps)
        right = [p for p in ps if p[1] > p[3]]
        left = [p for p in ps if p[2] < p[3]]
        mid = [p for p in ps if p not in right and p not in left]
        results.append(False if right else True if len(left) == len(ps) else None)

        def ranges(group: list) -> str:
            ms: dict[str, list[float]] = {}
            for p in group:
                ms.setdefault(p[0], []).append(p[1])
            return ", ".join(f"{m} {_n(min(v))}-{_n(max(v))}" for m, v in sorted(ms.items(), key=lambda kv: min(kv[1])))

        text = (
            f"{dev} (fp32 ridge {_n(ridge)} FLOP/B): {len(right)} of {len(ps)} points right of the ridge even at their unfused AI"
        )
        text += f" ({ranges(right)})" if right else ""
        text += f"; {len(mid)} straddle it ({ranges(mid)})" if mid else ""
        text += f"; {len(left)} left of it at their compulsory AI" if left else ""
        fr = [(p[4], p[0]) for p in ps if p[4] is not None]
        if fr:
            best = max(fr)
            text += f"; its best training point reaches {best[0]:.0%} of the compute roof ({best[1]})"
        texts.append(text)
    verdict = FAILS if any(r is False for r in results) else HOLDS if all(results) else UNCLEAR
    return Verdict(claim, verdict, "; ".join(texts), rule)


def gpu_bound_sides(cells: list[Cell]) -> Verdict:
    claim = "On the GPU, MobileNetV2 and SqueezeNet lie on the bandwidth slope; the ResNets reach the compute side (6.4)"
    rule = (
        "per GPU at fp32 (the seed's precision): holds when both light models' unfused AI is left of the ridge and both "
        "ResNets' right of it (at the compulsory AI, the least traffic possible, every model is right of it)"
    )
    by_dev: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for c in cells:
        p = _p(c)
        if p["platform"] != "cuda" or p["precision"] != "fp32" or p["scenario"] != "A":
            continue
        for r in _ok(c, "train"):
            lo, ridge = number(r.get("ai_low_flops_per_byte")), number(r.get("ridge_flops_per_byte"))
            if lo and ridge:
                by_dev.setdefault(c.device, {}).setdefault(str(p["model"]), []).append((lo, ridge))
    usable = {d: ms for d, ms in by_dev.items() if any(m in ms for m in LIGHT) and any(m in ms for m in HEAVY)}
    if not usable:
        return Verdict(claim, NOT_MEASURED, "needs fp32 GPU training points of a light model and a ResNet", rule)
    texts, results = [], []
    for dev, ms in sorted(usable.items()):
        ai = {m: statistics.median(v[0] for v in vals) for m, vals in ms.items()}
        ridge = statistics.median(v[1] for vals in ms.values() for v in vals)
        results += [ai[m] < ridge for m in LIGHT if m in ai] + [ai[m] > ridge for m in HEAVY if m in ai]
        texts.append(
            f"{dev} (fp32 ridge {_n(ridge)} FLOP/B), unfused training AI: "
            + ", ".join(f"{m} {_n(v)} ({'left' if v < ridge else 'right'})" for m, v in sorted(ai.items(), key=lambda kv: kv[1]))
        )
    return Verdict(claim, _combine(results), "; ".join(texts), rule)


def resnet50_nearest_roof(groups: list[list[Cell]]) -> Verdict:
    claim = "ResNet50 is the only model that climbs significantly toward the compute roof on the GPU (6.4)"
    rule = "holds when resnet50 has the highest % of roof of the fp32 training points on every GPU and pipeline (medians over repeats)"
    by: dict[tuple[str, str], dict[str, float]] = {}
    one = False
    for g in groups:
        p = _p(g[0])
        if p["platform"] != "cuda" or p["precision"] != "fp32" or p["scenario"] != "A":
            continue
        vals = [v for c in g for r in _ok(c, "train") if (v := number(r.get("roof_fraction"))) is not None]
        if vals:
            by.setdefault((g[0].device, str(p["pipeline"])), {})[str(p["model"])] = statistics.median(vals)
            one = one or len(g) < 2
    usable = {k: ms for k, ms in by.items() if "resnet50" in ms and len(ms) > 1}
    if not usable:
        return Verdict(claim, NOT_MEASURED, "needs fp32 GPU training points of resnet50 and another model", rule)
    texts, results = [], []
    for (dev, pipe), ms in sorted(usable.items()):
        results.append(max(ms, key=lambda m: ms[m]) == "resnet50")
        texts.append(
            f"{dev} {pipe}: " + ", ".join(f"{m} {_pct(v)}" for m, v in sorted(ms.items(), key=lambda kv: -kv[1])) + " of roof"
        )
    return Verdict(claim, _qual(_combine(results), one), "; ".join(texts), rule)


def _sweep_path(g: list[Cell]) -> list[tuple[float, float, float | None]]:
    """(batch, achieved FLOP/s, roof fraction) of one sweep configuration by batch: medians over its repeats."""
    by: dict[float, list[tuple[float, float | None]]] = {}
    for c in g:
        for r in _ok(c, "sweep"):
            b, f = number(r.get("batch_size")), number(r.get("achieved_flop_per_s"))
            if b and f:
                by.setdefault(b, []).append((f, number(r.get("roof_fraction"))))
    out = []
    for b in sorted(by):
        fracs = [v[1] for v in by[b] if v[1] is not None]
        out.append((b, statistics.median(v[0] for v in by[b]), statistics.median(fracs) if fracs else None))
    return out


def batches_toward_roof(groups: list[list[Cell]]) -> Verdict:
    claim = (
        "Larger batches raise achieved FLOP/s toward the compute roof, until memory pressure or instability (1.2, 6.3, 7.1 #4)"
    )
    rule = (
        "holds when every batch sweep peaks (achieved FLOP/s, median over repeats) above its smallest batch; where a "
        "sweep falls after its peak is shown. The sweep trains on one batch kept on the device: no input pipeline"
    )
    texts: dict[tuple[str, str], list[str]] = {}
    results = []
    for g in groups:
        path = _sweep_path(g)
        if len(path) < 2:
            continue
        p = _p(g[0])
        first, last = path[0], path[-1]
        peak = max(path, key=lambda x: x[1])
        results.append(peak[0] > first[0])
        t = f"{p['model']} x{peak[1] / first[1]:.3g} from b{first[0]:.0f} to b{peak[0]:.0f}"
        if first[2] is not None and peak[2] is not None:
            t += f" ({_pct(first[2])} to {_pct(peak[2])} of roof)"
        if last is not peak:
            t += f", then {last[1] / peak[1] - 1:+.0%} by b{last[0]:.0f}"
        texts.setdefault((g[0].device, str(p["precision"])), []).append(t)
    if not results:
        return Verdict(claim, NOT_MEASURED, "no batch sweep (scenario B) finished", rule)
    ev = "; ".join(f"{dev} {prec}: " + ", ".join(ts) for (dev, prec), ts in sorted(texts.items()))
    return Verdict(claim, HOLDS if all(results) else FAILS, ev, rule)


def squeezenet_nans(cells: list[Cell]) -> Verdict:
    claim = "SqueezeNet1.1 gives NaNs at batch 128 (2.3, Table 6)"
    rule = (
        "holds when any SqueezeNet1.1 training step at batch 128 or more has a non-finite loss; does not hold when a "
        "scenario-A pass at batch 128 on the real tree stays finite (--only model=squeezenet1_1 --only scenario=A "
        "--set batch_size=128); the sweep's finite losses alone settle nothing: it trains on one random-noise batch"
    )
    a_rows, sweep_rows = [], []
    for c in cells:
        p = _p(c)
        if p["model"] != "squeezenet1_1":
            continue
        for r in _ok(c, "train"):
            if (number(r.get("batch_size")) or 0) >= 128:
                a_rows.append((c, r))
        for r in _ok(c, "sweep"):
            if (number(r.get("batch_size")) or 0) >= 128:
                sweep_rows.append((c, r))
    bad = [(c, r) for c, r in a_rows + sweep_rows if r.get("loss_finite") is False]
    if bad:
        where = ", ".join(sorted({f"{c.device} {_p(c)['precision']} b{r.get('batch_size')}" for c, r in bad}))
        return Verdict(claim, HOLDS, f"non-finite loss at {where}", rule)
    real_a = [(c, r) for c, r in a_rows if c.first.get("dataset_real")]
    parts = []
    if sweep_rows:
        bs = sorted({int(r["batch_size"]) for _, r in sweep_rows})
        devs = sorted({f"{c.device} {_p(c)['precision']}" for c, _ in sweep_rows})
        parts.append(
            f"loss finite in all {len(sweep_rows)} sweep points at b{bs[0]}-b{bs[-1]} ({', '.join(devs)}; random-noise batch)"
        )
    if a_rows:
        parts.append(f"finite in {len(a_rows)} scenario-A passes at batch 128 or more ({len(real_a)} on the real tree)")
    else:
        parts.append("no scenario-A SqueezeNet1.1 pass at batch 128 or more (the matrix runs the seed's batch 64)")
    if real_a:
        return Verdict(claim, FAILS, "; ".join(parts), rule)
    if not a_rows and not sweep_rows:
        return Verdict(claim, NOT_MEASURED, parts[-1], rule)
    return Verdict(claim, NEEDS_REAL, "; ".join(parts), rule)


def loader_dominates_light(groups: list[list[Cell]], cells: list[Cell]) -> Verdict:
    claim = "Input-pipeline time dominates for the lighter models (7.3, 7.6)"
    rule = (
        "holds when, on every device at fp32, both light models keep a smaller share of their synthetic-gpu "
        "throughput through the real loader (loader / synthetic-gpu img/s) than both ResNets; the decode cost and the "
        "page cache are the real tree's, so synthetic JPEGs cannot settle it"
    )
    by: dict[str, dict[str, float]] = {}
    for r in gap_table(groups):
        if r["precision"] == "fp32" and r["ratio"]:
            by.setdefault(str(r["device"]), {})[str(r["model"])] = r["ratio"]
    if not by:
        return Verdict(claim, NOT_MEASURED, "needs loader and synthetic-gpu cells of one model and device", rule)
    texts, results = [], []
    for dev, ms in sorted(by.items()):
        results += [ms[lt] < ms[h] for lt in LIGHT for h in HEAVY if lt in ms and h in ms]
        texts.append(
            f"{dev} fp32 loader / synthetic-gpu: "
            + ", ".join(f"{m} {v:.2f}" for m, v in sorted(ms.items(), key=lambda kv: kv[1]))
        )
    if _synthetic(cells, "loader"):
        return Verdict(claim, NEEDS_REAL, "; ".join(texts) + " (synthetic JPEG tree)", rule)
    return Verdict(claim, HOLDS if results and all(results) else FAILS if results else NOT_MEASURED, "; ".join(texts), rule)


def mps_between(sp: list[Speedup]) -> Verdict:
    claim = "The Apple M3 Pro (MPS) lands between the CPU and the NVIDIA GPU (7.1 #2, 8 #3)"
    rule = "holds when, per model at fp32 with the loader, GPU / MPS and MPS / CPU are both above 1x (intervals above 1 where there are any)"
    one_x = Summary(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2)
    gpu_mps = {
        x.model: x.ratio
        for x in sp
        if (x.a.platform, x.b.platform) == ("cuda", "mps") and x.precision == "fp32" and x.pipeline == "loader"
    }
    mps_cpu = {
        x.model: x.ratio
        for x in sp
        if (x.a.platform, x.b.platform) == ("mps", "cpu") and x.precision == "fp32" and x.pipeline == "loader"
    }
    models = [m for m in MODELS if m in gpu_mps and m in mps_cpu]
    if not models:
        return Verdict(
            claim, NOT_MEASURED, "needs fp32 loader cells of one model on an NVIDIA GPU, an Apple GPU (torch-mps) and a CPU", rule
        )
    results = [_above(gpu_mps[m], one_x) for m in models] + [_above(mps_cpu[m], one_x) for m in models]
    one = any(gpu_mps[m].lo is None or mps_cpu[m].lo is None for m in models)
    ev = ", ".join(f"{m}: GPU/MPS {_ratio_text(gpu_mps[m])}, MPS/CPU {_ratio_text(mps_cpu[m])}" for m in models)
    return Verdict(claim, _qual(_combine(results), one), ev, rule)


def epoch_times(groups: list[list[Cell]], cells: list[Cell]) -> Verdict:
    claim = "Epoch times (Table 4)"
    rule = (
        "Table 4 restates Table 3: its seconds x Table 3's img/s = the seed's epoch, 6,400 images (50 batches of 128) in "
        "22 of 24 entries and 3,200 (50 of 64) for SqueezeNet1.1 on the T4, not Tiny-ImageNet's 100,000; ours are "
        "projected to that epoch at our fp32 loader img/s (Pass times below)"
    )
    per: dict[str, list[str]] = {}
    order = {m: i for i, m in enumerate(MODELS)}
    for g in sorted(groups, key=lambda g: order.get(str(_p(g[0])["model"]), 9)):
        p = _p(g[0])
        if p["precision"] != "fp32" or p["pipeline"] != "loader" or p["scenario"] != "A":
            continue
        ips = [v for c in g for r in _ok(c, "train") if (v := number(r.get("img_per_s")))]
        if not ips:
            continue
        sd = SEED_DEVICE.get(str(p["platform"]), "")
        n = seed.epoch_images(str(p["model"]), sd)
        se = seed.EPOCH.get((str(p["model"]), sd))
        per.setdefault(g[0].device, []).append(
            f"{p['model']} {n / statistics.median(ips):.3g} s" + (f" (seed {sd} {se[0]} s)" if se else "")
        )
    if not per:
        return Verdict(claim, NOT_MEASURED, "no fp32 loader training pass", rule)
    ev = "one seed epoch, training, projected: " + "; ".join(f"{d}: " + ", ".join(v) for d, v in sorted(per.items()))
    return Verdict(claim, NEEDS_REAL if _synthetic(cells, "loader") else FIGURES, ev, rule)


def verdicts(groups: list[list[Cell]], sp: list[Speedup]) -> list[Verdict]:
    """Every claim of the seed this study can check, in the seed's order of argument."""
    cells = [c for g in groups for c in g]
    return [
        gpu_over_cpu(sp),
        heavy_gains_most(sp),
        lowest_ai(cells),
        gpu_bound_sides(cells),
        resnet50_nearest_roof(groups),
        cpu_memory_bound(cells),
        batches_toward_roof(groups),
        squeezenet_nans(cells),
        loader_dominates_light(groups, cells),
        mps_between(sp),
        epoch_times(groups, cells),
    ]


__all__ = ["VERDICTS", "Verdict", "verdicts"]


# seed 003's Table 8 (GPU/CPU, Scenario A throughputs): "10-50x depending on model complexity"
CLAIMS = tuple(
    faster(
        f"gpu-over-cpu-{model}",
        f"GPU over CPU, {model} (fp32, scenario A)",
        {"backend": "torch-cuda", "variant": "fp32", "model": model, "pipeline": "loader", "scenario": "A"},
        {"backend": "torch-cpu", "variant": "fp32", "model": model, "pipeline": "loader", "scenario": "A"},
        "Table 8",
        seed,
        f"Table 8: {seed}x",
    )
    for model, seed in (("resnet18", 35.5), ("mobilenet_v2", 21.4), ("resnet50", 29.2), ("squeezenet1_1", 14.2))
)
