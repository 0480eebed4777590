"""A warning printed under a figure (NOT MNIST, NOT CIFAR-10): below everything the figure draws,
its axis labels, tick labels and legends included, so it never covers one; and naming the series
it is about where only some of them are.

    note = data_warning("NOT MNIST", "digits-embedded", ["torch-cpu seed [vm]"], all_series=False, why="...")
    add(fig, note)        # before savefig(..., bbox_inches="tight"), which grows the image to hold it
"""

from __future__ import annotations

from bench.core.text import plot_text

GAP = 0.015  # figure fraction between the lowest drawn thing and the note


def data_warning(what: str, datasets: list[str], series: list[str], all_series: bool, why: str, most: int = 4) -> str:
    """'NOT MNIST (digits-embedded): every series. why' or '...: torch-cpu seed [vm], ... and 2 more. why'."""
    sets = plot_text(", ".join(sorted(set(datasets))))
    if all_series:
        which = "every series"
    else:
        shown = [plot_text(s) for s in series[:most]]
        which = ", ".join(shown) + (f" and {len(series) - most} more" if len(series) > most else "")
    return f"{what} ({sets}): {which}. {why}"


def add(fig, text: str, color: str = "tab:red") -> None:
    """TEXT centred under the lowest thing FIG draws (axes with their labels and legends, a
    figure legend, a supxlabel). Measured without drawing: `get_tightbbox` lays each axes out itself."""
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    boxes += [t.get_window_extent(renderer) for t in fig.texts if t.get_visible() and t.get_text()]
    boxes += [leg.get_window_extent(renderer) for leg in fig.legends]
    lowest = min((b.y0 for b in boxes if b is not None), default=0.0)
    y = fig.transFigure.inverted().transform((0.0, lowest))[1] - GAP
    fig.text(0.5, y, text, ha="center", va="top", fontsize=9, color=color, fontweight="bold", wrap=False)
