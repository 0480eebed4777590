"""Seed 002's claims, as data (bench.core.claims): every sentence of its sections V and VII and
its abstract that a measurement can check, and the kit's own setups beside them.

The seed prints no tables. Its configurations are our cells (config.py): CPU Default, Quantized
(our `int8`: PT2E static int8 beside compiled fp32; the seed's own `quant-dynamic` in the full
profile) and Tuned (`optuna`); GPU Default, AMP and Tuned (`optuna`), at batch 32 on the seed's
DataLoader; Mac GPU (`torch-mps`). Each repeat is one of the seed's 3 seeds; a figure per repeat
is read from its epoch rows (median epoch time, the highest epoch's test accuracy, peak memory)
or its inference rows (batch-1 p50 latency per deployment form), then the median over repeats.
Every per-repeat figure is readout.py's (the one place the rows become numbers); a claim of
several conditions is answered per model (`answers.conditions(..., by=MODEL, by_open=OPEN)`).

Which figures are judged where: bench.core.claims' one rule. A figure the seed measured on named
hardware is judged only there (`seed_hw`), a band (32 % on the i7, 40 ms and 100 s on the i9, 10 %
on the GTX 1660 Ti, 300-600 MB on the P100, 10-14 ms on the M3 Pro) and a one-sided bound alike
(GPU Default under 20 s and every GPU configuration below 5 ms on Zaratan's A100 and Kaggle's
P100, every CPU configuration above 13 ms on its i7, i9 and M3 Pro): elsewhere "not comparable",
ours beside it (an H100's 2 s is not the P100's). The seed's Zaratan CPU node is unnamed, so no CPU
of ours can be it. Accuracy needs the real CIFAR-10 (`Needs(real_data=True)`); a claim tied to the
seed's hardware that ran neither there nor on real data "needs the seed's hardware".

Judged on the quantity it is about: the Quantized cells (int8, quant-dynamic) quantize after
training and train exactly as Default does, so a training figure of theirs is Default's work. The
seed's "Quantized consumed the least memory" is then no question for our training peaks: a
difference between two identical trainings is noise (quant-least-memory: not comparable).

Thresholds, each the reading of a word:
    QUANT_CUT = 0.32, CUT_TOL = 0.10   "a 32 % reduction in training time": 22-42 % less time
    AMP_CUT = (0.05, 0.20)             "reduced training time by 5-20 %": 0.80-0.95x the time
    KEEP_PTS = 2.0                     "preserving accuracy", "retained accuracy within 1-2 %":
                                       at most 2 points below (the seed's own upper figure)
    TUNED_ACC, ACC_PTS = 70.0, 5.0     "reached 70 %": 65-75 %
    GAIN_PTS = (3.0, 6.0)              "accuracy improved by 3-6 %": percentage points
    FIG_TOL = 0.25                     a time or size figure on the seed's hardware "agrees"
                                       within 25 %
    CHANCE_PCT                         "stayed at 10 % accuracy": at or below 10 % plus three
                                       binomial standard deviations of the seed's 1,000 test
                                       images (config.chance_limit, the at-chance flag's rule)
"""

from __future__ import annotations

from bench.core import answers
from bench.core.claims import (
    Claim,
    Expect,
    Level,
    Metric,
    Needs,
    Ratio,
    above,
    below,
    between,
    faster,
)
from bench.core.study import free_work
from bench.studies.cifar_opt.config import CifarOptConfig, chance_limit
from bench.studies.cifar_opt.readout import (
    SEED_N_TRAIN,
    eager_ms,
    fastest_ms,
    final_acc_pct,
    gpu_alloc_mb,
    heap_mb,
    int8_drop_pts,
    int8_size_mb,
    int8_size_ratio,
    int8_speedup,
    peak_rss_mb,
    quantized,
    seed_epoch_s,
    slowest_ms,
)

QUANT_CUT, CUT_TOL = 0.32, 0.10
AMP_CUT = (0.05, 0.20)
KEEP_PTS = 2.0
TUNED_ACC, ACC_PTS = 70.0, 5.0
GAIN_PTS = (3.0, 6.0)
FIG_TOL = 0.25
CHANCE_PCT = 100 * chance_limit(1000)

WORK = free_work(CifarOptConfig)  # its work params (config.py marks them): a Level's default `free`
SPEED_FREE = (*WORK, "dataset")  # a speed claim's (bench.core.claims: the dataset's name is no part of a rate)
SEARCH_BUDGET = ("trial_epochs", "trial_budget_s")  # how long a search ran (with `trials`, a work param)
TUNED_FREE = (*SPEED_FREE, *SEARCH_BUDGET)  # a speed claim about a Tuned side: each side's search ran its own budget
# an accuracy claim: the data must match, the amount of work may not (the seed: 5 CPU, 10 GPU epochs)
ACC_FREE = (*WORK, *SEARCH_BUDGET)

# the seed's configurations (batch 32 on its DataLoader, one GPU; a Tuned side trains at its
# search's pick). A param pinned on one side of a Ratio is not compared with the other side: pin
# it on both.
CPU_D = {"backend": "torch-cpu", "variant": "default", "batch_size": 32}
CPU_Q = {"backend": "torch-cpu", "variant": "int8", "batch_size": 32}
CPU_T = {"backend": "torch-cpu", "variant": "optuna"}
GPU_D = {"backend": "torch-cuda", "variant": "default", "pipeline": "loader", "batch_size": 32, "gpus": 1}
GPU_A = {"backend": "torch-cuda", "variant": "amp", "pipeline": "loader", "batch_size": 32, "gpus": 1}
GPU_T = {"backend": "torch-cuda", "variant": "optuna", "pipeline": "loader", "gpus": 1}
MPS_D = {"backend": "torch-mps", "variant": "default", "pipeline": "loader", "batch_size": 32}
MPS_T = {"backend": "torch-mps", "variant": "optuna", "pipeline": "loader"}
KIT_TUNED = {"backend": "torch-cuda", "variant": "tuned", "pipeline": "resident"}
CPU = {"backend": "torch-cpu"}  # with a `quantized` metric: the Quantized cells, int8 and quant-dynamic alike

POST_TRAINING = "post-training quantization: the Quantized cell trains exactly as Default, so 1.0x is what to expect"
SEED_SCALE = f"time per {SEED_N_TRAIN:,} images, the seed epoch"
# the seed's hardware (substrings of a device name): its HPC GPU (Zaratan's GPU node, "6912 CUDA cores":
# an A100) and Kaggle's Tesla P100; its CPUs: the Lenovo's i7-1355U, the Alienware's i9-9900, the
# MacBook's M3 Pro (its Zaratan CPU node is unnamed)
HPC_GPUS = ("A100", "P100")
SEED_CPUS = ("i7-1355U", "i9-9900", "M3 Pro")
ON_HPC = "judged on the seed's A100 (Zaratan) and P100 only"
OWN_PICK = "Tuned trains at the batch and lr its own search picked"
SAME_SPEED = (
    "post-training quantization: our Quantized cells train exactly as Default, so their training speed is 1.0x "
    "Default's by construction; the seed's faster Quantized training is not a quantity our cells measure"
)
SAME_TRAINING = (
    "post-training quantization: our Quantized cells train exactly as Default, so their training peak is Default's "
    "work; a difference is noise, not the seed's Quantized memory"
)
UNIVERSALLY = "universally outperformed CPUs"
V_VII_ABS = "Sec. V, VII, abstract"


# ---- claims made of several conditions, answered per model (bench.core.answers.conditions): per
# model, per configuration where a condition's sides leave the variant open (a side
# {"backend": "torch-cpu"} with a `quantized` metric: int8 and quant-dynamic), per host where one
# model's conditions ran on several
MODEL, OPEN = ("model",), ("variant",)


def _acc(a: dict, b: dict) -> Ratio:
    return Ratio(a, b, metric=final_acc_pct, free=ACC_FREE)


def _speed(a: dict, b: dict, metric: Metric, free: tuple[str, ...] = TUNED_FREE) -> Ratio:
    return Ratio(a, b, metric=metric, free=free)


def _fig(x: float, unit: str) -> Expect:
    lo, hi = x * (1 - FIG_TOL), x * (1 + FIG_TOL)
    return between(lo, hi, f"{lo:g}-{hi:g} {unit}")


CLAIMS: tuple[Claim, ...] = (
    # ---- training time
    faster(
        "gpu-over-cpu",
        "GPU Default over CPU Default (training img/s)",
        GPU_D,
        CPU_D,
        V_VII_ABS,
        None,
        UNIVERSALLY,
        free=SPEED_FREE,
    ),
    faster(
        "amp-gpu-over-cpu",
        "GPU AMP over CPU Default (training img/s)",
        GPU_A,
        CPU_D,
        V_VII_ABS,
        None,
        UNIVERSALLY,
        headline=False,
        free=SPEED_FREE,
    ),
    faster(
        "optuna-gpu-over-cpu",
        "GPU Tuned (Optuna) over CPU Tuned (Optuna) (training img/s)",
        GPU_T,
        CPU_T,
        V_VII_ABS,
        None,
        UNIVERSALLY,
        free=TUNED_FREE,
        note=OWN_PICK,
    ),
    faster(
        "amp-over-default",
        "GPU AMP over GPU Default (training img/s)",
        GPU_A,
        GPU_D,
        "Sec. V, VII",
        (1 / (1 - AMP_CUT[0]), 1 / (1 - AMP_CUT[1])),
        "5-20 % less training time",
        expect=between(1 / (1 - AMP_CUT[0]), 1 / (1 - AMP_CUT[1]), "1.05-1.25x (5-20 % less time)"),
        free=SPEED_FREE,
    ),
    faster(
        "optuna-over-default",
        "GPU Tuned (Optuna) over GPU Default (training img/s)",
        GPU_T,
        GPU_D,
        "Sec. V, VII",
        None,
        "tuning unlocks peak GPU throughput",
        free=TUNED_FREE,
        note=OWN_PICK,
    ),
    faster(
        "quant-over-default",
        "CPU Quantized over CPU Default (training img/s)",
        CPU_Q,
        CPU_D,
        "Sec. V",
        None,
        "consistently less epoch time",
        comparable=SAME_SPEED,
        free=SPEED_FREE,
    ),
    Claim(
        "quant-32pct",
        "CPU Quantized over CPU Default, ResNet-18 on the i7 (training img/s)",
        "Sec. V",
        Ratio({**CPU_Q, "model": "resnet18"}, {**CPU_D, "model": "resnet18"}, free=SPEED_FREE),
        between(1 / (1 - QUANT_CUT + CUT_TOL), 1 / (1 - QUANT_CUT - CUT_TOL), "1.28-1.72x (22-42 % less time)"),
        1 / (1 - QUANT_CUT),
        "32 % less training time",
        seed_hw=("i7-1355U",),
        note=POST_TRAINING,
    ),
    faster(
        "cputuned-epoch-below-default",
        "CPU Tuned (Optuna) over CPU Default (training img/s)",
        CPU_T,
        CPU_D,
        "Sec. V, VII",
        None,
        "consistently less epoch time",
        free=TUNED_FREE,
        headline=False,
        note=OWN_PICK,
    ),
    Claim(
        "cputuned-mbv2-i9-unstable",
        "CPU Tuned MobileNetV2 on the i9: over 100 s an epoch, 30 % accuracy",
        "Sec. V, VII",
        answers.conditions(
            ("epoch", Level({**CPU_T, "model": "mobilenet_v2"}, seed_epoch_s, "s"), above(100.0, "100 s")),
            ("accuracy", Level({**CPU_T, "model": "mobilenet_v2"}, final_acc_pct, "%"), between(25.0, 35.0, "25-35 %")),
        ),
        seed_text="> 100 s, 30 %",
        needs=Needs(real_data=True, what="the seed's Core i9-9900 (torch-cpu) and the real CIFAR-10"),
        seed_hw=("i9-9900",),
        note=SEED_SCALE,
    ),
    Claim(
        "gpu-default-rn18-under-20s",
        "GPU Default ResNet-18: an epoch under 20 s (Zaratan's A100, the P100)",
        "Sec. V",
        Level({**GPU_D, "model": "resnet18"}, seed_epoch_s, "s"),
        below(20.0, "20 s"),
        seed_text="< 20 s",
        seed_hw=HPC_GPUS,
        note=f"{ON_HPC}; {SEED_SCALE}",
    ),
    Claim(
        "gpu-default-mbv2-under-15s",
        "GPU Default MobileNetV2: an epoch under 15 s (Zaratan's A100, the P100)",
        "Sec. V",
        Level({**GPU_D, "model": "mobilenet_v2"}, seed_epoch_s, "s"),
        below(15.0, "15 s"),
        seed_text="< 15 s",
        seed_hw=HPC_GPUS,
        note=f"{ON_HPC}; {SEED_SCALE}",
    ),
    # ---- accuracy
    Claim(
        "amp-keeps-accuracy",
        "GPU AMP keeps the accuracy of GPU Default (AMP - Default)",
        "Sec. V, VII",
        answers.conditions(("AMP - Default", _acc(GPU_A, GPU_D), None), minus=True, by=MODEL, by_open=OPEN),
        above(-KEEP_PTS, f"-{KEEP_PTS:g} points"),
        seed_text="preserving accuracy",
        needs=Needs(real_data=True, what="GPU AMP and Default cells on one host"),
    ),
    Claim(
        "amp-fails-1660ti",
        "GPU AMP on the GTX 1660 Ti stays at 10 % accuracy",
        "Sec. V, VII",
        Level(GPU_A, final_acc_pct, "%"),
        below(CHANCE_PCT, f"chance, {CHANCE_PCT:.1f} %"),
        10.0,
        "chance",
        needs=Needs(real_data=True, what="the seed's GTX 1660 Ti (torch-cuda) and the real CIFAR-10"),
        seed_hw=("1660 Ti",),
        note="on other GPUs: amp-keeps-accuracy, and the at-chance flag",
    ),
    Claim(
        "gpu-tuned-best-acc",
        "GPU Tuned is the most accurate GPU configuration",
        "Sec. V, VII",
        answers.conditions(
            ("Tuned / Default", _acc(GPU_T, GPU_D), None), ("Tuned / AMP", _acc(GPU_T, GPU_A), None), by=MODEL, by_open=OPEN
        ),
        above(1.0, "1x"),
        seed_text="best performer on all platforms",
        needs=Needs(real_data=True, what="GPU Tuned, Default and AMP cells on one host"),
    ),
    Claim(
        "gpu-tuned-70pct",
        "GPU Tuned reaches 70 % accuracy (CUDA, Mac GPU)",
        "Sec. V",
        answers.conditions(
            ("CUDA", Level(GPU_T, final_acc_pct, "%"), None),
            ("Mac GPU", Level(MPS_T, final_acc_pct, "%"), None),
            need=False,
            by=MODEL,
            by_open=OPEN,
        ),
        between(TUNED_ACC - ACC_PTS, TUNED_ACC + ACC_PTS, f"{TUNED_ACC - ACC_PTS:g}-{TUNED_ACC + ACC_PTS:g} %"),
        TUNED_ACC,
        "both models",
        needs=Needs(real_data=True, what="a GPU Tuned cell, CUDA or Apple"),
    ),
    Claim(
        "cputuned-acc-above",
        "CPU Tuned is more accurate than CPU Default and Quantized",
        "Sec. V, VII",
        answers.conditions(
            ("Tuned / Default", _acc(CPU_T, CPU_D), None), ("Tuned / Quantized", _acc(CPU_T, CPU_Q), None), by=MODEL, by_open=OPEN
        ),
        above(1.0, "1x"),
        seed_text="improved accuracy on most devices",
        needs=Needs(real_data=True, what="CPU Tuned, Default and Quantized cells on one host"),
        note="Quantized trains as Default does: the same accuracy",
    ),
    Claim(
        "quant-acc-within-2",
        "CPU Quantized keeps accuracy within 2 points (fp32 - int8)",
        "Sec. V, VII",
        Level(CPU, int8_drop_pts, "pts"),
        below(KEEP_PTS, f"{KEEP_PTS:g} points"),
        seed_text="within 1-2 %",
        needs=Needs(real_data=True),
        note="one trained model scored as fp32 and as int8 (the seed may have trained twice)",
    ),
    Claim(
        "gpu-more-accurate",
        "GPU configurations are more accurate than CPU ones (GPU / CPU)",
        "Abstract",
        answers.conditions(
            ("Default / Default", _acc(GPU_D, CPU_D), None),
            ("AMP / Default", _acc(GPU_A, CPU_D), None),
            ("Tuned / Tuned", _acc(GPU_T, CPU_T), None),
            by=MODEL,
            by_open=OPEN,
        ),
        above(1.0, "1x"),
        seed_text="outperforms CPU in accuracy",
        needs=Needs(real_data=True, what="GPU and CPU cells of the seed configurations"),
        note="the seed protocol trains 10 epochs on a GPU, 5 on a CPU",
    ),
    Claim(
        "gpu-tuning-gain",
        "GPU tuning adds 3-6 points of accuracy (Tuned - Default)",
        "Abstract",
        answers.conditions(
            ("CUDA", _acc(GPU_T, GPU_D), None),
            ("Mac GPU", _acc(MPS_T, MPS_D), None),
            need=False,
            minus=True,
            by=MODEL,
            by_open=OPEN,
        ),
        between(*GAIN_PTS, f"{GAIN_PTS[0]:g}-{GAIN_PTS[1]:g} points"),
        GAIN_PTS,
        "improved by 3-6 %",
        needs=Needs(real_data=True, what="GPU Tuned and Default cells on one host"),
    ),
    # ---- memory
    Claim(
        "quant-145mb",
        "CPU Quantized uses about 145 MB",
        "Sec. V, VII",
        answers.conditions(
            ("peak RSS", Level(CPU, quantized(peak_rss_mb), "MB"), None),
            ("tracemalloc peak", Level(CPU, quantized(heap_mb), "MB"), None),
            ("int8 model", Level(CPU, int8_size_mb, "MB"), None),
            need=False,
            by=MODEL,
            by_open=OPEN,
        ),
        seed_text="around 145 MB",
        comparable=(
            "the seed measured CPU memory with psutil and tracemalloc and never says which gave 145 MB, of what; ours: "
            "peak RSS of the training process (torch and its libraries), the tracemalloc peak, the int8 model"
        ),
        needs=Needs(what="a CPU Quantized cell"),
    ),
    Claim(
        "quant-least-memory",
        "CPU Quantized uses the least memory (peak RSS, others / Quantized)",
        "Sec. V, VII",
        answers.conditions(
            ("Default / Quantized", _speed(CPU_D, CPU_Q, peak_rss_mb, SPEED_FREE), None),
            ("Tuned / Quantized", _speed(CPU_T, CPU_Q, peak_rss_mb), None),
            by=MODEL,
            by_open=OPEN,
        ),
        above(1.0, "1x"),
        seed_text="consumed the least memory",
        needs=Needs(what="CPU Default, Tuned and Quantized cells on one host"),
        comparable=SAME_TRAINING,
        note="what quantization does shrink is the model: quant-smaller-model",
    ),
    Claim(
        "amp-less-memory",
        "GPU AMP uses less GPU memory than Default and Tuned (others / AMP)",
        "Sec. V",
        answers.conditions(
            ("Default / AMP", _speed(GPU_D, GPU_A, gpu_alloc_mb, SPEED_FREE), None),
            ("Tuned / AMP", _speed(GPU_T, GPU_A, gpu_alloc_mb), None),
            by=MODEL,
            by_open=OPEN,
        ),
        above(1.0, "1x"),
        seed_text="slightly less memory",
        needs=Needs(what="GPU Default, Tuned and AMP cells on one host"),
        note="torch.cuda.max_memory_allocated, the counter the seed used; a Tuned peak follows its batch",
    ),
    Claim(
        "p100-memory",
        "The P100 uses 300-600 MB of GPU memory",
        "Sec. V",
        answers.conditions(
            ("Default", Level(GPU_D, gpu_alloc_mb, "MB"), None),
            ("AMP", Level(GPU_A, gpu_alloc_mb, "MB"), None),
            ("Tuned", Level(GPU_T, gpu_alloc_mb, "MB"), None),
            by=MODEL,
            by_open=OPEN,
        ),
        between(300.0, 600.0, "300-600 MB"),
        seed_text="300-600 MB",
        needs=Needs(what="GPU Default, AMP and Tuned cells"),
        seed_hw=("P100",),
    ),
    Claim(
        "mps-memory-1000",
        "The Mac GPU peaks near 1000 MB (ResNet-18)",
        "Sec. V",
        Level({**MPS_D, "model": "resnet18"}, gpu_alloc_mb, "MB"),
        between(1000.0 * (1 - FIG_TOL), 1000.0, f"{1000 * (1 - FIG_TOL):g}-1000 MB"),
        1000.0,
        "nearly",
        comparable=(
            "the seed names no Mac GPU counter (max_memory_allocated is CUDA only); ours is the Metal driver allocation "
            "at the end of an epoch, not a peak"
        ),
    ),
    # ---- inference latency (batch 1, p50: the seed's "seconds per sample")
    Claim(
        "cpu-latency-above-13",
        "Every CPU configuration takes above 13 ms (latency, fastest form; the i7, i9, M3 Pro)",
        "Sec. V, VII",
        answers.conditions(
            ("Default", Level(CPU_D, fastest_ms, "ms"), None),
            ("Quantized", Level(CPU_Q, fastest_ms, "ms"), None),
            ("Tuned", Level(CPU_T, fastest_ms, "ms"), None),
            by=MODEL,
            by_open=OPEN,
        ),
        above(13.0, "13 ms"),
        seed_text="above 13 ms in all cases",
        needs=Needs(what="CPU Default, Quantized and Tuned cells"),
        seed_hw=SEED_CPUS,
        note="the seed timed seconds per sample and never gives its batch; ours is one synced batch-1 call",
    ),
    Claim(
        "cputuned-latency-40",
        "CPU Tuned on the i9: 40 ms, the worst latency",
        "Sec. V",
        Level(CPU_T, eager_ms, "ms"),
        _fig(40.0, "ms"),
        40.0,
        "the worst",
        seed_hw=("i9-9900",),
    ),
    Claim(
        "gpu-latency-below-5",
        "Every GPU configuration takes below 5 ms (latency; Zaratan's A100, the P100)",
        "Sec. V, VII",
        answers.conditions(
            ("Default", Level(GPU_D, slowest_ms, "ms"), None),
            ("AMP", Level(GPU_A, slowest_ms, "ms"), None),
            ("Tuned", Level(GPU_T, slowest_ms, "ms"), None),
            by=MODEL,
            by_open=OPEN,
        ),
        below(5.0, "5 ms"),
        seed_text="below 5 ms, all configurations",
        needs=Needs(what="CUDA Default, AMP and Tuned cells"),
        seed_hw=HPC_GPUS,
        note=f"{ON_HPC} (mps-latency-10-14)",
    ),
    Claim(
        "mps-latency-10-14",
        "The Mac GPU takes 10-14 ms (latency)",
        "Sec. V, VII",
        answers.conditions(
            ("Default", Level(MPS_D, eager_ms, "ms"), None),
            ("Tuned", Level(MPS_T, eager_ms, "ms"), None),
            need=False,
            by=MODEL,
            by_open=OPEN,
        ),
        between(10.0, 14.0, "10-14 ms"),
        seed_text="10-14 ms",
        needs=Needs(what="Apple GPU (torch-mps) Default or Tuned cells"),
        seed_hw=("M3 Pro",),
        note="Sec. VII puts the Mac above 13 ms",
    ),
    Claim(
        "amp-latency",
        "GPU AMP lowers latency (Default / AMP)",
        "Sec. V, abstract",
        _speed(GPU_D, GPU_A, eager_ms, SPEED_FREE),
        above(1.0, "1x"),
        seed_text="minor latency improvements",
        note="the abstract says considerable reductions; either needs AMP faster",
    ),
    Claim(
        "gpu-latency-below-cpu",
        "GPU configurations have lower latency than CPU ones (CPU / GPU)",
        "Sec. VII",
        answers.conditions(
            ("Default / Default", _speed(CPU_D, GPU_D, eager_ms, SPEED_FREE), None),
            ("Default / AMP", _speed(CPU_D, GPU_A, eager_ms, SPEED_FREE), None),
            ("Tuned / Tuned", _speed(CPU_T, GPU_T, eager_ms), None),
            by=MODEL,
            by_open=OPEN,
        ),
        above(1.0, "1x"),
        seed_text="lower inference latency",
        needs=Needs(what="GPU and CPU cells of the seed configurations"),
    ),
    Claim(
        "quant-lower-latency",
        "CPU quantization lowers latency (fp32 / int8 form)",
        "Sec. VII",
        Level(CPU, int8_speedup, "x"),
        above(1.0, "1x"),
        seed_text="reduces inference latency",
        note="one model as int8 beside its own fp32 form (PT2E int8 and compiled fp32; dynamic int8 and eager fp32)",
    ),
    Claim(
        "quant-smaller-model",
        "CPU quantization shrinks the model (int8 / fp32 size)",
        "Abstract, Sec. V",
        answers.conditions(("", Level(CPU, int8_size_ratio, "x"), None), exact=True, by=MODEL, by_open=OPEN),
        below(1.0, "1x"),
        seed_text="compact models",
        needs=Needs(what="a CPU Quantized cell"),
    ),
    # ---- the kit's own setups, beside the seed's questions
    faster(
        "kit-tuned-over-default",
        "GPU kit-tuned (bf16, channels-last, compile, graphs) over GPU Default",
        KIT_TUNED,
        {"backend": "torch-cuda", "variant": "default"},
        "the kit",
        free=(*SPEED_FREE, "pipeline"),
        kit=True,
    ),
    faster(
        "kit-tuned-gpu-over-quant-cpu",
        "GPU kit-tuned over CPU Quantized (int8): each side at its fastest (training img/s)",
        {**KIT_TUNED, "batch_size": 32},
        CPU_Q,
        "the kit",
        free=(*SPEED_FREE, "pipeline"),
        kit=True,
    ),
)
