"""Seed 001's claims, as data (bench.core.claims): its Tables 3-5, Fig. 3 and what Sec. 8 says of
them, and the kit's tuned CuPy beside them. The answer engine (bench.core.answers) judges them;
report.py's tables show numbers only.

Sides: CuPy is the `cupy` runs (the seed's code on the GPU), NumPy the `numpy` runs inside the same
GPU cell (one process, interleaved with CuPy's: Table 3's speedups are ratios from one session, so
every ratio pairs within one run). Per repeat a figure is the median over the cell's plain runs
(times), or its op row (Table 4) or memory row (Table 5).

dtype: the seed names none. Every answer is per dtype (the matrix runs float32 and float64, one
cell each), and the seed's figures are compared with both; its own is most likely float64 (NumPy's
default for its `np.random.rand` weights and `/ 255.` pixels), so the float64 answer is the seed's
setting and the float32 one what a GPU framework would pick.

Hardware: the seed names none, so no absolute time is a claim; each row of Tables 3 and 4 is the
claim that CuPy is faster (the factor is shown beside ours, never judged). The work size is the
data: full-batch descent over MNIST's 59,000 samples, so on the embedded digits (1,197) a timing or
array size says "needs real data".

Table 5 against arithmetic: each row is read as the seed prints it, NumPy's column and CuPy's in
one answer per dtype. The parameters, activations and gradients are the kit's array bytes (counts,
decided by value), which the seed's figures fail: 7,960 parameters are 0.03 MB at float32 and 0.06
MB at float64, 125-250x below its 7.9 MB, and a 784-10-10 net's activations (Z1, A1, Z2, A2: 4
arrays of 10 x 59,000) and gradients (the one-hot Y, dZ2, dZ1 and the parameter gradients) are
below its 26.3 and 34.2 MB at either dtype. Its input, 47.1 MB, is exactly 60,000 x 784 bytes: the
uint8 pixels, not the float arrays it trained on (a quantity the kit does not hold), so that row is
"not comparable". Its framework overhead and totals are judged as it words them, CuPy over NumPy.

Table 3's total is the 500 iterations' timed steps (total_s) and its backward includes the update,
as the seed's iteration does. Table 4's ops come from a run synced around each op: matmul is every
matmul, forward and backward; the gradient op is the backward's elementwise work (one-hot, dZ,
sums), the update an op of its own; the seed does not say how it split them.

Thresholds, each the reading of a word:
    MEM_TOL = 0.25      a memory figure "7.9 MB": within 25 %
    SIGNIFICANT = 2.0   "significantly higher framework overhead": CuPy's at least 2x NumPy's
    SIMILAR_PTS = 1.0   "similar convergence patterns": CuPy's training and validation accuracy
                        within 1 point of NumPy's at every recorded iteration
"""

from __future__ import annotations

import statistics

from bench.core import answers
from bench.core.claims import WORK_AMOUNT, Claim, Level, Measured, Metric, Needs, Ratio, above, below, between, quality
from bench.core.study import number

MEM_TOL, SIGNIFICANT, SIMILAR_PTS = 0.25, 2.0, 1.0
CP = {"backend": "cupy"}
NP = {"backend": "numpy", "cell_platform": "cuda"}  # NumPy's runs inside the GPU cell
GPU_CELL = "a GPU cell: NumPy and CuPy side by side (--platform cuda)"
GPU = Needs(what=GPU_CELL)
MNIST = Needs(real_data=True, what=GPU_CELL)  # the work is full-batch descent over MNIST's 59,000 samples
OTHER_OPS = ("relu", "softmax", "gradient")  # Table 4's other rows


# ---- per-repeat figures, from a cell's rows --------------------------------------------------
def _of(rows: list[dict], part: str, phase: str) -> list[dict]:
    return [r for r in rows if r.get("phase") == phase and r.get("status") == "ok" and str(r.get("backend")) == part]


def per_ms(key: str) -> Metric:
    """1 / the median of KEY (ms) over the repeat's plain runs: larger is faster."""

    def metric(rows: list[dict], part: str) -> float | None:
        vals = [v for r in _of(rows, part, "plain") if (v := number(r.get(key))) is not None and v > 0]
        return 1 / statistics.median(vals) if vals else None

    return metric


def _op_ms(rows: list[dict], part: str, op: str) -> float | None:
    got = [v for r in _of(rows, part, "op") if r.get("op") == op and (v := number(r.get("op_ms_per_iter"))) is not None and v > 0]
    return got[0] if got else None


def op_per_ms(op: str) -> Metric:
    """1 / OP's ms per iteration in the synced op run: larger is faster."""

    def metric(rows: list[dict], part: str) -> float | None:
        ms = _op_ms(rows, part, op)
        return 1 / ms if ms else None

    return metric


def matmul_lead(rows: list[dict], part: str) -> float | None:
    """The matmul's speedup over NumPy (the same cell's op run) over the largest of Table 4's other
    ops' speedups: above 1, the matmul gains most."""

    def gain(op: str) -> float | None:
        a, b = _op_ms(rows, "numpy", op), _op_ms(rows, part, op)
        return a / b if a and b else None

    mm, gains = gain("matmul"), [gain(op) for op in OTHER_OPS]
    others = [g for g in gains if g is not None]
    return mm / max(others) if mm and len(others) == len(gains) else None


def memory_mb(key: str) -> Metric:
    """KEY of the repeat's memory row, MB (10^6 bytes). The overhead only from rows of its one
    definition (they have memory_total_bytes; older rows defined it per column)."""

    def metric(rows: list[dict], part: str) -> float | None:
        mem = [
            r for r in _of(rows, part, "memory") if key != "framework_overhead_bytes" or r.get("memory_total_bytes") is not None
        ]
        got = [v for r in mem if (v := number(r.get(key))) is not None]
        return got[0] / 1e6 if got else None

    return metric


@quality
def curve_gap_pts(rows: list[dict], part: str) -> float | None:
    """The largest |accuracy - NumPy's| (training or validation, percentage points) over the
    recorded iterations both curves share."""
    ref = {r.get("iteration"): r for r in _of(rows, "numpy", "convergence")}
    gaps = [
        100 * abs(a - b)
        for r in _of(rows, part, "convergence")
        if (o := ref.get(r.get("iteration"))) is not None
        for k in ("train_acc", "val_acc")
        if (a := number(r.get(k))) is not None and (b := number(o.get(k))) is not None
    ]
    return max(gaps) if gaps and part != "numpy" else None


# ---- Table 5's rows: NumPy's column and CuPy's, counts decided by value -------------------------
def both_columns(key: str) -> Measured:
    """A row of Table 5 as the seed prints it, NumPy's column and CuPy's, one answer per dtype; each
    column is a count (array bytes: its value decides)."""
    return answers.conditions(
        ("NumPy", Level(NP, memory_mb(key), "MB"), None),
        ("CuPy", Level(CP, memory_mb(key), "MB"), None),
        per_workload=True,
        exact=True,
    )


def _faster(cid: str, text: str, where: str, metric: Metric | None, seed: tuple[float, float], **kw) -> Claim:
    """Table 3 or 4's row: CuPy faster than NumPy (above 1x); the seed's factor beside ours."""
    return Claim(
        cid,
        text,
        where,
        Ratio(CP, NP, metric, free=WORK_AMOUNT, across="run"),
        seed=seed[0] / seed[1],
        seed_text=f"{seed[0]:g} / {seed[1]:g} " + ("s" if cid == "cupy-over-numpy" else "ms"),
        needs=MNIST,
        **kw,
    )


def _table5(cid: str, text: str, key: str, mb: float, **kw) -> Claim:
    band = between(mb * (1 - MEM_TOL), mb * (1 + MEM_TOL), f"within {MEM_TOL:.0%} of {mb:g} MB")
    return Claim(cid, text, "Table 5, Sec. 8.4", both_columns(key), band, mb, "CPU = GPU", **kw)


CLAIMS: tuple[Claim, ...] = (
    _faster(
        "cupy-over-numpy",
        "GPU (CuPy) over CPU (NumPy)",
        "Table 3, Sec. 8.5",
        None,
        (42.3, 15.1),
        headline=True,
    ),
    _faster("t3-per-iter", "CuPy over NumPy: time per iteration", "Table 3", per_ms("per_iter_median_ms"), (84.6, 30.2)),
    _faster("t3-forward", "CuPy over NumPy: forward pass", "Table 3", per_ms("forward_median_ms"), (36.7, 11.9)),
    _faster(
        "t3-backward",
        "CuPy over NumPy: backward pass",
        "Table 3",
        per_ms("backward_median_ms"),
        (47.9, 18.3),
    ),
    _faster(
        "t4-matmul",
        "CuPy over NumPy: matrix multiplication",
        "Table 4",
        op_per_ms("matmul"),
        (42.3, 6.7),
    ),
    _faster("t4-relu", "CuPy over NumPy: ReLU", "Table 4", op_per_ms("relu"), (3.1, 1.8)),
    _faster("t4-softmax", "CuPy over NumPy: softmax", "Table 4", op_per_ms("softmax"), (5.6, 2.9)),
    _faster(
        "t4-gradient",
        "CuPy over NumPy: gradient computation",
        "Table 4",
        op_per_ms("gradient"),
        (33.6, 18.8),
        note="ours: the backward's elementwise work (module docstring)",
    ),
    Claim(
        "matmul-gains-most",
        "Matrix multiplication gains most from the GPU, the other operations less",
        "Sec. 8.3, 8.5",
        Level(CP, matmul_lead, "x"),
        above(1.0, "the matmul's speedup above every other op's"),
        6.3 / 1.9,
        "6.3x against at most 1.9x",
        needs=MNIST,
        note="ours: the matmul's speedup over the largest other op's",
    ),
    _table5(
        "t5-params",
        "Table 5: model parameters",
        "params_bytes",
        7.9,
        needs=GPU,
    ),
    _table5(
        "t5-input",
        "Table 5: input data",
        "input_bytes",
        47.1,
        needs=MNIST,
        comparable="the seed's 47.1 MB is 60,000 x 784 uint8 pixels, not the float arrays it trained on (ours)",
    ),
    _table5(
        "t5-activations",
        "Table 5: intermediate activations",
        "activations_bytes",
        26.3,
        needs=MNIST,
    ),
    _table5(
        "t5-gradients",
        "Table 5: gradient storage",
        "gradients_bytes",
        34.2,
        needs=MNIST,
    ),
    Claim(
        "t5-overhead",
        "The GPU has significantly higher framework overhead (CUDA runtime, allocation)",
        "Table 5, Sec. 8.4",
        Ratio(CP, NP, memory_mb("framework_overhead_bytes"), free=WORK_AMOUNT, across="run"),
        above(SIGNIFICANT, f"CuPy's at least {SIGNIFICANT:g}x NumPy's"),
        158.6 / 12.5,
        "158.6 / 12.5 MB",
        needs=MNIST,
        note="one definition for both columns (runner.OVERHEAD_DEFINITION)",
    ),
    Claim(
        "t5-total",
        "GPU implementations require more memory in all",
        "Table 5, Sec. 8.5",
        Ratio(CP, NP, memory_mb("memory_total_bytes"), free=WORK_AMOUNT, across="run"),
        above(1.0, "CuPy's total above NumPy's"),
        274.1 / 128.0,
        "274.1 / 128.0 MB",
        needs=MNIST,
    ),
    Claim(
        "fig3-convergence",
        "CuPy and NumPy converge alike: similar accuracy over the same iterations",
        "Fig. 3, Sec. 8.2, 8.5",
        Level(CP, curve_gap_pts, "points"),
        below(SIMILAR_PTS, f"within {SIMILAR_PTS:g} point at every recorded iteration"),
        seed_text="curves alike",
        needs=GPU,
        note="the largest gap in training or validation accuracy",
    ),
    # the kit's own question beside the seed's
    Claim(
        "tuned-over-cupy",
        "CuPy tuned (fused, graphed) over CuPy as written",
        "the kit",
        Ratio({"backend": "cupy-tuned"}, CP, free=WORK_AMOUNT, across="run"),
        headline=True,
        kit=True,
    ),
)
