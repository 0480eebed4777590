"""Seed 000's Fig. 1 as four PNGs: time per epoch, throughput per epoch, test accuracy per
epoch, and average-throughput bars. One line per cell (backend, pipeline, device).

`fig1` computes what each figure shows from the cells; the `draw_*` functions draw it from that
data alone (bench.core.figures: the report draws them in parallel and keeps them by content)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.core import figure_note
from bench.core.figure_layout import legend_size, place, text_width
from bench.core.figures import figure
from bench.core.resultset import ResultCell
from bench.core.text import plot_text
from bench.studies.mnist_cnn import readout as R

PLOTS = ("epoch_time.png", "throughput.png", "test_accuracy.png", "avg_throughput.png")  # avg_throughput: dots + CI whiskers


def data_note(groups: list[list[ResultCell]], name: Callable[[list[ResultCell]], str] | None = None) -> str | None:
    """A warning stamped under every figure when a series did not train on real MNIST, naming
    those series (all of them: "every series") by NAME (default: the cell's backend)."""
    other = {id(g): str(R.epochs(g[0])[0].get("dataset")) for g in groups if R.epochs(g[0])}
    other = {k: v for k, v in other.items() if v != "mnist"}
    if not other:
        return None
    name = name or (lambda g: str(g[0].first.get("backend")))
    return figure_note.data_warning(
        "NOT MNIST",
        list(other.values()),
        [name(g) for g in groups if id(g) in other],
        len(other) == len(groups),
        "The embedded default is a wiring check, not comparable with seed 000.",
    )


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


DPI = 120
# the axes' width the figures had when bbox_inches="tight" cropped them: 9 in at matplotlib's
# default subplot margins (0.125-0.9); heights likewise 77 % of the figure's
AX_W = 9 * 0.775


def _save(fig, path: Path, note: str | None = None) -> None:
    if note:
        figure_note.add(fig, note)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    _plt().close(fig)


def _finish(
    fig,
    path: Path,
    note: str | None,
    legend,
    grid_h: float,
    *,
    left: float = 0.9,
    top: float = 0.45,
    bottom: float = 0.6,
    hspace: float = 0.0,
    least: float = 1.0,
) -> None:
    """FIG laid out once (bench.core.figure_layout) and saved: the axes grid GRID_H inches tall
    and AX_W wide, LEGEND (loc upper left at (1.01, 1)) measured alone beside it, the figure as
    tall as the taller of the grid and the legend, HSPACE inches between two rows of axes, and
    the axes at least LEAST inches wide (an axis label from the data). A figure with a data NOTE
    keeps the measuring layout (`_save`: the note goes under whatever is lowest)."""
    if note:
        _save(fig, path, note)
        return
    lw, lh = legend_size(fig, legend) if legend is not None else (0.0, 0.0)
    right = 0.01 * AX_W + lw + 0.12
    h = max(top + grid_h + bottom, top + lh + 0.12)
    fig.set_size_inches(left + max(AX_W, least) + right, h)
    place(fig, left=left, right=right, top=top, bottom=h - top - grid_h, hspace=hspace)
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)


# every series gets its device family's colour (bench.core.palette: CPUs blue, NVIDIA GPUs green,
# the same in every plot) in its own shade AND its own marker, so lines stay apart in greyscale
# print and for colour-blind readers
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")


def _style(i: int, color: str) -> dict:
    return {"color": color, "marker": _MARKERS[i % len(_MARKERS)]}


def _legend_outside(ax):
    return ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


class Fig1Series:
    """What every Fig. 1 panel shares: the configurations (repeats grouped), each one's legend
    name, shade and marker, and the data warning."""

    def __init__(self, cells: list[ResultCell], label: Callable[[ResultCell], str]) -> None:
        from bench.core import palette
        from bench.core.labels import distinct, environments
        from bench.core.resultset import group_repeats

        cells = [c for c in cells if c.status == "ok" and R.epochs(c)]
        self.groups = group_repeats(cells)
        multi = len({c.device for c in cells}) > 1

        def base(g: list[ResultCell]) -> str:
            c = g[0]
            return f"{label(c)} ({c.device})" if multi else label(c)

        # a configuration in two runs (a rerun, another host, a smoke beside a default run) is two
        # series: their names carry the run, then the data and epochs, only where they would collide
        unique = distinct(
            [base(g) for g in self.groups],
            [g[0].run_label for g in self.groups],
            *environments(self.groups),
            [g[0].first.get("dataset") for g in self.groups],
            [f"{len(R.epochs(g[0]))} epochs" for g in self.groups],
        )
        self.names = {id(g): u for g, u in zip(self.groups, unique)}
        self.shade = palette.colors([(id(g), palette.family(g[0].device, g[0].first.get("backend"))) for g in self.groups])
        self.note = data_note(self.groups, lambda g: self.names[id(g)])

    def name(self, g: list[ResultCell]) -> str:
        """The legend name: unique name, noise mark, repeat count."""
        from bench.core import noise

        name = noise.mark(self.names[id(g)], ";".join(x.flags for x in g if x.flags))
        return plot_text(name) + (f", n={len(g)}" if len(g) > 1 else "")

    def style(self, i: int, g: list[ResultCell]) -> dict:
        return _style(i, self.shade[id(g)])

    def line(self, i: int, g: list[ResultCell], key: str, scale: float = 1.0) -> dict:
        """Configuration G's KEY per epoch: median over repeats and its min-max band."""
        xs, med, lo, hi = R.per_epoch(g, key, scale)
        return {"name": self.name(g), "style": self.style(i, g), "xs": xs, "med": med, "lo": lo, "hi": hi, "band": len(g) > 1}


def fig1(cells: list[ResultCell], out: Path, label: Callable[[ResultCell], str]) -> list[Path]:
    """Seed 000's Fig. 1 over repeats: one series per configuration (median over repeats, the
    min-max band shaded), legends outside the axes, a difference-to-reference panel under the
    accuracy curves, and throughput as medians with 95 % interval whiskers (no bars)."""
    s = Fig1Series(cells, label)
    return per_epoch_figures(s, out) + [accuracy_figure(s, out), throughput_figure(s, out)]


def per_epoch_figures(s: Fig1Series, out: Path) -> list[Path]:
    """Time per epoch and training throughput per epoch, one line per configuration."""
    repeats = any(len(g) > 1 for g in s.groups)
    paths = []
    for key, ylabel, title, fname in (
        ("epoch_s", "seconds (log scale)", "Time per epoch", "epoch_time.png"),
        ("samples_per_s", "samples/s (log scale)", "Training throughput", "throughput.png"),
    ):
        lines = [s.line(i, g, key) for i, g in enumerate(s.groups)]
        title += " (median over repeats, min-max shaded)" if repeats else ""
        figure(out, fname, draw_per_epoch, {"lines": lines, "ylabel": ylabel, "title": title, "note": s.note})
        paths.append(out / fname)
    return paths


def accuracy_figure(s: Fig1Series, out: Path) -> Path:
    """Test accuracy per epoch. The curves lie within a point of each other, so a second panel
    shows each one's difference to a reference on the same data (that dataset's first torch-cpu
    configuration, else its first one): a merged report may hold several datasets."""

    def ds(g: list[ResultCell]) -> str:
        return str(g[0].first.get("dataset"))

    refs: dict[str, list[ResultCell]] = {}
    for g in s.groups:
        if ds(g) not in refs or (
            str(g[0].first.get("backend")) == "torch-cpu" and refs[ds(g)][0].first.get("backend") != "torch-cpu"
        ):
            refs[ds(g)] = g
    acc = []
    for i, g in enumerate(s.groups):
        line = s.line(i, g, R.ACC, 100)
        rx, rmed, _, _ = R.accuracy_curve(refs[ds(g)])
        rmap = dict(zip(rx, rmed))
        line["diff"] = [(x, m - rmap[x]) for x, m in zip(line["xs"], line["med"]) if x in rmap]
        acc.append(line)
    ref_names = "; ".join(f"{plot_text(d)}: {s.name(g)}" for d, g in refs.items())
    figure(out, "test_accuracy.png", draw_accuracy, {"lines": acc, "ref_names": ref_names, "note": s.note})
    return out / "test_accuracy.png"


def throughput_figure(s: Fig1Series, out: Path) -> Path:
    """Median throughput per configuration with its 95 % interval over repeats: dots and
    whiskers on a log axis (a log-scale bar's length means nothing), the value printed."""
    from bench.core import stats

    rows: list[dict[str, Any]] = []
    for i, g in enumerate(s.groups):
        per = [v for c in g if (v := R.median_samples_per_s(R.epochs(c))) is not None]
        sm = stats.summarize(per)
        rows.append({"name": s.name(g), "median": sm.median, "lo": sm.lo, "hi": sm.hi, "style": s.style(i, g)})
    rows.sort(key=lambda r: r["median"])
    figure(out, "avg_throughput.png", draw_avg_throughput, {"rows": rows, "note": s.note})
    return out / "avg_throughput.png"


def draw_per_epoch(d: dict, path: Path) -> None:
    """Time or throughput per epoch: a line per configuration, its min-max band shaded, log y."""
    fig, ax = _plt().subplots(figsize=(9, 4.5), dpi=DPI)
    for line in d["lines"]:
        ax.plot(line["xs"], line["med"], ms=4, lw=1.2, label=line["name"], **line["style"])
        if line["band"]:
            ax.fill_between(line["xs"], line["lo"], line["hi"], color=line["style"]["color"], alpha=0.15, lw=0)
    ax.set_yscale("log")  # lines spanning 10^3-10^6 samples/s; the values stay readable in the legend's order
    ax.set_xlabel("epoch")
    ax.set_ylabel(d["ylabel"])
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(d["title"], y=1.0)  # y given: no search for top ticks (none here)
    _finish(fig, path, d["note"], _legend_outside(ax), 4.5 * 0.77)


def draw_accuracy(d: dict, path: Path) -> None:
    """Test accuracy per epoch, and under it each curve's difference to its dataset's reference."""
    fig, (ax, dx) = _plt().subplots(2, 1, figsize=(9, 6.5), dpi=DPI, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for line in d["lines"]:
        st = line["style"]
        ax.plot(line["xs"], line["med"], ms=4, lw=1.2, label=line["name"], **st)
        if line["band"]:
            ax.fill_between(line["xs"], line["lo"], line["hi"], color=st["color"], alpha=0.15, lw=0)
        if line["diff"]:
            dx.plot([x for x, _ in line["diff"]], [y for _, y in line["diff"]], ms=4, lw=1.2, **st)
    dx.axhline(0.0, color="black", lw=0.8)
    dx.set_ylabel("difference to the reference\n(percentage points)", fontsize=8)
    dx.set_title(f"reference per dataset: {d['ref_names']}", fontsize=7, y=1.0)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Test accuracy after each epoch", y=1.0)
    ax.grid(True, alpha=0.3)
    dx.grid(True, alpha=0.3)
    dx.set_xlabel("epoch")
    least = text_width([dx.get_title()], 7, DPI) + 0.1  # the reference names, from the data, on one line
    _finish(fig, path, d["note"], _legend_outside(ax), 6.5 * 0.77, hspace=0.4, least=least)


def draw_avg_throughput(d: dict, path: Path) -> None:
    """Median throughput per configuration, 95 % interval whiskers, log x, the value printed."""
    rows = d["rows"]
    fig, ax = _plt().subplots(figsize=(9, 0.8 + 0.42 * max(1, len(rows))), dpi=DPI)
    for y, r in enumerate(rows):
        med, st = r["median"], r["style"]
        c_lo, c_hi = (r["lo"], r["hi"]) if r["lo"] is not None and r["hi"] is not None else (med, med)
        ax.errorbar([med], [y], xerr=[[med - c_lo], [c_hi - med]], fmt=st["marker"], color=st["color"], capsize=3, ms=6)
        ax.annotate(f"{med:,.0f}", (c_hi, y), xytext=(6, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)
    ax.set_xscale("log")
    xlabel = "median training throughput, samples/s (log scale; whiskers: 95% CI over repeats, their range below 6)"
    ax.set_xlabel(xlabel)
    ax.set_title("Throughput by configuration", y=1.0)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    if rows:
        lo_all = min((r["lo"] or r["median"]) for r in rows)
        hi_all = max((r["hi"] or r["median"]) for r in rows)
        ax.set_xlim(lo_all / 1.5, hi_all * 3)  # room for the printed values
    names = text_width([r["name"] for r in rows], 8, DPI)
    grid_h = (0.8 + 0.42 * max(1, len(rows))) * 0.77
    _finish(fig, path, d["note"], None, grid_h, left=names + 0.15, bottom=0.55, least=text_width([xlabel], 10, DPI))
