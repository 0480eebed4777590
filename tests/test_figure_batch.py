"""The report's figure batch (host/figures.py) with a real pool, and fixed figure margins
(bench/core/figure_layout.py) measured on drawn figures."""

from __future__ import annotations

import pytest

from bench.studies.profile.report import draw_ops
from host.figures import batch_for

OPS = {
    "names": ["aten::convolution_backward", "aten::add_"],
    "values": [3.0, 1.0],
    "xlabel": "self cpu, ms",
    "title": "one configuration: operators",
}


def test_one_picture_asked_for_under_two_names_is_drawn_once_and_both_files_hold_it(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    batch = batch_for(out, jobs=2)
    batch(out, "a.png", draw_ops, OPS)
    batch(out, "b.png", draw_ops, OPS)  # a copy of a result dir: the same data under another name
    batch(out, "c.png", draw_ops, {**OPS, "title": "another configuration"})
    small = batch.finish()
    assert batch.counts == {"figures": 3, "cached": 0, "drawn": 2, "twins": 1}
    assert (out / "a.png").read_bytes() == (out / "b.png").read_bytes() != (out / "c.png").read_bytes()
    assert small["a.png"] == small["b.png"] and set(small) == {"a.png", "b.png", "c.png"}
    assert batch.worker_cpu_s > 0 and batch.draw_cpu_s == batch.worker_cpu_s  # drawn in the workers

    again = batch_for(out, jobs=2)  # the next merge: every figure from the cache
    for name in ("b.png", "a.png", "c.png"):
        again(out, name, draw_ops, OPS if name != "c.png" else {**OPS, "title": "another configuration"})
    assert again.finish() == small
    assert again.counts == {"figures": 3, "cached": 3, "drawn": 0, "twins": 0} and again.draw_cpu_s == 0


@pytest.mark.parametrize("dpi", [72, 80, 90, 110, 120])
def test_a_margin_measured_by_text_width_holds_the_labels_at_the_dpi_it_is_saved_at(dpi):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.core.figure_layout import place, text_width

    names = [f"vm: GPU tuned: bf16+cl+compile+graphs [kit] (pipeline synthetic-gpu, batch {b})" for b in (8, 128, 512)]
    fig, ax = plt.subplots(figsize=(10, 3), dpi=dpi)
    ax.barh(names, [1.0, 2.0, 3.0])
    ax.tick_params(labelsize=7)
    left = text_width(names, 7, dpi) + 0.25
    place(fig, left=left, right=0.3, top=0.3, bottom=0.4)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_position()
    assert box.x0 * 10 == pytest.approx(left) and (1 - box.x1) * 10 == pytest.approx(0.3)
    assert box.y0 * 3 == pytest.approx(0.4) and (1 - box.y1) * 3 == pytest.approx(0.3)
    lefts = [t.get_window_extent(renderer).x0 for t in ax.get_yticklabels()]
    assert 0 <= min(lefts) < 0.3 * dpi, "the widest label starts inside the image, near its edge"
    plt.close(fig)


def test_margins_wider_than_the_figure_grow_it_instead_of_failing():
    """A label from the data (a hostile result dir's) wider than the figure: the figure grows, the
    axes keep an inch, as bbox_inches="tight" grew the image to hold the label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.core.figure_layout import place, text_width

    fig, axes = plt.subplots(1, 2, figsize=(4, 3))
    left = text_width(["<script>" * 40], 7, dpi=80) + 0.25
    assert left > 4
    place(fig, left=left, right=0.3, top=0.3, bottom=0.3, wspace=0.5)
    w, h = fig.get_size_inches()
    assert w == pytest.approx(left + 0.3 + 0.5 + 2 * 1.0) and h == 3
    assert axes[0].get_position().x0 * w == pytest.approx(left)
    assert axes[1].get_position().width * w == pytest.approx(1.0)
    plt.close(fig)


def test_a_legend_below_the_axes_lies_inside_the_grown_figure_and_under_every_label():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.core.figure_layout import legend_below, place

    fig, ax = plt.subplots(figsize=(4, 3))
    for i in range(9):
        ax.plot([1, 10, 100], [i, i + 1, i + 2], label=f"a series with a long name, number {i}")
    ax.set_xscale("log")
    ax.set_xlabel("FLOP/byte")
    leg = ax.legend(fontsize=7, ncol=3, loc="lower center")
    add = legend_below(fig, leg)
    place(fig, left=0.6, right=0.2, top=0.3, bottom=0.6 + add)
    w, h = fig.get_size_inches()
    assert w > 4 and h == pytest.approx(3 + add), "grown to the legend's width and height"
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = leg.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= w * fig.dpi and 0 <= box.y0
    for thing in (ax.xaxis.label, *ax.get_xticklabels()):
        assert box.y1 <= thing.get_window_extent(renderer).y0, thing
    plt.close(fig)


def test_the_pages_copy_of_a_wide_figure_is_scaled_to_the_inline_width_and_a_narrow_one_keeps_its_size():
    import io

    from PIL import Image, ImageDraw

    from host.figures import INLINE_MAX_PX, small_png

    for width in (3211, 900):
        im = Image.new("RGB", (width, 400), "white")
        ImageDraw.Draw(im).line([(0, 0), (width - 1, 399)], fill="red", width=3)
        buf = io.BytesIO()
        im.save(buf, "PNG")
        with Image.open(io.BytesIO(small_png(buf.getvalue()))) as got:
            assert got.width == min(width, INLINE_MAX_PX) and abs(got.height - 400 * got.width / width) <= 1
