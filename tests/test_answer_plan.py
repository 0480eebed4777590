"""The answer first (issue 53): on a host with a GPU, `orchestrate.py all` runs every study's answer
matrix (the same work on both platforms), reports after the first round, then adds rounds until
decided within a whole-run budget; pairs form only on the same trained work and data; a run stopped
by a signal or by --stop-after keeps a report and resumes.

The real studies' plans are checked without running them (their answer matrices pair every
headline comparison, equal work on both sides); the whole flow runs on tests/answer_study.py, whose
`gpu-side` backend is plain Python on a platform a fake nvidia-smi lists."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.core import answers as A
from bench.core.claims import Ratio
from bench.core.registry import studies
from bench.core.request import PLATFORMS, effective_profile
from bench.core.resultset import ResultCell

ROOT = Path(__file__).resolve().parent.parent
ANS = {"KIT_STUDY_MODULES": "answer_study"}
SEQ = {"KIT_STUDY_MODULES": "seq_study"}
KIT_STUDIES = ("mnist-cnn", "mlp-scratch", "cifar-opt", "roofline", "profile")


def _cli(*args: str, env: dict | None = None, gpu: Path | None = None, merged: bool = False) -> subprocess.CompletedProcess:
    """ARGS under this Python from the checkout; MERGED: stderr into stdout, in the order written."""
    e = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}", **(env or {})}
    if gpu is not None:
        e["PATH"] = f"{gpu}{os.pathsep}{e['PATH']}"
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if merged else {"capture_output": True}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, text=True, timeout=600, **pipes)


@pytest.fixture
def fake_gpu(tmp_path) -> Path:
    """A dir holding an nvidia-smi that lists one GPU: the host's plan sees a cuda platform."""
    d = tmp_path / "bin"
    d.mkdir()
    smi = d / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "0, NVIDIA FakeGPU, 580.0, 81559 MiB, 700.00 W, 1980 MHz"\n')
    smi.chmod(0o755)
    return d


# ---- the plan: which profile, which cells ----------------------------------------------------
@given(st.sets(st.sampled_from(PLATFORMS)))
def test_auto_is_the_answer_exactly_where_a_gpu_platform_runs(platforms):
    got = effective_profile("auto", sorted(platforms))
    assert got == ("answer" if platforms & {"cuda", "mps"} else "auto")
    for named in ("smoke", "default", "full", "answer"):
        assert effective_profile(named, sorted(platforms)) == named  # a named profile is never changed


def _planned(study, cells) -> list[ResultCell]:
    """Cells as result cells with one ok row per backend part, for the answer engine to pair."""
    out = []
    for i, c in enumerate(cells):
        ds = str(c.params.get("dataset", "auto"))
        rows = [
            {"backend": part, "variant": c.variant, "status": "ok", "dataset": ds, "dataset_real": False}
            for part in c.backend.split("+")
        ]
        out.append(ResultCell(Path(f"/r/plan/{study.name}/{c.name}-{i}"), rows, {}, spec=json.loads(c.to_json())))
    return out


def _one_gpu(study, claim) -> bool:
    """A Ratio claim both of whose sides a host with a CPU and one NVIDIA GPU runs."""
    rule = claim.rule
    if not isinstance(rule, Ratio) or claim.needs.gpus > 1:
        return False
    for side in (rule.a, rule.b):
        b = side.get("backend")
        if side.get("gpus", 1) > 1 or side.get("parallel") not in (None, "none"):
            return False
        if b is not None and study.backends[b].platform not in ("cpu", "cuda"):
            return False
    return True


@pytest.mark.parametrize("name", KIT_STUDIES)
def test_the_answer_matrix_forms_every_headline_comparison_with_the_same_work_on_both_sides(name):
    """On a host with a CPU and a GPU, every headline comparison of every study forms from its
    answer cells, and no pair of them is kept apart by its trained work or data: the answer is the
    same work on both sides. (A side both platforms share, e.g. batch, stays in the workload.)"""
    study = studies()[name]
    cells = study.matrix("cpu", "answer") + study.matrix("cuda", "answer")
    assert cells and all(study.validate(c) is None for c in cells)
    results = _planned(study, cells)
    formed = 0
    for claim in study.claims:
        if not (claim.headline and _one_gpu(study, claim)):
            continue
        rule = Ratio(claim.rule.a, claim.rule.b, metric=lambda rows, part: 1.0, free=claim.rule.free)
        got = A.ratio_findings(study, results, rule)
        assert got, (claim.id, A.missing(study, results, claim))
        assert all(not A.unlike(study, *f.sides, set(rule.a) | set(rule.b)) for f in got)
        assert not A._not_alike(study, results, rule), claim.id  # no pair of its cells kept apart
        formed += 1
    assert formed >= 1


@pytest.mark.parametrize("name", ("cifar-opt", "roofline", "profile"))
def test_the_seeds_own_gpu_setups_never_pair_with_the_cpu_ones(name):
    """The default profile gives each platform the seed's own amount (a GPU 5,000 images x 10
    epochs, a CPU 1,000 x 5): no GPU-over-CPU pair forms from it, and the answer says why."""
    study = studies()[name]
    cells = study.matrix("cpu", "default") + study.matrix("cuda", "default")
    results = _planned(study, cells)
    for claim in study.claims:
        rule = claim.rule
        if not (claim.headline and _one_gpu(study, claim)):
            continue
        platforms = {study.backends[s["backend"]].platform for s in (rule.a, rule.b) if "backend" in s}
        if platforms != {"cpu", "cuda"}:
            continue
        r = Ratio(rule.a, rule.b, metric=lambda rows, part: 1.0, free=rule.free)
        assert not A.ratio_findings(study, results, r), claim.id
        [why] = A._not_alike(study, results, r)  # what missing() says of such a claim
        assert "not the same work" in why and "--set" in why, why


# ---- the first part: each study's GPU-over-CPU pair before anything else ------------------------
def _answer_cells() -> list:
    out = []
    for name in KIT_STUDIES:
        study = studies()[name]
        out += study.matrix("cpu", "answer") + study.matrix("cuda", "answer")
    return out


@pytest.mark.parametrize("name", KIT_STUDIES)
def test_the_first_part_is_the_study_s_first_headline_gpu_over_cpu_pair(name):
    """answer_parts puts, per study, one pair first: the cells of its first seed headline claim whose
    sides run on two platforms, and those cells alone form that claim (same work, both platforms)."""
    from bench.run.matrix import answer_parts

    study = studies()[name]
    cells = study.matrix("cpu", "answer") + study.matrix("cuda", "answer")
    first = answer_parts(cells)[0]
    assert 1 <= len(first) <= 2 and not any(study.deferred(c) for c in first)
    claim = next(
        c
        for c in study.claims
        if c.headline
        and not c.kit
        and isinstance(c.rule, Ratio)
        and A.ratio_findings(study, _planned(study, cells), Ratio(c.rule.a, c.rule.b, lambda rows, part: 1.0, free=c.rule.free))
        and {study.backends[s["backend"]].platform for s in (c.rule.a, c.rule.b) if "backend" in s} == {"cpu", "cuda"}
    )
    got = A.ratio_findings(
        study, _planned(study, first), Ratio(claim.rule.a, claim.rule.b, lambda rows, part: 1.0, free=claim.rule.free)
    )
    assert got, (claim.id, [c.name for c in first])
    platforms = {A.planned_facets(study, c, p)["platform"] for c in first for p in c.backend.split("+")}
    assert platforms == {"cpu", "cuda"}


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_planned_cell_s_facets_are_those_its_rows_will_have(data):
    """planned_facets (the plan, before a cell runs) agrees with facets (the result cell's) for any
    cell of any study's answer matrix and any backend part of it."""
    cells = _answer_cells()
    c = data.draw(st.sampled_from(cells))
    study = studies()[c.study]
    part = data.draw(st.sampled_from(c.backend.split("+")))
    [rc] = _planned(study, [c])
    assert A.planned_facets(study, c, part) == A.facets(study, rc, part)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_answer_s_parts_hold_every_cell_once_in_the_matrix_s_order(data):
    """Whatever repeats a run holds, the parts partition its cells; the first two hold first repeats
    only, and no part is empty."""
    from bench.run.matrix import answer_parts

    base = data.draw(st.lists(st.sampled_from(_answer_cells()), min_size=1, max_size=30, unique_by=lambda c: c.key))
    cells = [c.replace(repeat=r) for c in base for r in range(data.draw(st.integers(1, 3)))]
    cells = data.draw(st.permutations(cells))
    parts = answer_parts(cells)
    flat = [c for p in parts for c in p]
    assert sorted(map(id, flat)) == sorted(map(id, cells)) and all(parts)
    for p in parts:
        order = [cells.index(c) for c in p]
        assert order == sorted(order)
    for p in parts[:-1]:
        assert all(c.repeat == 0 for c in p)


# ---- the one rule: a pair is the same work and data, whatever else the claim lets differ --------
def _ans_cell(run: str, backend: str, repeat: int, epochs: int, dataset: str, real: bool, rate: float) -> ResultCell:
    rows = [
        {"backend": backend, "variant": "default", "status": "ok", "dataset": dataset, "dataset_real": real, "step_s": 1 / rate}
    ]
    spec = {"study": "ans", "backend": backend, "variant": "default", "seed": 0, "repeat": repeat, "params": {"epochs": epochs}}
    system = {
        "cpu_model": "Test CPU",
        "cpu_logical_cores": 2,
        **({"gpu": {"name": "FakeGPU"}, "gpu_count": 1} if "gpu" in backend else {}),
    }
    return ResultCell(Path(f"/r/{run}/ans/{backend}-{repeat}"), rows, system, spec=spec, origin=run)


@pytest.fixture(scope="module")
def ans_study():
    """The test study, imported here (registering it), never named in this process's environment:
    the subprocesses of other tests must not inherit KIT_STUDY_MODULES."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("answer_study", ROOT / "tests" / "answer_study.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("answer_study", mod)  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    from bench.core import registry

    registry._STUDIES.pop("ans", None)  # registered by the import: other tests see the kit's studies only
    return mod.Ans()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    e=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    data=st.tuples(
        st.sampled_from(["mnist", "digits", "cifar10-synthetic"]), st.sampled_from(["mnist", "digits", "cifar10-synthetic"])
    ),
    real=st.tuples(st.booleans(), st.booleans()),
    same_run=st.booleans(),
)
def test_a_pair_forms_exactly_when_the_trained_work_and_the_data_agree(ans_study, e, data, real, same_run):
    runs = ("one", "one") if same_run else ("mine", "ref")
    cells = [_ans_cell(runs[0], "gpu-side", r, e[0], data[0], real[0], 100.0 + r) for r in range(3)]
    cells += [_ans_cell(runs[1], "cpu-side", r, e[1], data[1], real[1], 25.0 + r) for r in range(3)]
    claim = ans_study.claims[0]
    got = A.ratio_findings(ans_study, cells, claim.rule)
    alike = e[0] == e[1] and data[0] == data[1] and real[0] == real[1]
    assert bool(got) == alike
    if not alike:
        [answer] = A.judge(ans_study, cells, claim)
        assert answer.verdict == "not measured here" and "not the same work" in answer.why, answer.why
        if data[0] != data[1] or real[0] != real[1]:
            assert "data " in answer.why
        else:
            assert f"--set epochs={e[1]}" in answer.why  # what to run to pair them
    else:
        assert got[0].rank == (0 if same_run else A.RANKS.index("across hosts")) and got[0].value.median == pytest.approx(
            4.0, rel=0.05
        )


def test_a_ratio_whose_lower_side_measured_zero_is_no_pair_and_says_so(ans_study):
    cells = [_ans_cell("one", "gpu-side", r, 2, "none", True, 100.0) for r in range(3)]
    cells += [_ans_cell("one", "cpu-side", r, 2, "none", True, 25.0) for r in range(3)]
    zero = Ratio({"backend": "gpu-side"}, {"backend": "cpu-side"}, metric=lambda rows, part: 0.0 if part == "cpu-side" else 1.0)
    assert A.ratio_findings(ans_study, cells, zero) == []


@pytest.mark.quiet
# ---- the whole flow on a host with a (fake) GPU --------------------------------------------------
@pytest.mark.slow
def test_all_on_a_gpu_host_answers_first_then_adds_fixed_rounds_then_the_compiled_cells(tmp_path, fake_gpu):
    out, rep = tmp_path / "run", tmp_path / "rep"
    r = _cli(
        "orchestrate.py", "all", "--study", "ans", "--out", str(out), "--report-dir", str(rep), "--no-references",
        "--runtime", "native", "--budget", "3m", env=ANS, gpu=fake_gpu, merged=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:]
    lines = r.stdout.splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("answer first:"))
    first_cell = next(i for i, line in enumerate(lines) if line.startswith("ok "))
    first_report = next(i for i, line in enumerate(lines) if line.startswith("report: ") and "into the run" in line)
    first_round = next(i for i, line in enumerate(lines) if line.startswith("until decided: round 2"))
    late = next(i for i, line in enumerate(lines) if line.startswith("ok ") and "gpu-late" in line)
    last_round = max(i for i, line in enumerate(lines) if line.startswith("until decided: round"))
    assert plan < first_cell < first_report < first_round < last_round < late  # compiled cells after the rounds
    assert any(line.startswith("report: ") for line in lines[late:])  # and the report again after them
    assert "--budget 3m for the whole run" in r.stdout and "rounds to 6 for each comparison" in r.stdout
    rec = json.loads((out / "sequential.json").read_text())
    [comp] = rec["comparisons"]
    assert rec["fixed"] and (comp["stopped"], comp["verdict"], comp["rounds"]) == ("max-repeats", "holds", 6)
    claims = json.loads((rep / "report.json").read_text())["claims"]
    [f] = next(c for c in claims if c["id"] == "gpu-over-cpu")["findings"]
    assert f["interval"] == "ci" and "6 rounds, stopped max-repeats" in f["until_decided"]
    cells = [json.loads(p.read_text()) for p in out.glob("ans/*/cell.json")]
    assert {c["params"]["epochs"] for c in cells} == {2}  # the same work on both platforms
    v = _cli("orchestrate.py", "verify", str(out), "--allow-unbaselined", env=ANS)
    assert v.returncode == 0, v.stdout[-2000:]


@pytest.mark.quiet
@pytest.mark.slow
def test_a_sigterm_mid_run_leaves_a_report_and_verify_names_the_interrupted_cell(tmp_path, fake_gpu):
    out, rep = tmp_path / "run", tmp_path / "rep"
    e = {
        **os.environ,
        **ANS,
        "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}",
        "PATH": f"{fake_gpu}{os.pathsep}{os.environ['PATH']}",
    }
    argv = [sys.executable, "orchestrate.py", "all", "--study", "ans", "--out", str(out), "--report-dir", str(rep)]
    argv += ["--no-references", "--runtime", "native", "--set", "ans.slow_s=0.6", "--set", "epochs=4", "--budget", "5m"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    deadline = time.monotonic() + 300
    assert proc.stdout is not None
    for line in proc.stdout:  # the first report, then a cell of round 2 under way
        seen.append(line)
        if line.startswith("ready   cpu-side default r1") or time.monotonic() > deadline:
            break
    time.sleep(0.8)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, "".join(seen) + rest
    assert (rep / "REPORT.md").is_file() and "ans" in (rep / "REPORT.md").read_text()
    v = _cli("orchestrate.py", "verify", str(out), "--allow-unbaselined", env=ANS)
    assert v.returncode == 0, v.stdout[-3000:]
    assert "interrupted" in v.stdout and "cpu-side" in v.stdout


@pytest.mark.parametrize(
    "budget, says",
    [("0", "above zero"), ("-5m", "above zero"), ("soon", "takes a time"), ("10s", "shorter than the answer's first round")],
)
def test_a_bad_budget_is_one_line_before_any_cell(tmp_path, fake_gpu, budget, says):
    out = tmp_path / "run"
    r = _cli(
        "orchestrate.py", "all", "--study", "ans", "--out", str(out), "--no-references", "--runtime", "native",
        f"--budget={budget}", env=ANS, gpu=fake_gpu,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and says in err[0] and err[0].startswith("error:"), r.stderr
    assert not list(out.glob("ans/*/rows.jsonl"))


def test_a_host_with_a_cpu_alone_says_it_forms_no_gpu_comparison_and_refuses_a_budget(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()  # no nvidia-smi at all
    r = _cli(
        "orchestrate.py", "all", "--study", "ans", "--out", str(tmp_path / "run"), "--no-references", "--runtime",
        "native", "--budget", "5m", env={**ANS, "PATH": f"{empty}{os.pathsep}/usr/bin:/bin"},
    )  # fmt: skip
    assert r.returncode == 2 and "--budget 5m" in r.stderr and "cpu" in r.stderr, r.stderr
    ok = _cli(
        "orchestrate.py", "all", "--study", "ans", "--out", str(tmp_path / "run"), "--no-references", "--runtime",
        "native", env={**ANS, "PATH": f"{empty}{os.pathsep}/usr/bin:/bin"},
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "only cpu runs here" in ok.stdout and "answer first" not in ok.stdout


# ---- --stop-after: a clean end of one call, resumed by the same command ------------------------
def test_stop_after_ends_a_call_cleanly_and_the_same_command_resumes_without_rerunning(tmp_path):
    out = tmp_path / "run"
    argv = ("-m", "bench", "matrix", "seq", "--set", "steps=2", "--repeats", "3", "--out", str(out))
    first = _cli(*argv, "--stop-after", "1s", env=SEQ)  # no cell fits: nothing starts, nothing is lost
    assert first.returncode == 75, first.stderr[-2000:]
    assert "paused" in first.stdout and not list(out.glob("seq/*/rows.jsonl"))
    done = _cli(*argv, env=SEQ)
    assert done.returncode == 0, done.stderr[-2000:]
    made = {p.parent.name: p.stat().st_mtime for p in out.glob("seq/*/rows.jsonl")}
    assert len(made) == 6
    again = _cli(*argv, "--stop-after", "10m", env=SEQ)
    assert again.returncode == 0 and "reused" in again.stdout
    assert {p.parent.name: p.stat().st_mtime for p in out.glob("seq/*/rows.jsonl")} == made  # nothing ran twice


def test_the_default_budget_grows_to_cover_a_slow_hosts_first_round_and_a_given_one_does_not(monkeypatch):
    """A host whose first round alone outlasts the default budget (few cores beside a GPU) still gets
    its answer: the default grows to cover it (and a third more for rounds); a budget the user gave is
    refused instead, in one line."""
    from bench.core.errors import UsageError
    from bench.core.request import RunRequest
    from host import answer_plan

    # every cell 60 s: round 1 is about 39 minutes, above the default budget
    monkeypatch.setattr(answer_plan, "_seconds", lambda cells: 60.0 * len(cells))
    req = RunRequest(platforms=("cpu", "cuda"))
    got = answer_plan.plan(req, ["cpu", "cuda"], False, ())
    assert got is not None and got.budget_s is not None and got.budget_s >= got.first_s * 4 / 3 > 20 * 60
    assert got.request.until_decided and got.request.budget_whole and got.request.repeats == 1
    with pytest.raises(UsageError, match="shorter than the answer's first round"):
        answer_plan.plan(req, ["cpu", "cuda"], False, (), "20m")
    assert answer_plan.plan(req, ["cpu"], False, ()) is None  # a CPU alone: not the answer's plan
    boxed = answer_plan.plan(req, ["cpu", "cuda"], True, ())  # containers: no rounds pair a CPU and a GPU cell
    assert boxed is not None and boxed.budget_s is None and boxed.request.repeats == 3


@settings(max_examples=40, deadline=None)  # 6+ repeats a side: a bootstrap interval, a few hundred ms
@given(
    a=st.dictionaries(st.integers(0, 7), st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=8),
    b=st.dictionaries(st.integers(0, 7), st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=8),
    paired=st.sampled_from([None, True, False]),
)
def test_a_ratio_of_any_readings_is_a_summary_or_one_value_error_never_a_division_by_zero(a, b, paired):
    """The one place a ratio is formed (bench.core.stats.ratio) refuses a lower side at 0 in any
    repeat, whatever the readings: a GPU idle in every sample once crashed the whole report."""
    from bench.core import stats

    try:
        s = stats.ratio(a, b, paired=paired)
    except ValueError:
        assert min(b.values()) <= 0
        return
    assert min(b.values()) > 0 and s.median >= 0
    assert s.lo is None or s.lo <= s.hi


@pytest.mark.quiet
def test_all_takes_stop_after_ends_cleanly_and_resumes(tmp_path, fake_gpu):
    """The README's main job ends a call at --stop-after like `reference gpu` (exit 75, the report
    of what finished) and the same command goes on; a bad value is one line before any cell."""
    out, rep = tmp_path / "run", tmp_path / "rep"
    base = ("orchestrate.py", "all", "--study", "ans", "--out", str(out), "--report-dir", str(rep), "--no-references")
    base += ("--runtime", "native", "--set", "ans.slow_s=0.3", "--set", "epochs=3")
    bad = _cli(*base, "--stop-after", "soon", env=ANS, gpu=fake_gpu)
    assert bad.returncode == 2 and "--stop-after" in bad.stderr and not out.exists(), bad.stderr
    first = _cli(*base, "--stop-after", "30s", env=ANS, gpu=fake_gpu, merged=True)
    assert first.returncode == 75, first.stdout[-3000:]
    assert "paused" in first.stdout
    done = {p: p.stat().st_mtime_ns for p in out.glob("ans/*/rows.jsonl")}
    assert done, first.stdout[-3000:]  # the first call finished some cells before it paused
    again = _cli(*base, "--budget", "2m", env=ANS, gpu=fake_gpu, merged=True)
    assert again.returncode == 0, again.stdout[-3000:]
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())  # a finished cell is never run again
    assert len(list(out.glob("ans/*/rows.jsonl"))) > len(done) and (rep / "REPORT.md").is_file()


@pytest.mark.parametrize("name", KIT_STUDIES)
def test_no_pair_on_one_platform_means_an_empty_first_part(name):
    """The plan's 'first report after N cells' counts the pairs only: on one platform no pair forms,
    and the first part is empty (it is not the rest of round 1, as answer_parts()[0] would be)."""
    from bench.run.matrix import answer_parts, first_part

    cells = studies()[name].matrix("cpu", "answer")
    assert first_part(cells) == [] and sorted(c.key for p in answer_parts(cells) for c in p) == sorted(c.key for c in cells)


# ---- --rounds-first (`reference gpu`): the compiled cells only in what the rounds leave -----------
@settings(max_examples=80, deadline=None)
@given(
    costs=st.lists(st.floats(1.0, 500.0), min_size=0, max_size=6),
    left=st.one_of(st.none(), st.floats(-100.0, 1500.0)),
)
def test_rounds_first_keeps_the_compiled_cells_that_fit_in_order_and_names_the_rest(costs, left):
    from bench.core.cell import Cell
    from bench.run import matrix

    cells = [Cell(study="mnist-cnn", backend="torch-cuda", variant="tuned", seed=i) for i in range(len(costs))]
    cost = {c.seed: s for c, s in zip(cells, costs)}
    said: list[str] = []
    orig = matrix.estimate_s
    matrix.estimate_s = lambda c, *a: cost[c.seed]  # type: ignore[assignment]
    try:
        kept = matrix._fitting(cells, left, said.append)
    finally:
        matrix.estimate_s = orig  # type: ignore[assignment]
    if left is None:
        assert kept == cells and not said
        return
    assert not kept or sum(cost[c.seed] for c in kept) <= left + 1e-9
    assert [c.seed for c in kept] == sorted(c.seed for c in kept)  # in the order given
    assert len(said) == len(cells) - len(kept) and all(s.startswith("not run: ") and "--rounds-first" in s for s in said)
    used = 0.0
    for c in cells:  # each one left out did not fit beside the ones before it
        if c in kept:
            used += cost[c.seed]
        else:
            assert used + cost[c.seed] > left


def test_the_gpu_reference_runs_its_rounds_first_and_says_so_in_its_plan(monkeypatch):
    from bench.core.request import RunRequest
    from host import answer_plan
    from host.reference import PRESETS

    monkeypatch.setattr(answer_plan, "_seconds", lambda cells: 10.0 * len(cells))  # a GPU host's 16 cores, not these 2

    assert PRESETS["gpu"].rounds_first and not PRESETS["cpu"].rounds_first
    req = RunRequest(platforms=("cpu", "cuda"))
    got = answer_plan.plan(req, ["cpu", "cuda"], False, (), "25m", rounds_first=True)
    assert got is not None and got.request.until().rounds_first and "--rounds-first" in got.request.matrix_argv()
    assert "last in what the rounds leave of --budget 25m" in " ".join(answer_plan.lines(got))
    plain = answer_plan.plan(req, ["cpu", "cuda"], False, (), "25m")  # `all`: their time kept in the budget
    assert plain is not None and "--rounds-first" not in plain.request.matrix_argv()
    assert "the compiled cells last, within --budget" in " ".join(answer_plan.lines(plain))


# ---- `all`: the compiled cells inside the whole --budget, by their running estimates ---------------
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    costs=st.lists(st.floats(1.0, 500.0), min_size=1, max_size=6),
    left=st.one_of(st.none(), st.floats(-100.0, 1500.0)),
    stop=st.one_of(st.none(), st.floats(0.0, 1500.0)),
)
def test_the_compiled_cells_start_only_within_the_budget_or_the_stop_and_say_which_did_not(tmp_path, costs, left, stop):
    """On one H200 the compiled cells ran after a spent budget (the README's main job 3 min past its 20):
    each starts only where its estimate ends before the budget's end (matrix._in_budget), the ones left
    out are named on one line, the run is not paused for them, and an earlier --stop-after still pauses."""
    from bench.core.cell import Cell
    from bench.core.request import Paths
    from bench.run import matrix
    from bench.run.schedule import Outcome, Paused, Scheduler

    said: list[str] = []
    cells = [Cell(study="mnist-cnn", backend="torch-cuda", variant="tuned", seed=i) for i in range(len(costs))]
    cost = {c.key: s for c, s in zip(cells, costs)}
    sched = Scheduler(Paths(tmp_path / "out", None), None, False, echo=said.append)
    ran: list[Cell] = []

    class Costs:  # the run's ETA: each cell's expected seconds from now
        @staticmethod
        def for_cells(todo, serial=True):
            return Costs()

        def cost_of(self, key):
            return cost[key]

    sched._child = lambda cell, env=None: cell  # type: ignore[method-assign,assignment]
    sched._drive = lambda cell: ran.append(cell) or Outcome(cell, "ok", 0.0)  # type: ignore[method-assign,assignment,func-returns-value]
    import bench.run.schedule as S

    real_eta, S.Eta = S.Eta, Costs  # type: ignore[misc,assignment]
    now = time.monotonic()
    sched.stop_at = None if stop is None else now + stop
    end = None if left is None else now + left
    try:
        got = matrix._in_budget(sched, cells, "sequential", end)
        paused = False
    except Paused as p:
        got, paused = p.outcomes, True
    finally:
        S.Eta = real_eta  # type: ignore[misc]
    assert sched.stop_at == (None if stop is None else now + stop) and sched.stop_by == "--stop-after"  # put back
    limit = min(x for x in (left, stop) if x is not None) if (left, stop) != (None, None) else None
    slack = 0.5  # the seconds this test itself takes between the two clocks
    for c in ran:
        assert limit is None or cost[c.key] <= limit + slack
    for c in cells:
        if c not in ran:
            assert limit is not None and cost[c.key] > limit - slack
    assert [o.cell for o in got] == ran
    by_budget = end is not None and (stop is None or not now + stop <= end)  # the earlier of the two, ties to the stop
    if len(ran) < len(cells):
        assert paused != by_budget  # the budget's end is no pause; an earlier --stop-after is
        assert any(s.startswith("not run --budget") for s in said) == by_budget
        for line in (s for s in said if s.startswith("not run --budget")):  # the cells by name, not their hashes
            assert "torch-cuda" in line and not re.search(r"[0-9a-f]{40}", line), line
    else:
        assert not paused and not any(s.startswith(("not run", "paused")) for s in said)
