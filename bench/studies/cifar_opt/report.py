"""cifar-opt's report section: what each side ran (and what was cut), training and
inference tables (medians over repeats, each repeat one of the seed's 3 seeds), same-host
ratios and GPU-over-CPU ratios (a GPU configuration beside a CPU one, per model, each with
its 95 % interval), Figs. 1-4 as the seed drew them (epoch time, accuracy, peak memory,
latency per model and configuration) and the Optuna searches (budget, distance from chance,
Pareto plots). Numbers and intervals only: whether the seed's claims hold is the answer
engine's (claims.py, rendered by host/answers.py after this section).

Every figure is readout.py's (the one place the rows become numbers): this module names the
figures, lays them out and draws them, and reads no row field itself.

Host side: standard library, numpy, scipy (bench.core.stats) and matplotlib only.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

from bench.core import figure_note, palette, stats
from bench.core.figure_layout import place, text_width
from bench.core.figures import figure
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.tables import fmt, markdown
from bench.core.text import Md, md_code, plot_text, safe_name, sig
from bench.core.text import md as md_text
from bench.studies.cifar_opt import crossdevice
from bench.studies.cifar_opt import readout as R
from bench.studies.cifar_opt.config import CPU_DEFAULT
from bench.studies.cifar_opt.readout import SEED_N_TRAIN, platform, real_data
from bench.studies.cifar_opt.readout import ci as _ci
from bench.studies.cifar_opt.readout import forms as _forms
from bench.studies.cifar_opt.readout import label as _label
from bench.studies.cifar_opt.readout import med as _med
from bench.studies.cifar_opt.readout import where as _where


def training_table(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for g in groups:
        c = g[0]
        if not R.rows(c, "epoch"):
            continue
        t = R.training(g)
        out.append(
            {
                "where": _where(c),
                "model": c.first.get("model") or (c.spec.get("params") or {}).get("model"),
                "config": _label(c) + (" ⚑" if any(x.flags for x in g) else ""),
                "batch": "/".join(dict.fromkeys(str(b) for b in R.batches(g))),
                "images": R.n_train(g),
                "epoch_time": _ci(t.epoch_s),
                "img_s": _med(t.img_s),
                "acc": _ci(t.acc, "{:.1f}", 100) if t.acc else "n/a (synthetic-gpu)",
                "rss": _med(t.rss),
                "heap": _med(t.heap),
                "gpu": _med(t.gpu),
                "warmup": _med(t.compile_s),
                "n": len(g),
            }
        )
    return out


TRAIN_COLS = [
    ("where", "run (host) · device"),
    ("model", "model"),
    ("config", "configuration"),
    ("batch", "batch (per seed if they differ)"),
    ("images", "images per epoch"),
    ("epoch_time", "epoch s [interval]"),
    ("img_s", "img/s"),
    ("acc", "test acc % [interval]"),
    ("rss", "peak RSS MB"),
    ("heap", "tracemalloc peak MB"),
    ("gpu", "GPU alloc peak MB"),
    ("warmup", "warm-up/compile s"),
    ("n", "seeds"),
]


def inference_table(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for g in groups:
        c = g[0]
        for f in _forms(g):
            i = R.inference(g, f)
            out.append(
                {
                    "where": _where(c),
                    "model": c.first.get("model"),
                    "config": _label(c),
                    "form": f,
                    "p50": _ci(i.p50, "{:.3f}"),
                    "p90": _med(i.p90),
                    "p99": _med(i.p99),
                    "thr": _med(i.thr),
                    "acc": _med(i.acc, 100),
                    "drop": _med(i.drop),
                    "size": _med(i.size),
                    "calls": _med(i.calls),
                }
            )
    return out


INFER_COLS = [
    ("where", "run (host) · device"),
    ("model", "model"),
    ("config", "configuration"),
    ("form", "form"),
    ("p50", "batch-1 p50 ms [interval]"),
    ("p90", "p90 ms"),
    ("p99", "p99 ms"),
    ("thr", "batched img/s"),
    ("acc", "test acc %"),
    ("drop", "acc drop (pts)"),
    ("size", "size MB"),
    ("calls", "calls"),
]


def _ratio_line(what: str, a: dict[int, float], b: dict[int, float], target: str = "") -> dict | None:
    """A / B over repeats with its interval (readout.ratio; below 1: A is the smaller), None where
    it was not measured."""
    r = R.ratio(a, b)
    if r is None:
        return None
    ci = r.interval("{:.2f}") if r.lo is not None else "n=1"
    return {"what": what, "ratio": f"{r.median:.2f}x", "ci": ci, "target": target}


def ratios(groups: list[list[Cell]]) -> list[dict]:
    """Same-host ratios of the deployment forms and of the kit's tuned configuration, with their
    intervals (the seed's comparisons are claims: claims.py judges them)."""
    out: list[dict | None] = []
    by = {(_where(g[0]), g[0].first.get("model"), _label(g[0])): g for g in groups}
    for g in groups:
        c = g[0]
        model, where = c.first.get("model"), _where(c)
        forms = _forms(g)
        if "int8-pt2e" in forms and "fp32-compiled" in forms:
            q, fp = R.inference(g, "int8-pt2e"), R.inference(g, "fp32-compiled")
            out.append(_ratio_line(f"{model} int8 / compiled fp32 batch-1 p50 latency ({where})", q.p50, fp.p50, "<= 0.7x"))
            out.append(_ratio_line(f"{model} int8 / compiled fp32 batched img/s ({where})", q.thr, fp.thr))
            out.append(_ratio_line(f"{model} int8 / fp32 model size ({where})", q.size, fp.size, "<= 0.3x"))
        if "int8-dynamic" in forms and "fp32-eager" in forms:
            q, fp = R.inference(g, "int8-dynamic"), R.inference(g, "fp32-eager")
            out.append(_ratio_line(f"{model} seed's dynamic int8 / eager fp32 latency ({where})", q.p50, fp.p50))
    for (where, model, label), g in by.items():
        if label == "GPU tuned: bf16+cl+compile+graphs [kit] (pipeline resident)":
            for other, what in (
                ("GPU Default", "tuned / default (seed's loader, fp32 eager)"),
                ("GPU AMP (fp16)", "tuned / AMP"),
            ):
                o = by.get((where, model, other))
                if o:
                    out.append(_ratio_line(f"{model} training img/s, {what} ({where})", R.training(g).img_s, R.training(o).img_s))
            syn = by.get((where, model, "GPU tuned: bf16+cl+compile+graphs [kit] (pipeline synthetic-gpu)"))
            if syn:
                out.append(
                    _ratio_line(
                        f"{model} tuned, resident / synthetic-gpu img/s ({where})",
                        R.training(g).img_s,
                        R.training(syn).img_s,
                        ">= 0.9x",
                    )
                )
    return [r for r in out if r]


RATIO_COLS = [
    ("what", "comparison (same host, same run)"),
    ("ratio", "ratio of medians"),
    ("ci", "interval"),
    ("target", "the kit's target (not judged)"),
]


@dataclass(frozen=True)
class Figure:
    fname: str
    title: str
    what: str  # the bars' figure (readout.BARS: the key, the per-repeat figure, its scale)
    per_form: bool = False  # a bar per deployment form
    accuracy: bool = False  # an accuracy: a note names the bars not on CIFAR-10


FIGURES = [
    Figure(
        "cifar-opt_fig1_epoch_time.png",
        "Fig. 1: average epoch time (s) per 5,000 training images (the seed's epoch)",
        "epoch_time",
    ),
    Figure("cifar-opt_fig2_accuracy.png", "Fig. 2: test accuracy (%)", "accuracy", accuracy=True),
    Figure(
        "cifar-opt_fig3_peak_memory.png",
        "Fig. 3: peak memory while training (MB): process RSS; GPU allocator where a GPU ran",
        "peak_memory",
    ),
    Figure(
        "cifar-opt_fig4_latency.png",
        "Fig. 4: batch-1 inference latency p50 (ms), per deployment form",
        "latency",
        per_form=True,
    ),
]


def _bars(groups: list[list[Cell]], spec: Figure, mdl: str) -> list[tuple[str, list[float], str]]:
    """(bar label, values over seeds, device family) for one panel; a configuration of two runs
    is two bars named apart by their run."""
    from bench.core.labels import distinct, environments

    bars, runs, envs = [], [], []
    for g in groups:
        c = g[0]
        if c.first.get("model") != mdl:
            continue
        for f in _forms(g) if spec.per_form else [None]:
            b = R.bar(g, spec.what, form=f)
            if b:
                n = b.scaled_from
                note = f" (x{SEED_N_TRAIN / n:g}: {n:,} images)" if n else ""
                name = f"{c.first.get('host')}: {_label(c)}" + (f" · {f}" if f else "") + (" [GPU]" if b.gpu else "") + note
                bars.append((name, b.values, palette.family(c.device, c.first.get("backend"))))
                runs.append(c.run_label)
                envs.append(c)
    names = distinct([b[0] for b in bars], runs, *environments(envs))  # then escaped once, whole
    return [(plot_text(n), v, fam) for n, (_, v, fam) in zip(names, bars)]


def _bar_figure(groups: list[list[Cell]], spec: Figure) -> dict:
    """What one of the seed's Figs. 1-4 shows: per model, (label, values over seeds, device family) a bar."""
    models = sorted({str(g[0].first.get("model")) for g in groups})
    return {
        "panels": [(plot_text(m), _bars(groups, spec, m)) for m in models],
        "title": spec.title,
        "note": _not_cifar(groups) if spec.accuracy else "",
    }


def _not_cifar(groups: list[list[Cell]]) -> str:
    """The figure's NOT CIFAR-10 line naming the bars it is about, or ''."""
    fake = [g for g in groups if not real_data(g)]
    if not fake:
        return ""
    return figure_note.data_warning(
        "NOT CIFAR-10",
        [str(g[0].first.get("dataset")) for g in fake],
        [f"{g[0].first.get('host')}: {_label(g[0])}" for g in fake],
        len(fake) == len(groups),
        "Synthetic data: the accuracies check that training works, not the seed's claims.",
    )


def draw_bars(d: dict, path: Path) -> None:
    """One of the seed's Figs. 1-4: a panel per model, a bar per configuration (and form), the
    median over seeds with min-max whiskers, on a linear axis from 0 with each bar's value
    written beside it (bench.core.figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = d["panels"]
    n_bars = max([1, *(len(b) for _, b in panels)])
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, len(panels) * (1.2 + 0.32 * n_bars)), squeeze=False)
    for ax, (mdl, bars) in zip(axes[:, 0], panels):
        meds = [statistics.median(v) for _, v, _ in bars]
        los = [m - min(v) for m, (_, v, _) in zip(meds, bars)]
        his = [max(v) - m for m, (_, v, _) in zip(meds, bars)]
        ys = list(range(len(bars)))
        shade = palette.colors([(i, fam) for i, (_, _, fam) in enumerate(bars)])  # colour = device family
        ax.barh(ys, meds, xerr=[los, his], color=[shade[i] for i in ys], capsize=3)
        for y, m, h in zip(ys, meds, his):
            ax.annotate(fmt(m), (m + h, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
        ax.set_yticks(ys, [name for name, _, _ in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(mdl, fontsize=10, y=1.0)  # y given: no search for top ticks (none here)
        ax.set_xscale("linear")
        ax.set_xlim(0, max([m + h for m, h in zip(meds, his)] or [1.0]) * 1.2)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(d["title"], fontsize=11)
    left = text_width([name for _, bars in panels for name, _, _ in bars], 7, dpi=110) + 0.25
    place(fig, left=left, right=0.3, top=0.65, bottom=0.35, hspace=0.6)
    if d["note"]:
        figure_note.add(fig, d["note"])
        fig.savefig(path, dpi=110, bbox_inches="tight")  # the image grows to hold the note
    else:
        fig.savefig(path, dpi=110)
    plt.close(fig)


def _figures(groups: list[list[Cell]], out: Path) -> list[str]:
    return [f"![{spec.title}]({figure(out, spec.fname, draw_bars, _bar_figure(groups, spec))})" for spec in FIGURES]


def _fig(v: float | None, f: str) -> str:
    """V in format F, or "?" where it is not a number."""
    return "?" if v is None else f.format(v)


def _pareto(groups: list[list[Cell]], out: Path) -> list[str]:
    """One line per Optuna search: its budget, its distance from chance, its pick, its Pareto plot."""
    lines = []
    for g in groups:
        for c in g:
            f = R.search(c)
            if f is None:
                continue
            data = {
                "trials": [
                    (p.epoch_s, p.acc_pct, p.on_front, plot_text(f"b{p.batch} lr{_fig(p.lr, '{:.1g}')}")) for p in f.points
                ],
                "front": f.front,
                "chance": f.chance * 100,
                "title": plot_text(f"{c.first.get('model')} {c.first.get('backend')} seed {R.training_seed(c)}: Optuna trials"),
            }
            fname = figure(out, f"cifar-opt_pareto_{safe_name(c.dir.name)}.png", draw_pareto, data)
            journal = f"{c.dir.name}/{f.journal}"
            budget = (
                f"{md_text(f.trials)} trials x {md_text(f.epochs)} epoch(s) on {f.n_fit:,} images, scored on {f.n_val:,} held out"
            )
            if f.budget_s:
                budget += f", no trial started after {float(f.budget_s):g} s"
            ran = f"{f.ran} ran" + (f" in {float(f.search_s):.0f} s" if isinstance(f.search_s, (int, float)) else "")
            if isinstance(f.best, (int, float)):
                gap = (f.best - f.chance) * 100
                dist = (
                    f"best trial {f.best * 100:.1f} % validation accuracy, {gap:+.1f} pts from the chance limit "
                    f"{f.chance * 100:.1f} % ({md_text(f.above)} of {f.ran} trials above it)"
                )
                if gap <= 0:
                    dist += "; **no trial above chance: the pick is as good as a random one**"
            else:
                dist = "no trial completed"
            mem = (
                f"; the search's peak memory {float(f.peak_mb):,.0f} MB ({f.peak_what}), not counted in the training table"
                if isinstance(f.peak_mb, (int, float))
                else ""
            )
            lines.append(
                f"- {md_text(_where(c))} {md_text(c.first.get('model'))} seed {c.repeat}: budget {budget}; {ran}; {dist}; "
                f"picked trial {md_text(f.picked_trial)} (batch {md_text(f.picked_batch)}, "
                f"lr {_fig(f.picked_lr, '{:.3g}')}); objective {md_text(f.objective)}{mem}; "
                f"journal {md_code(journal)} ![Pareto]({fname})"
            )
    return lines


def draw_pareto(d: dict, path: Path) -> None:
    """An Optuna search's trials, epoch time against validation accuracy: the Pareto front in red
    and joined, the others as grey crosses, each labelled with its batch and lr, the chance limit dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for on, colour, marker in ((False, "tab:gray", "x"), (True, "tab:red", "o")):
        pts = [(x, y) for x, y, front, _ in d["trials"] if front == on]
        if pts:
            ax.scatter([x for x, _ in pts], [y for _, y in pts], c=colour, marker=marker)
    for x, y, _, text in d["trials"]:
        ax.annotate(text, (x, y), fontsize=6)
    if d["front"]:
        ax.plot([x for x, _ in d["front"]], [y for _, y in d["front"]], color="tab:red", lw=1, label="Pareto front")
    ax.axhline(d["chance"], color="tab:blue", ls=":", lw=1, label="chance limit")
    ax.set_xlabel("epoch time (s)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(d["title"], fontsize=9, y=1.0)  # y given: no search for top ticks (none here)
    ax.legend(fontsize=7)
    place(fig, left=0.75, right=0.6, top=0.35, bottom=0.6)  # right: a label of a trial at the largest time
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _sizes(groups: list[list[Cell]]) -> list[str]:
    """What each platform's cells ran: images, epochs, batch, latency calls; and what was cut from the seed's."""
    seen: dict[tuple, set[str]] = {}
    for g in groups:
        c = g[0]
        seen.setdefault((platform(c), *R.sizes(g)), set()).add(c.device)
    out = []
    for (plat, ntr, nte, ep, calls), devices in sorted(seen.items(), key=lambda kv: str(kv[0])):
        line = (
            f"- {md_text(plat.upper())} ({md_text(', '.join(sorted(devices)))}): {md_text(_count(ntr))} training / "
            f"{md_text(_count(nte))} test images, {md_text(ep)} epoch(s), {md_text(_count(calls))} batch-1 latency calls"
        )
        if isinstance(ntr, int) and ntr < SEED_N_TRAIN:
            why = (
                " so that the CPU default profile (Default, Quantized, Tuned x 2 models x 3 seeds) takes about 15 min "
                "on 2 cores and 8 min on a 16-core Xeon (bench/studies/cifar_opt/config.py, CPU_DEFAULT)"
                if plat == "cpu" and ntr == CPU_DEFAULT["n_train"]
                else ""
            )
            line += (
                f". Fewer than the seed's {SEED_N_TRAIN:,} training images{why}; Fig. 1 and the claims scale epoch times "
                f"to {SEED_N_TRAIN:,} images, throughputs need no scaling"
            )
        out.append(line)
    return out


def _count(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else fmt(v)


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = [c for c in cells if c.status == "ok"]
    if not cells:
        return []
    out.mkdir(parents=True, exist_ok=True)
    groups = group_repeats(cells)
    data = sorted({(str(c.first.get("dataset")), bool(c.first.get("dataset_real"))) for c in cells})
    md = [
        "ResNet-18 and MobileNetV2 (torchvision, num_classes=10, 32x32 input) on a stratified subsample of CIFAR-10, "
        "batch 32 (the Tuned configurations: their search's pick), SGD momentum 0.9, weight decay 1e-4. "
        "Each repeat is a fresh process with its own training seed (the seed's 3 seeds); tables give medians over "
        f"them with {stats.INTERVAL_TEXT}. Epoch time excludes evaluation and warm-up/compile (own column). "
        "Latency: batch 1, one synced call at a time after warm-up, forms of one cell interleaved. What each side ran:",
        "",
        *_sizes(groups),
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
    unfolded = [(g[0], x) for g in groups if (x := R.unfolded_pt2e(g)) is not None]
    if unfolded:
        md += [
            "⚑ int8-pt2e kept its weights fp32 (the converted model stores "
            + "; ".join(f"{md_text(_where(c))} {md_text(c.first.get('model'))}: {x:.3g}x" for c, x in unfolded)
            + " the fp32 model's bytes; torch 2.14.1 with torchao 0.18 folds them to int8, 0.25-0.28x): in this "
            "torch and torchao the model as converted did not shrink; its latency is what inductor's freezing "
            "compiled from the quantize ops on fp32 weights.",
            "",
        ]
    rat = ratios(groups)
    if rat:
        md += ["#### Same-host ratios", "", markdown(rat, RATIO_COLS), ""]
    cross = crossdevice.cross_device(groups)
    if cross:
        md += [
            "#### GPU over CPU (the seed's configurations side by side)",
            "",
            "How many times faster the GPU configuration is than the CPU one, per model: training img/s GPU ÷ CPU "
            f"and batch-1 latency CPU ÷ GPU, medians over seeds with {stats.INTERVAL_TEXT} (paired by seed only "
            "when both sides ran in one run). A row whose side is missing names the command that makes it.",
            "",
            markdown([{**r, "note": _note(r)} for r in cross], crossdevice.COLS),
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


def _note(r: dict) -> Md | str:
    """A missing side's note carries its command as code; every other note is plain text."""
    if not r.get("missing"):
        return str(r["note"])
    cmd = crossdevice.command(r["missing"], *_missing_what(r))
    return Md(f"run {md_code(cmd)}, then report both dirs")


def _missing_what(r: dict) -> tuple[str, str]:
    pair = next(p for p in crossdevice.PAIRS if p.name == r["pair"])
    return (pair.cpu_variant if r["missing"] == "cpu" else pair.gpu_variant), str(r["model"])


def summary(cells: list[Cell]) -> tuple[list[str], dict]:
    """A few lines after a matrix run: per configuration, epoch time, accuracy, latency."""
    cells = [c for c in cells if c.status == "ok"]
    rows: list[dict] = []
    said: list[str] = []
    for g in group_repeats(cells):
        c = g[0]
        t = R.training(g)
        ep, acc = _med(t.epoch_s), _med(t.acc, 100)
        lat: dict[str, float | None] = {f: _med(R.inference(g, f).p50) for f in _forms(g)}
        flags = ";".join(sorted({x.flags for x in g if x.flags}))
        rows.append(
            {
                "model": c.first.get("model"),
                "config": _label(c),
                "epoch_s": ep,
                "acc_pct": acc,
                "latency_p50_ms": lat,
                "flags": flags,
            }
        )
        said.append(
            f"  {str(c.first.get('model')):<13} {_label(c):<40} epoch {sig(ep)} s, acc {sig(acc)}%, p50 "
            + ", ".join(f"{f} {sig(v)} ms" for f, v in lat.items())
            + (f"  ⚑ {flags}" if flags else "")
        )
    synthetic = any(not c.first.get("dataset_real") for c in cells)
    lines = textwrap.wrap(
        "per configuration, median over repeats: training epoch time (s), final test accuracy (%), batch-1 "
        "inference latency p50 (ms) per deployment form"
        + ("; on the synthetic set, not CIFAR-10: its accuracies are not the seed's to compare" if synthetic else ""),
        120,
    ) if rows else []  # fmt: skip
    lines += said
    return lines, {"configurations": rows}
