"""Labels that never collide and colours that mean the device: the
merged report of every committed reference prints no row twice in any table, a plot of two
runs of one configuration names them apart, every plot colours CPUs blue and NVIDIA GPUs green,
and `--label` names a run in system.json and in the report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.core import palette
from bench.core.labels import distinct, qualify
from bench.core.resultset import collect

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
# columns whose numbers name a row rather than measure it
KEY_HEADERS = ("#", "repeat", "batch", "epochs")
NUMBER = re.compile(r"[\s~≈<>=+\-–−x%(),.\d\[\]⚑]*(\(range of \d+\))?\s*|n=1, no interval|–|")


def test_distinct_adds_the_first_qualifier_that_tells_names_apart_then_numbers():
    names = ["torch-cpu seed", "torch-cpu seed", "numba-cpu", "torch-cpu seed"]
    runs = ["cpu-2core", "cpu-2core", "cpu-2core", "H100"]
    data = ["mnist", "digits", "mnist", "mnist"]
    assert distinct(names, runs, data) == [
        "torch-cpu seed [cpu-2core] [mnist]",
        "torch-cpu seed [cpu-2core] [digits]",
        "numba-cpu",  # unique already: untouched
        "torch-cpu seed [H100]",
    ]
    assert distinct(["a", "a"], ["same", "same"]) == ["a #1", "a #2"]  # no qualifier separates them
    rows = [{"m": "resnet18", "dev": "H100"}, {"m": "resnet18", "dev": "H100"}]
    assert qualify(rows, ("m", "dev"), "dev", ["run1", "run2"])[1]["dev"] == "H100 [run2]"
    with pytest.raises(ValueError):
        distinct(["a", "b"], ["only one"])


def test_device_families_have_their_own_colours():
    assert palette.family("NVIDIA H100 80GB HBM3", "torch-cuda") == "nvidia"
    assert palette.family("AMD EPYC, 2 cores", "numba-cpu") == palette.family("Intel Xeon", "torch-cpu") == "cpu"
    assert palette.family("Apple M4 Pro", "torch-mps") == "apple"
    got = palette.colors([("a", "cpu"), ("b", "nvidia"), ("c", "cpu"), ("a", "nvidia")])
    assert got["a"] == palette.SHADES["cpu"][0] and got["c"] == palette.SHADES["cpu"][1]
    assert got["b"] == palette.SHADES["nvidia"][0] and len(got) == 3  # a key keeps its first colour


@pytest.fixture(scope="module")
def merged(merged_references) -> Path:
    return merged_references


def _tables(md: str) -> list[tuple[str, list[str], list[list[str]]]]:
    out, cur, head = [], [], ""
    for line in md.splitlines() + [""]:
        if line.startswith("#"):
            head = line
        if line.startswith("|"):
            cur.append(line)
            continue
        if len(cur) > 2:
            cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in cur]
            out.append((head, cells[0], cells[2:]))
        cur = []
    return out


def test_the_merged_references_print_no_row_label_twice(merged):
    """A row's label: every cell that is not a measurement (text, or a number under a key header
    such as batch or repeat). Two rows a reader cannot tell apart but by their figures fail."""
    md = (merged / "REPORT.md").read_text()
    tables = _tables(md)
    assert len(tables) > 40
    dup = []
    for head, header, rows in tables:
        keys = [h.lower().startswith(KEY_HEADERS) for h in header]
        labels = [tuple(c for c, k in zip(r, keys) if k or not NUMBER.fullmatch(c)) for r in rows]
        dup += [(head, lab) for lab, n in Counter(labels).items() if n > 1]
    assert not dup, dup[:5]


def _figures(monkeypatch) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen: list = []
    real_close = plt.close

    def close(fig=None):
        if fig is not None:
            seen.append(fig)
        return real_close(fig)

    monkeypatch.setattr(plt, "close", close)
    return seen


def _texts(fig) -> list[list[str]]:
    """Per axes: the legend's entries, or the y tick labels where there is no legend."""
    out = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            out.append([t.get_text() for t in leg.get_texts()])
        elif ax.get_yticklabels() and any(t.get_text() and not NUMBER.fullmatch(t.get_text()) for t in ax.get_yticklabels()):
            out.append([t.get_text() for t in ax.get_yticklabels()])
    return out


def test_a_plot_of_two_runs_names_them_apart_and_colours_by_device(monkeypatch, tmp_path):
    """mnist-cnn's Fig. 1 over the H100 reference and its rerun (the same configurations twice):
    every legend entry once, each run named, CPU series blue and GPU series green."""
    from matplotlib.colors import to_hex

    from bench.studies.mnist_cnn import plots, report

    cells, _, _ = collect([REF / "H100-80GB-HBM3", REF / "H100-80GB-HBM3-rerun", REF / "cpu-2core-epyc"])
    cells = [c for c in cells if c.study == "mnist-cnn"]
    figs = _figures(monkeypatch)
    plots.fig1([c for c in cells if c.status == "ok" and report.epochs(c)], tmp_path, report.label)
    assert figs
    for fig in figs:
        for labels in _texts(fig):
            assert len(labels) == len(set(labels)), [x for x, n in Counter(labels).items() if n > 1]
    legend = _texts(figs[0])[0]
    assert any("[H100-80GB-HBM3-rerun/run1]" in x for x in legend) and any("[H100-80GB-HBM3]" in x for x in legend)
    for line in figs[0].axes[0].get_lines():
        name, color = line.get_label(), to_hex(line.get_color())
        if name.startswith("_"):
            continue
        fam = "nvidia" if "cuda" in name else "cpu"
        assert color in palette.SHADES[fam], (name, color)


def test_label_names_the_run_in_system_json_and_the_report(tmp_path):
    out = tmp_path / "mine"
    bad = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mlp-scratch", "--profile", "smoke", "--label", "a\nb", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "--label" in bad.stderr and not out.exists()
    r = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mlp-scratch", "--profile", "smoke", "--only", "backend=numpy",
         "--label", "laptop, before the fix", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    systems = [json.loads(p.read_text()) for p in out.rglob("system.json")]
    assert systems and {s.get("run_label") for s in systems} == {"laptop, before the fix"}
    cells, _, _ = collect([out])
    assert cells and {c.run_label for c in cells} == {"laptop, before the fix"}


def test_no_plot_of_the_merged_references_names_two_series_alike(monkeypatch, tmp_path):
    """Every figure the report draws over every committed reference: no legend and no bar axis
    holds one label twice."""
    from bench.core.resultset import holding_results
    from host.report import build_report

    figs = _figures(monkeypatch)
    dirs, _ = holding_results(sorted(REF.glob("*")))
    build_report(dirs, tmp_path / "report", jobs=1, figure_cache=None)  # drawn here, where plt.close is watched
    assert len(figs) >= 10
    dup = []
    for fig in figs:
        for labels in _texts(fig):
            dup += [(fig.get_suptitle() or fig.axes[0].get_title(), x) for x, n in Counter(labels).items() if n > 1 and x]
    assert not dup, dup[:5]


def _container_twin(src: Path, dst: Path) -> None:
    """A copy of the CPU reference's mnist-cnn cells as if a container run had made them beside the
    native ones in one results dir (the main job's `results/<host>/` after `run --runtime docker`)."""
    import shutil

    shutil.copytree(src, dst)
    for d in sorted((dst / "mnist-cnn").iterdir()):
        twin = d.with_name(d.name[:-4] + "c0de")
        shutil.copytree(d, twin)
        system = json.loads((twin / "system.json").read_text())
        system.update(runtime="container", image_id="sha256:" + "1" * 64, run_id=system["run_id"] + "-c")
        system["libraries"]["torch"] = "2.10.0"
        (twin / "system.json").write_text(json.dumps(system))
        spec = json.loads((twin / "cell.json").read_text())
        if spec.get("env"):  # cells the matrix labelled with their environment (Cell.env)
            spec["env"] = "container-torch2.10.0-" + "1" * 8
            (twin / "cell.json").write_text(json.dumps(spec))
        rows = [json.loads(x) for x in (twin / "rows.jsonl").read_text().splitlines() if x.strip()]
        rows = [{**r, "run_id": r["run_id"] + "-c", "image_id": system["image_id"]} for r in rows]
        (twin / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_one_configuration_from_two_environments_is_named_by_its_environment_never_numbered(monkeypatch, tmp_path):
    """Native and container cells of one configuration in one results dir (one run label): Table I
    and Fig. 1 name each row and series by its environment, and no label gets a bare #1/#2."""
    from bench.studies.mnist_cnn import plots, report

    _container_twin(REF / "cpu-2core-epyc", tmp_path / "vm")
    cells, _, _ = collect([tmp_path / "vm"])
    cells = [c for c in cells if c.study == "mnist-cnn"]
    assert {c.env_name for c in cells} == {"native torch 2.14.1", "container torch 2.10.0"}
    rows = report.summary_table(cells)
    names = [r["platform"] for r in rows]
    assert len(names) == 6 and len(set(names)) == 6 and not any("#" in n for n in names), names
    for env in ("native torch 2.14.1", "container torch 2.10.0"):
        assert sum(n.endswith(f"[{env}]") for n in names) == 3, names
    per_repeat = [(r["platform"], r["repeat"]) for r in report.table1(cells)]  # a row per repeat, its column beside
    assert len(set(per_repeat)) == len(per_repeat) == 60 and not any("#" in n for n, _ in per_repeat), (
        per_repeat
    )  # 3 configurations x 10 repeats x 2 environments
    figs = _figures(monkeypatch)
    plots.fig1([c for c in cells if c.status == "ok" and report.epochs(c)], tmp_path, report.label)
    legend = _texts(figs[0])[0]
    assert len(legend) == 6 and not any("#" in x for x in legend), legend
    assert sum("[container torch 2.10.0]" in x for x in legend) == 3, legend
