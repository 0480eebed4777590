"""Seed 002's claims, each with our measurement and a verdict.

The seed prints no tables; these are its sentences (sections V and VII, the abstract) that a
measurement can check. Each claim's `check` reads the report's groups (and the GPU-over-CPU
rows) and gives (ours, verdict, evidence). Verdicts:

    holds              our measurement agrees with the claim (on our hardware: the seed's
                       HPC node, P100, i7 and i9 are not here; a bound is checked as a bound)
    does not hold      it disagrees, and the evidence says by how much
    needs real data    the claim is about CIFAR-10 accuracy and these cells ran on synthetic
                       data (timing and memory do not depend on the images' content; accuracy does)
    not measured here  no cell of the configurations the claim needs ran; the evidence says which
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.core import stats
from bench.core.claims import SPEED_FREE, between, faster
from bench.core.resultset import ResultCell as Cell
from bench.studies.cifar_opt.readout import (
    GPU_PLATFORMS,
    SEED_N_TRAIN,
    last,
    med,
    model,
    n_train,
    param,
    per_repeat,
    platform,
    ratio_text,
    real_data,
    run_labels,
    where,
)

HOLDS, FAILS, REAL, NOT_MEASURED = "holds", "does not hold", "needs real data", "not measured here"
MODEL_NAME = {"resnet18": "ResNet-18", "mobilenet_v2": "MobileNetV2"}

Check = Callable[[list[list[Cell]], list[dict]], tuple[str, str, str]]


@dataclass(frozen=True)
class Claim:
    claim: str  # the seed's sentence, shortened
    seed: str  # its figure
    check: Check  # (groups, GPU-over-CPU rows) -> (ours, verdict, evidence)


def _of(groups: list[list[Cell]], plats: tuple[str, ...], variants: tuple[str, ...], mdl: str | None = None) -> list:
    """The groups of PLATS and VARIANTS (the seed's batch 32, the seed's loader on a GPU)."""
    out = []
    for g in groups:
        c = g[0]
        if platform(c) not in plats or c.first.get("variant") not in variants or (mdl and model(c) != mdl):
            continue
        if param(c, "batch_size", 32) != 32 or (platform(c) != "cpu" and param(c, "pipeline", "loader") != "loader"):
            continue
        out.append(g)
    return out


def _pairs(groups: list[list[Cell]], plats: tuple[str, ...], a: str, b: str) -> list[tuple[list[Cell], list[Cell]]]:
    """(A group, B group) of one model on one host (same host and device), for same-host ratios."""
    bs = _of(groups, plats, (b,))
    return [
        (ga, gb) for ga in _of(groups, plats, (a,)) for gb in bs if model(ga[0]) == model(gb[0]) and where(ga[0]) == where(gb[0])
    ]


def _paired(ga: list[Cell], gb: list[Cell]) -> bool | None:
    return None if len(run_labels(ga) | run_labels(gb)) == 1 else False


def _name(g: list[Cell]) -> str:
    return MODEL_NAME.get(model(g[0]), model(g[0]))


def _epoch_bound(mdl: str, bound_s: float) -> Check:
    def check(groups, cross):
        found = []
        for g in _of(groups, GPU_PLATFORMS, ("default",), mdl):
            n = n_train(g) or SEED_N_TRAIN
            v = med(per_repeat(g, "epoch", "epoch_s"))
            if v is not None:
                found.append((v * SEED_N_TRAIN / n, g[0].device, n))
        if not found:
            return "not run here", NOT_MEASURED, f"no GPU Default {MODEL_NAME[mdl]} cell"
        ours = "; ".join(
            f"{v:.2f} s on {dev}" + (f" (scaled from {n:,} images)" if n != SEED_N_TRAIN else "") for v, dev, n in found
        )
        verdict = HOLDS if all(v < bound_s for v, _, _ in found) else FAILS
        return ours, verdict, "median epoch time over seeds, per 5,000 images; timing does not depend on the images' content"

    return check


def _amp_time(groups, cross):
    pairs = _pairs(groups, GPU_PLATFORMS, "amp", "default")
    if not pairs:
        return "not run here", NOT_MEASURED, "needs GPU AMP and GPU Default cells on one host"
    parts, ok = [], True
    for ga, gb in pairs:
        r = stats.ratio(per_repeat(ga, "epoch", "epoch_s"), per_repeat(gb, "epoch", "epoch_s"), paired=_paired(ga, gb))
        parts.append(f"{_name(ga)} {ratio_text(r)}")
        ok = ok and 0.80 <= r.median <= 0.95 and (r.hi is None or r.hi < 1.0)
    devices = ", ".join(sorted({ga[0].device for ga, _ in pairs}))
    return "; ".join(parts), HOLDS if ok else FAILS, f"AMP / Default epoch time on {devices}; the claim: 0.80-0.95x"


def _quant_time(groups, cross):
    pairs = _pairs(groups, ("cpu",), "int8", "default") + _pairs(groups, ("cpu",), "quant-dynamic", "default")
    if not pairs:
        return "not run here", NOT_MEASURED, "needs CPU Quantized (int8 or quant-dynamic) and CPU Default cells on one host"
    parts, ok = [], True
    for ga, gb in pairs:
        r = stats.ratio(per_repeat(ga, "epoch", "epoch_s"), per_repeat(gb, "epoch", "epoch_s"), paired=_paired(ga, gb))
        parts.append(f"{_name(ga)} {ga[0].first.get('variant')} {ratio_text(r)}")
        ok = ok and r.median <= 0.8 and (r.hi is None or r.hi < 1.0)
    devices = ", ".join(sorted({ga[0].device for ga, _ in pairs}))
    evidence = (
        f"Quantized / Default epoch time on {devices}: both train the same fp32 model (quantization comes "
        "after training), so about 1.0x is what to expect"
    )
    return "; ".join(parts), HOLDS if ok else FAILS, evidence


def _gpu_over_cpu(groups, cross):
    formed = [r for r in cross if r.get("train_ratio") is not None]
    missing = sorted({f"{r['model']} {r['pair'].split(':')[0]}" for r in cross if r.get("missing")})
    if not formed:
        return (
            "not run here",
            NOT_MEASURED,
            "no GPU and CPU cell of one configuration pair" + (f" (missing: {', '.join(missing)})" if missing else ""),
        )
    slow = [
        r for r in formed if r["train_ratio"].median <= 1.0 or (r["train_ratio"].lo is not None and r["train_ratio"].lo <= 1.0)
    ]
    lo, hi = min(r["train_ratio"].median for r in formed), max(r["train_ratio"].median for r in formed)
    ours = f"GPU {lo:.1f}x" + (f" to {hi:.1f}x" if hi > lo else "") + " the CPU's training img/s"
    evidence = f"{len(formed)} GPU / CPU row(s) of the table above" + (f"; not formed: {', '.join(missing)}" if missing else "")
    return ours, FAILS if slow else HOLDS, evidence


def _latency_bound(plats: tuple[str, ...], below: bool, bound_ms: float) -> Check:
    def check(groups, cross):
        found = []
        for g in groups:
            if platform(g[0]) not in plats:
                continue
            for f in {r.get("form") for c in g for r in c.rows if r.get("phase") == "inference"}:
                v = med(per_repeat(g, "inference", "latency_p50_ms", form=f))
                if v is not None:
                    found.append((v, f"{_name(g)} {g[0].first.get('variant')} {f}", g[0].device))
        if not found:
            return "not run here", NOT_MEASURED, f"no {'GPU' if plats != ('cpu',) else 'CPU'} inference rows"
        lo, hi = min(found), max(found)
        ours = f"{lo[0]:.3g}–{hi[0]:.3g} ms"
        ok = hi[0] < bound_ms if below else lo[0] > bound_ms
        devices = sorted({d for _, _, d in found})
        evidence = f"batch-1 p50 over every deployment form, on {', '.join(devices)}; fastest {lo[1]}, slowest {hi[1]}"
        return ours, HOLDS if ok else FAILS, evidence

    return check


def _amp_latency(groups, cross):
    pairs = _pairs(groups, GPU_PLATFORMS, "amp", "default")
    if not pairs:
        return "not run here", NOT_MEASURED, "needs GPU AMP and GPU Default cells on one host"
    parts, ok = [], True
    for ga, gb in pairs:
        a = per_repeat(ga, "inference", "latency_p50_ms", form="eager-fp16")
        b = per_repeat(gb, "inference", "latency_p50_ms", form="eager-fp32")
        if not a or not b:
            continue
        r = stats.ratio(a, b, paired=_paired(ga, gb))
        parts.append(f"{_name(ga)} {ratio_text(r)}")
        ok = ok and r.median < 1.0 and (r.hi is None or r.hi < 1.0)
    if not parts:
        return "not run here", NOT_MEASURED, "no eager-fp16 / eager-fp32 latency rows"
    return "; ".join(parts), HOLDS if ok else FAILS, "AMP / Default batch-1 p50 latency (below 1.0x: AMP faster)"


def _quant_memory(groups, cross):
    qs = _of(groups, ("cpu",), ("int8", "quant-dynamic"))
    if not qs:
        return "not run here", NOT_MEASURED, "no CPU Quantized cell"
    rss = [v for g in qs if (v := med(per_repeat(g, "epoch", "rss_peak_mb", max))) is not None]
    sizes = [
        v for g in qs for f in ("int8-pt2e", "int8-dynamic") if (v := med(per_repeat(g, "inference", "model_size_mb", form=f)))
    ]
    if not rss:
        return "not run here", NOT_MEASURED, "no peak RSS in the Quantized cells' rows"
    ours = f"{min(rss):,.0f}–{max(rss):,.0f} MB" if len(rss) > 1 else f"{rss[0]:,.0f} MB"
    ok = all(145 / 1.5 <= v <= 145 * 1.5 for v in rss)
    evidence = (
        "peak process RSS while training (a torch process with its libraries; the seed does not say what its 145 MB "
        "counted)" + (f"; the quantized model itself: {min(sizes):.3g}–{max(sizes):.3g} MB" if sizes else "")
    )
    return ours, HOLDS if ok else FAILS, evidence


def _quant_accuracy(groups, cross):
    qs = _of(groups, ("cpu",), ("int8", "quant-dynamic"))
    drops = [
        (v, _name(g), f)
        for g in qs
        for f in ("int8-pt2e", "int8-dynamic")
        if (v := med(per_repeat(g, "inference", "acc_drop_pts", form=f))) is not None
    ]
    if not drops:
        return "not run here", NOT_MEASURED, "no CPU Quantized cell"
    ours = "; ".join(f"{n} {f} {v:+.1f} pts" for v, n, f in drops)
    if not all(real_data(g) for g in qs):
        return ours, REAL, "accuracy drop (fp32 minus int8, same model, same test images) on synthetic data, not CIFAR-10"
    ok = all(v <= 2.0 for v, _, _ in drops)
    return ours, HOLDS if ok else FAILS, "accuracy drop, fp32 minus int8, percentage points"


def _final_acc(g: list[Cell]) -> float | None:
    return med(per_repeat(g, "epoch", "test_acc", last), 100)


def _tuned_accuracy(groups, cross):
    gs = _of(groups, GPU_PLATFORMS, ("optuna",))
    accs = [(v, _name(g)) for g in gs if (v := _final_acc(g)) is not None]
    if not accs:
        return "not run here", NOT_MEASURED, "no GPU Tuned (Optuna) cell"
    ours = "; ".join(f"{n} {v:.1f} %" for v, n in accs)
    if not all(real_data(g) for g in gs):
        return ours, REAL, "test accuracy on synthetic data, not CIFAR-10"
    return ours, HOLDS if all(65 <= v <= 75 for v, _ in accs) else FAILS, "median test accuracy over seeds (the claim: ~70 %)"


def _tuning_gain(groups, cross):
    gains = []
    for ga, gb in _pairs(groups, GPU_PLATFORMS, "optuna", "default"):
        a, b = _final_acc(ga), _final_acc(gb)
        if a is not None and b is not None:
            gains.append((a - b, _name(ga), real_data(ga) and real_data(gb)))
    if not gains:
        return "not run here", NOT_MEASURED, "needs GPU Tuned and GPU Default cells on one host"
    ours = "; ".join(f"{n} {d:+.1f} pts" for d, n, _ in gains)
    if not all(r for _, _, r in gains):
        return ours, REAL, "Tuned minus Default test accuracy on synthetic data, not CIFAR-10"
    return ours, HOLDS if all(3 <= d <= 6 for d, _, _ in gains) else FAILS, "Tuned minus Default median test accuracy"


SEED_CLAIMS = [
    Claim("GPU Default epoch time, ResNet-18 (HPC / P100)", "< 20 s", _epoch_bound("resnet18", 20.0)),
    Claim("GPU Default epoch time, MobileNetV2 (HPC / P100)", "< 15 s", _epoch_bound("mobilenet_v2", 15.0)),
    Claim("GPU AMP cuts training time against GPU Default", "5-20 % less", _amp_time),
    Claim("GPU configurations train faster than CPU ones", "GPU faster", _gpu_over_cpu),
    Claim("CPU Quantized cuts training time against CPU Default (ResNet-18, i7)", "32 % less", _quant_time),
    Claim("GPU inference latency (HPC / P100), all configurations", "< 5 ms", _latency_bound(GPU_PLATFORMS, True, 5.0)),
    Claim("GPU AMP lowers inference latency a little against GPU Default", "minor gain", _amp_latency),
    Claim("CPU inference latency, all configurations", "> 13 ms", _latency_bound(("cpu",), False, 13.0)),
    Claim("CPU Quantized peak memory", "~145 MB", _quant_memory),
    Claim("CPU Quantized keeps accuracy within 1-2 % of Default", "<= 2 pts", _quant_accuracy),
    Claim("GPU Tuned accuracy (ResNet-18 and MobileNetV2)", "~70 %", _tuned_accuracy),
    Claim("GPU tuning improves accuracy (abstract)", "+3-6 %", _tuning_gain),
]


def seed_claims(groups: list[list[Cell]], cross: list[dict]) -> list[dict]:
    out = []
    for c in SEED_CLAIMS:
        ours, verdict, evidence = c.check(groups, cross)
        out.append({"claim": c.claim, "seed": c.seed, "ours": ours, "verdict": verdict, "evidence": evidence})
    return out


def tally(rows: list[dict]) -> str:
    """'4 holds, 5 does not hold, 3 needs real data'."""
    counts = {v: sum(r["verdict"] == v for r in rows) for v in (HOLDS, FAILS, REAL, NOT_MEASURED)}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


COLS = [
    ("claim", "seed's claim"),
    ("seed", "seed"),
    ("ours", "ours (medians over seeds)"),
    ("verdict", "verdict"),
    ("evidence", "evidence"),
]


SEARCH_BUDGET = ("trial_epochs", "trial_budget_s")  # how long a search ran (with `trials`, a WORK_AMOUNT param)
# seed 002 prints no tables: "GPU-based training consistently delivered faster average epoch
# times"; "AMP typically reduced training time by 5-20%"; "on the Lenovo (Intel Core i7),
# quantization led to a 32% reduction in training time for ResNet18"
CLAIMS = (
    faster(
        "gpu-over-cpu",
        "GPU Default over CPU Default (training img/s)",
        {"backend": "torch-cuda", "variant": "default"},
        {"backend": "torch-cpu", "variant": "default"},
        "Sec. V",
        None,
        "GPU faster (no figure)",
    ),
    faster(
        "amp-over-default",
        "GPU AMP over GPU Default",
        {"backend": "torch-cuda", "variant": "amp"},
        {"backend": "torch-cuda", "variant": "default"},
        "Sec. V",
        (1 / 0.95, 1 / 0.80),
        "5-20 % less training time",
        expect=between(1 / 0.95, 1 / 0.80, "1.05-1.25x"),
    ),
    faster(
        "quant-over-default",
        "CPU Quantized over CPU Default (training img/s)",
        {"backend": "torch-cpu", "variant": "int8"},
        {"backend": "torch-cpu", "variant": "default"},
        "Sec. V",
        1 / 0.68,
        "32 % less training time (ResNet-18, Intel i7)",
        note="post-training quantization: the Quantized cell trains exactly as Default, so 1.0x is what to expect",
    ),
    faster(
        "optuna-over-default",
        "GPU Tuned (Optuna) over GPU Default",
        {"backend": "torch-cuda", "variant": "optuna"},
        {"backend": "torch-cuda", "variant": "default"},
        "Sec. V",
        free=(*SPEED_FREE, *SEARCH_BUDGET),
    ),
    faster(
        "optuna-gpu-over-cpu",
        "GPU Tuned (Optuna) over CPU Tuned (Optuna) (training img/s)",
        {"backend": "torch-cuda", "variant": "optuna"},
        {"backend": "torch-cpu", "variant": "optuna"},
        "Sec. V",
        free=(*SPEED_FREE, *SEARCH_BUDGET),
        note="each side trains at the batch its own search picked",
    ),
    faster(
        "kit-tuned-over-default",
        "GPU kit-tuned (bf16, channels-last, compile, graphs) over GPU Default",
        {"backend": "torch-cuda", "variant": "tuned"},
        {"backend": "torch-cuda", "variant": "default"},
        "the kit",
        free=(*SPEED_FREE, "pipeline"),
    ),
)
