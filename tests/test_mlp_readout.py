"""mlp-scratch's readout (bench/studies/mlp_scratch/readout.py, issue 58 item 1): the one place the
study's rows become numbers.

- every figure the report, the summary, the claims and the Study hooks read is a function of a
  cell's ok rows in their own order (plain_run, iteration, the op's place), so a permutation of a
  real cell's rows (Hypothesis; the CPU reference, and the H100 reference's GPU cell where it is
  committed: its speedups, ops and curve gaps) moves none of them, nor a line of the tables;
- the report, the claims and the package's Study hooks read no measured row field themselves: the
  names protocol.py and runner.py write a measurement under appear, among the study's own
  modules, only in readout.py and in the writers (a reader may not go back to `r["total_s"]`), and
  the readers import no per-value accessor (num, nums, number...) to read rows with.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from bench.core.registry import get_study
from bench.core.resultset import ResultCell, group_repeats, load_cells
from bench.studies.mlp_scratch import claims, net, protocol, readout, report, runner

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "bench" / "studies" / "mlp_scratch"
REFS = ROOT / "results" / "reference"
CPU = REFS / "cpu-2core-epyc" / "mlp-scratch"
GPU = REFS / "H100-80GB-HBM3" / "mlp-scratch"
FEW = settings(max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
NP = "numpy"

_GROUPS: dict[str, list[ResultCell]] = {}


def _group(where: Path, pattern: str) -> list[ResultCell]:
    """The repeats of one committed configuration (cells under WHERE whose dir matches PATTERN)."""
    key = f"{where}/{pattern}"
    if key not in _GROUPS:
        dirs = sorted(where.glob(pattern))
        if not dirs:
            pytest.skip(f"no committed mlp-scratch cell {pattern} under {where}")
        [group] = group_repeats([c for c in load_cells(dirs) if c.status == "ok"])
        _GROUPS[key] = group
    return _GROUPS[key]


def _cpu() -> list[ResultCell]:
    return _group(CPU, "numpy_float32-*")


def _gpu() -> list[ResultCell]:
    return _group(GPU, "numpy+cupy+cupy-tuned_float32-*")


def _per_cell(c: ResultCell, part: str) -> dict:
    """A repeat's figures of PART, as the claims' metrics and the Study hooks read them."""
    study = get_study("mlp-scratch")
    rs = c.rows
    return {
        "rates": [readout.rate(k)(rs, part) for k in readout.STEP_TIMES],
        "op rates": [readout.op_rate(op)(rs, part) for op in readout.OPS],
        "matmul lead": claims.matmul_lead(rs, part),
        "curve gap": claims.curve_gap_pts(rs, part),
        "memory": [readout.memory_metric(k)(rs, part) for k in readout.MEMORY_LABELS]
        + [readout.memory_mb(rs, part, readout.MEMORY_TOTAL)],
        "throughput": study.throughput(rs),
        "samples": study.samples_per_unit(rs, part),
        "accuracy": study.accuracy(rs, part),
        "loss curve": study.loss_curve(rs, part),
        "agrees": readout.curve_agrees(rs, part),
        "out of order": sorted(readout.out_of_order(rs)),
        "progress": sorted(readout.progress(rs)),
    }


def _readings(group: list[ResultCell]) -> dict:
    """Every figure readout.py gives for GROUP, and the report's lines and summary built on them."""
    out: dict = {"variants": [readout.variants(c) for c in group], "ops": readout.op_names(group), "blas": readout.blas(group)}
    for v in readout.variants(group[0]):
        out[v] = {
            "per repeat": [readout.per_repeat(group, v, k) for k in (*readout.TOTALS, *readout.STEP_TIMES)],
            "pooled": [readout.pooled(group, v, k) for k in (*readout.STEP_TIMES, readout.TRAIN_FINAL, readout.VAL_FINAL)],
            "speedups": [readout.speedup(group, v, k, NP) for k in readout.TOTALS],
            "pooled speedups": [readout.pooled_speedup(group, v, k, NP) for k in readout.STEP_TIMES],
            "summary": readout.summary(group, v, NP),
            "ops": [
                (readout.op_per_repeat(group, v, op), readout.op_median(group, v, op), readout.op_speedup(group, v, op, NP))
                for op in readout.OPS
            ],
            "curves": [readout.curve(group, v, k) for k in readout.ACCURACIES],
            "cells": [_per_cell(c, v) for c in group],
        }
    out["memory"] = [readout.memory(c) for c in group]
    out["report"] = [report.table3(group), report.table4(group), *(report.table5(c) for c in group), report.summary(group)]
    return out


def _shuffled(group: list[ResultCell], data) -> list[ResultCell]:
    return [dataclasses.replace(c, rows=data.draw(st.permutations(c.rows))) for c in group]


def test_the_reference_cells_hold_every_phase():
    """The cells the permutations use have what each figure reads: several plain runs per repeat,
    an op run, a memory row and a curve (the GPU cell: three parts, so speedups and gaps)."""
    for group in (_cpu(), *([_gpu()] if GPU.is_dir() else [])):
        assert len(group) >= 2
        for c in group:
            phases = [r.get("phase") for r in c.rows]
            assert phases.count("plain") >= 2 * len(readout.variants(c)) and {"op", "memory", "convergence"} <= set(phases)
        figs = _readings(group)
        assert all(figs[v]["summary"] is not None for v in figs["variants"][0])


@FEW
@given(st.data())
def test_the_cpu_references_figures_do_not_follow_the_row_order(data):
    group = _cpu()
    assert _readings(_shuffled(group, data)) == _readings(group)


@FEW
@given(st.data())
def test_the_gpu_references_figures_do_not_follow_the_row_order(data):
    if not GPU.is_dir():
        pytest.skip(f"no committed GPU reference under {GPU}")
    group = _gpu()
    shuffled = _shuffled(group, data)
    got = _readings(shuffled)
    assert got == _readings(group)
    assert got["variants"][0] == ["numpy", "cupy", "cupy-tuned"]  # the cell's order, not the rows'
    assert got["cupy"]["speedups"][0] is not None and got["cupy"]["cells"][0]["curve gap"] is not None
    for c in shuffled:  # each selection in its own order
        assert [r["plain_run"] for r in readout.rows(c.rows, NP, "plain")] == sorted(
            r["plain_run"] for r in readout.rows(c.rows, NP, "plain")
        )
        its = [r["iteration"] for r in readout.rows(c.rows, "cupy", "convergence")]
        assert its == sorted(its)
        assert [r["op"] for r in readout.rows(c.rows, NP, "op")] == list(net.OPS)


def test_a_time_of_zero_and_a_row_not_ok_measure_nothing():
    rows = [
        {"phase": "plain", "status": "ok", "backend": "numpy", "plain_run": 0, "total_s": 2.0},
        {"phase": "plain", "status": "ok", "backend": "numpy", "plain_run": 1, "total_s": 0},
        {"phase": "plain", "status": "ok", "backend": "numpy", "plain_run": 2, "total_s": "4"},  # text: not a number
        {"phase": "plain", "status": "error", "backend": "numpy", "plain_run": 3, "total_s": 9.0},
        {"phase": "plain", "status": "ok", "backend": "cupy", "plain_run": 0, "total_s": 1.0},
    ]
    assert readout.plain_median(rows, "numpy", readout.TOTAL) == 2.0
    assert readout.rate(readout.TOTAL)(rows, "cupy") == 1.0
    assert readout.plain_median(rows, "cupy-tuned", readout.TOTAL) is None


# ---- the op and memory names the readout knows are the writers' ---------------------------------
def test_the_readouts_names_are_the_writers():
    assert readout.OPS[: len(net.OPS)] == net.OPS  # the op order: the net's, then the tuned variant's
    assert tuple(readout.MEMORY_LABELS) == runner.MEMORY_PARTS
    assert set(readout.MEMORY_ALSO) <= set(runner.MEMORY_KEYS) and readout.MEMORY_TOTAL in runner.MEMORY_KEYS
    assert set(readout.TOTALS) | set(readout.STEP_TIMES) | {readout.TRAIN_FINAL, readout.VAL_FINAL} <= set(protocol.PLAIN_KEYS)
    assert {readout.STEP, readout.LOSS, *readout.ACCURACIES} == set(runner.record(0, 0.5, 0.5, 1.0))


# ---- no other module of the study reads these itself ---------------------------------------------
WRITERS = {"protocol.py", "runner.py", "net.py", "tuned_cupy.py", "memory.py", "config.py"}  # they make the rows


def _measured() -> set[str]:
    """The names a cell's rows hold a measurement under: the plain run's, the memory row's, a
    convergence point's, the op row's (protocol.py and runner.py write them)."""
    return (
        set(protocol.PLAIN_KEYS)
        | set(runner.MEMORY_KEYS)
        | set(runner.record(0, 0.5, 0.5, 1.0))
        | {"op_ms_per_iter", "op_ms_total", "op_calls", "plain_run", "agrees_with_numpy"}
    )


def _modules() -> dict[str, ast.Module]:
    """The study's own modules (not its backends)."""
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(STUDY_DIR.glob("*.py"))}


def _reads_of(tree: ast.Module, keys: set[str]) -> dict[str, list[int]]:
    """KEYS used as a string other than as a key of a dict display (a row a writer builds), with
    their lines: r["total_s"], r.get("total_s"), nums(rs, "total_s"), ("total_s", "loop_wall_s")..."""
    dict_keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    out: dict[str, list[int]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys and id(n) not in dict_keys:
            out.setdefault(n.value, []).append(n.lineno)
    return out


def test_only_the_readout_reads_a_measurement_from_a_row():
    mods = _modules()
    readers = set(mods) - WRITERS - {"readout.py"}
    assert {"report.py", "claims.py", "__init__.py"} <= readers
    fields = _measured()
    named = _reads_of(mods["readout.py"], fields)
    assert {readout.TOTAL, readout.PER_ITER, readout.VAL_FINAL, readout.STEP, readout.OP_MS, readout.MEMORY_TOTAL} <= set(named)
    bad = {name: got for name in sorted(readers) if (got := _reads_of(mods[name], fields))}
    assert not bad, f"measured row fields read outside readout.py (go through bench.studies.mlp_scratch.readout): {bad}"


def test_the_readers_read_rows_through_the_readout():
    """The report, the claims and the Study hooks import no per-value accessor of rows
    (bench.core.tables' num/nums/real/quotient, bench.core.study's number/curve/medians/last) and
    each imports the readout."""
    accessors = {"num", "nums", "real", "quotient", "number", "curve", "medians", "last"}
    mods = _modules()
    for name in ("report.py", "claims.py", "__init__.py"):
        tree = mods[name]
        imported = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("bench.core")
            for a in n.names
        }
        assert not imported & accessors, f"{name} imports {sorted(imported & accessors)}: read rows through readout.py"
        uses = any(
            isinstance(n, ast.ImportFrom)
            and n.module == "bench.studies.mlp_scratch"
            and any(a.name == "readout" for a in n.names)
            for n in ast.walk(tree)
        )
        assert uses, f"{name} does not import bench.studies.mlp_scratch.readout"
