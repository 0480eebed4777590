"""The report's headline (bench/core/headline.py, host/headline.py) on the committed references:
every study contributes a row, the table opens REPORT.md and REPORT.html, a ratio is paired
only inside one run, and two workloads are never compared."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import headline
from bench.core.registry import studies
from bench.core.resultset import collect

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    out = tmp_path_factory.mktemp("merged")
    # exactly the README's command: the glob names README.md, baselines/ and a report folder too
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "report", *sorted(map(str, REF.glob("*"))), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def test_every_study_contributes_a_headline_row(merged):
    import json

    rows = json.loads((merged / "report.json").read_text())["headline"]["rows"]
    ours = {n for n, st in studies().items() if type(st).__module__.startswith("bench.")}  # not a test's toy
    assert {r["study"] for r in rows} == ours
    for r in rows:
        assert r["ratio"] > 0 and r["repeats"] >= 1 and r["data"]
        if r["lo"] is not None:
            assert r["lo"] <= r["ratio"] <= r["hi"]


def test_the_report_opens_with_the_headline(merged):
    md = (merged / "REPORT.md").read_text()
    sections = re.findall(r"^## (.+)$", md, flags=re.M)
    assert sections[0].startswith("Headline"), sections[:3]
    head = md.split("\n## ")[1]
    table = [x for x in head.splitlines() if x.startswith("| ") and not x.startswith("| #")]
    assert len(table) >= 5
    assert "### What to trust" in head and "synthetic data" in head
    # the seed's figure beside ours, e.g. seed 003's Table 8 for ResNet-18
    assert any("roofline" in x and "35.5x" in x for x in table)
    html = (merged / "REPORT.html").read_text()
    h2 = re.findall(r"<h2[^>]*>(.*?)</h2>", html)
    assert h2[0].startswith("Headline") and len(h2) > 5


def test_the_merged_page_has_a_table_of_contents_and_stays_small(merged):
    html = (merged / "REPORT.html").read_text()
    toc = re.search(r'<nav class="toc">(.*?)</nav>', html, flags=re.S)
    assert toc and html.index('<nav class="toc">') < html.index("<h2")
    links = re.findall(r'href="#([a-z0-9-]+)"', toc.group(1))
    ids = re.findall(r'<h[23] id="([a-z0-9-]+)"', html)
    assert links == ids and len(ids) == len(set(ids)) > 10  # every section linked, ids unique
    assert len(html.encode()) < 2_000_000, "the merged references' page must stay under 2 MB"
    inlined = re.findall(r'src="data:image/png;base64,', html)
    assert len(inlined) == len(list(merged.glob("*.png")))  # each figure once


def _cells(*names):
    cells, _, _ = collect([REF / n for n in names])
    return cells


def _row(rows, name):
    return next(r for r in rows if r.comparison == name)


def test_a_ratio_is_paired_only_within_one_run():
    st = studies()["mnist-cnn"]
    name = "PyTorch: CUDA over CPU (kit setup)"
    same, _ = headline.rows(st, [c for c in _cells("H100-80GB-HBM3") if c.study == "mnist-cnn"])
    r = _row(same, name)
    assert r.paired and "H100-80GB-HBM3" in r.denominator
    # the rerun has no CPU cell: its GPU cells pair with another run's CPU, unpaired
    cross, _ = headline.rows(st, [c for c in _cells("H100-80GB-HBM3-rerun", "cpu-2core-epyc") if c.study == "mnist-cnn"])
    mine = [r for r in cross if r.comparison == name]
    assert mine and all(not r.paired and "cpu-2core-epyc" in r.denominator for r in mine)
    assert all(r.ratio.lo is not None and r.ratio.lo <= r.ratio.median <= r.ratio.hi for r in mine)
    best = headline.best(mine)
    assert len(best) == 1 and len(best[0].others) == len(mine) - 1


def test_two_workloads_are_never_compared():
    st = studies()["mnist-cnn"]
    cells = [c for c in _cells("H100-80GB-HBM3") if c.study == "mnist-cnn"]
    name = "PyTorch: CUDA over CPU (kit setup)"
    moved = []
    for c in cells:
        c = copy.copy(c)
        if c.first.get("backend") == "torch-cpu":
            c.spec = {**c.spec, "params": {**c.spec["params"], "batch_size": 256}}
        moved.append(c)
    rows, missing = headline.rows(st, moved)
    assert not [r for r in rows if r.comparison == name]
    assert any(name in m and "never ran the same workload" in m for m in missing)


def test_a_comparison_without_cells_says_what_is_missing():
    st = studies()["profile"]
    cells = [c for c in _cells("H100-80GB-HBM3-profile") if c.study == "profile"]
    rows, missing = headline.rows(st, cells)
    assert any(r.comparison.startswith("GPU: batch 128 over batch 64") for r in rows)
    assert any(r.comparison.startswith("GPU over CPU") for r in rows)  # the reference holds both sides
    assert any("2 GPUs (DDP) over 1" in m and "gpus=2" in m for m in missing)  # a one-GPU host
    gpu_only = [c for c in cells if c.first.get("backend") != "torch-cpu"]
    _, missing = headline.rows(st, gpu_only)
    assert any("GPU over CPU" in m and "backend=torch-cpu" in m for m in missing)


def test_versus_seed_reads_the_interval():
    from bench.core.stats import ratio

    r = ratio({0: 10.0, 1: 11.0, 2: 12.0}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert headline.versus_seed(r, 11.0).startswith("agrees")
    assert headline.versus_seed(r, 30.0).startswith("differs")
    assert headline.versus_seed(r, (9.0, 10.5)).startswith("agrees")
    assert headline.versus_seed(r, None) == "seed gave no figure"
    assert headline.verdict(r) == "faster"


def test_no_95_percent_interval_from_fewer_repeats_than_the_threshold(merged):
    """Below stats.MIN_CI_REPEATS repeats a side the interval is the range and says so: in the
    headline's rows and everywhere REPORT.md prints a ratio's interval."""
    import json

    from bench.core import stats

    rows = json.loads((merged / "report.json").read_text())["headline"]["rows"]
    assert rows and all(
        r["interval"] == ("range" if r["repeats"] < stats.MIN_CI_REPEATS else "ci") for r in rows if r["lo"] is not None
    )
    md = (merged / "REPORT.md").read_text()
    assert not re.search(r"95% CI [\d.]+-[\d.]+", md)  # the old '8.05x (95% CI 3.86-12.79; ...)'
    assert "| interval |" in md and "(range)" in md and "(range of 3)" in md
