"""mnist-cnn's report section: seed 000's Table I from epoch rows (plus the spread the seed
did not report), Fig. 1, the seed's own numbers, and the same-session throughput ratios."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

from bench.core.resultset import ResultCell
from bench.core.rows import atomic_write_text, write_json
from bench.core.tables import markdown, text_table

TABLE1_COLUMNS = [
    ("platform", "Platform"),
    ("device", "Device"),
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
    "repeat",
    "cell",
]
# (numerator, denominator, the target an earlier issue set): ratios of median throughput, same session
RATIOS = [
    ("numba-cpu resident default", "torch-cpu resident default", ">= 1.0"),
    ("torch-cpu resident default", "torch-cpu seed default", ">= 2.0"),
    ("numba-cuda resident default", "torch-cuda resident tuned", ">= 0.5"),
    ("torch-cuda resident tuned", "torch-cuda resident default", ""),
    ("torch-cuda resident tuned", "torch-cuda seed default", ""),
    ("torch-cuda resident tuned", "torch-cpu resident default", ""),
    ("numba-cuda resident default", "numba-cpu resident default", ""),
]
SEED_TABLE1 = """| Platform (seed 000, RTX 4060 laptop / M4 Pro) | Avg Epoch Time (s) | Avg Throughput (samples/s) | Final Test Acc (%) |
|---|---|---|---|
| CPU (Numba, dense layers only) | 2.0928 | 30,501 | 96.33 |
| GPU CUDA (Numba, dense backprop on CPU) | 0.9268 | 71,758 | 96.68 |
| CPU PyTorch | 11.2687 | 5,340 | 97.57 |
| CUDA PyTorch | 8.7219 | 6,948 | 97.21 |
| MPS PyTorch | 9.0544 | 6,645 | 97.31 |"""


def epochs(cell: ResultCell) -> list[dict]:
    return [r for r in cell.rows if r.get("status") == "ok" and r.get("epoch") is not None]


def label(cell: ResultCell) -> str:
    r = cell.first
    v = "" if r.get("variant") in (None, "default") else f" [{r['variant']}]"
    return f"{r.get('backend')} {r.get('pipeline')}{v}"


def key(cell: ResultCell) -> str:
    r = cell.first
    return f"{r.get('backend')} {r.get('pipeline')} {r.get('variant')}"


def table1_row(cell: ResultCell) -> dict:
    ep = epochs(cell)
    tput = [r["samples_per_s"] for r in ep]
    vram = [r["vram_peak_mb"] for r in ep if r.get("vram_peak_mb") is not None]
    first = ep[0]
    img = cell.system.get("image_id", first.get("image_id", "native"))
    return {
        "platform": label(cell),
        "device": cell.device,
        "avg_epoch_s": statistics.fmean(r["epoch_s"] for r in ep),
        "total_train_s": sum(r["epoch_s"] for r in ep),
        "avg_samples_per_s": statistics.fmean(tput),
        "final_test_acc_pct": 100 * ep[-1]["test_acc"],
        "max_test_acc_pct": 100 * max(r["test_acc"] for r in ep),
        "avg_rss_mb": statistics.fmean(r["rss_mean_mb"] for r in ep),
        "max_vram_mb": max(vram) if vram else 0.0,
        "median_samples_per_s": statistics.median(tput),
        "min_samples_per_s": min(tput),
        "max_samples_per_s": max(tput),
        "compile_s": first.get("compile_s"),
        "epochs": len(ep),
        "dataset": str(first.get("dataset")) + ("" if first.get("dataset_real_mnist") else " (not MNIST)"),
        "runtime": cell.system.get("runtime", "native") if img == "native" else f"{cell.system.get('runtime')} {str(img)[:19]}",
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
    return sorted(rows, key=lambda r: (r["device"], -r["median_samples_per_s"]))


def ratios(cells: list[ResultCell]) -> list[dict]:
    """RATIOS among cells that ran on one host (the ratio of two hosts' numbers is not one session's)."""
    by: dict[tuple[str, str], float] = {}
    for c in cells:
        ep = epochs(c)
        if c.status == "ok" and ep:
            by[(str(c.first.get("host")), key(c))] = statistics.median(r["samples_per_s"] for r in ep)
    out = []
    for host in sorted({h for h, _ in by}):
        for num, den, target in RATIOS:
            a, b = by.get((host, num)), by.get((host, den))
            if a and b:
                out.append({"host": host, "numerator": num, "denominator": den, "target": target, "ratio": a / b})
    return out


def section(cells: list[ResultCell], out: Path) -> list[str]:
    from bench.studies.mnist_cnn import plots

    rows = table1(cells)
    plot_paths = plots.fig1([c for c in cells if c.status == "ok" and epochs(c)], out, label) if rows else []
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=TABLE1_CSV, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out / "table1.csv", buf.getvalue())
    write_json(out / "table1.json", {"rows": rows})
    md = [
        "### Table I (measured)",
        "",
        "Epoch time is training only (evaluation excluded); throughput = samples / epoch time, padded "
        "samples included; RAM is the process RSS sampled every 10 ms during training; VRAM is the "
        "allocator's peak. Median and min-max are over epochs.",
        "",
        markdown(shown(rows), TABLE1_COLUMNS) if rows else "_no finished cells_",
        "",
    ]
    if any("not MNIST" in r["dataset"] for r in rows):
        md += [
            "> Rows marked *(not MNIST)* ran on the embedded default (scikit-learn's 1,797 digits resized "
            "to 28x28): a wiring check, not comparable with the seed. Reproduce Table I on real MNIST "
            "with `KIT_DATA_DIR=... python orchestrate.py all`.",
            "",
        ]
    rat = ratios(cells)
    if rat:
        md += [
            "### Throughput ratios (medians over epochs, cells of one host)",
            "",
            "| host | ratio | value | target |",
            "|---|---|---|---|",
        ]
        md += [f"| {r['host']} | {r['numerator']} / {r['denominator']} | {r['ratio']:.2f}x | {r['target']} |" for r in rat]
        md.append("")
    md += ["### Fig. 1", ""] + [f"![{p.stem}]({p.name})" for p in plot_paths] + [""]
    md += [
        "### The seed's Table I, for comparison",
        "",
        SEED_TABLE1,
        "",
        "The seed's PyTorch rows were bound by per-sample transforms (our `seed` pipeline), and its "
        "Numba rows trained only the dense layers; ours train every layer.",
        "",
    ]
    return md


def summary(cells: list[ResultCell]) -> tuple[list[str], dict]:
    """What a matrix prints when it ends: Table I of this run and the ratios."""
    rows = table1(cells)
    cols = [TABLE1_COLUMNS[i] for i in (0, 1, 2, 3, 4, 9, 5, 6, 7, 8, 11)]
    lines = ["Table I (this run)", *text_table(shown(rows), cols)] if rows else []
    rat = ratios(cells)
    if rat:
        lines += ["", "ratios of median throughput (same session)"]
        lines += [
            f"  {r['numerator']} / {r['denominator']}: {r['ratio']:.2f}x" + (f" (target {r['target']})" if r["target"] else "")
            for r in rat
        ]
    cells_d = {
        key(c): (
            {"status": c.status, "reason": c.reason}
            if c.status != "ok" or not epochs(c)
            else {
                "status": "ok",
                "median_samples_per_s": table1_row(c)["median_samples_per_s"],
                "min_samples_per_s": min(r["samples_per_s"] for r in epochs(c)),
                "max_samples_per_s": max(r["samples_per_s"] for r in epochs(c)),
                "final_test_acc": epochs(c)[-1]["test_acc"],
                "epochs": len(epochs(c)),
            }
        )
        for c in cells
    }
    return lines, {"cells": cells_d, "ratios": rat}
