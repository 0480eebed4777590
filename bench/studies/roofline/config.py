"""roofline's config: defaults as data (units in the comments), precisions, and the matrix.

A cell is one model on one device at one precision, in one of two scenarios (the seed's):

    A  one run: a training pass of at most `max_train_batches` batches, then a validation pass
       of at most `max_val_batches` (the seed's "1 epoch" under its max-batch control), through
       the `loader` pipeline (the real Tiny-ImageNet JPEG tree, decoded by DataLoader workers)
       or `synthetic-gpu` (one fixed batch on the device: the upper bound without input work;
       exactly `max_*_batches` steps, as no tree limits a repeated batch; 0: as many as the tree)
    B  a batch sweep: powers of two from `sweep_min_batch` up, `sweep_batches` training steps
       each on a fixed device batch, until an out-of-memory error, the predicted memory of the
       next size exceeding `sweep_mem_fraction` of what is free, or `sweep_max_batch`

Step (`step`): eager (the default: every kernel launched from Python, what an eager PyTorch
user gets) | cuda-graph (CUDA, one device: the training step captured once per batch shape as a
CUDA graph and replayed, the same arithmetic checked against the eager step first; validation
stays eager). At small batches the eager step is paced by the host, whose speed wanders between
processes by 10-30 % on the H100 reference; the graph takes the host out of the step.

Precision (the variant): fp32 (TF32 off for matmul and cuDNN), tf32 (fp32 tensors, TF32
allowed: CUDA only), bf16-cl (bf16 autocast + channels_last: CUDA only). CPU and MPS run
fp32: the issue asks for the precision axis on GPUs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bench.core.cell import Cell

MODELS = ("resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1")
SEED_BATCH = {"squeezenet1_1": 64}  # the seed: 128 for every model but SqueezeNet (64 "to avoid NaNs")
SCENARIOS = ("A", "B")
PIPELINES = ("loader", "synthetic-gpu")
DATASETS = ("auto", "tinyimagenet", "tinyimagenet-synthetic")
ROOF_SIZES = ("default", "quick")
PRECISIONS = ("fp32", "tf32", "bf16-cl")
STEPS = ("eager", "cuda-graph")
VARIANTS = {"cpu": ("fp32",), "mps": ("fp32",), "cuda": PRECISIONS}
ROOF_OF = {"fp32": "fp32", "tf32": "tf32", "bf16-cl": "bf16"}  # precision -> the compute roof it is held against
DEVICE = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}
IMAGE_SIDE = 64  # px: Tiny-ImageNet's; a tree of another size trains, and is counted, at its own (the index's image_size)
# ImageNet's per-channel mean/std (0..1 scale): Tiny-ImageNet is an ImageNet subset
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


# a field marked {"work": ...} sets how much work a cell does (bench.core.study.work_params)
@dataclass(frozen=True)
class RooflineConfig:
    model: str = "resnet18"  # torchvision resnet18 | mobilenet_v2 | resnet50 | squeezenet1_1, weights=None
    scenario: str = "A"  # A: one train + val run | B: batch sweep
    batch_size: int = 128  # A: images per step, train and val (the seed's 128; 64 for squeezenet1_1, set by the matrix)
    # A: fixed max of training steps (0: the whole train split, the seed's full epoch)
    max_train_batches: int = field(default=100, metadata={"work": "trained"})
    # A: fixed max of validation batches (0: the whole val split)
    max_val_batches: int = field(default=40, metadata={"work": "amount"})
    # untimed training steps first (cuDNN autotune, allocator, clocks); weights restored after
    warmup_batches: int = field(default=3, metadata={"work": "amount"})
    lr: float = 0.01  # SGD learning rate, every model and device (the seed: "same optimizer and learning rate")
    momentum: float = 0.9  # SGD momentum
    step: str = "eager"  # eager | cuda-graph (CUDA, one device: the training step captured and replayed)
    # loader (JPEG tree through a DataLoader) | synthetic-gpu (a fixed batch on the device)
    pipeline: str = field(default="loader", metadata={"named": True})
    num_workers: int = 4  # DataLoader worker processes (the seed's 4, whatever the core count; recorded)
    threads: int = 0  # torch intra-op threads; 0 = every core this process may use
    sweep_min_batch: int = field(default=16, metadata={"work": "amount"})  # B: first batch size (images)
    sweep_max_batch: int = field(default=1024, metadata={"work": "amount"})  # B: largest batch size tried (images)
    # B: timed training steps per batch size (after 2 untimed ones at that size)
    sweep_batches: int = field(default=10, metadata={"work": "amount"})
    # B: stop before a size whose predicted memory exceeds this share of the free memory
    sweep_mem_fraction: float = field(default=0.9, metadata={"work": "amount"})
    # default | quick: the roofs' measurement sizes (quick: smaller, for smoke runs; cached apart)
    roof_sizes: str = field(default="default", metadata={"work": "amount"})
    dataset: str = "auto"  # auto | tinyimagenet | tinyimagenet-synthetic (resolved by the matrix)
    dataset_sha256: str = ""  # checksum of the data index the cell must see (filled by the matrix)
    synthetic_classes: int = 200  # the synthetic tree's classes (the real tree has 200)
    # synthetic JPEGs a class in train/ (the real tree: 500)
    synthetic_train_per_class: int = field(default=64, metadata={"work": "trained"})
    # synthetic JPEGs a class in val/ (the real tree: 50)
    synthetic_val_per_class: int = field(default=10, metadata={"work": "amount"})


@dataclass(frozen=True)
class Settings(RooflineConfig):
    """The config plus the cell fields a trainer needs."""

    backend: str = "torch-cpu"
    precision: str = "fp32"
    seed: int = 0  # cell.seed + cell.repeat
    device: str = "cpu"


def settings(cell: Cell) -> Settings:
    keys = asdict(RooflineConfig()).keys()
    return Settings(
        **{k: v for k, v in cell.params.items() if k in keys},
        backend=cell.backend,
        precision=cell.variant,
        seed=cell.seed + cell.repeat,
        device=DEVICE[cell.backend],
    )


def sweep_sizes(lo: int, hi: int) -> list[int]:
    """lo, 2 lo, 4 lo, ... up to hi (images)."""
    out, b = [], lo
    while b <= hi:
        out.append(b)
        b *= 2
    return out


# ---- the matrix --------------------------------------------------------------------------
# A: per platform, the fixed max number of batches (the seed's max-batch control); B: the sweep's range
LIMITS = {
    "cpu": {"max_train_batches": 10, "max_val_batches": 5, "sweep_min_batch": 16, "sweep_max_batch": 256, "sweep_batches": 3},
    "mps": {"max_train_batches": 50, "max_val_batches": 20, "sweep_min_batch": 16, "sweep_max_batch": 1024, "sweep_batches": 5},
    "cuda": {
        "max_train_batches": 100,
        "max_val_batches": 40,
        "sweep_min_batch": 16,
        "sweep_max_batch": 4096,
        "sweep_batches": 10,
    },
}
SMOKE_DATA = {"synthetic_classes": 20, "synthetic_train_per_class": 8, "synthetic_val_per_class": 4}
SMOKE: dict[str, dict] = {
    "cpu": {
        "batch_size": 16,
        "max_train_batches": 4,
        "max_val_batches": 2,
        "warmup_batches": 1,
        "num_workers": 2,
        "sweep_min_batch": 8,
        "sweep_max_batch": 32,
        "sweep_batches": 2,
        "roof_sizes": "quick",
        **SMOKE_DATA,
    },
    "cuda": {"max_train_batches": 10, "max_val_batches": 5, "sweep_min_batch": 64, "sweep_max_batch": 512, "sweep_batches": 3},
    "mps": {"max_train_batches": 10, "max_val_batches": 5, "sweep_min_batch": 16, "sweep_max_batch": 128, "sweep_batches": 3},
}


# The answer profile (a GPU host's `all`, and `reference gpu`): seed 003's Table 8 cells, every model
# GPU against this host's CPU, scenario A, fp32, through the JPEG loader at the seed's batch, with the
# CPU's pass lengths on every platform (10 training and 5 validation batches: the seed's 50-batch
# "epoch" is more than a CPU affords inside the plan; the report projects every pass to it)
ANSWER = {"max_train_batches": 10, "max_val_batches": 5, "scenario": "A", "pipeline": "loader"}


def matrix_spec(platform: str, profile: str) -> list[tuple[str, str, dict]]:
    """(model, precision, params) for PLATFORM and PROFILE, models outermost."""
    out: list[tuple[str, str, dict]] = []
    if profile == "answer":
        return [(m, "fp32", {**LIMITS[platform], "batch_size": SEED_BATCH.get(m, 128), **ANSWER}) for m in MODELS]
    models: tuple[str, ...] = MODELS
    precisions: tuple[str, ...] = VARIANTS[platform]
    if profile == "smoke":
        models = ("squeezenet1_1",) if platform != "cuda" else ("resnet18",)
        precisions = ("fp32", "bf16-cl") if platform == "cuda" else ("fp32",)
    for m in models:
        base: dict = {**LIMITS[platform], "batch_size": SEED_BATCH.get(m, 128)}
        # full: the whole splits (100,000 training and 10,000 validation images on the real tree), a true
        # epoch. The seed's "epoch" was 50 batches, 6,400 images (seed.EPOCH_IMAGES): the report
        # projects every pass to that size, whichever profile ran
        if profile == "full":
            base.update(max_train_batches=0, max_val_batches=0)
        if profile == "smoke":
            base.update(SMOKE[platform])
        for prec in precisions:
            for pipe in PIPELINES:
                if profile == "smoke" and platform == "cuda" and prec != "fp32" and pipe == "loader":
                    continue
                out.append((m, prec, {**base, "scenario": "A", "pipeline": pipe}))
        for prec in precisions if profile != "smoke" else precisions[-1:]:
            if prec == "tf32" and profile != "full":
                continue  # the sweep runs at fp32 and bf16-cl; tf32 only in full
            out.append((m, prec, {**base, "scenario": "B", "pipeline": "synthetic-gpu"}))
    return out


# What a cell costs, for the run's ETA (Study.estimate), at 64 px: training images/s per model
# on the 2-core AMD EPYC (results/reference/cpu-2core-epyc-roofline, synthetic-gpu, fp32),
# validation at 3x that, the loader at half of it (JPEG decode on the same 2 cores); a GPU at
# GPU_IMG_S. OPEN_S: start, index, counting, roofs from the cache, warm-up.
CPU_IMG_S = {"resnet18": 174.0, "resnet50": 56.0, "mobilenet_v2": 187.0, "squeezenet1_1": 538.0}
GPU_IMG_S = 8000.0
OPEN_S = {"cpu": 3.5, "cuda": 15.0, "mps": 10.0}  # the main job's smoke cells: 4.3-4.9 s each


def cost(cfg: Settings) -> tuple[int, float, float]:
    """(steps, open s, mean step s) of a cell with CFG, from the constants above."""
    rate = CPU_IMG_S.get(cfg.model, 150.0) if cfg.device == "cpu" else GPU_IMG_S
    if cfg.scenario == "A":
        train = (cfg.max_train_batches or 1000) * cfg.batch_size / (rate / (2 if cfg.pipeline == "loader" else 1))
        val = (cfg.max_val_batches or 100) * cfg.batch_size / (3 * rate)
        return 2, OPEN_S[cfg.device], (train + val) / 2
    sizes = sweep_sizes(cfg.sweep_min_batch, cfg.sweep_max_batch)
    per = [(cfg.sweep_batches + 2) * b / rate for b in sizes]
    return len(sizes), OPEN_S[cfg.device], sum(per) / len(sizes)
