"""Seed 000's Table I, from epoch rows, plus the spread the seed did not report."""
from __future__ import annotations

import statistics

from bench.report.merge import Cell

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


def table1_row(cell: Cell) -> dict:
    ep = cell.epochs
    tput = [r["samples_per_s"] for r in ep]
    vram = [r["vram_peak_mb"] for r in ep if r.get("vram_peak_mb") is not None]
    first = ep[0]
    return {
        "platform": cell.label,
        "device": cell.device,
        "avg_epoch_s": statistics.fmean(r["epoch_s"] for r in ep),
        "total_train_s": sum(r["epoch_s"] for r in ep),
        "avg_samples_per_s": statistics.fmean(tput),
        "final_test_acc_pct": 100 * ep[-1]["test_acc"],
        "max_test_acc_pct": 100 * max(r["test_acc"] for r in ep),
        "avg_rss_mb": statistics.fmean(r["rss_mean_mb"] for r in ep),
        "max_vram_mb": max(vram) if vram else 0.0,
        "median_samples_per_s": statistics.median(tput),
        "spread_samples_per_s": f"{min(tput):,.0f}-{max(tput):,.0f}",
        "compile_s": first.get("compile_s"),
        "epochs": len(ep),
        "dataset": first.get("dataset") + ("" if first.get("dataset_real_mnist") else " (not MNIST)"),
        "runtime": cell.system.get("runtime", "native") if cell.system.get("image_id", "native") == "native"
        else f"{cell.system.get('runtime')} {str(cell.system.get('image_id'))[:19]}",
        "batch_size": first.get("batch_size"),
    }


def table1(cells: list[Cell]) -> list[dict]:
    rows = [table1_row(c) for c in cells if c.status == "ok" and c.epochs]
    return sorted(rows, key=lambda r: (r["device"], -r["median_samples_per_s"]))


def fmt(v) -> str:
    if isinstance(v, float) and v == 0:
        return "0"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"
    return "" if v is None else str(v)


def markdown(rows: list[dict], columns=TABLE1_COLUMNS) -> str:
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])
