"""One comparison, one figure in one report (issue 55, item 8): the worth table's time ratio is the
headline's own figure for the same answer, the mnist-cnn ratio table prints what its claims read (a
sequential run's confidence sequence included), and mlp-scratch's Table 4 speedup is the t4 claim's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import worth as W
from bench.core.registry import studies
from bench.core.resultset import collect

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"


def _cells(*names: str) -> list:
    dirs = [REF / n for n in names if (REF / n).is_dir()]
    if len(dirs) < len(names):
        pytest.skip("the committed references are not in this checkout")
    return collect(dirs)[0]


def _claim(study: str, cells: list, cid: str) -> list[A.Answer]:
    st = studies()[study]
    claim = next(c for c in st.claims if c.id == cid)
    return [a for a in A.judge(st, [c for c in cells if c.study == study], claim) if a.findings and a.primary]


def test_the_worth_tables_time_ratio_is_the_headlines_figure():
    cells = _cells("H200", "cpu-2core-epyc")
    reg = studies()
    answers = A.judge_all(reg, cells)
    worths = W.worth_all(reg, answers)
    assert worths  # the H200 run's GPU-over-CPU comparisons
    for w in worths:
        f = w.answer.findings[0]
        if w.time is not None and f.of_ratio and f.sides[0].facets.get("platform") != "cpu":
            assert w.time.median == f.value.median and w.time.kind == f.value.kind, w.answer.label


def test_the_mnist_ratio_table_prints_the_claims_figure_of_a_sequential_run():
    from bench.studies.mnist_cnn import report

    cells = [c for c in _cells("cpu-2core-epyc") if c.study == "mnist-cnn"]
    [target] = _claim("mnist-cnn", cells, "kit-cpu-numba-vs-torch")
    rows = [r for r in report.ratios_ci(cells) if r["numerator"] == "numba-cpu resident default"]
    assert rows and rows[0]["ratio"] == target.findings[0].value.median
    assert rows[0]["ci_kind"] == target.findings[0].value.kind == "cs"  # the run added rounds until decided


def test_mlp_table_4_speedup_is_the_t4_claims_figure():
    from bench.core.resultset import group_repeats
    from bench.studies.mlp_scratch import report

    cells = [c for c in _cells("H100-80GB-HBM3") if c.study == "mlp-scratch"]
    [claim] = [a for a in _claim("mlp-scratch", cells, "t4-matmul") if a.split.get("dtype", "float32") == "float32"][:1]
    group = next(
        g for g in group_repeats(cells) if "cupy" in str(g[0].first.get("cell")) and g[0].first.get("dtype") == "float32"
    )
    line = next(ln for ln in report.table4(group) if ln.startswith("| matmul"))
    got = [float(x) for x in re.findall(r"\| ([0-9.]+)x", line)]
    assert got and abs(got[0] - claim.findings[0].value.median) < 0.05
