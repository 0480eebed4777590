"""Seed 000's Fig. 1 as four PNGs: time per epoch, throughput per epoch, test accuracy per
epoch, and average-throughput bars. One line per cell (backend, pipeline, device)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.core.resultset import ResultCell  # noqa: E402

PLOTS = ("epoch_time.png", "throughput.png", "test_accuracy.png", "avg_throughput.png")


def data_note(cells: list[ResultCell]) -> str | None:
    """A warning stamped on every figure when any line did not train on real MNIST."""
    other = sorted({str(r.get("dataset")) for c in cells for r in _epochs(c)[:1]} - {"mnist"})
    if not other:
        return None
    return f"NOT MNIST: {', '.join(other)} (the embedded default is a wiring check, not comparable with seed 000)"


def _save(fig, path: Path, note: str | None = None) -> None:
    if note:
        fig.text(0.5, -0.02, note, ha="center", va="top", fontsize=9, color="tab:red", fontweight="bold")
    tmp = path.with_name("." + path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)


def _epochs(c: ResultCell) -> list[dict]:
    return [r for r in c.rows if r.get("status") == "ok" and r.get("epoch") is not None]


def fig1(cells: list[ResultCell], out: Path, label: Callable[[ResultCell], str]) -> list[Path]:
    cells = [c for c in cells if c.status == "ok" and _epochs(c)]
    note = data_note(cells)
    multi = len({c.device for c in cells}) > 1

    def _name(c: ResultCell, multi_device: bool) -> str:
        return f"{label(c)} ({c.device})" if multi_device else label(c)

    specs = [
        ("epoch_s", "Time per epoch (s)", "epoch_time.png", True),
        ("samples_per_s", "Training throughput (samples/s)", "throughput.png", True),
        ("test_acc", "Test accuracy (%)", "test_accuracy.png", False),
    ]
    paths = []
    for key, ylabel, fname, log in specs:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        ax.set_prop_cycle(color=[plt.get_cmap("tab20")(i) for i in range(20)])  # more than 10 cells must not share colours
        for c in cells:
            xs = [r["epoch"] for r in _epochs(c)]
            ys = [r[key] * (100 if key == "test_acc" else 1) for r in _epochs(c)]
            ax.plot(xs, ys, marker="o", ms=3, label=_name(c, multi))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(ylabel + " per epoch")
        _save(fig, out / fname, note)
        paths.append(out / fname)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * max(1, len(cells))))
    order = sorted(cells, key=lambda c: sum(r["samples_per_s"] for r in _epochs(c)) / len(_epochs(c)))
    vals = [sum(r["samples_per_s"] for r in _epochs(c)) / len(_epochs(c)) for c in order]
    ys = list(range(len(order)))  # positions, not category names: two cells may share a name
    ax.barh(ys, vals, color="tab:blue")
    ax.set_yticks(ys, [_name(c, multi) for c in order])
    for y, v in zip(ys, vals):
        ax.text(v, y, f" {v:,.0f}", va="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("average training throughput (samples/s, log scale)")
    ax.set_title("Average throughput")
    _save(fig, out / "avg_throughput.png", note)
    paths.append(out / "avg_throughput.png")
    return paths
