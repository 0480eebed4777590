"""mnist-cnn's config: defaults as data, units in the comments; and the per-platform matrix."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bench.core.cell import Cell

DATASETS = ("auto", "mnist", "digits")  # auto: MNIST when <data dir>/mnist exists, else the embedded digits


# a field marked {"work": ...} sets how much work a cell does (bench.core.study.work_params)
@dataclass(frozen=True)
class MnistCnnConfig:
    pipeline: str = "resident"  # seed (per-sample transforms via a DataLoader) | resident (normalised tensor, seeded slices)
    epochs: int = field(default=10, metadata={"work": "trained"})  # passes over the training set
    batch_size: int = 512  # samples per SGD step
    lr: float = 0.01  # SGD learning rate
    momentum: float = 0.9  # SGD momentum (torch form: v = m*v + g)
    threads: int = 0  # CPU threads for torch/numba; 0 = every core this process may use
    last_batch: str = "pad"  # pad (repeat samples from the start, as the seed) | drop
    dataset: str = "auto"  # auto | mnist | digits (resolved by the matrix to mnist or digits)
    dataset_sha256: str = ""  # checksum of the data the cell must see (filled by the matrix)
    # use the first N training samples (smoke runs); 0 = all
    limit_train: int = field(default=0, metadata={"work": "trained", "free": False})
    init: str = "kit"  # kit (torch's default U(+-1/sqrt(fan_in)) everywhere) | seed (seed 000: conv N(0,1)*0.1, dense He normal, zero biases)
    sgd: str = "torch"  # torch (v = m*v + g, g of the batch-mean loss) | seed (seed 000: v = m*v + (1-m)*G, G of the batch-summed loss; variant seed only)
    input_scale: str = "normalize"  # normalize ((x/255 - 0.1307)/0.3081) | div255 (x/255 only: seed 000's Numba input)


@dataclass(frozen=True)
class Settings(MnistCnnConfig):
    """The config plus the cell fields a trainer needs."""

    backend: str = "torch-cpu"
    variant: str = "default"
    seed: int = 0


def settings(cell: Cell) -> Settings:
    """The cell's settings; each repeat trains from its own seed (cell.seed + cell.repeat: the init and
    the batch order), so the spread of the repeats' accuracies is the seeds' and not zero."""
    keys = asdict(MnistCnnConfig()).keys()
    return Settings(
        **{k: v for k, v in cell.params.items() if k in keys},
        backend=cell.backend,
        variant=cell.variant,
        seed=cell.seed + cell.repeat,
    )


# platform -> (backend, pipeline, variant) of the default matrix; `full` adds FULL_EXTRA
PLATFORM_CELLS = {
    "cpu": [("torch-cpu", "seed", "default"), ("torch-cpu", "resident", "default"), ("numba-cpu", "resident", "default")],
    "cuda": [
        ("torch-cuda", "seed", "default"),
        ("torch-cuda", "resident", "default"),
        ("torch-cuda", "resident", "tuned"),
        ("numba-cuda", "resident", "default"),
    ],
    "mps": [("torch-mps", "seed", "default"), ("torch-mps", "resident", "default")],
}
FULL_EXTRA = {
    "cpu": [("numba-cpu", "resident", "seed")],
    "cuda": [
        ("torch-cuda", "resident", "graphs"),
        ("torch-cuda", "resident", "graphs+bf16"),
        ("numba-cuda", "resident", "graph"),
        ("numba-cuda", "resident", "seed"),
    ],
}
# seed 000's own Numba setups (variant "seed": dense-layer backprop only; numba-cuda does it on
# the CPU with the copies that implies) start from the seed's weights and input scaling and
# update with its optimizer form; the matrix writes these into the cell, so its spec records
# them (`--set init=kit` etc. override)
VARIANT_PARAMS = {("numba-cpu", "seed"): {"init": "seed", "input_scale": "div255", "sgd": "seed"}}
VARIANT_PARAMS[("numba-cuda", "seed")] = VARIANT_PARAMS[("numba-cpu", "seed")]
INITS = ("kit", "seed")
INPUT_SCALES = ("normalize", "div255")
SGD_FORMS = ("torch", "seed")
# what a variant trains (row key `trains`)
DENSE_ONLY_VARIANTS = {("numba-cpu", "seed"), ("numba-cuda", "seed")}


def trains(backend: str, variant: str) -> str:
    return "dense layers only" if (backend, variant) in DENSE_ONLY_VARIANTS else "all layers"


PROFILE_PARAMS = {
    "smoke": {"epochs": 2, "limit_train": 4096},  # wiring check: 16 SGD steps
    "default": {},  # the seed's 10 epochs, batch 512
    "full": {},  # default + extra GPU variants
    "answer": {},  # the seed's 10 epochs on every platform: the default's cells and the seed's own Numba setups
}
# the answer profile (a GPU host's `all`): the default's cells, plus the seed's own Numba setups that
# its headline pairs (numba GPU over CPU and each device's Numba over PyTorch, variant seed), the same
# work on every platform
ANSWER_EXTRA = {"cpu": [("numba-cpu", "resident", "seed")], "cuda": [("numba-cuda", "resident", "seed")]}


# What a cell costs, for the run's ETA (Study.estimate): seconds per training sample and per
# test sample (evaluation), and the cell process's start + open (imports, data, warm-up), on the
# 2-core AMD EPYC: epoch_s / 60,000 and eval_s / 10,000 of results/reference/cpu-2core-epyc
# (real MNIST, 10 epochs, medians); start + open from the main job's cells there.
STEP_COST = {  # (backend, pipeline) -> (s per training sample, s per test sample, start + open s)
    ("torch-cpu", "seed"): (180e-6, 60e-6, 6.0),  # the main job's cells (embedded digits): 8-10.5 s each
    ("torch-cpu", "resident"): (60e-6, 55e-6, 5.0),  # 6.3-6.7 s
    ("numba-cpu", "resident"): (25e-6, 9e-6, 3.0),  # 2.9 s from numba's cache (15 s when it compiles)
}
GPU_STEP_COST = (2e-6, 1e-6, 8.0)  # any GPU backend: the epoch is short, the start (CUDA context, JIT) is not
DATASET_SIZES = {"mnist": (60_000, 10_000), "digits": (1_497, 300)}  # (train, test) of each resolved dataset
