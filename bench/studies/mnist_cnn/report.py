"""mnist-cnn's report section: seed 000's Table I from epoch rows (plus the spread the seed
did not report), Fig. 1, the seed's own numbers, and the same-session throughput ratios."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.core import noise, stats
from bench.core.labels import qualify
from bench.core.resultset import ResultCell, group_repeats
from bench.core.rows import atomic_write_text, write_json
from bench.core.tables import markdown, md_row, text_table
from bench.core.text import csv_text, sig
from bench.core.text import md as md_text
from bench.studies.mnist_cnn import readout as R
from bench.studies.mnist_cnn.readout import epochs  # a cell's epoch rows, by epoch number (tests read report.epochs)

TABLE1_COLUMNS = [
    ("platform", "Platform"),
    ("device", "Device"),
    ("run", "Run"),
    ("repeat", "Repeat"),
    ("avg_epoch_s", "Avg Epoch Time (s)"),
    ("total_train_s", "Total Train Time (s)"),
    ("avg_samples_per_s", "Avg Throughput (samples/s)"),
    ("final_test_acc_pct", "Final Test Acc (%)"),
    ("max_test_acc_pct", "Max Test Acc (%)"),
    ("avg_rss_mb", "Avg Proc RAM (MB)"),
    ("max_vram_mb", "Max GPU VRAM (MB)"),
    ("median_samples_per_s", "Median Throughput (samples/s)"),
    ("spread_samples_per_s", "Throughput min-max"),
    ("compile_s", "Compile/JIT (s)"),
    ("epochs", "Epochs"),
    ("dataset", "Dataset"),
    ("runtime", "Runtime"),
]
# table1.csv / table1.json: numbers stay numbers (the markdown's "min-max" text is made from
# min_ and max_samples_per_s when rendering), plus the keys that join a row to the tidy table
TABLE1_CSV = [k for k, _ in TABLE1_COLUMNS if k != "spread_samples_per_s"] + [
    "min_samples_per_s",
    "max_samples_per_s",
    "batch_size",
    "dataset_real",
    "host",
    "backend",
    "pipeline",
    "variant",
    "cell",
]
# (numerator, denominator): ratios of median throughput, same session; the numbers only (the
# kit's targets for three of them are claims: claims.py, judged with every seed claim)
RATIOS = [
    ("numba-cpu resident default", "torch-cpu resident default"),
    ("torch-cpu resident default", "torch-cpu seed default"),
    ("numba-cuda resident default", "torch-cuda resident tuned"),
    ("torch-cuda resident tuned", "torch-cuda resident default"),
    ("torch-cuda resident tuned", "torch-cuda seed default"),
    ("torch-cuda resident tuned", "torch-cpu resident default"),
    ("numba-cuda resident default", "numba-cpu resident default"),
]
# Table I over repeats: one row per configuration (cell spec without its repeat, per host and
# device); each repeat (a fresh process) gives one value per figure, and the table shows the
# median of those with a 95 % bootstrap interval from 6 repeats, the range below (bench.core.stats),
# the IQR and the range.
SUMMARY_COLUMNS = [
    ("platform", "Platform"),
    ("device", "Device"),
    ("run", "Run"),
    ("repeats", "Repeats"),
    ("median_samples_per_s", "Median Throughput (samples/s)"),
    ("ci_samples_per_s", "interval"),
    ("iqr_samples_per_s", "IQR"),
    ("range_samples_per_s", "min-max"),
    ("avg_epoch_s", "Avg Epoch Time (s)"),
    ("ci_epoch_s", "Epoch Time interval"),
    ("total_train_s", "Total Train Time (s)"),
    ("final_test_acc_pct", "Final Test Acc (%)"),
    ("max_test_acc_pct", "Max Test Acc (%)"),
    ("avg_rss_mb", "Avg Proc RAM (MB)"),
    ("max_vram_mb", "Max GPU VRAM (MB)"),
    ("compile_s", "Compile/JIT (s)"),
    ("epochs", "Epochs"),
    ("dataset", "Dataset"),
]
SUMMARY_CSV = [
    "platform",
    "device",
    "run",
    "host",
    "backend",
    "pipeline",
    "variant",
    "repeats",
    "median_samples_per_s",
    "ci_lo_samples_per_s",
    "ci_hi_samples_per_s",
    "q1_samples_per_s",
    "q3_samples_per_s",
    "min_samples_per_s",
    "max_samples_per_s",
    "avg_epoch_s",
    "ci_lo_epoch_s",
    "ci_hi_epoch_s",
    "total_train_s",
    "final_test_acc_pct",
    "max_test_acc_pct",
    "avg_rss_mb",
    "max_vram_mb",
    "compile_s",
    "epochs",
    "dataset",
    "dataset_real",
    "flags",
]

SEED_TABLE1 = """| Platform (seed 000, RTX 4060 laptop / M4 Pro) | Avg Epoch Time (s) | Avg Throughput (samples/s) | Final Test Acc (%) |
|---|---|---|---|
| CPU (Numba, dense layers only) | 2.0928 | 30,501 | 96.33 |
| GPU CUDA (Numba, dense backprop on CPU) | 0.9268 | 71,758 | 96.68 |
| CPU PyTorch | 11.2687 | 5,340 | 97.57 |
| CUDA PyTorch | 8.7219 | 6,948 | 97.21 |
| MPS PyTorch | 9.0544 | 6,645 | 97.31 |"""


def label(cell: ResultCell) -> str:
    r = cell.first
    v = "" if r.get("variant") in (None, "default") else f" [{r['variant']}]"
    return f"{r.get('backend')} {r.get('pipeline')}{v}"


def key(cell: ResultCell) -> str:
    r = cell.first
    return f"{r.get('backend')} {r.get('pipeline')} {r.get('variant')}"


def table1_row(cell: ResultCell) -> dict:
    """One cell (a repeat): its figures (readout.figures: Table I's columns and the throughput's
    spread over epochs) and what names it."""
    fig = R.figures(cell)
    first = epochs(cell)[0]  # check_rows: each holds Table I's four measurements, as numbers
    return {
        "platform": label(cell),
        "device": cell.device,
        "run": cell.run_label,
        "avg_epoch_s": fig["avg_epoch_s"],
        "total_train_s": fig["total_train_s"],
        "avg_samples_per_s": fig["avg_samples_per_s"],
        "final_test_acc_pct": fig["final_test_acc_pct"],
        "max_test_acc_pct": fig["max_test_acc_pct"],
        "avg_rss_mb": fig["avg_rss_mb"],
        "max_vram_mb": fig["max_vram_mb"] or 0.0,
        "median_samples_per_s": fig["median_samples_per_s"],
        "min_samples_per_s": fig["min_samples_per_s"],
        "max_samples_per_s": fig["max_samples_per_s"],
        "compile_s": fig["compile_s"],
        "epochs": fig["epochs"],
        "dataset": str(first.get("dataset")) + ("" if first.get("dataset_real_mnist") else " (not MNIST)"),
        "runtime": cell.environment,
        "env": cell.env_name,
        "batch_size": first.get("batch_size"),
        "dataset_real": bool(first.get("dataset_real_mnist")),
        "host": first.get("host") or cell.system.get("hostname"),
        "backend": first.get("backend"),
        "pipeline": first.get("pipeline"),
        "variant": first.get("variant"),
        "repeat": first.get("repeat"),
        "cell": first.get("cell") or cell.dir.name,
        "unclean_source": cell.unclean_source,
    }


def shown(rows: list[dict]) -> list[dict]:
    """Table I rows as the markdown and terminal tables show them (the min-max spread as text)."""
    return [{**r, "spread_samples_per_s": f"{r['min_samples_per_s']:,.0f}-{r['max_samples_per_s']:,.0f}"} for r in rows]


def table1(cells: list[ResultCell]) -> list[dict]:
    rows = [table1_row(c) for c in cells if c.status == "ok" and epochs(c)]
    rows.sort(key=lambda r: (r["device"], r["run"], -r["median_samples_per_s"]))
    envs = [r["env"] for r in rows], [r["runtime"] for r in rows]
    return qualify(rows, ("platform", "device", "run", "repeat"), "platform", *envs, [r["cell"] for r in rows])


def _ok(cells: list[ResultCell]) -> list[ResultCell]:
    return [c for c in cells if c.status == "ok" and epochs(c)]


def summary_row(group: list[ResultCell]) -> dict:
    """One configuration over its repeats: per repeat one value per figure, then the median of
    those (readout.over_repeats) with a 95 % bootstrap interval (stats.summarize), IQR and range."""
    per = [table1_row(c) for c in group]
    conf = R.over_repeats([R.figures(c) for c in group])
    tput = stats.summarize([r["median_samples_per_s"] for r in per])
    ep_s = stats.summarize([r["avg_epoch_s"] for r in per])
    flags = [(f"r{c.repeat}:" if len(group) > 1 else "") + f for c in group for f in c.flags.split(";") if f]
    first = per[0]
    return {
        "platform": noise.mark(first["platform"], ";".join(flags)),
        "device": first["device"],
        "run": group[0].run_label,
        "env": first["env"],
        "runtime": first["runtime"],
        "host": first["host"],
        "backend": first["backend"],
        "pipeline": first["pipeline"],
        "variant": first["variant"],
        "repeats": len(per),
        "median_samples_per_s": tput.median,
        "ci_lo_samples_per_s": tput.lo,
        "ci_hi_samples_per_s": tput.hi,
        "q1_samples_per_s": tput.q1,
        "q3_samples_per_s": tput.q3,
        "min_samples_per_s": tput.min,
        "max_samples_per_s": tput.max,
        "ci_samples_per_s": tput.interval(),
        "iqr_samples_per_s": f"{tput.q1:,.0f}-{tput.q3:,.0f}",
        "range_samples_per_s": f"{tput.min:,.0f}-{tput.max:,.0f}",
        "avg_epoch_s": ep_s.median,
        "ci_lo_epoch_s": ep_s.lo,
        "ci_hi_epoch_s": ep_s.hi,
        "ci_epoch_s": ep_s.interval("{:.4f}"),
        "total_train_s": conf["total_train_s"],
        "final_test_acc_pct": conf["final_test_acc_pct"],
        "max_test_acc_pct": conf["max_test_acc_pct"],
        "avg_rss_mb": conf["avg_rss_mb"],
        "max_vram_mb": conf["max_vram_mb"] or 0.0,
        "compile_s": conf["compile_s"],
        "epochs": first["epochs"],
        "dataset": first["dataset"],
        "dataset_real": first["dataset_real"],
        "flags": ";".join(flags),
    }


def summary_table(cells: list[ResultCell]) -> list[dict]:
    rows = [summary_row(g) for g in group_repeats(_ok(cells))]
    rows.sort(key=lambda r: (r["device"], r["run"], -r["median_samples_per_s"]))
    return qualify(
        rows,
        ("platform", "device", "run"),
        "platform",
        [r["env"] for r in rows],
        [r["runtime"] for r in rows],
        [r["dataset"] for r in rows],
        [f"{r['epochs']} epochs" for r in rows],
    )


def _session(c: ResultCell) -> str:
    """Cells whose ratio means something: one host, one environment (a native run and a container
    run of one host are two sessions, never one ratio), one dataset, the same training setup
    (every parameter but the pipeline, which the ratios compare)."""
    params = {k: v for k, v in (c.spec.get("params") or {}).items() if k not in ("pipeline", "dataset_sha256")}
    setup = ", ".join(f"{k}={params[k]}" for k in ("dataset", "epochs", "batch_size", "limit_train") if k in params)
    return f"{c.run_label}: {c.first.get('host')} {c.environment} ({setup or c.first.get('dataset')})"


def ratios_ci(cells: list[ResultCell]) -> list[dict]:
    """RATIOS among one host's cells: median of per-repeat median throughputs and a 95 % interval
    paired by repeat (repeat i of both ran in the same round)."""
    from bench.core import seqstats

    by: dict[tuple[str, str], dict[int, float]] = {}
    roots: dict[str, set] = {}
    for c in _ok(cells):
        if (v := R.median_samples_per_s(epochs(c))) is not None:
            by.setdefault((_session(c), key(c)), {})[c.repeat] = v
        roots.setdefault(_session(c), set()).add(c.dir.parent.parent.resolve())
    out = []
    for sess in sorted({h for h, _ in by}):
        # the claims' own figure for the same pair (a sequential run's: its confidence sequence)
        seq = len(roots[sess]) == 1 and seqstats.sequential_root(next(iter(roots[sess])))
        for top, den in RATIOS:
            a, b = by.get((sess, top)), by.get((sess, den))
            if a and b:
                r = seqstats.pair_figure(a, b, seq)
                out.append(
                    {
                        "host": sess,
                        "numerator": top,
                        "denominator": den,
                        "ratio": r.median,
                        "ci_lo": r.lo,
                        "ci_hi": r.hi,
                        "ci_kind": r.kind,
                        "ci_tag": r.tag,  # 'range of 3: 75%', 'unpaired ranges of 2 / 6: at least 37%', '95% CS'
                        "unpaired": bool(r.sides_n),  # sides of different repeats: no per-repeat ratios
                        "min": r.min,
                        "max": r.max,
                        "repeats": r.n,
                    }
                )
    return out


# Table I's columns a summary line shows in 3 significant digits (the markdown table keeps fmt's)
_SIG = ("avg_epoch_s", "avg_rss_mb", "compile_s", "max_vram_mb", "total_train_s")


def _ratio_text(r: dict) -> str:
    """'2.93x (95% CI 2.81-3.05)', or '(range of 3 2.81-3.05)' below 6 repeats; 3 significant digits."""
    if r["ci_lo"] is None or r["ci_hi"] is None:
        return f"{sig(r['ratio'])}x (one repeat: no interval; run --repeats 3)"
    kind = r.get("ci_kind", "ci")
    what = {"ci": "95% CI", "cs": f"95% CS of {r['repeats']} rounds"}.get(kind, f"range of {r['repeats']}")
    return f"{sig(r['ratio'])}x ({what} {sig(r['ci_lo'])}-{sig(r['ci_hi'])})"


def _kit_targets(cells: list[ResultCell]) -> list[str]:
    """The kit's targets among the ratios above, judged by the claims engine (one verdict policy)."""
    from bench.core import answers
    from bench.core.registry import get_study

    study = get_study("mnist-cnn")
    out = []
    for claim in study.claims:
        if claim.kit and claim.expect is not None:
            out += [f"  {claim.text}: {a.verdict}" for a in answers.judge(study, cells, claim) if a.findings]
    return out


def _flag_lines(rows: list[dict], esc: Callable[[object], str] = str) -> list[str]:
    """The flagged configurations; ESC escapes the values (`md` for markdown)."""
    flagged = [r for r in rows if r["flags"]]
    if not flagged:
        return []
    return [
        "⚑ flagged cells (bench.core.noise: CV over timed epochs > "
        f"{noise.CV_LIMIT:.0%}, an epoch > {noise.OUTLIER_X}x the median, throttling, a shared GPU or CPU): "
        + "; ".join(f"{esc(r['platform'].rstrip(' ⚑'))}: {esc(r['flags'])}" for r in flagged),
        "",
    ]


def section(cells: list[ResultCell], out: Path) -> list[str]:
    from bench.studies.mnist_cnn import plots
    from bench.studies.mnist_cnn.seed_table import seed_section

    rows = table1(cells)
    plot_paths = plots.fig1([c for c in cells if c.status == "ok" and epochs(c)], out, label) if rows else []
    atomic_write_text(out / "table1.csv", csv_text(rows, list(TABLE1_CSV)))  # one row per cell (repeat)
    write_json(out / "table1.json", {"rows": rows})
    summ = summary_table(cells)
    atomic_write_text(out / "table1_summary.csv", csv_text(summ, list(SUMMARY_CSV)))  # one row per configuration, over repeats
    write_json(out / "table1_summary.json", {"rows": summ})
    return [
        *table1_lines(summ, rows),
        *ratio_lines(ratios_ci(cells)),
        *(["### Fig. 1", ""] + [f"![{p.stem}]({p.name})" for p in plot_paths] + [""]),
        *seed_section(cells),  # seed 000's Table I beside ours for the same setups, and the speedup table
    ]


def table1_lines(summ: list[dict], rows: list[dict]) -> list[str]:
    """Table I over repeats, its flagged cells, the per-repeat table folded, and the note where a
    row did not run on MNIST."""
    md = [
        "### Table I (measured)",
        "",
        "One row per configuration over its repeats (each a fresh process, run in rounds across "
        "cells). Per repeat: throughput = median over epochs of samples / epoch time (training only, "
        "padded samples included), epoch time = mean over epochs. The table gives the median over "
        f"repeats with {stats.INTERVAL_TEXT} (scipy.stats.bootstrap, percentile, resampling "
        "repeats), the IQR and the range. RAM is the process RSS sampled every 10 ms during "
        "training; VRAM is the allocator's peak. ⚑ marks a flagged cell (listed below the table).",
        "",
        markdown(summ, SUMMARY_COLUMNS) if summ else "_no finished cells_",
        "",
        *_flag_lines(summ, md_text),
    ]
    if rows:
        md += [
            "<details><summary>Table I per cell and repeat, with the min-max over epochs (table1.csv)</summary>",
            "",
            markdown(shown(rows), TABLE1_COLUMNS),
            "",
            "</details>",
            "",
        ]
    if any("not MNIST" in r["dataset"] for r in rows):
        md += [
            "> Rows marked *(not MNIST)* ran on the embedded default (scikit-learn's 1,797 digits resized "
            "to 28x28): a wiring check, not comparable with the seed. Reproduce Table I on real MNIST "
            "with `KIT_DATA_DIR=... python orchestrate.py all`.",
            "",
        ]
    return md


def ratio_lines(rat: list[dict]) -> list[str]:
    """The same-host throughput ratios (ratios_ci) as a table ([] where there are none)."""
    if not rat:
        return []
    md = [
        "### Throughput ratios (cells of one host, paired by repeat)",
        "",
        "The interval is a 95% bootstrap CI from 6 repeats; with fewer it is the range of the paired per-repeat "
        "ratios, marked *(range of n)* with the probability 1 - 2^(1-n) that it holds the true ratio (75% at 3), or, "
        "where the two sides ran different numbers of repeats, the unpaired ranges' min(A)/max(B) to max(A)/min(B), "
        "marked *(unpaired ranges)* with at least the product of each side's; with one "
        "repeat there is none; a run that added rounds until decided gives the median per-round ratio with its "
        "95% confidence sequence, marked *(95% CS)*: the same figure its claims read. The kit's targets for three of these ratios are judged with the seed's claims "
        "(below), by the kit's one verdict policy.",
        "",
        "| host (setup) | ratio | median | interval | min-max over repeats |",
        "|---|---|---|---|---|",
    ]
    for r in rat:
        interval = (
            (f"{r['ci_lo']:.2f}-{r['ci_hi']:.2f}" + (f" ({r.get('ci_tag')})" if r.get("ci_kind") in ("range", "cs") else ""))
            if r["ci_lo"] is not None
            else "n=1"
        )
        md.append(
            md_row(
                [
                    r["host"],
                    f"{r['numerator']} / {r['denominator']}",
                    f"{r['ratio']:.2f}x",
                    interval,
                    # unpaired sides (different repeats) have no per-repeat ratios: their range is the interval
                    "– (unpaired)" if r.get("unpaired") else f"{r['min']:.2f}-{r['max']:.2f}",
                ]
            )
        )
    return md + [""]


def summary(cells: list[ResultCell]) -> tuple[list[str], dict]:
    """What a matrix prints when it ends: Table I over repeats and the ratios with intervals."""
    summ = summary_table(cells)
    cols = [SUMMARY_COLUMNS[i] for i in (0, 1, 2, 3, 4, 5, 7, 10, 12, 14)]
    shown = [
        {**{k: sig(v) if k in _SIG and isinstance(v, float) else v for k, v in r.items()}, "median_samples_per_s": f"{r['median_samples_per_s']:,.0f}"}
        for r in summ
    ]  # fmt: skip
    title = "Table I (this run; median over repeats and its interval: a 95% bootstrap CI from 6 repeats, else their range)"
    lines = [title, *text_table(shown, cols)] if summ else []
    flagged = [r for r in summ if r["flags"]]
    if flagged:
        lines.append(
            f"⚑ flagged (bench.core.noise: CV over timed epochs > {noise.CV_LIMIT:.0%}, an epoch > {noise.OUTLIER_X}x the "
            "median, throttling, a shared GPU or CPU):"
        )
        lines += [f"  {r['platform'].rstrip(' ⚑')}: {r['flags']}" for r in flagged]
    rat = ratios_ci(cells)
    if rat:
        lines += ["", "ratios of median throughput (same session, paired by repeat; > 1: the first is faster)"]
        lines += [f"  {r['numerator']} / {r['denominator']}: {_ratio_text(r)}" for r in rat]
        lines += _kit_targets(cells)
    cells_d = {
        key(c) + (f" r{c.repeat}" if c.repeat else ""): (
            {"status": c.status, "reason": c.reason}
            if c.status != "ok" or not epochs(c)
            else {
                "status": "ok",
                "repeat": c.repeat,
                "median_samples_per_s": R.median_samples_per_s(epochs(c)),
                "min_samples_per_s": R.min_samples_per_s(epochs(c)),
                "max_samples_per_s": R.max_samples_per_s(epochs(c)),
                "final_test_acc": R.final_acc(epochs(c)),
                "epochs": len(epochs(c)),
                "flags": c.flags,
            }
        )
        for c in cells
    }
    return lines, {"cells": cells_d, "configurations": summ, "ratios": rat}
