"""One comparison, one figure (issue 55, item 8): a study table that prints a pair's ratio reads the
claims' own function (bench.core.seqstats.pair_figure), so a sequential run's table and its claim
agree (mnist-cnn's seed-setups table said 2.73x where the claim said 2.77x on cpu-2core-epyc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core.registry import get_study
from bench.studies.mnist_cnn import seed_table
from host.compare import load_set

REF = Path(__file__).resolve().parent.parent / "results" / "reference" / "cpu-2core-epyc"


@pytest.mark.skipif(not REF.is_dir(), reason="the committed reference is not in this checkout")
def test_the_seed_setups_table_prints_the_claim_s_own_figure():
    cells = [c for c in load_set(REF, "verify", partial_ok=True).cells if c.study == "mnist-cnn"]
    [row] = [r for r in seed_table.speedups(cells) if r["name"] == "CPU: Numba over PyTorch"]
    study = get_study("mnist-cnn")
    claim = next(c for c in study.claims if c.id == "kit-cpu-numba-vs-torch")
    [answer] = [a for a in A.judge(study, cells, claim) if a.primary]
    value = answer.findings[0].value
    assert row["ratio"] == pytest.approx(value.median, rel=1e-9)
    assert "95% CS" in row["ci"] and value.kind == "cs"
