"""mlp-scratch's config: defaults as data, units in the comments; the profiles (a platform's
cell and its backends come from the registry: MlpScratch.platform_backend)."""

from __future__ import annotations

from dataclasses import dataclass, field

PROFILE_PARAMS = {
    "smoke": {"iterations": 100, "plain_runs": 2, "breakdown_iterations": 20},  # wiring check
    "default": {},  # the seed's 500 iterations
    "full": {},
    # the seed's 500 iterations on both platforms (the CuPy cell times NumPy beside it), one timed run a
    # cell: the answer's repeats are its fresh-process rounds (a float64 NumPy run is ~20 s on the H200
    # host's 16 cores, so three in-process runs cost a round about a minute more)
    "answer": {"plain_runs": 1},
}
# The dtypes each profile runs, one labelled cell each. float64 is NumPy's default, so the
# seed's `np.random.rand(...) - 0.5` weights and `/ 255.` pixels most likely trained in
# float64; float32 is what a GPU framework would pick. Both on cpu and cuda (CuPy's float64
# is fast on data-centre GPUs such as the H100). Cost, measured on a 2-core AMD EPYC VM
# (OpenBLAS, 2 threads), real MNIST: float32 43-60 ms per iteration, float64 66-74 ms, so a
# repeat of the float64 cell (3 x 500 timed iterations + the op, memory and check runs) takes
# about 2 minutes beside the float32 cell's 1.5; on the embedded default (the README's quick
# start) the whole default matrix, both cells x 3 repeats, takes about 25 s.
PROFILE_DTYPES = {
    "smoke": ("float32",),
    "default": ("float32", "float64"),
    "full": ("float32", "float64"),
    "answer": ("float32", "float64"),
}


@dataclass(frozen=True)
class MlpConfig:
    iterations: int = 500  # full-batch gradient-descent steps
    lr: float = 0.1  # learning rate
    dtype: str = "float32"  # float32 | float64 (the matrix makes one cell of each, PROFILE_DTYPES)
    # timed plain runs per variant, interleaved in the cell's process
    plain_runs: int = field(default=3, metadata={"work": "amount"})
    breakdown_iterations: int = field(default=100, metadata={"work": "amount"})  # iterations of the synced op-breakdown run
    check_steps: int = field(default=5, metadata={"work": "amount"})  # steps compared with NumPy before timing
    threads: int = 0  # NumPy's BLAS threads (threadpoolctl limit around every run); 0 = every core the process may use
    dataset: str = "auto"  # one of bench.data.DIGIT_DATASETS (the matrix resolves auto)
    dataset_sha256: str = ""  # checksum of the data the cell must see (filled by the matrix)


# What a cell costs, for the run's ETA (Study.estimate), on the 2-core AMD EPYC: one training
# iteration of a backend takes FIXED_ITER_S + PER_SAMPLE_ITER_S[dtype] x the training samples
# (results/reference/cpu-2core-epyc: NumPy 43-60 ms per float32 iteration and 66-74 ms per
# float64 one on 59,000 samples); the memory step spawns a process per backend (SPAWN_S); the
# cell process starts and loads the data in OPEN_S. A GPU backend's iteration: GPU_ITER_S.
PER_SAMPLE_ITER_S = {"float32": 0.85e-6, "float64": 1.2e-6}
FIXED_ITER_S = 0.15e-3
GPU_ITER_S = 0.3e-3
SPAWN_S = 2.5
OPEN_S = 2.0
TRAIN_SAMPLES = {"mnist": 59_000, "digits": 1_197}  # after the validation split (protocol.load_xy)
