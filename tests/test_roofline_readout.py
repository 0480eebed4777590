"""roofline's readout (bench/studies/roofline/readout.py, issue 58 item 1): the one place the
study's rows become numbers.

- every figure the report, the summary, the claims and the Study hooks read is a function of a
  cell's ok rows in their own order (phase, then batch size), so a permutation of the committed
  references' rows (Hypothesis; the 2-core EPYC's cells and the H100's, passes and sweeps) moves
  none of them: not a readout figure, not a line or figure of the report section, not a claim's
  answer (its verdict, value and the per-repeat figures it rests on);
- the report, the claims and the package's Study hooks read no measured row field themselves: the
  names protocol.py writes a measurement under appear, among the study's own modules, only in
  readout.py and in the writers (a reader may not go back to `r["img_per_s"]`), and the readers
  import no per-value accessor (num, nums, number...) to read rows with; measures.py is gone
  (its metrics and findings are readout.py's), and readout.py imports not its own package.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core.figures import collecting
from bench.core.registry import get_study
from bench.core.resultset import ResultCell, collect, group_repeats
from bench.studies.roofline import readout, report

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "bench" / "studies" / "roofline"
REFS = ROOT / "results" / "reference"
CPU = REFS / "cpu-2core-epyc-roofline"
GPU = REFS / "H100-80GB-HBM3-roofline"
FEW = settings(max_examples=8, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])

_CELLS: dict[Path, list[ResultCell]] = {}


def _cells(where: Path) -> list[ResultCell]:
    """The ok roofline cells of one committed reference."""
    if where not in _CELLS:
        if not (where / "roofline").is_dir():
            pytest.skip(f"no committed roofline reference under {where}")
        _CELLS[where] = [c for c in collect([where])[0] if c.study == "roofline" and c.status == "ok"]
    return _CELLS[where]


# ---- what each reader shows -------------------------------------------------------------------
METRICS = {
    "train img/s": readout.train_ips,
    "val img/s": readout.val_ips,
    "GPU %": readout.gpu_util,
    "CPU %": readout.cpu_util,
    "train % of roof": readout.train_roof_pct,
    "val % of roof": readout.val_roof_pct,
    "compute roof": readout.compute_roof,
    "bandwidth roof": readout.bw_roof,
    "params at 1000": readout.params_at(1000),
    "b64 / b32": readout.sweep_gain(64, 32),
    "b256 / b128": readout.sweep_gain(256, 128),
    "climb": readout.sweep_climb,
    "NaN passes": readout.nan_passes,
    "high AI / ridge": readout._over_ridge(readout.AI_HIGH),
    "low AI / ridge": readout._over_ridge(readout.AI_LOW),
    "high AI at 128": readout._ai(readout.AI_HIGH, readout.AI_BATCH),
    "low AI at 128": readout._ai(readout.AI_LOW, readout.AI_BATCH),
}


def _per_cell(c: ResultCell) -> dict:
    """A repeat's figures, as the claims' metrics, the report's tables and the Study hooks read them."""
    study = get_study("roofline")
    rs, part = c.rows, str(c.first.get("backend"))
    return {
        "params": readout.params(c),
        "metrics": {k: m(rs, part) for k, m in METRICS.items()},
        "ips": [readout.ips(rs, p) for p in readout.POINT_PHASES],
        "counts": readout.counts(c),
        "threads": readout.threads(c),
        "roofs": readout.row_roofs(c),
        "points": [readout.plot_points(c, p) for p in readout.POINT_PHASES],
        "ends": readout.sweep_ends(rs),
        "hooks": (
            study.throughput(rs),
            study.accuracy(rs, part),
            study.loss_curve(rs, part),
            study.invariants(rs),
            study.progress_line(rs),
            study.check_rows(rs),
            readout.above_roof(rs),
            readout.flops_off(rs),
            readout.miscounted(rs),
        ),
    }


def _answer(a: A.Answer) -> tuple:
    """An answer as the claims table shows it: its verdict and why, and every finding's value,
    sides and per-repeat figures."""
    found = [(f.value, f.what, f.unit, f.exact, f.rank, f.split, [(s.run, s.part, s.per) for s in f.sides]) for f in a.findings]
    return a.claim.id, a.verdict, a.why, a.split, a.primary, a.others, found


def _readings(cells: list[ResultCell], out: Path) -> dict:
    """Every figure readout.py gives for CELLS, and the report section, its figures' data, the
    summary and every claim's answers built on them."""
    study = get_study("roofline")
    groups = group_repeats(cells)
    drawn: list = []
    with collecting(lambda where, name, draw, data: drawn.append((name, data))):
        section = report.section(cells, out)
    sp = report.speedups(groups)
    return {
        "cells": [_per_cell(c) for c in cells],
        "groups": [(readout.perf(g), readout.sweep(g), readout.pooled_ips(g, readout.TRAIN)) for g in groups],
        "intensities": readout.intensities(cells),
        "tables": (
            report.perf_table(groups),
            report.gap_table(groups),
            report.sweep_table(groups),
            report.complexity_table(groups),
            report.speedup_table(sp),
            report.speedup_sides(sp),
            report.roof_lines(cells),
        ),
        "section": section,
        "figures": drawn,
        "summary": report.summary(cells),
        "answers": [_answer(a) for claim in study.claims for a in A.judge(study, cells, claim)],
    }


def _shuffled(cells: list[ResultCell], data) -> list[ResultCell]:
    return [dataclasses.replace(c, rows=data.draw(st.permutations(c.rows))) for c in cells]


def test_the_reference_cells_hold_every_phase(tmp_path):
    """The cells the permutations use have what each figure reads: passes through both pipelines,
    sweeps of several batches with their end, and answers with a value."""
    for where in (CPU, GPU):
        cells = _cells(where)
        phases = {r.get("phase") for c in cells for r in c.rows}
        assert set(readout.PHASES) <= phases
        assert any(len(readout.cell_rows(c, readout.SWEEP)) >= 4 for c in cells)
        figs = _readings(cells, tmp_path)
        assert figs["figures"] and figs["tables"][2] and any(found for *_, found in figs["answers"])


@FEW
@given(data=st.data())
def test_the_cpu_references_figures_do_not_follow_the_row_order(tmp_path_factory, data):
    cells = _cells(CPU)
    out = tmp_path_factory.mktemp("rl")
    assert _readings(_shuffled(cells, data), out) == _readings(cells, out)


@FEW
@given(data=st.data())
def test_the_gpu_references_figures_do_not_follow_the_row_order(tmp_path_factory, data):
    cells = _cells(GPU)
    out = tmp_path_factory.mktemp("rl")
    shuffled = _shuffled(cells, data)
    assert _readings(shuffled, out) == _readings(cells, out)
    for c in shuffled:  # each selection in its own order
        batches = [r["batch_size"] for r in readout.cell_rows(c, readout.SWEEP)]
        assert batches == sorted(batches)
        assert [r.get("phase") for r in readout.points(c.rows)] == sorted(
            (r.get("phase") for r in readout.points(c.rows)), key=readout.POINT_PHASES.index
        )


def test_a_sweep_reads_by_batch_not_by_place():
    """A sweep written out of order (or a batch written twice) reads the same gains, climb and
    first point as one written smallest batch first."""

    def point(b: int, ips: float, **kw) -> dict:
        return {"phase": "sweep", "status": "ok", "batch_size": b, "img_per_s": ips, "achieved_flop_per_s": ips * 1e9, **kw}

    rows = [point(32, 100.0), point(64, 180.0), point(128, 300.0)]
    backwards = [point(128, 300.0), {"phase": "sweep", "status": "error", "batch_size": 16}, point(64, 180.0), point(32, 100.0)]
    for rs in (rows, backwards):
        assert readout.sweep_gain(64, 32)(rs, "") == 1.8
        assert readout.sweep_climb(rs, "") == 3.0
        assert [r["batch_size"] for r in readout.phase_rows(rs, "sweep")] == [32, 64, 128]
    twice = [point(64, 200.0), *rows, point(64, 160.0)]  # one batch twice: its median, never the last written
    assert readout.sweep_gain(64, 32)(twice, "") == readout.sweep_gain(64, 32)(list(reversed(twice)), "") == 1.8


def test_a_rate_of_zero_and_a_row_not_ok_measure_nothing():
    rows = [
        {"phase": "train", "status": "ok", "backend": "torch-cpu", "batch_size": 128, "img_per_s": 0},
        {"phase": "train", "status": "ok", "backend": "torch-cpu", "batch_size": 128, "img_per_s": "50"},  # text
        {"phase": "train", "status": "error", "backend": "torch-cpu", "batch_size": 128, "img_per_s": 9.0},
        {"phase": "val", "status": "ok", "backend": "torch-cpu", "batch_size": 128, "img_per_s": 40.0},
    ]
    assert readout.train_ips(rows, "torch-cpu") is None and readout.val_ips(rows, "torch-cpu") == 40.0
    assert get_study("roofline").throughput(rows) == {}


# ---- no other module of the study reads these itself ---------------------------------------------
WRITERS = {"protocol.py", "trainer.py", "roofmath.py", "config.py", "seed.py"}  # they make the rows (or the seed's numbers)
READERS = {"report.py", "claims.py", "__init__.py"}
# what a row says of its configuration and identity, not what the cell measured
CONFIG = {
    "batch_size",
    "num_workers",
    "threads",
    "repeat",
    "schema",
    "seed",
    "channels_last",
    "dataset_real",
    "tf32_cudnn",
    "tf32_matmul",
    "roofs_from_cache",
    "image_size",
}


def _measured() -> set[str]:
    """The names the references' rows hold a measurement under: every numeric field (and the
    counts', roofs' and sweep's own words) that is no configuration."""
    cells = _cells(CPU) + _cells(GPU)
    numeric = {k for c in cells for r in c.rows for k, v in r.items() if isinstance(v, (int, float))}
    words = {readout.FLOPS_WHY, readout.STOP, readout.STOP_REASON, readout.STOP_BATCH}
    words |= {readout.ROOF_COMPUTE_NAME, readout.ROOF_BANDWIDTH_NAME, "roof_bound", "roof_bound_at_low_ai"}
    return (numeric | words) - CONFIG


def _modules() -> dict[str, ast.Module]:
    """The study's own modules (not its backends)."""
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(STUDY_DIR.glob("*.py"))}


def _reads_of(tree: ast.Module, keys: set[str]) -> dict[str, list[int]]:
    """KEYS used as a string other than as a key of a dict display (a row a writer builds, a side's
    facets), with their lines: r["img_per_s"], r.get("img_per_s"), median(rows, "epoch_s")..."""
    dict_keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    out: dict[str, list[int]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys and id(n) not in dict_keys:
            out.setdefault(n.value, []).append(n.lineno)
    return out


def test_measures_is_folded_into_the_readout():
    assert not (STUDY_DIR / "measures.py").exists()
    for path in [*ROOT.glob("bench/**/*.py"), *ROOT.glob("host/**/*.py"), *ROOT.glob("lab/**/*.py"), *ROOT.glob("tests/*.py")]:
        if path.resolve() == Path(__file__).resolve():
            continue
        assert "roofline.measures" not in path.read_text(), f"{path} still names bench.studies.roofline.measures"
    tree = _modules()["readout.py"]
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "bench.studies.roofline" not in mods, "readout.py imports its own package's __init__ (a cycle: get_study instead)"


def test_only_the_readout_reads_a_measurement_from_a_row():
    mods = _modules()
    assert READERS <= set(mods) - WRITERS - {"readout.py"}, sorted(mods)
    assert set(mods) - WRITERS - {"readout.py"} == READERS, "a new reader of the study's rows: list it in READERS"
    fields = _measured()
    named = _reads_of(mods["readout.py"], fields)
    assert {readout.IPS, readout.FLOP_S, readout.AI_LOW, readout.AI_HIGH, readout.ROOF_FRACTION, readout.PASS_S} <= set(named)
    bad = {name: got for name in sorted(READERS) if (got := _reads_of(mods[name], fields))}
    assert not bad, f"measured row fields read outside readout.py (go through bench.studies.roofline.readout): {bad}"


def test_the_readers_read_rows_through_the_readout():
    """The report, the claims and the Study hooks import no per-value accessor of rows
    (bench.core.tables' num/nums/real/quotient, bench.core.study's number/curve/medians/last/
    ok_rows/numbers_missing, bench.core.stats' ratio), and each imports the readout."""
    accessors = {"num", "nums", "real", "quotient", "number", "curve", "medians", "last", "ok_rows", "numbers_missing", "ratio"}
    mods = _modules()
    for name in sorted(READERS):
        tree = mods[name]
        imported = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("bench.core")
            for a in n.names
        }
        assert not imported & accessors, f"{name} imports {sorted(imported & accessors)}: read rows through readout.py"
        calls = {
            n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
            if n.func.value.id in ("stats", "statistics")
        }
        assert not calls & {"ratio", "median", "summarize"}, f"{name} computes {sorted(calls)} itself: readout.py's"
        uses = any(
            isinstance(n, ast.ImportFrom)
            and (
                n.module == "bench.studies.roofline.readout"
                or (n.module == "bench.studies.roofline" and any(a.name == "readout" for a in n.names))
            )
            for n in ast.walk(tree)
        )
        assert uses, f"{name} does not import bench.studies.roofline.readout"


# ---- a roof measured under load (the container smoke's 1.166 while tests ran beside it, 2026-11-29) --
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=100, deadline=None)
@given(pts=st.lists(st.tuples(st.floats(0.05, 3.0), st.sampled_from([True, False, None])), min_size=1, max_size=8))
def test_a_point_above_a_roof_measured_under_load_is_named_not_failed(pts):
    """verify holds every point to a roof measured on a quiet machine; a point above a roof measured
    while other work loaded the machine (a low roof) is named beside the cell, never its failure."""
    study = get_study("roofline")
    rows = [
        {"phase": "train", "status": "ok", "batch_size": 8 * (i + 1), "roof_fraction": f}
        | ({} if busy is None else {"roofs_measured_busy": busy})
        for i, (f, busy) in enumerate(pts)
    ]
    [(name, broken), *_] = study.invariants(rows)
    assert name == "roof_fraction <= 1"
    quiet_above = [f for f, busy in pts if f > 1.0 and busy is not True]
    busy_above = [f for f, busy in pts if f > 1.0 and busy is True]
    assert bool(broken) == bool(quiet_above)
    _bad, info = study.equivalence(rows)
    assert any("of a roof measured under load: not held to it" in x for x in info) == bool(busy_above)
