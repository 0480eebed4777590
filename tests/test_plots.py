"""Figures a reader can trust: what they were made from is on them."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st


def test_figures_from_the_embedded_default_say_not_mnist(tmp_path):
    from bench.core.resultset import ResultCell
    from bench.studies.mnist_cnn.plots import data_note

    def cell(dataset):
        rows = [{"status": "ok", "epoch": 1, "dataset": dataset, "samples_per_s": 1.0, "epoch_s": 1.0, "test_acc": 0.5}]
        return ResultCell(tmp_path, rows)

    assert data_note([[cell("mnist")]]) is None
    one, two = [cell("mnist")], [cell("digits")]
    named = {id(one): "torch-cpu seed [H100]", id(two): "torch-cpu seed [vm]"}
    assert data_note([one, two], lambda g: named[id(g)]).startswith("NOT MNIST (digits): torch-cpu seed [vm]. ")
    assert data_note([two]).startswith("NOT MNIST (digits): every series. ")


def test_a_figures_warning_lies_below_its_axis_labels_and_legend(tmp_path):
    """The note under a figure is drawn below the lowest thing on it (the x label, the tick
    labels, a legend outside the axes), never over one."""
    import matplotlib.pyplot as plt

    from bench.core import figure_note

    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([1, 2, 3], [1, 4, 9], label="a long series name for a legend")
    ax.set_xlabel("epoch")
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.25))  # a legend hanging under the axes
    figure_note.add(fig, "NOT MNIST (digits): every series.")
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    note = fig.texts[-1].get_window_extent(r)
    for thing in (ax.xaxis.label, *ax.get_xticklabels(), ax.get_legend()):
        box = thing.get_window_extent(r)
        assert note.y1 <= box.y0 and not note.overlaps(box), (thing, note, box)
    plt.close(fig)


def _cells(tmp_path, n_configs=12, repeats=2, epochs=3):
    from bench.core.resultset import ResultCell

    cells = []
    for k in range(n_configs):
        for rep in range(repeats):
            rows = [
                {
                    "status": "ok",
                    "epoch": e,
                    "dataset": "mnist",
                    "backend": f"b{k}",
                    "pipeline": "resident",
                    "variant": "default",
                    "repeat": rep,
                    "host": "h",
                    "device": "cpu",
                    "samples_per_s": 1000.0 * (k + 1) * (1 + 0.01 * rep),
                    "epoch_s": 60.0 / (k + 1),
                    "test_acc": 0.9 + 0.01 * e + 0.001 * k,
                    "flags": "",
                }
                for e in range(1, epochs + 1)
            ]
            spec = {"study": "mnist-cnn", "backend": f"b{k}", "variant": "default", "params": {}, "repeat": rep}
            cells.append(ResultCell(tmp_path / f"c{k}_{rep}", rows, spec=spec))
    return cells


def test_every_figure_keeps_its_legend_off_the_data_and_its_series_apart(tmp_path, monkeypatch):
    """Issue 9's figure rules, checked on the figures themselves: legends outside the axes,
    a distinct (colour, marker) pair per series, no bar chart on a log axis, titles without
    repeated words."""
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer

    from bench.core.figures import collecting
    from bench.studies.mnist_cnn import plots

    jobs: list = []
    with collecting(lambda out, name, draw, data: jobs.append((name, draw, data))):
        plots.fig1(_cells(tmp_path), tmp_path, lambda c: str(c.first["backend"]))
    assert sorted(n for n, _, _ in jobs) == sorted(plots.PLOTS)
    figs = []
    monkeypatch.setattr(plots, "_save", lambda fig, path, note=None: figs.append((path.name, fig)))
    for name, draw, data in jobs:
        draw(data, tmp_path / name)
    for name, fig in figs:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            leg = ax.get_legend()
            if leg is not None:
                assert not leg.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)), (
                    f"{name}: legend over the data"
                )
            styles = [(str(line.get_color()), line.get_marker()) for line in ax.get_lines() if line.get_label()[:1] != "_"]
            assert len(styles) == len(set(styles)), f"{name}: two series share colour and marker"
            if ax.get_xscale() == "log" or ax.get_yscale() == "log":
                assert not any(isinstance(c, BarContainer) for c in ax.containers), f"{name}: bars on a log axis"
            words = ax.get_title().lower().split()
            assert len(words) == len(set(words)), f"{name}: repeated words in {ax.get_title()!r}"
        plt.close(fig)


def test_the_html_report_is_one_self_contained_page(tmp_path):
    from host.report import render_html

    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    page = render_html("# r\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n![a](a.png)\n", tmp_path)
    assert "<table>" in page and 'src="data:image/png;base64,' in page and 'src="a.png"' not in page


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40_000), min_size=1, max_size=12),
    text=st.integers(0, 30_000),
    most=st.integers(1_000, 200_000),
)
def test_the_page_inlines_figures_in_order_while_it_stays_within_its_budget_and_links_the_rest(sizes, text, most):
    """The merged references' page grew past 4.5 MB with its 30th folder (3.1 MB of it figures): past the
    page's budget a figure stays a link to its file beside the page, never dropped, and a note says so."""
    import base64
    import re
    import tempfile

    from host.report import _inline_figures

    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        small = {}
        for i, n in enumerate(sizes):
            (out / f"f{i}.png").write_bytes(b"png")
            small[f"f{i}.png"] = bytes(n)
        body = "x" * text + "".join(f'<img src="f{i}.png" alt="f{i}">' for i in range(len(sizes)))
        page = _inline_figures(body, out, small, most=most)
    srcs = re.findall(r'src="([^"]+)"', page)
    assert len(srcs) == len(sizes)  # every figure is on the page, inlined or linked
    inlined = [s for s in srcs if s.startswith("data:")]
    linked = [s for s in srcs if not s.startswith("data:")]
    assert all(len(base64.b64decode(s.split(",", 1)[1])) == sizes[int(re.search(r'alt="f(\d+)"', m).group(1))]
               for s, m in zip(srcs, re.findall(r"<img [^>]+>", page)) if s.startswith("data:"))  # fmt: skip
    assert linked == [f"f{i}.png" for i, s in enumerate(srcs) if not s.startswith("data:")]
    note = "past the page's" in page
    assert note == bool(linked)
    body_only = page.split("<p><em>")[0] if note else page
    assert len(body_only.encode()) <= max(most, len(body.encode()))
    grow = [len("data:image/png;base64,") + len(base64.b64encode(bytes(n))) - len(f"f{i}.png") for i, n in enumerate(sizes)]
    assert inlined or all(len(body.encode()) + g > most for g in grow)  # none inlined: none fitted alone
