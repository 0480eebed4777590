"""mlp-scratch report sections: seed 001's Table 3 (times, speedups), Table 4 (ops),
Table 5 (memory) and Fig. 3 (convergence). Speedups are NumPy / variant, medians over the
interleaved repeats of one cell (one host, one session); every row has one (NumPy's is 1.0x).
Numbers only: the seed's claims (claims.py) are judged by the answer engine, whose table follows
this section. Every figure is readout.py's (the one place the rows become numbers): this module
lays them out."""

from __future__ import annotations

from pathlib import Path

from bench.core import figure_note, stats
from bench.core.figures import figure
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.tables import fmt, md_row, md_sep
from bench.core.text import Md, md_reason, plot_text, short
from bench.core.text import md as md_text
from bench.studies.mlp_scratch import MlpScratch
from bench.studies.mlp_scratch import readout as R
from bench.studies.mlp_scratch.runner import OVERHEAD_DEFINITION

REFERENCE = MlpScratch.reference()  # the variant every speedup divides by
# Table 3's two totals: the timed training steps only, and the whole loop with the records
TOTALS = (
    (R.TOTAL, "Total, steps only (s)"),
    (R.WHOLE, "Total, entire process (s)"),
)


def _platform(v: str) -> str:
    """The platform of backend V (results may name one this checkout does not register)."""
    spec = MlpScratch.backends.get(v)
    return spec.platform if spec else "?"


def _speedup(group: list[Cell], v: str, key: str) -> str:
    """'2.8x [2.6-3.0]' (paired by repeat; the verdict on the seed's figure is the answer engine's,
    claims.py); the reference variant's own row reads '1.0x (reference)'."""
    if v == REFERENCE:
        return "1.0x (reference)" if R.per_repeat(group, v, key) else ""
    if not R.per_repeat(group, REFERENCE, key) or not R.per_repeat(group, v, key):
        return ""
    r = R.speedup(group, v, key, REFERENCE)
    if r is None:
        return "not measured (a time near 0)"
    if r.lo is None or r.hi is None:
        return f"{r.median:.1f}x (n=1)"
    return f"{r.median:.1f}x{r.bracket('{:.1f}')}"


def _ms_with_speedup(group: list[Cell], v: str, key: str) -> str:
    mine = R.pooled(group, v, key)
    if mine is None:
        return ""
    x = R.pooled_speedup(group, v, key, REFERENCE)
    return fmt(mine) + (f" ({x:.1f}x)" if x else "")


def table3(group: list[Cell]) -> list[str]:
    """Seed 001's Table 3 over repeats: per repeat the median of its plain runs, then the
    median over repeats with a 95 % bootstrap interval; speedups paired by repeat. Two totals:
    the timed training steps only (total_s), and the whole training loop with the accuracy
    records every 10 iterations (loop_wall_s: the seed's "entire process")."""
    vs = R.variants(group[0])
    head = ["variant"]
    for _, name in TOTALS:
        head += [name, "interval", "Speedup vs NumPy [interval]"]
    head += ["Per iteration (ms, median; speedup)", "Forward (ms; speedup)", "Backward + update (ms; speedup)"]
    head += ["Final train acc", "Final val acc"]
    out = [md_row(head), md_sep(len(head))]
    for v in vs:
        if not R.per_repeat(group, v, R.TOTAL):
            continue
        cells = [v]
        for key, _ in TOTALS:
            mine = R.per_repeat(group, v, key)
            if not mine:
                cells += ["", "", ""]
                continue
            t = stats.summarize(list(mine.values()))
            cells += [fmt(t.median), t.interval(short), _speedup(group, v, key)]
        cells += [_ms_with_speedup(group, v, key) for key in R.STEP_TIMES]
        cells += [fmt(R.pooled(group, v, R.TRAIN_FINAL)), fmt(R.pooled(group, v, R.VAL_FINAL))]
        out.append(md_row(cells))
    return out


def table4(group: list[Cell]) -> list[str]:
    """Table 4 over the configuration's repeats: each op's median ms per iteration, and each
    variant's speedup as the claims read it (the ratio of the medians over repeats, paired by
    repeat: stats.ratio of the per-repeat rates), so the table and the t4-* claims print one figure."""
    names = R.op_names(group)
    vs = [v for v in R.variants(group[0]) if any(R.op_per_repeat(group, v, op) for op in names)]
    others = [v for v in vs if v != REFERENCE]
    head = md_row(["op", *[f"{v} (ms/iter)" for v in vs], *[f"speedup {v}" for v in others]])
    out = [head, md_sep(1 + len(vs) + len(others))]
    for op in names:
        ref = R.op_per_repeat(group, REFERENCE, op)
        sps = []
        for v in others:
            if not ref or not R.op_per_repeat(group, v, op):
                sps.append("")
                continue
            sp = R.op_speedup(group, v, op, REFERENCE)
            sps.append(f"{sp.median:.1f}x" + sp.bracket() if sp else "not measured (a time near 0)")
        out.append(md_row([op, *[fmt(R.op_median(group, v, op)) for v in vs], *sps]))
    return out


OLD_OVERHEAD = (
    "these rows predate the one definition: NumPy's overhead is RSS - arrays - the caller's inputs, "
    "CuPy's is the pool held - arrays; Total is the sum of the rows above"
)


def _mb(v: float | None) -> str:
    return fmt(v) if v is not None else ""


def table5(cell: Cell) -> tuple[list[str], bool]:
    """(lines, one_definition): Table 5 (readout.memory) with its Total row. one_definition is False
    for rows written before memory_total_bytes existed (their overhead was defined per column)."""
    t5 = R.memory(cell)
    out = [md_row(["component (MB)", *t5.parts]), md_sep(1 + len(t5.parts))]
    out += [md_row([label, *map(_mb, vals)]) for label, vals in t5.rows]
    out.append(md_row([Md("**Total**"), *(Md(f"**{md_text(_mb(t))}**") if t is not None else "" for t in t5.total)]))
    out += [md_row([Md(f"*also read:* {md_text(label)}"), *map(_mb, vals)]) for label, vals in t5.also]
    return out, t5.one_definition


# ---------------------------------------------------------------- Fig. 3

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")
_LINESTYLES = {"numpy": "-", "cupy": "--", "cupy-tuned": ":"}


def _markevery(n: int, i: int, k: int) -> tuple[int, int]:
    """About ten markers per line, series i's shifted by i/k of the spacing: lines on top of
    each other still show every series' marker."""
    step = max(1, n // 10)
    return (i * step // max(1, k)) % step, step


def convergence_plot(cells: list[Cell], out: Path) -> Path | None:
    """Seed 001's Fig. 3: training accuracy vs iteration (left), validation accuracy (right),
    the two sharing their y-limits; under each, every curve's difference to NumPy float64 on
    the same dataset (percentage points), so curves that lie on top of each other stay
    readable. One series per configuration and variant: median over repeats (min-max band
    where repeats differ), its own colour and marker; the legend sits outside the axes."""
    series = _series(cells)
    if not series:
        return None
    refs = _references(series)
    panels = [_panel(series, refs, key) for key in R.ACCURACIES]
    shaded = any(c["band"] is not None for curves in panels for c in curves)
    many = any(len(g) > 1 for g, _, _ in series)
    how = " (median over repeats" + (", min-max shaded)" if shaded else ")") if many else ""
    data = {
        "panels": panels,
        "ref_name": plot_text(" / ".join(sorted({f"{rv} {R.dtype(rg[0])}" for rg, rv, _ in refs.values()}))),
        "title": "mlp-scratch convergence, seed 001 Fig. 3" + how,
        "note": _data_note(series),
        "x_label": R.STEP,  # the convergence rows' own number
    }
    return out / figure(out, "mlp_convergence.png", draw_convergence, data)


def _series(cells: list[Cell]) -> list[tuple[list[Cell], str, str]]:
    """(repeats of one configuration, variant, legend label) for every variant with a validation
    curve; labels name the device and dataset where several ran, then whatever else tells two
    series apart (run, environment, iterations), the noise mark and the repeat count."""
    from bench.core import noise
    from bench.core.labels import distinct, environments

    groups = group_repeats([c for c in cells if c.status == "ok"])
    multi_dev = len({g[0].device for g in groups}) > 1
    multi_ds = len({str(g[0].first.get("dataset")) for g in groups}) > 1
    series = []
    for g in groups:
        c = g[0]
        dtype = R.dtype(c)
        for v in R.variants(c):
            if not R.has_curve(g, v):
                continue
            label = f"{v} {dtype}"
            if multi_dev:
                label += f" ({c.device})"
            if multi_ds:
                label += f", {c.first.get('dataset')}"
            series.append((g, v, label))
    if not series:
        return []
    # one configuration from two runs is two series, named apart by their run (then environment, iterations)
    unique = distinct(
        [lab for _, _, lab in series],
        [g[0].run_label for g, _, _ in series],
        *environments([g for g, _, _ in series]),
        [f"{g[0].first.get('iterations')} iterations" for g, _, _ in series],
    )  # each label escaped once, whole, for the plot
    return [
        (g, v, plot_text(noise.mark(u, ";".join(x.flags for x in g if x.flags)) + (f", n={len(g)}" if len(g) > 1 else "")))
        for (g, v, _), u in zip(series, unique)
    ]


def _references(series: list[tuple[list[Cell], str, str]]) -> dict[str, tuple]:
    """dataset -> the series every curve on it is drawn against: NumPy float64 if it ran, else
    the first NumPy series, else the first."""

    def rank(s) -> int:
        g, v, _ = s
        return (v != REFERENCE) * 2 + (R.dtype(g[0]) != "float64")

    refs: dict[str, tuple] = {}
    for s in series:
        ds = str(s[0][0].first.get("dataset"))
        if ds not in refs or rank(s) < rank(refs[ds]):
            refs[ds] = s
    return refs


def _panel(series: list[tuple[list[Cell], str, str]], refs: dict[str, tuple], key: str) -> list[dict]:
    """One panel's curves of KEY: each series' median, its min-max band where repeats differ, its
    difference to its dataset's reference, and its style (device family's shade, marker, line)."""
    from bench.core import palette

    shade = palette.colors([(i, palette.family(g[0].device, g[0].first.get("backend"))) for i, (g, _, _) in enumerate(series)])
    curves = []
    for i, (g, v, label) in enumerate(series):
        cur = R.curve(g, v, key)
        xs = list(cur)
        rg, rv, _ = refs[str(g[0].first.get("dataset"))]
        ref = R.curve(rg, rv, key)
        curves.append(
            {
                "label": label,
                "style": {
                    "color": shade[i],  # the device family's shade (bench.core.palette)
                    "marker": _MARKERS[i % len(_MARKERS)],
                    "ls": _LINESTYLES.get(v, "-."),
                    "markevery": _markevery(len(xs), i, len(series)),
                    "ms": 5,
                    "lw": 1.3,
                    "mfc": "none" if i % 2 else None,  # open and filled markers alternate: overlaps show both
                },
                "xs": xs,
                "med": [m for m, _, _ in cur.values()],
                "band": ([lo for _, lo, _ in cur.values()], [hi for _, _, hi in cur.values()])
                if any(lo != hi for _, lo, hi in cur.values())
                else None,
                "diff": [(x, cur[x][0] - ref[x][0]) for x in xs if x in ref],
            }
        )
    return curves


def _data_note(series: list[tuple[list[Cell], str, str]]) -> str:
    """The figure's warning where a series trained on data that is not MNIST ("" where none did)."""
    fake = [(g, lab) for g, _, lab in series if not g[0].first.get("dataset_real", True)]
    if not fake:
        return ""
    return figure_note.data_warning(
        "NOT MNIST",
        [str(g[0].first.get("dataset")) for g, _ in fake],
        [lab for _, lab in fake],
        len(fake) == len(series),
        "The embedded default is a wiring check, not comparable with seed 001.",
    )


def draw_convergence(d: dict, path: Path) -> None:
    """Seed 001's Fig. 3 from its data (convergence_plot; bench.core.figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    axes[0, 1].sharey(axes[0, 0])
    axes[1, 1].sharey(axes[1, 0])
    for col, curves in enumerate(d["panels"]):
        ax, dx = axes[0, col], axes[1, col]
        for c in curves:
            st = c["style"]
            ax.plot(c["xs"], c["med"], label=c["label"], **st)
            if c["band"] is not None:
                ax.fill_between(c["xs"], c["band"][0], c["band"][1], color=st["color"], alpha=0.15, lw=0)
            if c["diff"]:
                dx.plot([x for x, _ in c["diff"]], [y for _, y in c["diff"]], **st)
        dx.axhline(0.0, color="black", lw=0.8)
        ax.grid(True, alpha=0.3)
        dx.grid(True, alpha=0.3)
        dx.set_xlabel(d["x_label"])
    ref_name = d["ref_name"]
    axes[0, 0].set_title("Training accuracy (the seed's Fig. 3)")
    axes[0, 1].set_title("Validation accuracy")
    axes[0, 0].set_ylabel("accuracy (%)")
    axes[1, 0].set_ylabel(f"difference to {ref_name}\n(percentage points)", fontsize=8)
    axes[1, 0].set_title(f"Training: minus {ref_name}", fontsize=9)
    axes[1, 1].set_title(f"Validation: minus {ref_name}", fontsize=9)
    axes[0, 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    fig.suptitle(d["title"])
    if d["note"]:
        figure_note.add(fig, d["note"])
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _blas_line(group: list[Cell]) -> str:
    """'NumPy BLAS: openblas 0.3.31, 2 threads' from the rows (every text seen), or ''."""
    seen = R.blas(group)
    return f"NumPy BLAS (threadpoolctl, pinned for every run): {md_text('; '.join(seen))}" if seen else ""


# Seed 001's Tables 3-5 as printed (500 iterations; the seed names no CPU, GPU, BLAS, CUDA
# or library version anywhere, so its figures cannot be tied to hardware)
SEED_TABLE3 = (
    ("Total training time (500 iterations, s)", 42.3, 15.1, "2.8x"),
    ("Average time per iteration (ms)", 84.6, 30.2, "2.8x"),
    ("Forward pass (ms)", 36.7, 11.9, "3.1x"),
    ("Backward pass (ms)", 47.9, 18.3, "2.6x"),
)
SEED_TABLE4 = (
    ("Matrix multiplication", 42.3, 6.7, "6.3x"),
    ("ReLU activation", 3.1, 1.8, "1.7x"),
    ("Softmax activation", 5.6, 2.9, "1.9x"),
    ("Gradient computation", 33.6, 18.8, "1.8x"),
)
SEED_TABLE5 = (
    ("Model parameters", 7.9, 7.9),
    ("Input data", 47.1, 47.1),
    ("Intermediate activations", 26.3, 26.3),
    ("Gradient storage", 34.2, 34.2),
    ("Framework overhead", 12.5, 158.6),
    ("Total", 128.0, 274.1),
)


def seed_tables() -> list[str]:
    """Seed 001's Tables 3-5 as printed, for reading ours (below) beside them."""
    md = [
        "#### Seed 001's Tables 3-5 as printed",
        "",
        "The seed names no hardware (no CPU, GPU, BLAS or library version), so its speedups cannot be "
        "tied to a machine: compare the *shape* (which parts gain most) rather than the factors. Its "
        "dtype is not stated either; NumPy's default float64 is the likely one (our float64 rows).",
        "",
        md_row(["Table 3", "CPU (NumPy)", "GPU (CuPy)", "speedup"]),
        md_sep(4),
        *[md_row([n, fmt(a), fmt(b), sp]) for n, a, b, sp in SEED_TABLE3],
        "",
        md_row(["Table 4: operation", "CPU (ms)", "GPU (ms)", "speedup"]),
        md_sep(4),
        *[md_row([n, fmt(a), fmt(b), sp]) for n, a, b, sp in SEED_TABLE4],
        "",
        md_row(["Table 5: component", "CPU (MB)", "GPU (MB)"]),
        md_sep(3),
        *[md_row([n, fmt(a), fmt(b)]) for n, a, b in SEED_TABLE5],
        "",
    ]
    return md


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = [c for c in cells if c.status == "ok"]
    if not cells:
        return []
    md = seed_tables() + _intro()
    for group in group_repeats(cells):
        md += configuration_tables(group)
    return md + fig3(cells, out)


def _intro() -> list[str]:
    """What Table 3's totals, the speedups, the op table and Table 5's overhead mean."""
    return [
        "784-10-10 MLP from scratch, full-batch gradient descent, lr 0.1. Table 3 has two totals: "
        "*steps only* sums the timed training steps (no syncs inside); *entire process* is the wall time of "
        "the whole training loop including the accuracy records every 10 iterations (a validation forward "
        "pass and host reads, as the seed's loop printed them), the seed's \"entire training process\" "
        "(warm-up and data upload excluded in both). Every speedup is NumPy's median over repeats / the "
        f"variant's, paired by repeat, with {stats.INTERVAL_TEXT}; NumPy's own row reads 1.0x. The op "
        "table comes from a separate run with a device sync around every op, so its numbers add up to more "
        "than the plain per-iteration time.",
        "",
        f"Table 5's framework overhead, one definition for every column: {OVERHEAD_DEFINITION}. The CUDA "
        "context and the interpreter are in neither Total (both exist before the measurement starts); "
        "the rows marked *also read* are not in the Total.",
        "",
    ]


def configuration_tables(group: list[Cell]) -> list[str]:
    """One configuration's heading (where it ran, on what data), its Tables 3-5 and the variants
    it could not run."""
    c = group[0]
    r0 = c.rows[0]
    n = len(group)
    flags = [f"r{x.repeat}: {md_text(x.flags)}" for x in group if x.flags]
    gpu = (c.system.get("gpu") or {}).get("name")
    on_gpu = any(_platform(v) != "cpu" for v in R.variants(c))  # only then did the cell use the GPU
    where = f"{str(r0.get('cell', '')).rsplit('-', 1)[0]} on {c.system.get('cpu_model', '?')}" + (
        f" + {gpu}" if gpu and on_gpu else ""
    )
    blas = _blas_line(group)
    t5, one = table5(c)
    md = [
        f"#### {md_text(where)} ({md_text(r0.get('dtype'))}, {md_text(r0.get('iterations'))} iterations, "
        f"{md_text(r0.get('dataset'))}{'' if r0.get('dataset_real') else ', not the real dataset'}, "
        f"{md_text(r0.get('n_train'))} train / {md_text(r0.get('n_val'))} val)",
        "",
        *([blas, ""] if blas else []),
        f"Table 3: time ({n} repeat{'s' if n > 1 else ''}, each a fresh process; medians over repeats)",
        "",
        *table3(group),
        "",
        *([f"⚑ flagged: {'; '.join(flags)}", ""] if flags else []),
        f"Table 4: operations (medians over {n} repeat{'s' if n > 1 else ''}; each speedup as the claims read it)",
        "",
        *table4(group),
        "",
        f"Table 5: memory (MB = 10^6 bytes; each variant measured in a fresh process; repeat {c.repeat})",
        "",
        *t5,
        "",
        *([] if one else [f"({OLD_OVERHEAD})", ""]),
    ]
    skipped = [r for r in c.rows if r.get("status") == "skipped"]
    return md + [f"- {md_text(r['backend'])} not run: {md_reason(r.get('reason'))}" for r in skipped] + ([""] if skipped else [])


def fig3(cells: list[Cell], out: Path) -> list[str]:
    """Fig. 3 drawn under OUT and its caption ([] where no cell has a curve)."""
    if not convergence_plot(cells, out):
        return []
    return [
        "Fig. 3: training accuracy per iteration (the seed's figure) and validation accuracy, each with "
        "its difference to NumPy float64 underneath.",
        "",
        "![mlp convergence](mlp_convergence.png)",
        "",
    ]


def summary(cells: list[Cell]) -> tuple[list[str], dict]:
    """What a matrix prints when it ends: per configuration and variant, the training time (the
    timed steps only, median over repeats [95% bootstrap interval]), the time per iteration, the
    final validation accuracy and the speed over NumPy's (paired by repeat), 3 significant digits."""
    cells = [c for c in cells if c.status == "ok"]
    lines: list[str] = []
    data: list[dict] = []
    for group in group_repeats(cells):
        r0 = group[0].rows[0]
        n = len(group)
        body = []
        for v in R.variants(group[0]):
            f = R.summary(group, v, REFERENCE)
            if f is None:
                continue
            t, ms, acc, r = f.total, f.per_iter_ms, f.final_val_acc, f.speed
            ci = t.bracket() or " (n=1)"
            speed = f"   {short(r.median)}x NumPy's speed{r.bracket()}" if r else ""
            body.append(
                f"  {v:<11} {short(t.median)} s{ci}   "
                + (f"{short(ms)} ms/iteration" if ms is not None else "")
                + (f"   val acc {100 * acc:.1f}%" if acc is not None else "")
                + speed
            )
            data.append({"dtype": r0.get("dtype"), "variant": v, "repeats": n, **f.data()})
        if not body:
            continue
        lines.append(
            f"{r0.get('dtype')}, {r0.get('iterations')} iterations, {n} repeat{'s' if n != 1 else ''} "
            "(training time of the timed steps: median [95% CI, or the range below 6 repeats] over repeats):"
        )
        lines += body
        flags = [f"r{x.repeat}: {x.flags}" for x in group if x.flags]
        lines += [f"  ⚑ flagged (noise; the report has the details): {'; '.join(flags)}"] if flags else []
    return lines, {"configurations": data}
