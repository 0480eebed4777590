"""profile's config: defaults as data (units in the comments), variants, and the matrix.

A cell trains torchvision's DenseNet-121 (classifier replaced for the data's classes) with Adam,
transfer learning one of two ways (the variant):

    frozen     the backbone frozen (no gradients), only the new classifier trains
    finetune   every layer trains (full fine-tuning)

plus, on CUDA, `+bf16-cl` (bf16 autocast + channels_last), e.g. `finetune+bf16-cl`.
How many GPUs: `parallel` none (one device) | dp (nn.DataParallel over the cell's devices, the
seed's two-GPU run) | ddp (DistributedDataParallel, one process per device under torchrun, NCCL;
gloo on CPU). The devices are the Cell's (`--set devices=0,1`, or cpu,cpu for 2 gloo ranks).
`batch_size` is per device: dp and ddp run `batch_size x world_size` images a step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.core.cell import Cell

TRANSFERS = ("frozen", "finetune")
OPTIONS = ("bf16-cl",)
PARALLEL = ("none", "dp", "ddp")
PIPELINES = ("loader", "synthetic-gpu")
DATASETS = ("auto", "catsdogs", "catsdogs-synthetic")
WEIGHTS = ("auto", "random")
DEVICE = {"torch-cpu": "cpu", "torch-cuda": "cuda"}
WEIGHTS_FILE = {"densenet121": "densenet121-a639ec97.pth"}  # torchvision's name: <arch>-<first 8 hex of its sha256>.pth
# torchvision's classification models, as torchvision.models.list_models(module=torchvision.models)
# names them (torchvision 0.29.1): the names `model` may take, checked by validate without importing
# torchvision; tests/test_trusted_inputs.py compares them with the installed torchvision's
TORCHVISION_MODELS = tuple(
    """
    alexnet convnext_base convnext_large convnext_small convnext_tiny densenet121 densenet161 densenet169
    densenet201 efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3 efficientnet_b4
    efficientnet_b5 efficientnet_b6 efficientnet_b7 efficientnet_v2_l efficientnet_v2_m efficientnet_v2_s
    googlenet inception_v3 maxvit_t mnasnet0_5 mnasnet0_75 mnasnet1_0 mnasnet1_3 mobilenet_v2
    mobilenet_v3_large mobilenet_v3_small regnet_x_16gf regnet_x_1_6gf regnet_x_32gf regnet_x_3_2gf
    regnet_x_400mf regnet_x_800mf regnet_x_8gf regnet_y_128gf regnet_y_16gf regnet_y_1_6gf regnet_y_32gf
    regnet_y_3_2gf regnet_y_400mf regnet_y_800mf regnet_y_8gf resnet101 resnet152 resnet18 resnet34 resnet50
    resnext101_32x8d resnext101_64x4d resnext50_32x4d shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5
    shufflenet_v2_x2_0 squeezenet1_0 squeezenet1_1 swin_b swin_s swin_t swin_v2_b swin_v2_s swin_v2_t vgg11
    vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn vit_b_16 vit_b_32 vit_h_14 vit_l_16 vit_l_32
    wide_resnet101_2 wide_resnet50_2
    """.split()
)
NO_LINEAR_HEAD = ("squeezenet1_0", "squeezenet1_1")  # their classifier is a conv: nothing for build_model to replace
# What else a model needs to train here, as checked on the meta device (forward + backward of a
# batch of 2 in train mode, tests/test_trusted_inputs.py): these two return (logits, auxiliary
# logits) while training, where the trainer takes one tensor ...
AUX_OUTPUTS = ("googlenet", "inception_v3")
# ... these are built for 224 px inputs only (position embeddings, fixed attention windows) ...
FIXED_SIZE = {**{m: 224 for m in TORCHVISION_MODELS if m.startswith("vit_")}, "maxvit_t": 224}
# ... and AlexNet's three stride-2 pools leave nothing of an image under 63 px (the rest take 32)
MIN_SIZE = {"alexnet": 63}
MEAN = (0.485, 0.456, 0.406)  # ImageNet's per-channel mean/std (0..1 scale): the pretrained weights expect them
STD = (0.229, 0.224, 0.225)


# a field marked {"work": ...} sets how much work a cell does (bench.core.study.work_params)
@dataclass(frozen=True)
class ProfileConfig:
    model: str = "densenet121"  # a torchvision classification model; DenseNet-121 is the seed's
    weights: str = "auto"  # auto: <data dir>/<arch>-<sha prefix>.pth when present (hash-checked), else random init | random
    batch_size: int = 64  # images per step per device (the seed's 64 and 128)
    lr: float = 0.003  # Adam learning rate (the seed's 0.003 and 0.03)
    epochs: int = field(default=20, metadata={"work": "trained"})  # timed, unprofiled epochs (the seed's 20)
    # training steps per epoch: at most this many on the loader, this many on synthetic-gpu (0: the whole train split)
    max_steps: int = field(default=0, metadata={"work": "trained"})
    # test batches per evaluation at most (0: the whole val split)
    max_eval_batches: int = field(default=0, metadata={"work": "amount"})
    image_size: int = 224  # px, square: shorter side resized, centre crop (the seed's 224)
    # loader (JPEG tree through a DataLoader) | synthetic-gpu (a fixed batch on the device)
    pipeline: str = field(default="loader", metadata={"named": True})
    num_workers: int = 4  # DataLoader worker processes
    threads: int = 0  # torch intra-op threads; 0 = every core this process may use
    # untimed training steps first (cuDNN autotune, allocator); weights restored after
    warmup_steps: int = field(default=3, metadata={"work": "amount"})
    parallel: str = "none"  # none | dp | ddp
    cudnn_benchmark: bool = True  # torch.backends.cudnn.benchmark (the seed's); the DataParallel cells run both ways
    ddp_bucket_mb: float = 25.0  # DDP gradient bucket size, MB (torch's default)
    ddp_grad_as_bucket_view: bool = True  # DDP gradients as views into the buckets (one copy fewer)
    ddp_static_graph: bool = False  # DDP static_graph (the same graph every step; frozen layers make it unsafe here)
    collective_timeout_s: float = 120.0  # ddp: a rank that waits this long on a collective ends the run
    # torch.profiler schedule: steps skipped, warmed up, recorded; cycles
    prof_wait: int = field(default=1, metadata={"work": "amount"})
    prof_warmup: int = field(default=2, metadata={"work": "amount"})
    prof_active: int = field(default=5, metadata={"work": "amount"})
    prof_repeat: int = 1
    prof_top_k: int = 15  # operator-table rows kept
    telemetry_hz: float = 10.0  # sampler rate (GPU: NVML; CPU: psutil)
    idle_s: float = field(default=3.0, metadata={"work": "amount"})  # idle baseline measured before the warm-up, s
    # sampler on/off check: pairs of blocks of `overhead_steps` steps, alternated
    overhead_blocks: int = field(default=3, metadata={"work": "amount"})
    overhead_steps: int = field(default=5, metadata={"work": "amount"})
    dataset: str = "auto"  # auto | catsdogs | catsdogs-synthetic (resolved by the matrix)
    dataset_sha256: str = ""  # checksum of the data index the cell must see (filled by the matrix)
    # the synthetic tree's training JPEGs per class (the seed: about 4,000)
    synthetic_train_per_class: int = field(default=1000, metadata={"work": "trained"})
    # validation JPEGs per class (the seed: about 1,000)
    synthetic_val_per_class: int = field(default=250, metadata={"work": "amount"})


@dataclass(frozen=True)
class Settings(ProfileConfig):
    backend: str = "torch-cpu"
    variant: str = "finetune"
    seed: int = 0
    device: str = "cpu"
    devices: tuple = ()  # the Cell's devices: GPU ids, or cpu ranks

    @property
    def transfer(self) -> str:
        return self.variant.split("+")[0]

    @property
    def bf16_cl(self) -> bool:
        return "bf16-cl" in self.variant.split("+")[1:]

    @property
    def device_list(self) -> list[str]:
        return list(self.devices)

    @property
    def world_size(self) -> int:
        return max(len(self.device_list), 1)

    @property
    def mode(self) -> str:
        """How the devices are used: dp (one process, nn.DataParallel), ddp (one rank each; what
        `parallel=none` with several devices means too), or none (one device)."""
        return "dp" if self.parallel == "dp" else "ddp" if self.parallel == "ddp" or len(self.device_list) > 1 else "none"


def settings(cell: Cell) -> Settings:
    keys = asdict(ProfileConfig()).keys()
    return Settings(
        **{k: v for k, v in cell.params.items() if k in keys},
        backend=cell.backend,
        variant=cell.variant,
        seed=cell.seed + cell.repeat,
        device=DEVICE[cell.backend],
        devices=devices_of(cell),
    )


def devices_of(cell: Cell) -> tuple:
    """The cell's devices; result dirs made before devices moved onto the Cell kept them as a
    'devices' parameter ("0,1")."""
    return cell.devices or tuple(d for d in str(cell.params.get("devices", "")).split(",") if d)


def variants(platform: str) -> tuple[str, ...]:
    base = TRANSFERS
    return base + tuple(f"{t}+{o}" for t in base for o in OPTIONS) if platform == "cuda" else base


# ---- the matrix ---------------------------------------------------------------------------
SMOKE = {  # tiny images, few steps, CPU: the whole study's code path in well under 90 s
    "image_size": 64,
    "batch_size": 8,
    "epochs": 2,
    "max_steps": 3,
    "max_eval_batches": 2,
    "warmup_steps": 1,
    "num_workers": 1,
    "prof_wait": 1,
    "prof_warmup": 1,
    "prof_active": 2,
    "idle_s": 0.5,
    "overhead_blocks": 2,
    "overhead_steps": 2,
    "synthetic_train_per_class": 24,
    "synthetic_val_per_class": 8,
}
# The CPU's default: a reduced protocol, stated. At the seed's 224 px and batch 64 a fine-tuning step
# takes about 40 s on the 2-core EPYC (CPU_IMG_S_224 below) and, by core count, an estimated 5-7 s
# on the H100 host's 16 Xeon cores (not yet measured there), so the seed's 20 epochs x 125 steps
# would take about a day and about 4 h. Each epoch runs MAX_STEPS steps; the report projects the
# measured time per image (plus each epoch's loader start) to the seed's 20 epochs x 8,005 images,
# beside the GPU cells projected the same way, and labels both as projections. About 17 steps' worth
# a cell (warm-up 1, epochs 2 x 3 + 1 eval batch each, sampler cost 1 + 2, profiler 1 + 3 at its
# slowdown): about 12 min fine-tuning and 4 min frozen on 2 cores (Study.estimate), about 2 and 1
# min on 16.
CPU_DEFAULT = {
    "epochs": 2,
    "max_steps": 3,
    "max_eval_batches": 1,
    "warmup_steps": 1,
    "overhead_blocks": 1,
    "overhead_steps": 1,
    "prof_warmup": 1,  # prof_wait stays 1: it is not a work-amount parameter, so the headline pairs the CPU with the GPU
    "prof_active": 2,
    "idle_s": 2.0,
}
SEED_TRAIN_IMAGES = 8005  # the seed's training split; its 20 epochs are the projections' target
SEED_EPOCHS = 20
CUDA_DEFAULT = {"epochs": 4, "num_workers": 8, "overhead_steps": 10}


# The answer profile (a GPU host's `all`, and `reference gpu`): the seed's run (DenseNet-121 fine-tuned,
# 224 px, batch 64, through the loader) on the GPU and on this host's CPU with the same reduced
# protocol on both (2 epochs x 2 steps, one eval batch: the seed's 20 x 125 steps would take hours on a
# CPU; both sides are projected to them), and on the GPU batch 64 and 128 on the device pipeline (the
# seed's batch comparison)
ANSWER = {**CPU_DEFAULT, "max_steps": 2, "prof_active": 1, "idle_s": 1.0}


def matrix_spec(platform: str, profile: str) -> list[tuple[str, dict]]:
    """(variant, params) for PLATFORM and PROFILE."""
    if profile == "answer":
        run = [("finetune", {**ANSWER, "pipeline": "loader"})]
        if platform == "cuda":
            run += [("finetune", {**ANSWER, "pipeline": "synthetic-gpu", "batch_size": b}) for b in (64, 128)]
        return run
    if platform == "cpu":  # smoke: 64 px, b8, 3 steps (the code path; not projected); default: the seed's
        # 224 px, b64 as a reduced protocol (CPU_DEFAULT, projected); full: 20 whole epochs (a day on 2 cores)
        cpu: dict[str, Any] = SMOKE if profile == "smoke" else CPU_DEFAULT if profile == "default" else {}
        return [(t, {**cpu, "pipeline": "loader"}) for t in ("finetune", "frozen")]
    if profile == "smoke":
        s = {**SMOKE, "image_size": 224, "batch_size": 32, "max_steps": 5, "synthetic_train_per_class": 64}
        return [("finetune", {**s, "pipeline": "loader"}), ("finetune+bf16-cl", {**s, "pipeline": "synthetic-gpu"})]
    extra = CUDA_DEFAULT if profile == "default" else {}
    two = {"devices": ("0", "1")}  # the Cell's devices (Profile.matrix passes them on)
    b128 = {**extra, "pipeline": "synthetic-gpu", "batch_size": 128}  # the 2-GPU runs, per GPU, and their 1-GPU baselines
    out = [
        ("finetune", {**extra, "pipeline": "loader"}),  # the seed's run on one GPU
        ("frozen", {**extra, "pipeline": "loader"}),
        ("finetune", {**extra, "pipeline": "synthetic-gpu"}),  # the bare-loop figure: 1.04k img/s at batch 64 fp32
    ]
    for v in ("finetune", "finetune+bf16-cl"):  # bare loop: 1.78k img/s for bf16-cl at batch 128
        out += [
            (v, b128),
            (v, {**b128, "parallel": "dp", **two}),  # the seed's two-GPU run, cudnn.benchmark on (the seed's) and off
            (v, {**b128, "parallel": "dp", "cudnn_benchmark": False, **two}),
            (v, {**b128, "parallel": "ddp", **two}),
        ]
    if profile == "full":  # the harness: one GPU as a world of one rank under torchrun, beside the plain cell
        out.append(("finetune", {**b128, "devices": ("0",)}))
    return out


# What a cell costs, for the run's ETA (Study.estimate): DenseNet-121 training images/s at
# 224 px on the 2-core AMD EPYC (fine-tuning; frozen runs the backbone forward only, about 3x
# faster), scaled by the pixels of image_size; a GPU at GPU_IMG_S (the H100 reference: 670 at
# batch 64 through the loader). The sampler-cost step runs 2 x overhead_blocks x
# overhead_steps steps; the profile step prof_wait + warmup + active steps per cycle, about
# 1.6x slower (the profiler's own cost). OPEN_S: start, model, data index, idle baseline.
CPU_IMG_S_224 = 1.5  # the main job's smoke cells at 64 px: 21 s fine-tuning, 10 s frozen
GPU_IMG_S_224 = 700.0
OPEN_S = {"cpu": 7.0, "cuda": 15.0, "mps": 10.0}


def cost(cfg: Settings, n_train: int) -> tuple[int, float, float]:
    """(steps, open s, mean step s) of a cell with CFG on a train split of N_TRAIN images."""
    rate = (CPU_IMG_S_224 if cfg.device == "cpu" else GPU_IMG_S_224) * (224 / cfg.image_size) ** 2
    rate *= (3.0 if cfg.transfer == "frozen" else 1.0) * cfg.world_size
    step_imgs = cfg.batch_size * cfg.world_size
    whole = max(n_train // step_imgs, 1)
    steps_per_epoch = (cfg.max_steps or whole) if cfg.pipeline == "synthetic-gpu" else min(cfg.max_steps or whole, whole)
    epoch_s = steps_per_epoch * step_imgs / rate + (cfg.max_eval_batches or 50) * step_imgs / (3 * rate)
    overhead_s = 2 * cfg.overhead_blocks * cfg.overhead_steps * step_imgs / rate
    profile_s = 1.6 * cfg.prof_repeat * (cfg.prof_wait + cfg.prof_warmup + cfg.prof_active) * step_imgs / rate
    steps = cfg.epochs + 2
    open_s = OPEN_S[cfg.device] + cfg.idle_s + (cfg.warmup_steps + 1) * step_imgs / rate
    return steps, open_s, (cfg.epochs * epoch_s + overhead_s + profile_s) / steps
