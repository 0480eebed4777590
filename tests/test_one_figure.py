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


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.core import stats  # noqa: E402
from host import answers as H  # noqa: E402

POS = st.floats(1e-4, 1e5, allow_nan=False, allow_infinity=False)


@given(median=POS, lo=POS, hi=POS, n=st.integers(1, 12))
def test_a_section_table_prints_the_headline_s_own_number(median, lo, hi, n):
    """The residual of item 8: cifar-opt's GPU-vs-CPU table printed 61.55x and profile's DDP table 3.1x
    where the headline and claims printed 61.5x and 3.05x for the same comparison. Both tables now write
    a ratio and its interval with the headline's number format, whatever the figures."""
    from bench.studies.cifar_opt import readout as cifar
    from bench.studies.profile import multigpu

    lo, hi = min(lo, hi), max(lo, hi)
    one = n == 1
    s = stats.Summary(median, None if one else lo, None if one else hi, lo, hi, lo, hi, n, kind="range")
    head = H._num(median, "x")
    assert cifar.ratio_text(s).startswith(head + (" (one seed" if one else " ["))
    if not one:
        assert cifar.ratio_text(s) == head + s.bracket(multigpu.short)


X4 = REF.parent / "H200-x4"


@pytest.mark.skipif(not X4.is_dir(), reason="the committed reference is not in this checkout")
def test_profile_s_ddp_over_dataparallel_table_prints_the_claim_s_figure():
    """H200-x4: the section's table said 3.1x [2.9-3.2] where claim ddp-over-dp said 3.05x [2.94-3.22]."""
    from bench.studies.profile import multigpu

    cells = [c for c in load_set(X4, "verify", partial_ok=True).cells if c.study == "profile"]
    study = get_study("profile")
    claim = next(c for c in study.claims if c.id == "ddp-over-dp")
    [answer] = [a for a in A.judge(study, cells, claim) if a.primary]
    v = answer.findings[0].value
    figure = H._num(v.median, "x")
    table = "\n".join(multigpu.versus_dp_table(multigpu.configs(cells)))
    row = next(ln for ln in table.splitlines() if "cudnn.benchmark off" in ln and "x2" in ln)
    assert f"| {figure} |" in row and f"{multigpu.short(v.lo)}–{multigpu.short(v.hi)}" in row, (figure, row)
