"""`--until-decided`: the confidence sequence, the options, and whole runs of a study with a
known comparison (tests/seq_study.py): rounds are added until the comparison is decided, the
record and the report say how many rounds it took and why it stopped, and a cell that fails
in a later round stops its comparison in one line with the earlier rounds kept."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.core import seqstats
from bench.core.claims import FASTER, UNDECIDED, decide
from bench.core.errors import UsageError
from bench.core.stats import CS_MIN_ROUNDS
from bench.run.sequential import Options, check, parse_budget, until_options

ROOT = Path(__file__).resolve().parent.parent
SEQ_ENV = {"KIT_STUDY_MODULES": "seq_study"}


def test_the_sequence_is_unbounded_below_its_first_bounded_round_and_then_holds_every_round():
    assert seqstats.min_rounds() == CS_MIN_ROUNDS
    up = {i: 2.0 + 0.01 * (i % 3) for i in range(CS_MIN_ROUNDS)}
    one = {i: 1.0 for i in range(CS_MIN_ROUNDS)}
    early = seqstats.paired({i: up[i] for i in range(CS_MIN_ROUNDS - 1)}, one)
    assert early.kind == "cs" and early.lo is None and early.hi is None
    verdict, why = decide(early, FASTER)
    assert verdict == UNDECIDED and "unbounded" in why
    s = seqstats.paired(up, one)
    assert s.lo == pytest.approx(min(up.values())) and s.hi == pytest.approx(max(up.values()))  # [min, max] of the rounds
    assert decide(s, FASTER)[0] == "holds"
    assert "95% CS" in s.bracket() and s.coverage == 0.95


def test_only_rounds_both_sides_ran_are_paired():
    a = {0: 2.0, 1: 2.0, 3: 2.0}
    b = {0: 1.0, 2: 1.0, 3: 1.0}
    assert seqstats.paired_rounds(a, b) == [2.0, 2.0]
    with pytest.raises(ValueError):
        seqstats.paired_rounds({0: 0.0}, {0: 1.0})


@pytest.mark.parametrize(
    "text, seconds", [("15m", 900), ("900s", 900), ("1h30m", 5400), ("90", 90), ("0.5h", 1800), ("2m30s", 150)]
)
def test_budget_forms(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["0", "-5m", "0s", "soon", "15 minutes", "1d", "", "nan"])
def test_a_budget_of_zero_or_less_or_no_time_is_one_line(text):
    with pytest.raises(UsageError) as err:
        parse_budget(text)
    assert "\n" not in str(err.value) and "--budget" in str(err.value)


def test_bad_options_are_one_line_each():
    with pytest.raises(UsageError, match="below the first round"):
        check(Options(max_repeats=2), 3, 50)
    with pytest.raises(UsageError, match="at most 50"):
        check(Options(max_repeats=51), 3, 50)
    for w in (0.0, -0.1, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--target-width must be above 0"):
            until_options(True, None, None, w)
    with pytest.raises(UsageError, match="only applies with --until-decided"):
        until_options(False, 5, None, None)
    assert until_options(False, None, None, None) is None
    assert until_options(True, None, "15m", 0.05) == Options(20, 900.0, 0.05)


def _cli(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=e, timeout=600)


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--budget", "0"], "--budget must be a time above zero"),
        (["--max-repeats", "2"], "--max-repeats 2 is below the first round's 3 repeats"),
        (["--target-width", "0"], "--target-width must be above 0"),
    ],
)
def test_bad_until_decided_input_is_one_line_exit_2_and_nothing_written(tmp_path, extra, says):
    for argv in (
        ["-m", "bench", "matrix", "seq", "--until-decided", *extra, "--out", str(tmp_path / "m")],
        [
            "orchestrate.py",
            "run",
            "cpu",
            "--study",
            "seq",
            "--runtime",
            "native",
            "--until-decided",
            *extra,
            "--out",
            str(tmp_path / "o"),
        ],
    ):
        r = _cli(*argv, env=SEQ_ENV)
        lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
        assert r.returncode == 2, r.stderr
        assert len(lines) == 1 and says in lines[0], r.stderr
    assert not (tmp_path / "m").exists() and not (tmp_path / "o" / "seq").exists()


def _record(out: Path) -> dict:
    return json.loads((out / seqstats.RECORD).read_text())


@pytest.mark.quiet
@pytest.mark.slow
def test_rounds_are_added_until_decided_and_the_report_says_how_many_and_why(tmp_path):
    out = tmp_path / "r"
    r = _cli(
        "-m", "bench", "matrix", "seq", "--set", "steps=2", "--until-decided", "--budget", "10m", "--out", str(out), env=SEQ_ENV
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[2].startswith("noise: ") and "CPU probe spread" in r.stdout
    rec = _record(out)
    assert {c["claim"]: (c["stopped"], c["verdict"], c["rounds"]) for c in rec["comparisons"]} == {
        "fast-over-slow": ("decided", "holds", CS_MIN_ROUNDS),
        "fast-near-slow": ("decided", "does not hold", CS_MIN_ROUNDS),
    }
    assert all(c["seconds"] > 0 for c in rec["comparisons"])
    assert len(list((out / "seq").iterdir())) == 2 * CS_MIN_ROUNDS  # both cells, one repeat a round
    note = r.stdout[r.stdout.index("== until decided") :]
    assert f"{CS_MIN_ROUNDS} rounds" in note and "stopped decided" in note and "95% CS" in note
    rep = _cli("orchestrate.py", "report", str(out), "--out", str(tmp_path / "rep"), env=SEQ_ENV)
    assert rep.returncode == 0, rep.stderr
    claims = json.loads((tmp_path / "rep" / "report.json").read_text())["claims"]
    f = next(c for c in claims if c["id"] == "fast-over-slow")["findings"][0]
    assert f["interval"] == "cs" and "confidence sequence" in f["method"] and "stopped decided" in f["until_decided"]
    md = (tmp_path / "rep" / "REPORT.md").read_text()
    assert f"95% CS of {CS_MIN_ROUNDS} rounds" in md and "until decided: 10 rounds" in md
    # an untrusted record (edited into nonsense) is not used: the fixed-n interval stands
    (out / seqstats.RECORD).write_text(json.dumps({"method": "x", "confidence": 7, "comparisons": "all"}))
    _cli("orchestrate.py", "report", str(out), "--out", str(tmp_path / "rep2"), env=SEQ_ENV)
    f2 = json.loads((tmp_path / "rep2" / "report.json").read_text())["claims"][0]["findings"][0]
    assert f2["interval"] == "ci" and not f2["until_decided"]


@pytest.mark.slow
def test_a_cell_failing_in_a_later_round_stops_its_comparison_in_one_line_and_keeps_the_rounds(tmp_path):
    out = tmp_path / "f"
    r = _cli(
        "-m", "bench", "matrix", "seq", "--set", "steps=1", "--set", "fail_repeat=4",
        "--until-decided", "--out", str(out), env=SEQ_ENV,
    )  # fmt: skip
    assert r.returncode == 1  # a cell failed
    said = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("error: seq fast-over-slow")]
    assert len(said) == 1 and "failed in round 5" in said[0] and "earlier rounds are kept" in said[0]
    rec = {c["claim"]: c for c in _record(out)["comparisons"]}
    assert rec["fast-over-slow"]["stopped"] == "failed" and rec["fast-over-slow"]["rounds"] == 4
    assert "seq failure in repeat 4" in rec["fast-over-slow"]["why"]
    kept = sorted(json.loads((d / "cell.json").read_text())["repeat"] for d in (out / "seq").iterdir())
    assert kept == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]  # the four good rounds of each, and the failed round's two cells
    assert not math.isnan(rec["fast-over-slow"]["seconds"])


def test_a_spent_budget_or_the_last_round_stops_a_comparison_and_says_so(tmp_path):
    out = tmp_path / "b"
    r = _cli("-m", "bench", "matrix", "seq", "--set", "steps=1", "--repeats", "1", "--until-decided", "--budget", "1s",
             "--out", str(out), env=SEQ_ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rec = _record(out)["comparisons"]
    assert {c["stopped"] for c in rec} == {"budget"} and all(c["rounds"] == 1 for c in rec)
    assert "of the budget left" in rec[0]["why"] and "stopped budget" in r.stdout
    out = tmp_path / "m"
    r = _cli("-m", "bench", "matrix", "seq", "--set", "steps=1", "--repeats", "1", "--until-decided", "--max-repeats", "2",
             "--out", str(out), env=SEQ_ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rec = _record(out)["comparisons"]
    assert {(c["stopped"], c["rounds"], c["verdict"]) for c in rec} == {("max-repeats", 2, "undecided")}
    assert len(list((out / "seq").iterdir())) == 4


def _seq(cost: dict[str, float]):
    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=Path("."), opts=Options(budget_s=1e9), run_round=lambda cells: [], echo=lambda line: None)
    s._estimate = lambda cells: sum(cost[c] for c in cells)  # type: ignore[method-assign]

    def comp(a: str, b: str) -> Comparison:
        return Comparison("seq", None, "", None, (a, b), (a, b))  # type: ignore[arg-type]

    return s, comp


def test_a_comparison_that_fits_the_budget_alone_waits_for_the_cheaper_ones_instead_of_stopping():
    """The cpu reference's dear comparison (torch seed pipeline, ~2 min a round) was stopped for
    budget at its third round beside the cheap one although 75 min were left: together they did
    not fit, alone it did. Now it waits; only one that cannot fit even alone is stopped."""
    s, comp = _seq({"a": 10.0, "b": 10.0, "c": 100.0})
    cheap, dear = comp("a", "b"), comp("b", "c")
    base = {k: k for k in "abc"}
    ahead = CS_MIN_ROUNDS  # neither has a round yet
    admitted, need, over = s._admit([dear, cheap], base, 130.0 * ahead)  # both: 120 s a round
    assert admitted == [cheap, dear] and need == 120.0 and over == []
    admitted, need, over = s._admit([dear, cheap], base, 115.0 * ahead)  # both do not fit; dear alone (110) does
    assert admitted == [cheap] and need == 20.0 and over == []
    admitted, need, over = s._admit([dear, cheap], base, 100.0 * ahead)  # dear alone does not fit
    assert admitted == [cheap] and over == [dear]
    admitted, need, over = s._admit([dear], base, 115.0 * ahead)  # once the cheap one is done, the dear one runs
    assert admitted == [dear] and over == []


def test_a_first_round_cell_costs_the_time_it_was_busy_not_the_interleaved_span():
    from bench.run.schedule import Outcome

    class Cell:
        key = "k"

        def replace(self, **kw):
            return self

    s, _ = _seq({})
    s.note([Outcome(Cell(), "ok", 500.0, active_s=120.0)])  # type: ignore[arg-type]
    s.note([Outcome(Cell(), "ok", 60.0)])  # no busy time known: its own seconds
    s.note([Outcome(Cell(), "ok", 500.0, active_s=120.0)], share=40.0)  # an added round: its share of the round
    s.note([Outcome(Cell(), "ok", 95.0, active_s=70.0)], serial=True)  # a sequential first round: its wall time
    assert s._spent == {"k": [120.0, 60.0, 40.0, 95.0]}


_READING = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, -1.0, 1e-300, float("nan"), float("inf")]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    a=st.dictionaries(st.integers(0, 12), _READING, min_size=1, max_size=12),
    b=st.dictionaries(st.integers(0, 12), _READING, min_size=1, max_size=12),
)
def test_swap_keeps_the_fixed_n_figure_where_a_side_cannot_make_a_ratio(tmp_path, a, b):
    """A sequential run's finding whose side read 0 (an accuracy of nothing learned on synthetic
    data: the H200 main job's report died on `0.0 / 1.67`), or any value no ratio takes, keeps its
    fixed-n figure: swap never raises, and a finding it swaps rests on positive finite rounds only."""
    from bench.core import answers as A
    from bench.core.resultset import ResultCell
    from bench.core.stats import Summary

    root = tmp_path / "run"
    root.mkdir(exist_ok=True)
    (root / seqstats.RECORD).write_text(json.dumps({"method": "m", "confidence": 0.95, "comparisons": []}))

    def side(name: str, per: dict) -> A.Side:
        cells = [ResultCell(root / "s" / f"{name}-{r}", [{"backend": name, "status": "ok"}], {}) for r in per]
        return A.Side(run="run", part=name, workload={}, facets={}, cells=cells, per=dict(per))

    before = Summary(1.0, None, None, 1.0, 1.0, 1.0, 1.0, 1, "range")
    f = A.Finding(value=before, sides=(side("a", a), side("b", b)), rank=0, of_ratio=True)
    [got] = seqstats.swap("s", "c", [f])
    if got.value is not before:
        both = sorted(set(a) & set(b))
        assert both and all(a[r] > 0 and b[r] > 0 and math.isfinite(a[r]) and math.isfinite(b[r]) for r in both)
        assert got.value.kind == "cs"


@pytest.mark.slow
def test_fixed_rounds_give_every_comparison_its_rounds_and_the_report_the_fixed_n_interval(tmp_path):
    """--fixed-rounds (a GPU host's answer): 6 rounds for each comparison, the clear one too (the
    sequence would have stopped it at 10, decided), judged by the 95% bootstrap of 6 repeats."""
    out = tmp_path / "x"
    r = _cli("-m", "bench", "matrix", "seq", "--set", "steps=2", "--repeats", "1", "--until-decided", "--fixed-rounds",
             "--max-repeats", "6", "--budget", "10m", "--out", str(out), env=SEQ_ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rec = _record(out)
    assert rec["fixed"] is True and "fixed number of rounds" in rec["method"]
    assert {c["claim"]: (c["stopped"], c["verdict"], c["rounds"]) for c in rec["comparisons"]} == {
        "fast-over-slow": ("max-repeats", "holds", 6),
        "fast-near-slow": ("max-repeats", "does not hold", 6),
    }
    assert len(list((out / "seq").iterdir())) == 2 * 6
    rep = _cli("orchestrate.py", "report", str(out), "--out", str(tmp_path / "rep"), env=SEQ_ENV)
    assert rep.returncode == 0, rep.stderr
    f = next(c for c in json.loads((tmp_path / "rep" / "report.json").read_text())["claims"] if c["id"] == "fast-over-slow")
    f = f["findings"][0]
    assert f["interval"] == "ci" and "bootstrap" in f["method"] and "6 rounds, stopped max-repeats" in f["until_decided"]


def test_fixed_rounds_with_a_target_width_or_without_until_decided_is_one_line():
    with pytest.raises(UsageError, match="--fixed-rounds only applies with --until-decided"):
        until_options(False, None, None, None, fixed=True)
    with pytest.raises(UsageError, match="--target-width does not apply"):
        until_options(True, 6, None, 0.05, fixed=True)


@settings(max_examples=200, deadline=None)
@given(
    ratios=st.lists(st.floats(0.05, 20.0), min_size=1, max_size=12),
    rounds=st.integers(2, 12),
)
def test_fixed_rounds_never_stop_a_comparison_on_its_verdict(ratios, rounds):
    """Whatever the rounds measured, a --fixed-rounds comparison is open below its rounds and stopped
    at them, with the fixed-n figure of its repeats; the sequence's decided stop never applies."""
    from bench.core import stats
    from bench.core.claims import FASTER
    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=Path("."), opts=Options(max_repeats=rounds, fixed=True), run_round=lambda c: [], echo=print)
    comp = Comparison("seq", None, "", FASTER, ("a", "b"), ("a", "b"))  # type: ignore[arg-type]
    comp.value = stats.ratio({i: r for i, r in enumerate(ratios)}, {i: 1.0 for i in range(len(ratios))})
    comp.verdict, _ = decide(comp.value, FASTER)
    s.comparisons = [comp]
    s._settle()
    assert comp.stopped == ("max-repeats" if len(ratios) >= rounds else "open")
    assert s._ahead(comp) == max(1, rounds - len(ratios))


class _FakeCell:
    def __init__(self, name: str):
        self.name, self.key = name, name

    def dir(self, out: Path) -> Path:
        return out / self.name

    def replace(self, **kw):
        return self


def _reused(tmp: Path, spans: list[tuple[float, float]]) -> list:
    from bench.run.schedule import Outcome

    out = []
    for i, (t0, t1) in enumerate(spans):
        d = tmp / f"c{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "cell.json").write_text("{}")
        (d / "rows.jsonl").write_text("")
        os.utime(d / "cell.json", (t0, t0))
        os.utime(d / "rows.jsonl", (t1, t1))
        out.append(Outcome(_FakeCell(f"c{i}"), "reused", 0.0))  # type: ignore[arg-type]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2000), st.integers(1, 300)), min_size=1, max_size=25))
def test_a_resumed_run_counts_the_time_its_reused_cells_covered_once(tmp_path_factory, raw):
    """A resume counts what earlier calls spent from the cells' files: the union of their spans (cells of
    an interleaved round ran side by side), and each cell costs its share of the group it ran in."""
    from bench.run.sequential import Sequential

    tmp = tmp_path_factory.mktemp("reused")
    base = 1_700_000_000
    spans = [(base + a, base + a + d) for a, d in raw]
    s = Sequential(cells=[], out=tmp, opts=Options(budget_s=1e9, whole=True), run_round=lambda c: [], echo=lambda x: None)
    s.note(_reused(tmp, spans))
    covered = set()
    for t0, t1 in spans:
        covered.update(range(int(t0), int(t1)))
    assert s._reused_s == pytest.approx(len(covered))
    assert sum(sum(v) for v in s._spent.values()) == pytest.approx(len(covered))  # the shares add up to the union


def test_a_resumed_interleaved_round_is_its_wall_time_not_the_sum_of_its_cells(tmp_path):
    """The H200 reference's third call (2026-11-29): 21 cells of round 2 had run side by side for about
    185 s, each file spanning 100-183 s; summed, they spent the whole 25-minute budget."""
    from bench.run.sequential import Sequential

    t = 1_700_000_000
    spans = [(t + i, t + 185 - (i % 5)) for i in range(21)]
    s = Sequential(cells=[], out=tmp_path, opts=Options(budget_s=1500, whole=True), run_round=lambda c: [], echo=lambda x: None)
    s.note(_reused(tmp_path, spans))
    assert s._reused_s == pytest.approx(185)


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.floats(1.0, 300.0), min_size=1, max_size=8),
    left=st.one_of(st.none(), st.floats(0.0, 3000.0)),
    fixed=st.booleans(),
)
def test_fixed_rounds_admit_or_stop_every_comparison_at_once(costs, left, fixed):
    """--fixed-rounds numbers its rounds from the first, so a comparison left waiting could never reach
    its last: each one is admitted (its remaining rounds fit beside the cheaper ones) or stopped now.
    Without it, one that fits alone waits for a later round."""
    from bench.core.claims import FASTER
    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=Path("."), opts=Options(max_repeats=6, fixed=fixed), run_round=lambda c: [], echo=print)
    comps = [Comparison("seq", None, "", FASTER, (f"a{i}", f"b{i}"), ("a", "b")) for i in range(len(costs))]  # type: ignore[arg-type]
    cost = {f"{side}{i}": c / 2 for i, c in enumerate(costs) for side in "ab"}
    s._estimate = lambda cells: sum(cost[c] for c in cells)  # type: ignore[method-assign]
    base = {k: k for k in cost}
    admitted, need, stopped = s._admit(comps, base, left)  # type: ignore[arg-type]
    ahead = 6 if fixed else 10  # no rounds yet: to the last (fixed) or to the sequence's first bound
    assert need == pytest.approx(sum(costs[comps.index(c)] for c in admitted))
    least = {id(c): min(s._ahead(c), s._short(c)) if fixed else s._ahead(c) for c in admitted}
    assert left is None or not admitted or s.plan_s(admitted, least, base) <= left + 1e-6  # type: ignore[arg-type]
    if left is None:
        assert {id(c) for c in admitted} == {id(c) for c in comps} and not stopped  # cheapest first
    elif fixed:
        assert {id(c) for c in admitted} | {id(c) for c in stopped} == {id(c) for c in comps}
    else:
        assert all(costs[comps.index(c)] * ahead > left for c in stopped)


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.tuples(st.floats(1.0, 300.0), st.booleans()), min_size=1, max_size=8),
    left=st.floats(0.0, 3000.0),
    fixed=st.booleans(),
)
def test_other_comparisons_never_crowd_out_a_gpu_vs_cpu_one(costs, left, fixed):
    """The kit's question is this GPU against this machine's CPU: H200-fixed-rounds gave 6 rounds to
    AMP over default and 2 to mnist-cnn's kit GPU-over-CPU pairs, all admitted cheapest first. Now
    the GPU-vs-CPU comparisons (`across`) a round admits are the ones it would admit if there were
    no others; the others take what is left."""
    from bench.core.claims import FASTER
    from bench.run.sequential import Comparison, Sequential

    def admit(pick):
        s = Sequential(cells=[], out=Path("."), opts=Options(max_repeats=6, fixed=fixed), run_round=lambda c: [], echo=print)
        s._estimate = lambda cells: sum(cost[c] for c in cells)  # type: ignore[method-assign]
        comps = [
            Comparison("seq", None, "", FASTER, (f"a{i}", f"b{i}"), ("a", "b"), across=x)  # type: ignore[arg-type]
            for i, (_, x) in enumerate(costs)
            if pick(x)
        ]
        names = {id(c): c.keys for c in comps}
        admitted, _, _ = s._admit(comps, {k: k for k in cost}, left)
        return {names[id(c)] for c in admitted if c.across}

    cost = {f"{side}{i}": c / 2 for i, (c, _) in enumerate(costs) for side in "ab"}
    assert admit(lambda x: True) == admit(lambda x: x)


def test_a_pair_of_cpu_and_gpu_sides_is_across_by_their_platform_facets():
    from bench.core.answers import Side, planned_facets
    from bench.core.cell import Cell
    from bench.core.registry import studies
    from bench.run.sequential import across

    reg = studies()

    def side(study, backend, part):
        facets = planned_facets(reg[study], Cell(study, backend), part)
        return Side(run="r", part=part, workload={}, facets=facets)

    assert across((side("mnist-cnn", "torch-cuda", "torch-cuda"), side("mnist-cnn", "numba-cpu", "numba-cpu")))
    assert not across((side("mnist-cnn", "torch-cuda", "torch-cuda"), side("mnist-cnn", "numba-cuda", "numba-cuda")))
    whole = "numpy+cupy+cupy-tuned"  # parts of one combined cell: NumPy is the CPU side
    assert across((side("mlp-scratch", whole, "cupy"), side("mlp-scratch", whole, "numpy")))
    assert not across((side("mlp-scratch", whole, "cupy"), side("mlp-scratch", whole, "cupy-tuned")))
    unknown = side("roofline", "no-such-backend", "no-such-backend")  # "?": never put first
    assert not across((unknown, side("roofline", "torch-cpu", "torch-cpu")))


# ---- the calls' journal and the round's shares (the H200-rounds-first reference, 2026-11-29) ---------
def test_a_resumed_run_counts_its_earlier_calls_wall_time_not_only_its_cells_files(tmp_path):
    """Three calls on one reference: the cells' files spanned 420 s of the first two calls' 1,024 s
    (process starts, reports and data checks fall outside them), so the third call saw 959 s of a
    1,380 s budget left and ran past it. The calls' journal counts what they took."""
    from bench.run.sequential import Sequential, calls_s, record_call

    t = time.monotonic()
    record_call(tmp_path, "one", t - 525.0)
    record_call(tmp_path, "two", t - 499.0)
    record_call(tmp_path, "two", t - 499.5)  # a call rewrites its own entry as it goes
    assert calls_s(tmp_path) == pytest.approx(1024.5, abs=0.2)
    s = Sequential(cells=[], out=tmp_path, opts=Options(budget_s=1380, whole=True), run_round=lambda c: [], echo=lambda x: None)
    s.earlier_calls_s = calls_s(tmp_path)
    spans = [(1_700_000_000 + 20 * i, 1_700_000_000 + 20 * i + 12) for i in range(35)]  # 420 s of files
    s.note(_reused(tmp_path / "cells", spans))
    assert s._reused_s == pytest.approx(1024.5, abs=0.2)
    left = s.left_s()
    assert left is not None and left < 1380 - 1024


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    doc=st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(["calls", "call", "s", "x"]), kids, max_size=4),
        max_leaves=12,
    )
)
def test_an_untrusted_call_journal_counts_a_finite_time_or_nothing(tmp_path_factory, doc):
    """Anything in calls.json: calls_s is a finite number of seconds >= 0 (0 where the file is not a
    journal), and record_call still writes a journal whose own entry counts."""
    from bench.run.sequential import CALLS, calls_s, record_call

    out = tmp_path_factory.mktemp("journal")
    (out / CALLS).write_text(json.dumps(doc, allow_nan=True))
    got = calls_s(out)
    assert math.isfinite(got) and got >= 0
    record_call(out, "mine", time.monotonic() - 7.0)
    assert calls_s(out) == pytest.approx(got + 7.0, abs=0.2) or calls_s(out) == pytest.approx(7.0, abs=0.2)


class _Ran:
    def __init__(self, name: str, busy: float | None):
        self.cell, self.status, self.seconds, self.active_s = _FakeCell(name), "ok", 999.0, busy


@settings(max_examples=100, deadline=None)
@given(busy=st.lists(st.floats(0.1, 60.0), min_size=1, max_size=20), wall=st.floats(1.0, 400.0))
def test_an_interleaved_rounds_time_is_shared_by_the_time_each_cell_was_busy(busy, wall):
    """A round of a 49 s cell and several 5 s ones: an equal split gave the small cells the big one's
    cost (the next round's estimate came out 40 % short for the small ones' comparisons). Each cell's
    part is its busy time's share of the round's wall time; the parts add up to the wall time."""
    from bench.run.sequential import Sequential, _config

    s = Sequential(cells=[], out=Path("."), opts=Options(budget_s=1e9), run_round=lambda c: [], echo=lambda x: None)
    got = [_Ran(f"c{i}", b) for i, b in enumerate(busy)]
    s.note(got, wall / len(got))
    parts = [s._spent[_config(o.cell)][0] for o in got]  # type: ignore[arg-type]
    assert sum(parts) == pytest.approx(wall)
    for p, b in zip(parts, busy):
        assert p == pytest.approx(wall * b / sum(busy))


def test_a_journal_that_cannot_be_written_never_ends_the_run(tmp_path):
    """The journal is best effort: a results dir it cannot write (here a file in its place) costs the
    next call its count, and this call goes on."""
    from bench.run.sequential import calls_s, record_call

    blocked = tmp_path / "not-a-dir"
    blocked.write_text("x")
    record_call(blocked, "mine", time.monotonic() - 3.0)  # no exception
    assert calls_s(blocked) == 0.0


def _measured(comp, n: int):
    from bench.core import stats

    comp.value = stats.ratio({i: 2.0 for i in range(n)}, {i: 1.0 for i in range(n)})
    return comp


def test_fixed_rounds_give_a_dear_gpu_vs_cpu_pair_the_rounds_that_fit_instead_of_none():
    """H200-mlp-scratch-profile, first call: mlp-scratch's pairs (125 s a round for both, 2 rounds done)
    and profile's GPU-vs-CPU pair (126 s a round, 1 round done); 1,065 s of the budget left. Its five
    rounds did not fit beside the cheaper ones' four, so it was stopped at one repeat: no claim of it
    could be judged. Now it gets the rounds to a range of 3 where those fit, and one more at a time."""
    from bench.core.claims import FASTER, MIN_DECIDING_RANGE
    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=Path("."), opts=Options(max_repeats=6, fixed=True), run_round=lambda c: [], echo=print)
    cost = {"numpy": 50.0, "cupy": 75.0, "cpu": 90.0, "gpu": 36.0}
    s._estimate = lambda cells: sum(cost[c] for c in cells)  # type: ignore[method-assign]
    base = {k: k for k in cost}
    mlp = _measured(Comparison("mlp", None, "", FASTER, ("cupy", "numpy"), ("a", "b"), across=True), 2)  # type: ignore[arg-type]
    prof = _measured(Comparison("profile", None, "", FASTER, ("gpu", "cpu"), ("a", "b"), across=True), 1)  # type: ignore[arg-type]
    admitted, need, stopped = s._admit([prof, mlp], base, 950.0)  # mlp 4 x 125 = 500, profile 2 x 126 = 252
    assert admitted == [mlp, prof] and need == pytest.approx(251.0) and stopped == []
    assert s._short(prof) == MIN_DECIDING_RANGE - 1
    admitted, _, stopped = s._admit([prof, mlp], base, 700.0)  # 500 + 252 do not fit: stopped, mlp kept
    assert admitted == [mlp] and stopped == [prof]
    _measured(prof, 3)
    _measured(mlp, 5)
    admitted, _, stopped = s._admit([prof, mlp], base, 260.0)  # at a range of 3: one more round while it fits
    assert admitted == [mlp, prof] and stopped == []


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.tuples(st.floats(1.0, 300.0), st.integers(0, 5)), min_size=1, max_size=6),
    left=st.floats(0.0, 3000.0),
)
def test_fixed_rounds_never_plan_past_the_budget_and_never_stop_one_whose_judged_rounds_fit_alone(costs, left):
    """Whatever the costs, rounds done and budget: the rounds planned (each admitted comparison to its last or,
    admitted short, to being judged) fit in what is left; and a comparison stopped is one whose short
    rounds did not fit beside those admitted before it."""
    from bench.core.claims import FASTER
    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=Path("."), opts=Options(max_repeats=6, fixed=True), run_round=lambda c: [], echo=print)
    comps = [
        _measured(Comparison("seq", None, "", FASTER, (f"a{i}", f"b{i}"), ("a", "b")), n) if n else
        Comparison("seq", None, "", FASTER, (f"a{i}", f"b{i}"), ("a", "b"))  # type: ignore[arg-type]
        for i, (_, n) in enumerate(costs)
    ]  # fmt: skip
    cost = {f"{side}{i}": c / 2 for i, (c, _) in enumerate(costs) for side in "ab"}
    s._estimate = lambda cells: sum(cost[c] for c in cells)  # type: ignore[method-assign]
    base = {k: k for k in cost}
    admitted, _, stopped = s._admit(comps, base, left)  # type: ignore[arg-type]
    assert s.plan_s(admitted, s.planned, base) <= left + 1e-6  # type: ignore[arg-type]
    assert all(s.planned[id(c)] in (s._ahead(c), s._short(c)) for c in admitted)
    assert {id(c) for c in admitted} | {id(c) for c in stopped} == {id(c) for c in comps}
    for c in stopped:  # its rounds to being judged did not fit beside the ones admitted
        assert s.plan_s(admitted + [c], s.planned | {id(c): s._short(c)}, base) > left - 1e-6  # type: ignore[arg-type]


def test_a_resumed_runs_stop_time_counts_its_earlier_calls(tmp_path):
    """A comparison's `at_s` ("stopped budget 7 min 55 s into the run") is the run's time: on one H200 the
    README's main job, resumed over three calls, said 7 min 55 s for a stop 16 minutes into its run."""
    import time as _time

    from bench.run.sequential import Comparison, Sequential

    s = Sequential(cells=[], out=tmp_path, opts=Options(budget_s=1e9), run_round=lambda cells: [], echo=lambda line: None)
    s.started = _time.monotonic() - 10.0
    s.earlier_calls_s = 500.0
    from types import SimpleNamespace

    c = Comparison("seq", SimpleNamespace(id="x"), "", None, ("a", "b"), ("a", "b"))  # type: ignore[arg-type]
    c.stopped = "budget"
    s.comparisons = [c]
    s.write()
    assert 510.0 <= c.at_s < 520.0


@settings(max_examples=120, deadline=None)
@given(
    cost=st.dictionaries(st.sampled_from("abcd"), st.floats(1.0, 300.0), min_size=4, max_size=4),
    done=st.sets(st.tuples(st.sampled_from("abcd"), st.integers(1, 6))),
    start=st.integers(1, 5),
    left=st.floats(-100.0, 2000.0),
    pairs=st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd")), min_size=1, max_size=5),
)
def test_a_resumed_run_counts_no_time_for_rounds_an_earlier_call_ran(cost, done, start, left, pairs):
    """A round an earlier call finished is reused at no cost: the plan counts only the rounds still to
    run, and a comparison whose next round is on disk is admitted whatever the budget has left
    (on one H200 the third call of the README's main job stopped roofline's comparisons at round 1 with
    30 s left, for rounds 2 and 3 the second call had run, and the report lost them)."""
    s, comp = _seq(cost)
    s._done = lambda cell, j: (cell, j) in done  # type: ignore[method-assign]
    comps = [comp(a, b) for a, b in pairs]
    base = {k: k for k in "abcd"}
    for c in comps:  # one comparison, its next n rounds: the estimate of each round not on disk
        for n in (1, 3):
            want = sum(cost[k] * sum((k, j) not in done for j in range(start, start + n)) for k in set(c.keys))
            assert s.plan_s([c], {id(c): n}, base, start) == pytest.approx(want)
        assert s.plan_s([c], {id(c): 3}, base) == pytest.approx(3 * sum(cost[k] for k in set(c.keys)))  # no START: estimates
    admitted, need, stopped = s._admit(comps, base, left, start=start)
    for c in comps:
        if all((k, start) in done for k in c.keys):  # its next round is on disk: admitted, for that round at least
            assert c in admitted and c not in stopped and s.planned[id(c)] >= 1
    keys = {k for c in admitted for k in c.keys}
    assert need == pytest.approx(sum(cost[k] for k in keys if (k, start) not in done))


@pytest.mark.slow
def test_a_resumed_run_keeps_the_rounds_on_disk_when_its_budget_is_spent(tmp_path):
    """The same rounds on disk, the same answer: a run that resumes with its budget spent reuses every round
    an earlier call ran (free) instead of stopping each comparison at round 1 (the README's main job on one
    H200: its third call's report said 1 round for comparisons the second call had run to 2 and 3)."""
    out = tmp_path / "r"
    args = ("-m", "bench", "matrix", "seq", "--set", "steps=1", "--repeats", "1", "--until-decided", "--max-repeats", "3")
    r = _cli(*args, "--budget", "10m", "--out", str(out), env=SEQ_ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    first = {c["claim"]: c["rounds"] for c in _record(out)["comparisons"]}
    assert set(first.values()) == {3}, first
    r = _cli(*args, "--budget", "1s", "--out", str(out), env=SEQ_ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "reused" in r.stdout
    assert {c["claim"]: c["rounds"] for c in _record(out)["comparisons"]} == first
    assert len(list((out / "seq").iterdir())) == 6  # nothing ran again
