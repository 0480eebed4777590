"""mlp-scratch (seed 001): its claims (bench/studies/mlp_scratch/claims.py) judged by the answer
engine, on the committed H100 references and on cells built here: one answer per dtype, every
ratio paired within one run, Table 5's array sizes decided by value (the seed's parameters, 7.9
MB, fail by arithmetic; its input is the uint8 pixels: not comparable), the matmul's lead and the
convergence read from one cell's NumPy and CuPy rows. No CuPy needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import get_study
from bench.core.resultset import ResultCell, collect

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
STUDY = get_study("mlp-scratch")
OPS = {"matmul": (42.0, 7.0), "relu": (3.0, 1.5), "softmax": (5.0, 2.5), "gradient": (30.0, 15.0)}  # NumPy, CuPy ms
MEMORY = {  # bytes, one definition (memory_total_bytes present)
    "numpy": {"params_bytes": 31_840, "input_bytes": 188_160_000, "framework_overhead_bytes": 15_000_000},
    "cupy": {"params_bytes": 31_840, "input_bytes": 188_160_000, "framework_overhead_bytes": 400_000_000},
}


def _judge(cells: list[ResultCell], cid: str) -> list[A.Answer]:
    return A.judge(STUDY, cells, next(c for c in STUDY.claims if c.id == cid))


def _cells(tmp: Path, *, dtype: str = "float32", repeats: int = 3, real: bool = True, ops: dict = OPS, memory: dict = MEMORY,
           gap_pts: float = 0.0, run: str = "run", parts: tuple[str, ...] = ("numpy", "cupy"), total: bool = True,
           ) -> list[ResultCell]:  # fmt: skip
    """A GPU cell per repeat of run RUN: NumPy and CuPy side by side (CuPy 5x faster), their op,
    memory (TOTAL: with memory_total_bytes, the one overhead definition) and convergence rows
    (CuPy's accuracy GAP_PTS points above NumPy's)."""
    out = []
    data = "mnist" if real else "digits"
    for rep in range(repeats):
        rows = []
        for v in parts:
            base = {"backend": v, "status": "ok", "dtype": dtype, "repeat": rep, "dataset": data, "dataset_real": real}
            k = (5.0 + 0.1 * rep) if v == "cupy" else 1.0
            rows.append({**base, "phase": "plain", "plain_run": 0, "iterations": 500, "total_s": 40.0 / k,
                         "per_iter_median_ms": 80.0 / k, "forward_median_ms": 35.0 / k, "backward_median_ms": 45.0 / k})  # fmt: skip
            col = 0 if v == "numpy" else 1
            rows += [{**base, "phase": "op", "op": op, "op_ms_per_iter": ms[col]} for op, ms in ops.items()]
            mem = dict(memory[v]) | ({"memory_total_bytes": sum(memory[v].values())} if total else {})
            rows.append({**base, "phase": "memory", **mem})
            lift = gap_pts / 100 if v == "cupy" else 0.0
            rows += [{**base, "phase": "convergence", "iteration": it, "train_acc": 0.1 + 0.01 * it + lift,
                      "val_acc": 0.1 + 0.01 * it, "loss": 1.0} for it in range(0, 51, 10)]  # fmt: skip
        spec = {"study": "mlp-scratch", "backend": "+".join(parts), "variant": "default", "repeat": rep,
                "params": {"dtype": dtype, "dataset": data}}  # fmt: skip
        out.append(ResultCell(tmp / run / "mlp-scratch" / f"{dtype}_{rep}", rows, spec=spec))
    return out


def test_the_references_answer_every_claim_per_dtype():
    cells = [c for c in collect([REF / "H100-80GB-HBM3", REF / "H100-80GB-HBM3-seed-setups"])[0] if c.study == "mlp-scratch"]
    got = {claim.id: A.judge(STUDY, cells, claim) for claim in STUDY.claims}
    assert len(got) == 17 and sum(not c.kit for c in STUDY.claims) == 16  # the catalogue's 16, and the kit's tuned CuPy
    for cid, found in got.items():
        assert all(a.verdict in C.VERDICTS for a in found), cid
    head = got["cupy-over-numpy"]
    assert [a.split for a in head] == [{"dtype": "float32"}, {"dtype": "float64"}] and all(a.verdict == C.HOLDS for a in head)
    assert all(f.pairing.startswith("same run") for a in head for f in a.findings)
    params = got["t5-params"]  # 7,960 parameters: 0.03 MB at float32, 0.06 at float64; the seed printed 7.9
    assert [a.split for a in params] == [{"dtype": "float32"}, {"dtype": "float64"}] and all(a.verdict == C.FAILS for a in params)
    assert [[(f.what, round(f.value.median, 4), f.exact) for f in a.findings] for a in params] == [
        [("NumPy", 0.0318, True), ("CuPy", 0.0318, True)],
        [("NumPy", 0.0637, True), ("CuPy", 0.0637, True)],
    ]
    assert all(a.verdict == C.NOT_COMPARABLE and "uint8" in a.why for a in got["t5-input"])
    assert all(a.verdict == C.HOLDS for a in got["fig3-convergence"] + got["matmul-gains-most"])


def test_a_table5_size_is_a_count_decided_by_value_and_a_time_needs_repeats(tmp_path):
    one = _cells(tmp_path / "a", repeats=1)
    [params] = _judge(one, "t5-params")
    assert params.verdict == C.FAILS and [f.value.n for f in params.findings] == [1, 1]  # 0.03 MB: far from 7.9
    seed_like = {v: {**MEMORY[v], "params_bytes": 8_000_000} for v in MEMORY}
    assert [a.verdict for a in _judge(_cells(tmp_path / "b", repeats=1, memory=seed_like), "t5-params")] == [C.HOLDS]
    cupy_off = {**seed_like, "cupy": {**seed_like["cupy"], "params_bytes": 31_840}}  # one column off: the row fails
    assert [a.verdict for a in _judge(_cells(tmp_path / "c", repeats=1, memory=cupy_off), "t5-params")] == [C.FAILS]
    [speed] = _judge(one, "cupy-over-numpy")
    assert speed.verdict == C.FEW  # a time needs an interval: one repeat gives none


def test_table3_and_4_rows_are_cupy_faster_with_the_seeds_factor_beside(tmp_path):
    cells = _cells(tmp_path)
    for cid in ("cupy-over-numpy", "t3-per-iter", "t3-forward", "t3-backward", "t4-matmul", "t4-gradient"):
        [a] = _judge(cells, cid)
        assert a.verdict == C.HOLDS and a.claim.seed is not None, cid
    [mm] = _judge(cells, "t4-matmul")
    assert mm.value is not None and mm.value.median == pytest.approx(6.0)
    slow = _cells(tmp_path / "slow", ops={**OPS, "relu": (1.0, 2.0)})  # CuPy's ReLU slower than NumPy's
    assert _judge(slow, "t4-relu")[0].verdict == C.FAILS


def test_the_matmul_gains_most_reads_one_cells_op_rows(tmp_path):
    [a] = _judge(_cells(tmp_path / "a"), "matmul-gains-most")  # 6x against at most 2x
    assert a.verdict == C.HOLDS and a.value is not None and a.value.median == pytest.approx(3.0)
    relu_first = {**OPS, "relu": (8.0, 1.0)}
    assert _judge(_cells(tmp_path / "b", ops=relu_first), "matmul-gains-most")[0].verdict == C.FAILS


def test_convergence_alike_within_a_point(tmp_path):
    assert _judge(_cells(tmp_path / "a", gap_pts=0.2), "fig3-convergence")[0].verdict == C.HOLDS
    [far] = _judge(_cells(tmp_path / "b", gap_pts=3.0), "fig3-convergence")
    assert far.verdict == C.FAILS and far.value is not None and far.value.median == pytest.approx(3.0)


def test_the_overhead_reads_only_rows_of_its_one_definition(tmp_path):
    [a] = _judge(_cells(tmp_path / "a"), "t5-overhead")  # 400 / 15 MB
    assert a.verdict == C.HOLDS and a.value is not None and a.value.median == pytest.approx(400 / 15)
    [old] = _judge(_cells(tmp_path / "b", total=False), "t5-overhead")  # written when each column had its own
    assert old.verdict == C.NOT_HERE and not old.findings


def test_ratios_pair_within_one_run_only(tmp_path):
    """Table 3's speedups are one session's: CuPy of one run never meets NumPy of another."""
    cupy = _cells(tmp_path, run="gpu-run", parts=("cupy",))
    numpy = _cells(tmp_path, run="cpu-run", parts=("numpy",))
    for c in cupy + numpy:
        c.spec["backend"] = "numpy+cupy"  # both GPU cells: only the run tells them apart
    [a] = _judge(cupy + numpy, "cupy-over-numpy")
    assert a.verdict == C.NOT_HERE and not a.findings


def test_the_embedded_digits_are_not_the_seeds_work(tmp_path):
    digits = _cells(tmp_path, real=False)
    [speed] = _judge(digits, "cupy-over-numpy")
    assert speed.verdict == C.NEEDS_REAL and speed.findings  # our figure beside the reason
    assert _judge(digits, "fig3-convergence")[0].verdict == C.HOLDS  # alike on any data


def test_the_claims_import_no_report_and_nothing_heavy():
    code = (
        "import sys, bench.studies.mlp_scratch.claims; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('cupy', 'torch', 'matplotlib') or m.endswith('.report')]; "
        "print(bad); raise SystemExit(bool(bad))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
