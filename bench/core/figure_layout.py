"""Figure margins fixed in inches: a figure laid out once, where `tight_layout` lays it out twice.

    fig, axes = plt.subplots(2, 4, figsize=(12, 4.6))
    ...
    place(fig, left=0.55, right=0.15, top=0.55, bottom=0.45, wspace=0.6, hspace=0.75)
    fig.savefig(path, dpi=80)              # no tight_layout, no bbox_inches="tight"

`fig.tight_layout()` and `savefig(..., bbox_inches="tight")` each lay every axis out (its ticks,
their labels, the titles) once to measure it and then again to draw it; that measuring pass is
about a third of a report figure's cost. The report's figures set their text sizes, so their
margins are known in inches beforehand; where a margin holds text that comes from the data (an
operator's name on a bar), `text_width` measures that text alone, without laying out an axis,
and a legend under the axes is measured alone and the figure grown to hold it (`legend_below`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def place(
    fig: Any,
    *,
    left: float,
    right: float,
    top: float,
    bottom: float,
    wspace: float = 0.0,
    hspace: float = 0.0,
    least: float = 1.0,
) -> None:
    """FIG's subplot grid with these margins and gaps, all in inches: LEFT/RIGHT/TOP/BOTTOM from
    the figure's edges to the grid's axes, WSPACE/HSPACE between two columns/rows of axes. Where
    they leave an axes less than LEAST inches (a label from the data as wide as the figure), the
    figure grows to give it that, as `bbox_inches="tight"` grew the image to hold the label."""
    w, h = fig.get_size_inches()
    rows, cols = fig.axes[0].get_subplotspec().get_gridspec().get_geometry() if fig.axes else (1, 1)
    w = max(w, left + right + (cols - 1) * wspace + cols * least)
    h = max(h, top + bottom + (rows - 1) * hspace + rows * least)
    fig.set_size_inches(w, h)
    ax_w = (w - left - right - (cols - 1) * wspace) / cols
    ax_h = (h - top - bottom - (rows - 1) * hspace) / rows
    fig.subplots_adjust(
        left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h, wspace=wspace / ax_w, hspace=hspace / ax_h
    )


def legend_below(fig: Any, legend: Any, gap: float = 0.1) -> float:
    """FIG grown to hold LEGEND (loc="lower center") under everything else, GAP above the bottom
    edge and centred (FIG widened where the legend is wider): returns the inches the grid of
    axes' bottom margin must add (call `place` after it)."""
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    inch = renderer.points_to_pixels(72.0)
    w, h = fig.get_size_inches()
    add = box.height / inch + 2 * gap
    fig.set_size_inches(max(w, box.width / inch + 2 * gap), h + add)
    legend.set_bbox_to_anchor((0.5, gap / (h + add)), transform=fig.transFigure)
    return add


def legend_size(fig: Any, legend: Any) -> tuple[float, float]:
    """(width, height) in inches LEGEND takes, measured alone (no axis laid out); set FIG's dpi to
    the one it is saved at first (text hinting differs between dpis)."""
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    inch = renderer.points_to_pixels(72.0)
    return box.width / inch, box.height / inch


def text_width(texts: Iterable[str], size: float, dpi: float) -> float:
    """Inches the widest of TEXTS takes at SIZE points in the default font, drawn at DPI (the
    dpi the figure is saved at: hinting makes a text's width in inches differ by up to 8 %
    between dpis); 0 for none."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = RendererAgg(1, 1, dpi)
    prop = FontProperties(size=size)
    widest = max((renderer.get_text_width_height_descent(t, prop, ismath=False)[0] for t in texts if t), default=0.0)
    return widest / dpi
