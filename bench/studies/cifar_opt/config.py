"""cifar-opt's config: defaults as data (units in the comments), variants, and the matrix.

A variant is a '+'-joined set of options (`bf16+cl+compile+graphs`), or one of the seed's
named configurations. What each configuration of seed 002 is in the kit:

    seed's name      kit cell                                  what it does
    CPU Default      torch-cpu default (pipeline loader)       eager fp32, DataLoader with per-sample transforms
    CPU Quantized    torch-cpu quant-dynamic                   trains as default; quantize_dynamic (Linear only) to infer
    CPU Tuned        torch-cpu optuna                          Optuna picks batch size and lr, then trains with them
    GPU Default      torch-cuda default (pipeline loader)      eager fp32, cudnn.benchmark, DataLoader
    GPU AMP          torch-cuda amp                            fp16 autocast + GradScaler
    GPU Tuned        torch-cuda optuna                         as CPU Tuned, on the GPU
and what the kit adds: torch-cpu int8 (PT2E static int8 for the convolutions, compiled,
beside compiled fp32), torch-cpu compile, and on CUDA any '+' of bf16, fp16, cl
(channels_last), compile, graphs (the whole training step as one CUDA graph), with the
GPU-resident pipeline; `tuned` = bf16+cl+compile+graphs on the resident pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.core.cell import Cell
from bench.core.errors import KitError

MODELS = ("resnet18", "mobilenet_v2")
DATASETS = ("auto", "cifar10", "cifar10-synthetic")
PIPELINES = ("loader", "resident", "synthetic-gpu")
OBJECTIVES = ("pareto", "accuracy")
# options a CUDA variant may join with '+'; the named configurations stand alone
OPTIONS = ("bf16", "fp16", "cl", "compile", "graphs")
NAMED = {
    "default": (),
    "amp": ("fp16",),  # the seed's torch.cuda.amp: fp16 autocast + GradScaler
    "tuned": ("bf16", "cl", "compile", "graphs"),
    "compile": ("compile",),
    "quant-dynamic": (),  # training as default; inference through quantize_dynamic
    "int8": (),  # training as default; inference compiled fp32 vs compiled PT2E int8
    "optuna": (),  # Optuna search over batch size and lr, then training with the pick
}
CPU_VARIANTS = ("default", "quant-dynamic", "int8", "compile", "optuna")
MPS_VARIANTS = ("default", "optuna")
SEED_BATCHES = {"cpu": (8, 16, 32, 64, 128), "cuda": (16, 32, 64, 128), "mps": (16, 32, 64, 128)}
MIN_BATCH = 2  # BatchNorm in training mode needs more than one value per channel: never a batch of 1


def trial_train_size(n_train: int, val_fraction: float) -> int:
    """Images an Optuna trial trains on: the stratified subsample (N_TRAIN / 10 per class) less
    the share of each class held out to score trials (at least one image; search.holdout)."""
    per = n_train // 10
    return n_train - 10 * max(1, round(val_fraction * per))


@dataclass(frozen=True)
class CifarOptConfig:
    model: str = "resnet18"  # torchvision resnet18 | mobilenet_v2, num_classes=10, 32x32 input as the seed
    epochs: int = 5  # passes over the training subsample (the seed: 5 on CPU, 10 on GPU; the matrix sets it)
    batch_size: int = 32  # samples per SGD step
    lr: float = 0.001  # SGD learning rate (the seed's)
    momentum: float = 0.9  # SGD momentum
    weight_decay: float = 1e-4  # SGD weight decay
    n_train: int = 5000  # stratified training subsample (the seed's 5,000)
    n_test: int = 1000  # stratified test subsample (the seed's 1,000)
    subsample_seed: int = 42  # fixes which images are in the subsample (the seed's fixed seed)
    pipeline: str = "loader"  # loader (the seed's DataLoader) | resident (uint8 on the device) | synthetic-gpu
    num_workers: int = -1  # DataLoader workers; -1 = the seed's (8 on CPU, 4 on GPU) capped at this process's cores
    threads: int = 0  # torch intra-op threads; 0 = every core this process may use
    dataset: str = "auto"  # auto | cifar10 | cifar10-synthetic (resolved by the matrix)
    dataset_sha256: str = ""  # checksum of the data the cell must see (filled by the matrix)
    latency_calls: int = 1000  # timed batch-1 inference calls per deployment form (after warm-up)
    latency_warmup: int = 50  # untimed batch-1 calls first
    infer_batch: int = 256  # batch size of the batched-inference throughput
    calib_batches: int = 16  # int8 PT2E: calibration batches (of batch_size, from the training set)
    trials: int = 8  # optuna: trial budget (trials)
    trial_budget_s: float = 0.0  # optuna: trial budget (seconds; 0 = no limit)
    trial_epochs: int = 1  # optuna: epochs per trial
    val_fraction: float = 0.2  # optuna: share of the training subsample held out to score trials (never the test set)
    objective: str = "pareto"  # optuna: pareto (accuracy up, epoch time down) | accuracy (single, with MedianPruner)
    chance_epochs: int = 2  # flag a cell whose test accuracy is still at chance after this many epochs


@dataclass(frozen=True)
class Settings(CifarOptConfig):
    """The config plus the cell fields a trainer needs."""

    backend: str = "torch-cpu"
    variant: str = "default"
    seed: int = 0  # the training seed: cell.seed + cell.repeat (each repeat is one of the seed's 3 seeds)
    device: str = "cpu"


DEVICE = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}


def settings(cell: Cell) -> Settings:
    keys = asdict(CifarOptConfig()).keys()
    return Settings(
        **{k: v for k, v in cell.params.items() if k in keys},
        backend=cell.backend,
        variant=cell.variant,
        seed=cell.seed + cell.repeat,
        device=DEVICE[cell.backend],
    )


def parse_variant(variant: str) -> tuple[str, ...]:
    """A named configuration's options, or the options of a '+' string; KitError otherwise."""
    if variant in NAMED:
        return NAMED[variant]
    parts = tuple(variant.split("+"))
    bad = [p for p in parts if p not in OPTIONS]
    if bad or len(set(parts)) != len(parts):
        raise KitError(
            f"unknown cifar-opt variant {variant!r}: a named one ({', '.join(NAMED)}) or a '+' of {', '.join(OPTIONS)}"
        )
    if "bf16" in parts and "fp16" in parts:
        raise KitError(f"variant {variant!r}: bf16 and fp16 exclude each other")
    if "graphs" in parts and "fp16" in parts:
        raise KitError(
            f"variant {variant!r}: fp16's GradScaler reads the loss scale on the host, which a CUDA graph cannot; use bf16"
        )
    return parts


def variant_kind(variant: str) -> str:
    """train (speed options) | quant-dynamic | int8 | optuna."""
    return variant if variant in ("quant-dynamic", "int8", "optuna") else "train"


# ---- the matrix --------------------------------------------------------------------------
EPOCHS = {"cpu": 5, "cuda": 10, "mps": 10}  # the seed's
SMOKE = {"epochs": 1, "n_train": 320, "n_test": 200, "latency_calls": 100, "latency_warmup": 10, "trials": 2, "calib_batches": 4}


def matrix_spec(platform: str, profile: str) -> list[tuple[str, str, dict]]:
    """(model, variant, params) for PLATFORM and PROFILE, models outermost."""
    out: list[tuple[str, str, dict]] = []
    if platform == "cpu":
        variants = {"smoke": ("default", "int8"), "default": CPU_VARIANTS, "full": CPU_VARIANTS}[profile]
        base: dict = {"epochs": EPOCHS["cpu"]}
        for m in MODELS:
            for v in variants:
                out.append((m, v, dict(base)))
            if profile == "full":  # the seed's CPU batch sweep of the default configuration
                out += [(m, "default", {**base, "batch_size": b}) for b in SEED_BATCHES["cpu"] if b != 32]
    elif platform == "cuda":
        base = {"epochs": EPOCHS["cuda"]}
        named = [("default", {}), ("amp", {}), ("optuna", {}), ("tuned", {"pipeline": "resident"})]
        if profile == "smoke":
            named = [("default", {}), ("tuned", {"pipeline": "resident"})]
        if profile == "full":
            named += [
                ("default", {"pipeline": "resident"}),
                ("bf16+cl", {"pipeline": "resident"}),
                ("tuned", {"pipeline": "loader"}),
                ("tuned", {"pipeline": "synthetic-gpu"}),
            ]
        for m in MODELS:
            out += [(m, v, {**base, **p}) for v, p in named]
            if profile == "full":
                out += [(m, "default", {**base, "batch_size": b}) for b in SEED_BATCHES["cuda"] if b != 32]
    elif platform == "mps":
        for m in MODELS:
            out += [(m, v, {"epochs": EPOCHS["mps"]}) for v in (("default",) if profile == "smoke" else MPS_VARIANTS)]
    if profile == "smoke":
        out = [(m, v, {**p, **SMOKE}) for m, v, p in out if m == "resnet18" or platform != "cpu" or v == "default"]
    return out


# What a cell costs, for the run's ETA (Study.estimate), on the 2-core AMD EPYC at 32x32 px:
# training images/s and one batch-1 inference call (ms) per model, eager fp32; compiling a
# form (inductor, PT2E int8) costs COMPILE_S; the cell process starts and opens in OPEN_S
# (measured: the main job's cifar-opt smoke cells, README "Quick start": 11 s for resnet18
# default, 36 s for its int8 cell, 11 s for mobilenet_v2).
CPU_COST = {"resnet18": (250.0, 10.0), "mobilenet_v2": (300.0, 5.0)}  # (train img/s, batch-1 call ms)
GPU_COST = (3000.0, 1.5)
COMPILE_S = {"cpu": 12.0, "cuda": 30.0, "mps": 10.0}
OPEN_S = 7.0


def cost(cfg: Settings) -> tuple[int, float, float]:
    """(steps, open s, mean step s) of a cell with CFG, from the constants above."""
    rate, call_ms = CPU_COST.get(cfg.model, (25.0, 40.0)) if cfg.device == "cpu" else GPU_COST
    kind, opts = variant_kind(cfg.variant), parse_variant(cfg.variant)
    compiled = "compile" in opts or kind == "int8"
    trials = cfg.trials if kind == "optuna" else 0
    epoch_s = cfg.n_train / rate + cfg.n_test / (3 * rate)
    forms = 2 if kind in ("int8", "quant-dynamic") else 1
    infer_s = forms * ((cfg.latency_calls + cfg.latency_warmup) * call_ms / 1e3 + cfg.n_test / (3 * rate))
    infer_s += COMPILE_S[cfg.device] * (2 if kind == "int8" else 0)
    open_s = OPEN_S + (COMPILE_S[cfg.device] if compiled else 0.0)
    total = trials * cfg.trial_epochs * epoch_s * (1 - cfg.val_fraction) + cfg.epochs * epoch_s + infer_s
    steps = trials + cfg.epochs + 1
    return steps, open_s, total / steps
