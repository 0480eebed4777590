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

Every per-repeat figure is readout.py's (the one place the rows become numbers); a claim here
names which one and how it is judged.

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

from bench.core import answers
from bench.core.claims import Claim, Level, Measured, Metric, Needs, Ratio, above, below, between, quality
from bench.core.study import free_work
from bench.studies.mlp_scratch import readout as R
from bench.studies.mlp_scratch.config import MlpConfig

MEM_TOL, SIGNIFICANT, SIMILAR_PTS = 0.25, 2.0, 1.0
WORK = free_work(MlpConfig)  # its work params (config.py marks the measured amounts): a Level's default `free`
CP = {"backend": "cupy"}
NP = {"backend": "numpy", "cell_platform": "cuda"}  # NumPy's runs inside the GPU cell
GPU_CELL = "a GPU cell: NumPy and CuPy side by side (--platform cuda)"
GPU = Needs(what=GPU_CELL)
MNIST = Needs(real_data=True, what=GPU_CELL)  # the work is full-batch descent over MNIST's 59,000 samples


# ---- per-repeat figures (readout.py), against NumPy's runs in the same cell -------------------------
def matmul_lead(rows: list[dict], part: str) -> float | None:
    """The matmul's speedup over NumPy (the same cell's op run) over the largest of Table 4's other
    ops' speedups (readout.matmul_lead): above 1, the matmul gains most."""
    return R.matmul_lead(rows, part, NP["backend"])


@quality
def curve_gap_pts(rows: list[dict], part: str) -> float | None:
    """The largest |accuracy - NumPy's| (training or validation, percentage points) over the
    recorded iterations both curves share (readout.curve_gap_pts)."""
    return R.curve_gap_pts(rows, part, NP["backend"])


# ---- Table 5's rows: NumPy's column and CuPy's, counts decided by value -------------------------
def both_columns(key: str) -> Measured:
    """A row of Table 5 as the seed prints it, NumPy's column and CuPy's, one answer per dtype; each
    column is a count (array bytes: its value decides)."""
    return answers.conditions(
        ("NumPy", Level(NP, R.memory_metric(key), "MB"), None),
        ("CuPy", Level(CP, R.memory_metric(key), "MB"), None),
        per_workload=True,
        exact=True,
    )


def _faster(cid: str, text: str, where: str, metric: Metric | None, seed: tuple[float, float], **kw) -> Claim:
    """Table 3 or 4's row: CuPy faster than NumPy (above 1x); the seed's factor beside ours."""
    return Claim(
        cid,
        text,
        where,
        Ratio(CP, NP, metric, free=WORK, across="run"),
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
    _faster("t3-per-iter", "CuPy over NumPy: time per iteration", "Table 3", R.rate(R.PER_ITER), (84.6, 30.2)),
    _faster("t3-forward", "CuPy over NumPy: forward pass", "Table 3", R.rate(R.FORWARD), (36.7, 11.9)),
    _faster(
        "t3-backward",
        "CuPy over NumPy: backward pass",
        "Table 3",
        R.rate(R.BACKWARD),
        (47.9, 18.3),
    ),
    _faster(
        "t4-matmul",
        "CuPy over NumPy: matrix multiplication",
        "Table 4",
        R.op_rate("matmul"),
        (42.3, 6.7),
    ),
    _faster("t4-relu", "CuPy over NumPy: ReLU", "Table 4", R.op_rate("relu"), (3.1, 1.8)),
    _faster("t4-softmax", "CuPy over NumPy: softmax", "Table 4", R.op_rate("softmax"), (5.6, 2.9)),
    _faster(
        "t4-gradient",
        "CuPy over NumPy: gradient computation",
        "Table 4",
        R.op_rate("gradient"),
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
        R.PARAMS,
        7.9,
        needs=GPU,
    ),
    _table5(
        "t5-input",
        "Table 5: input data",
        R.INPUT,
        47.1,
        needs=MNIST,
        comparable="the seed's 47.1 MB is 60,000 x 784 uint8 pixels, not the float arrays it trained on (ours)",
    ),
    _table5(
        "t5-activations",
        "Table 5: intermediate activations",
        R.ACTIVATIONS,
        26.3,
        needs=MNIST,
    ),
    _table5(
        "t5-gradients",
        "Table 5: gradient storage",
        R.GRADIENTS,
        34.2,
        needs=MNIST,
    ),
    Claim(
        "t5-overhead",
        "The GPU has significantly higher framework overhead (CUDA runtime, allocation)",
        "Table 5, Sec. 8.4",
        Ratio(CP, NP, R.memory_metric(R.OVERHEAD), free=WORK, across="run"),
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
        Ratio(CP, NP, R.memory_metric(R.MEMORY_TOTAL), free=WORK, across="run"),
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
        Ratio({"backend": "cupy-tuned"}, CP, free=WORK, across="run"),
        headline=True,
        kit=True,
    ),
)
