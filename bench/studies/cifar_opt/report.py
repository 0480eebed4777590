"""cifar-opt's report section: training and inference tables (medians over repeats, each
repeat one of the seed's 3 seeds), same-host ratios with intervals, the seed's claims
beside ours, Figs. 1-4 as the seed drew them (epoch time, accuracy, peak memory,
latency per model and configuration) and the Optuna Pareto plots.

Host side: standard library, numpy, scipy (bench.core.stats) and matplotlib only.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable
from pathlib import Path

from bench.core import stats
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.tables import fmt, markdown, sig
from bench.core.text import md as md_text
from bench.core.text import md_code, plot_text, safe_name

SEED_NAMES = {
    ("cpu", "default"): "CPU Default",
    ("cpu", "quant-dynamic"): "CPU Quantized (dynamic, Linear only)",
    ("cpu", "optuna"): "CPU Tuned (Optuna)",
    ("cpu", "int8"): "CPU int8 (PT2E static) [kit]",
    ("cpu", "compile"): "CPU compile [kit]",
    ("cuda", "default"): "GPU Default",
    ("cuda", "amp"): "GPU AMP (fp16)",
    ("cuda", "optuna"): "GPU Tuned (Optuna)",
    ("cuda", "tuned"): "GPU tuned: bf16+cl+compile+graphs [kit]",
    ("mps", "default"): "MPS Default",
    ("mps", "optuna"): "MPS Tuned (Optuna)",
}
PLATFORM = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}
# What seed 002 says in words (it prints no tables): claim, its figure, and how ours is read.
SEED_CLAIMS = [
    ("GPU Default epoch time, ResNet-18 (HPC / P100)", "< 20 s", "cuda", "resnet18", "default", "epoch_s", "s"),
    ("GPU Default epoch time, MobileNetV2 (HPC / P100)", "< 15 s", "cuda", "mobilenet_v2", "default", "epoch_s", "s"),
    ("GPU inference latency (HPC / P100), all configs", "< 5 ms", "cuda", None, None, "latency_p50_ms", "ms"),
    ("CPU inference latency, all configs", "> 13 ms", "cpu", None, None, "latency_p50_ms", "ms"),
    ("CPU Quantized peak memory", "~145 MB", "cpu", None, "quant-dynamic", "rss_peak_mb", "MB"),
    ("GPU Tuned accuracy (ResNet-18 and MobileNetV2)", "~70 %", "cuda", None, "optuna", "test_acc", "%"),
]
REAL_ONLY = ("test_acc",)  # claims whose check needs the real CIFAR-10


def _label(c: Cell) -> str:
    r = c.first
    plat = PLATFORM.get(str(r.get("backend")), "?")
    v = str(r.get("variant"))
    name = SEED_NAMES.get((plat, v), f"{plat.upper()} {v} [kit]")
    extra = []
    pipe = next((x.get("pipeline") for x in c.rows if x.get("pipeline")), "loader")
    if pipe != "loader":
        extra.append(f"pipeline {pipe}")
    bs = (c.spec.get("params") or {}).get("batch_size")
    if bs and bs != 32 and v != "optuna":
        extra.append(f"batch {bs}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def _rows(c: Cell, phase: str) -> list[dict]:
    return [r for r in c.rows if r.get("phase") == phase and r.get("status") == "ok"]


def _per_repeat(
    group: list[Cell], phase: str, key: str, agg: Callable = statistics.median, form: str | None = None
) -> dict[int, float]:
    out = {}
    for c in group:
        vals = [
            r[key] for r in _rows(c, phase) if isinstance(r.get(key), (int, float)) and (form is None or r.get("form") == form)
        ]
        if vals:
            out[c.repeat] = float(agg(vals))
    return out


def _last(vals: list) -> float:
    return float(vals[-1])


def _med(d: dict[int, float], scale: float = 1.0) -> float | None:
    return statistics.median(d.values()) * scale if d else None


def _ci(d: dict[int, float], f: str = "{:.2f}", scale: float = 1.0) -> str:
    if not d:
        return ""
    s = stats.summarize([v * scale for v in d.values()])
    return f"{f.format(s.median)} [{s.interval(f)}]" if s.lo is not None else f.format(s.median)


def _where(c: Cell) -> str:
    return f"{c.first.get('host')} · {c.device}"


def training_table(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for g in groups:
        c = g[0]
        if not _rows(c, "epoch"):
            continue
        acc = _per_repeat(g, "epoch", "test_acc", _last)
        out.append(
            {
                "where": _where(c),
                "model": c.first.get("model") or (c.spec.get("params") or {}).get("model"),
                "config": _label(c) + (" ⚑" if any(x.flags for x in g) else ""),
                "batch": "/".join(dict.fromkeys(str(_rows(x, "epoch")[0].get("batch_size")) for x in g if _rows(x, "epoch"))),
                "epoch_s": _ci(_per_repeat(g, "epoch", "epoch_s")),
                "img_s": _med(_per_repeat(g, "epoch", "samples_per_s")),
                "acc": _ci(acc, "{:.1f}", 100) if acc else "n/a (synthetic-gpu)",
                "rss": _med(_per_repeat(g, "epoch", "rss_peak_mb", max)),
                "heap": _med(_per_repeat(g, "epoch", "python_heap_peak_mb", max)),
                "gpu": _med(_per_repeat(g, "epoch", "gpu_alloc_peak_mb", max)),
                "compile_s": _med(_per_repeat(g, "epoch", "compile_s", max)),
                "n": len(g),
            }
        )
    return out


TRAIN_COLS = [
    ("where", "host · device"),
    ("model", "model"),
    ("config", "configuration"),
    ("batch", "batch (per seed if they differ)"),
    ("epoch_s", "epoch s [95% CI]"),
    ("img_s", "img/s"),
    ("acc", "test acc % [95% CI]"),
    ("rss", "peak RSS MB"),
    ("heap", "tracemalloc peak MB"),
    ("gpu", "GPU alloc peak MB"),
    ("compile_s", "warm-up/compile s"),
    ("n", "seeds"),
]


def _forms(g: list[Cell]) -> list[str]:
    seen: list[str] = []
    for c in g:
        for r in _rows(c, "inference"):
            if r["form"] not in seen:
                seen.append(r["form"])
    return seen


def inference_table(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for g in groups:
        c = g[0]
        for f in _forms(g):
            out.append(
                {
                    "where": _where(c),
                    "model": c.first.get("model"),
                    "config": _label(c),
                    "form": f,
                    "p50": _ci(_per_repeat(g, "inference", "latency_p50_ms", form=f), "{:.3f}"),
                    "p90": _med(_per_repeat(g, "inference", "latency_p90_ms", form=f)),
                    "p99": _med(_per_repeat(g, "inference", "latency_p99_ms", form=f)),
                    "thr": _med(_per_repeat(g, "inference", "infer_samples_per_s", form=f)),
                    "acc": _med(_per_repeat(g, "inference", "test_acc", form=f), 100),
                    "drop": _med(_per_repeat(g, "inference", "acc_drop_pts", form=f)),
                    "size": _med(_per_repeat(g, "inference", "model_size_mb", form=f)),
                    "calls": _med(_per_repeat(g, "inference", "latency_calls", form=f)),
                }
            )
    return out


INFER_COLS = [
    ("where", "host · device"),
    ("model", "model"),
    ("config", "configuration"),
    ("form", "form"),
    ("p50", "batch-1 p50 ms [95% CI]"),
    ("p90", "p90 ms"),
    ("p99", "p99 ms"),
    ("thr", "batched img/s"),
    ("acc", "test acc %"),
    ("drop", "acc drop (pts)"),
    ("size", "size MB"),
    ("calls", "calls"),
]


def _ratio_line(what: str, a: dict[int, float], b: dict[int, float], a_name: str, b_name: str, target: str = "") -> dict | None:
    """A / B over repeats with its interval and verdict (B/A <1 means A is smaller)."""
    if not a or not b:
        return None
    r = stats.ratio(a, b)
    ci = f"{r.lo:.2f}–{r.hi:.2f}" if r.lo is not None else "n=1"
    return {"what": what, "ratio": f"{r.median:.2f}x", "ci": ci, "verdict": stats.verdict(r, a_name, b_name), "target": target}


def ratios(groups: list[list[Cell]]) -> list[dict]:
    """Same-host comparisons the issue and the seed care about."""
    out: list[dict | None] = []
    by = {(_where(g[0]), g[0].first.get("model"), _label(g[0])): g for g in groups}
    for g in groups:
        c = g[0]
        model, where = c.first.get("model"), _where(c)
        forms = _forms(g)
        if "int8-pt2e" in forms and "fp32-compiled" in forms:
            lat = {f: _per_repeat(g, "inference", "latency_p50_ms", form=f) for f in ("int8-pt2e", "fp32-compiled")}
            size = {f: _per_repeat(g, "inference", "model_size_mb", form=f) for f in ("int8-pt2e", "fp32-compiled")}
            out.append(
                _ratio_line(
                    f"{model} int8 / compiled fp32 batch-1 p50 latency ({where})",
                    lat["int8-pt2e"],
                    lat["fp32-compiled"],
                    "fp32",
                    "int8",
                    "<= 0.7x",
                )
            )
            thr = {f: _per_repeat(g, "inference", "infer_samples_per_s", form=f) for f in ("int8-pt2e", "fp32-compiled")}
            out.append(
                _ratio_line(f"{model} int8 / compiled fp32 batched img/s", thr["int8-pt2e"], thr["fp32-compiled"], "int8", "fp32")
            )
            size_line = _ratio_line(
                f"{model} int8 / fp32 model size", size["int8-pt2e"], size["fp32-compiled"], "fp32", "int8", "<= 0.3x"
            )
            if size_line:  # a size ratio reads "larger/smaller", not "faster"
                size_line["verdict"] = (
                    size_line["verdict"].replace("fp32 faster", "int8 larger").replace("int8 faster", "int8 smaller")
                )
            out.append(size_line)
        if "int8-dynamic" in forms and "fp32-eager" in forms:
            lat = {f: _per_repeat(g, "inference", "latency_p50_ms", form=f) for f in ("int8-dynamic", "fp32-eager")}
            out.append(
                _ratio_line(
                    f"{model} seed's dynamic int8 / eager fp32 latency ({where})",
                    lat["int8-dynamic"],
                    lat["fp32-eager"],
                    "fp32",
                    "dynamic",
                )
            )
    for (where, model, label), g in by.items():
        if label == "GPU tuned: bf16+cl+compile+graphs [kit] (pipeline resident)":
            for other, what in (
                ("GPU Default", "tuned / default (seed's loader, fp32 eager)"),
                ("GPU AMP (fp16)", "tuned / AMP"),
            ):
                o = by.get((where, model, other))
                if o:
                    out.append(
                        _ratio_line(
                            f"{model} training img/s, {what}",
                            _per_repeat(g, "epoch", "samples_per_s"),
                            _per_repeat(o, "epoch", "samples_per_s"),
                            "tuned",
                            other,
                        )
                    )
            syn = by.get((where, model, "GPU tuned: bf16+cl+compile+graphs [kit] (pipeline synthetic-gpu)"))
            if syn:
                out.append(
                    _ratio_line(
                        f"{model} tuned, resident / synthetic-gpu img/s",
                        _per_repeat(g, "epoch", "samples_per_s"),
                        _per_repeat(syn, "epoch", "samples_per_s"),
                        "resident",
                        "synthetic",
                        ">= 0.9x",
                    )
                )
        if label == "GPU AMP (fp16)" and (where, model, "GPU Default") in by:
            o = by[(where, model, "GPU Default")]
            out.append(
                _ratio_line(
                    f"{model} epoch time, AMP / default (seed: 0.80-0.95)",
                    _per_repeat(g, "epoch", "epoch_s"),
                    _per_repeat(o, "epoch", "epoch_s"),
                    "default",
                    "AMP",
                )
            )
    return [r for r in out if r]


RATIO_COLS = [
    ("what", "comparison (same host, same run)"),
    ("ratio", "ratio of medians"),
    ("ci", "95% CI"),
    ("verdict", "verdict"),
    ("target", "target"),
]


def seed_claims(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for claim, theirs, plat, model, variant, key, unit in SEED_CLAIMS:
        vals = []
        real = True
        for g in groups:
            c = g[0]
            if PLATFORM.get(str(c.first.get("backend"))) != plat or (model and c.first.get("model") != model):
                continue
            if variant and c.first.get("variant") != variant:
                continue
            phase = "inference" if key.startswith("latency") else "epoch"
            agg = max if key.endswith("_mb") else _last if key == "test_acc" else statistics.median
            d = _per_repeat(g, phase, key, agg)
            if d:
                vals.append(statistics.median(d.values()) * (100 if key == "test_acc" else 1))
                real = real and bool(c.first.get("dataset_real"))
        ours = f"{min(vals):.3g}–{max(vals):.3g} {unit}" if len(vals) > 1 else f"{vals[0]:.3g} {unit}" if vals else "not run here"
        note = "needs real CIFAR-10 to check" if key in REAL_ONLY and not real else ""
        if vals and key not in REAL_ONLY:
            note = "different hardware and data: read as an order of magnitude"
        out.append({"claim": claim, "seed": theirs, "ours": ours, "note": note})
    return out


def _figures(groups: list[list[Cell]], out: Path) -> list[str]:
    """The seed's Figs. 1-4: one bar per configuration, a panel per model, medians with min-max whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    specs: list[tuple[str, str, str, str, Callable, float, str | None]] = [
        ("cifar-opt_fig1_epoch_time.png", "Fig. 1: average epoch time (s)", "epoch", "epoch_s", statistics.median, 1.0, None),
        ("cifar-opt_fig2_accuracy.png", "Fig. 2: test accuracy (%)", "epoch", "test_acc", _last, 100.0, None),
        (
            "cifar-opt_fig3_peak_memory.png",
            "Fig. 3: peak memory (MB): process RSS; GPU allocator where a GPU ran",
            "epoch",
            "rss_peak_mb",
            max,
            1.0,
            "gpu_alloc_peak_mb",
        ),
        (
            "cifar-opt_fig4_latency.png",
            "Fig. 4: batch-1 inference latency p50 (ms), per deployment form",
            "inference",
            "latency_p50_ms",
            statistics.median,
            1.0,
            None,
        ),
    ]
    models = sorted({str(g[0].first.get("model")) for g in groups})
    synthetic = not all(g[0].first.get("dataset_real") for g in groups)
    lines = []
    for fname, title, phase, key, agg, scale, alt in specs:
        n_bars = max(
            1,
            max(
                sum(len(_forms(g)) if phase == "inference" else 1 for g in groups if g[0].first.get("model") == m) for m in models
            ),
        )
        fig, axes = plt.subplots(len(models), 1, figsize=(10, len(models) * (1.0 + 0.32 * n_bars)), squeeze=False)
        for ax, model in zip(axes[:, 0], models):
            names, meds, los, his = [], [], [], []
            for g in groups:
                c = g[0]
                if c.first.get("model") != model:
                    continue
                k = alt if alt and PLATFORM.get(str(c.first.get("backend"))) != "cpu" else key
                forms = _forms(g) if phase == "inference" else [None]
                for f in forms:
                    d = _per_repeat(g, phase, k, agg, form=f)
                    if not d:
                        continue
                    v = [x * scale for x in d.values()]
                    names.append(
                        plot_text(f"{c.first.get('host')}: {_label(c)}" + (f" · {f}" if f else ""))
                        + (" [GPU]" if k == alt else "")
                    )
                    meds.append(statistics.median(v))
                    los.append(statistics.median(v) - min(v))
                    his.append(max(v) - statistics.median(v))
            ys = range(len(names))
            ax.barh(list(ys), meds, xerr=[los, his], color=[plt.get_cmap("tab10")(i % 10) for i in ys], capsize=3)
            for y, m in zip(ys, meds):
                ax.annotate(fmt(m), (m, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
            ax.set_yticks(list(ys), names, fontsize=7)
            ax.invert_yaxis()
            ax.set_title(plot_text(model), fontsize=10)
            ax.margins(x=0.15)
            if phase == "inference":
                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        fig.suptitle(title, fontsize=11)
        fig.tight_layout()
        if synthetic and key == "test_acc":
            fig.text(
                0.5,
                -0.02,
                "NOT CIFAR-10: synthetic data; accuracies check training works, not the seed's claims",
                ha="center",
                color="tab:red",
            )
        tmp = out / f".{fname}.tmp.png"
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        plt.close(fig)
        tmp.replace(out / fname)
        lines.append(f"![{title}]({fname})")
    return lines


def _pareto(groups: list[list[Cell]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = []
    for g in groups:
        for c in g:
            trials = [r for r in _rows(c, "trial") if isinstance(r.get("trial_val_acc"), (int, float)) and r.get("trial_epoch_s")]
            pick = next(iter(_rows(c, "search")), None)
            if not trials or not pick:
                continue
            front = {int(x) for x in str(pick.get("pareto_trials") or "").split(";") if x.strip().isdigit()}
            fig, ax = plt.subplots(figsize=(5.5, 4))
            for r in trials:
                on = r["trial"] in front
                ax.scatter(
                    r["trial_epoch_s"], r["trial_val_acc"] * 100, c="tab:red" if on else "tab:gray", marker="o" if on else "x"
                )
                ax.annotate(
                    plot_text(f"b{r['trial_batch_size']} lr{r['trial_lr']:.1g}"),
                    (r["trial_epoch_s"], r["trial_val_acc"] * 100),
                    fontsize=6,
                )
            fr = sorted((r["trial_epoch_s"], r["trial_val_acc"] * 100) for r in trials if r["trial"] in front)
            if fr:
                ax.plot(*zip(*fr), color="tab:red", lw=1, label="Pareto front")
            ax.set_xlabel("epoch time (s)")
            ax.set_ylabel("validation accuracy (%)")
            ax.set_title(
                plot_text(
                    f"{c.first.get('model')} {c.first.get('backend')} seed {c.first.get('seed', 0) + c.repeat}: Optuna trials"
                ),
                fontsize=9,
            )
            ax.legend(fontsize=7)
            fname = f"cifar-opt_pareto_{safe_name(c.dir.name)}.png"
            tmp = out / f".{fname}.tmp.png"
            fig.savefig(tmp, dpi=110, bbox_inches="tight")
            plt.close(fig)
            tmp.replace(out / fname)
            journal = f"{c.dir.name}/{pick['journal']}"
            lines.append(
                f"- {md_text(_where(c))} {md_text(c.first.get('model'))} repeat {c.repeat}: picked trial "
                f"{md_text(pick['picked_trial'])} (batch {md_text(pick['batch_size_picked'])}, lr {pick['lr_picked']:.3g}) "
                f"of {md_text(pick['trials_complete'])} complete; objective {md_text(pick['objective'])}; "
                f"journal {md_code(journal)} ![Pareto]({fname})"
            )
    return lines


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = [c for c in cells if c.status == "ok"]
    if not cells:
        return []
    out.mkdir(parents=True, exist_ok=True)
    groups = group_repeats(cells)
    data = sorted({(str(c.first.get("dataset")), bool(c.first.get("dataset_real"))) for c in cells})
    md = [
        "ResNet-18 and MobileNetV2 (torchvision, num_classes=10, 32x32 input) on a stratified "
        f"{md_text(cells[0].first.get('n_train'))}/{md_text(cells[0].first.get('n_test'))} subsample, SGD momentum 0.9, weight decay 1e-4. "
        "Each repeat is a fresh process with its own training seed (the seed's 3 seeds); tables give medians over "
        "them with a 95% bootstrap interval. Epoch time excludes evaluation and warm-up/compile (own column). "
        "Latency: batch 1, one synced call at a time after warm-up, forms of one cell interleaved.",
        "",
        "Data: " + ", ".join(f"{md_text(n)} ({'real' if r else 'synthetic: NOT CIFAR-10'})" for n, r in data) + ".",
        "",
    ]
    if not all(r for _, r in data):
        md += [
            "**The accuracy figures here come from synthetic data in CIFAR-10's format: they show that training, "
            "AMP and quantisation work, not the seed's accuracies. Checking the seed's accuracy claims needs the real "
            "CIFAR-10 (`orchestrate.py data fetch cifar10`).**",
            "",
        ]
    md += ["#### Training (the seed's Figs. 1-3 as numbers)", "", markdown(training_table(groups), TRAIN_COLS), ""]
    md += ["#### Inference (the seed's Fig. 4 as numbers)", "", markdown(inference_table(groups), INFER_COLS), ""]
    rat = ratios(groups)
    if rat:
        md += ["#### Same-host ratios", "", markdown(rat, RATIO_COLS), ""]
    md += [
        "#### Seed 002's claims beside ours",
        "",
        markdown(
            seed_claims(groups), [("claim", "seed's claim"), ("seed", "seed"), ("ours", "ours (medians)"), ("note", "note")]
        ),
        "",
    ]
    flagged = [f"{md_text(c.dir.name)}: {md_text(c.flags)}" for c in cells if c.flags]
    if flagged:
        md += ["⚑ flagged cells: " + "; ".join(flagged), ""]
    md += _figures(groups, out)
    par = _pareto(groups, out)
    if par:
        md += ["", "#### Optuna searches (the seed's Tuned)", "", *par]
    return md


def summary(cells: list[Cell]) -> tuple[list[str], dict]:
    """A few lines after a matrix run: per configuration, epoch time, accuracy, latency."""
    cells = [c for c in cells if c.status == "ok"]
    rows: list[dict] = []
    lats: list[dict[str, float | None]] = []
    for g in group_repeats(cells):
        c = g[0]
        ep = _per_repeat(g, "epoch", "epoch_s")
        acc = _per_repeat(g, "epoch", "test_acc", _last)
        lat: dict[str, float | None] = {f: _med(_per_repeat(g, "inference", "latency_p50_ms", form=f)) for f in _forms(g)}
        lats.append(lat)
        rows.append(
            {
                "model": c.first.get("model"),
                "config": _label(c),
                "epoch_s": _med(ep),
                "acc_pct": _med(acc, 100),
                "latency_p50_ms": lat,
                "flags": ";".join(sorted({x.flags for x in g if x.flags})),
            }
        )
    synthetic = any(not c.first.get("dataset_real") for c in cells)
    lines = textwrap.wrap(
        "per configuration, median over repeats: training epoch time (s), final test accuracy (%), batch-1 "
        "inference latency p50 (ms) per deployment form"
        + ("; on the synthetic set, not CIFAR-10: its accuracies are not the seed's to compare" if synthetic else ""),
        120,
    ) if rows else []  # fmt: skip
    lines += [
        f"  {r['model']:<13} {r['config']:<40} epoch {sig(r['epoch_s'])} s, acc {sig(r['acc_pct'])}%, p50 "
        + ", ".join(f"{f} {sig(v)} ms" for f, v in lats[i].items())
        + (f"  ⚑ {r['flags']}" if r["flags"] else "")
        for i, r in enumerate(rows)
    ]
    return lines, {"configurations": rows}
