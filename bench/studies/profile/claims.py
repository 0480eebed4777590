"""Seed 004's claims, as data (bench.core.claims): every statement of its Sec. VIII and abstract
that a measurement can check, and the kit's two-GPU comparisons beside them. The answer engine
(bench.core.answers) judges them; report.py's tables show numbers only.

What the claims read, per repeat (one cell each; every metric is readout.py's, the one place a
cell's rows become numbers, its epochs by their own number):
    time      gpu-over-cpu, b128-over-b64 and simpler-net-small-gain compare the seed's own
              quantity, the time of its 20 epochs x 8,005 images, projected from the timed epochs
              (readout.seed_hours: each epoch's loader start + 8,005 x the seconds per image after
              it; the CPU's default is a reduced protocol, so both sides are projections), read as
              seed runs per hour: GPU over CPU = CPU hours / GPU hours, the figure the report's
              CPU-vs-GPU table prints. Not throughput: a 3-step CPU epoch holds one loader start
              per 3 steps, the seed's epochs one per 125.
    per GPU   "GPU:0" is the first GPU a cell names (nn.DataParallel's output device), "GPU:1" the
              second. Utilisation and power: the median over the timed epochs of each epoch's mean;
              memory and temperature: the highest epoch maximum (the seed read nvidia-smi once,
              while training). Memory in MB = 10^6 bytes (the seed's MiB converted).
    two GPUs  the seed's batch was global: its "batch size 64" was 64 images a step spread over its
              two A6000s by nn.DataParallel, 128 likewise. The kit's batch_size is per GPU, so the
              seed's runs are dp cells at batch_size=32 and 64 on two GPUs (DP64, DP128), which the
              matrix lacks (its dp cells run 128 per GPU): `--set parallel=dp --set devices=0,1
              --set batch_size=32`. Memory, temperature and power readings are judged on the seed's
              A6000s only; "barely used" and the orderings (GPU:0 over GPU:1, 128 over 64) on any
              GPUs, one answer per workload.
    accuracy  the last epoch's test accuracy of cells that trained and tested on the whole split
              through the loader, with the ImageNet weights (a cell that trained real images from
              random weights is not the seed's transfer learning: it gives no value).

Thresholds, each the reading of a word:
    HUGE = 2.0          "a huge advantage" (GPU over CPU): at least 2x (the seed: 6.5x)
    LOW_UTIL = 20.0     "only 3 % ... 14 % ... the minimum utilization": each GPU below 20 %
    UTIL_PTS = 5.0      "(60-63) %" of the CPU: within 5 points of that range (one Task Manager reading)
    READING_TOL = 0.25  "around 3.4 GB", "152 W": within 25 % (one nvidia-smi reading)
    TEMP_C = 5.0        "reaches up to 59 degrees": within 5 degC
    LOAD_PCT = 10.0     "no significant amount of CPU utilization while loading the data": below 10 % of a step
    MOST_PCT = 50.0     "most of the time CPU was spent on the training": compute above 50 % of a step
    NO_EFFECT = 0.10    "doesn't have an effect on CPU memory": within 10 %
    ACC_PTS = 1.0       "around (98-99) %", "no significant differences", "without hampering": 1 point
                        (a ratio of accuracies within 1 %)
    SMALL_GAIN = 2.0    "not many significant improvements in GPU over the CPU": below 2x
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.core import answers
from bench.core.answers import Finding
from bench.core.claims import (
    Claim,
    Expect,
    Level,
    Measured,
    Needs,
    Ratio,
    above,
    below,
    between,
)
from bench.core.study import free_work
from bench.studies.profile import readout, seed
from bench.studies.profile.config import ProfileConfig

HUGE, LOW_UTIL, UTIL_PTS, READING_TOL, TEMP_C = 2.0, 20.0, 5.0, 0.25, 5.0
LOAD_PCT, MOST_PCT, NO_EFFECT, ACC_PTS, SMALL_GAIN = 10.0, 50.0, 0.10, 1.0, 2.0
MIB = 1.048576  # MB (10^6 bytes) per MiB, nvidia-smi's unit
SIMPLER = "resnet18"  # the seed's unnamed "simpler network": plain 3x3 convolutions, 1.8 GFLOPs at 224 px (DenseNet-121: 2.9)
SEED_HW = ("RTX A6000",)
SCALING = 0.95  # the kit's target for DDP: N GPUs at least 0.95 N times one GPU's images per second
WORK = free_work(ProfileConfig)  # its work params (config.py marks them): a Level's default `free`
SPEED_FREE = (*WORK, "dataset")  # a speed claim's (bench.core.claims: the dataset's name is no part of a rate)
DP_ON_NOTE = (
    "cuDNN caches its benchmarked algorithms per thread and nn.DataParallel runs each replica in a fresh thread every "
    "step, so with benchmark on every step searches again (the report's two-GPU section measures it); the DataParallel "
    "benchmark-on cells run a shorter protocol"
)
SEED_HOST = ("Gold 6256", "RTX A6000")  # the host's CPU readings, from a CPU cell or a GPU cell

# ---- per-repeat figures, from a cell's rows: readout.py's metrics (the one place rows become numbers)
of, gpu, gpu0_over_gpu1 = readout.of, readout.gpu, readout.gpu0_over_gpu1
seed_runs_per_hour, eval_img_per_s, final_acc_pct = readout.seed_runs_per_hour, readout.eval_img_per_s, readout.final_acc_pct
gpu_mem_total_mb, profile_pct, copy_over_kernels = readout.gpu_mem_total_mb, readout.profile_pct, readout.copy_over_kernels
UTIL, MEM, TEMP, POWER = readout.GPU_UTIL, readout.GPU_MEM, readout.GPU_TEMP, readout.GPU_POWER
IN_USE = readout.GPU_MEM_IN_USE


# ---- conditions read from one workload ---------------------------------------------------------
def each(*items: tuple[str, Level, Expect | None]) -> Measured:
    """Several levels of one side, each with its region, one answer per workload (and host)."""
    return answers.conditions(*items, per_workload=True)


def per_gpu(side: dict, key: str, agg: Callable[[list[float]], float], regions: tuple[Expect, ...], unit: str) -> Measured:
    return each(*((f"GPU:{i}", Level(side, gpu(key, i, agg), unit), e) for i, e in enumerate(regions)))


def around(x: float, tol: float, unit: str) -> Expect:
    """Within TOL (a fraction) of X."""
    return between(x * (1 - tol), x * (1 + tol), f"within {tol:.0%} of {x:,.0f} {unit}")


def near(x: float, tol: float, unit: str) -> Expect:
    """Within TOL units of X."""
    return between(x - tol, x + tol, f"within {tol:g} {unit} of {x:,.0f}")


def _not_read(study, cells) -> list[Finding]:
    return []


# ---- sides ---------------------------------------------------------------------------------------
GPU1 = {"backend": "torch-cuda", "variant": "finetune", "parallel": "none"}
CPU1 = {"backend": "torch-cpu", "variant": "finetune", "parallel": "none"}
SEED_RUN = {"model": "densenet121", "image_size": 224, "batch_size": 64, "pipeline": "loader"}
WHOLE = {"model": "densenet121", "pipeline": "loader", "max_steps": 0, "max_eval_batches": 0}  # the whole splits
DP = {"backend": "torch-cuda", "variant": "finetune", "parallel": "dp", "gpus": 2, "model": "densenet121"}
SEED_DP = {64: {**DP, "pipeline": "loader", "batch_size": 32}, 128: {**DP, "pipeline": "loader", "batch_size": 64}}
BATCH_NOTE = "the seed's batches were global, over two GPUs; the kit's are per GPU"
IMAGENET = Needs(
    real_data=True,
    what="the real cats-vs-dogs images with the ImageNet weights (densenet121-a639ec97.pth in the data dir); "
    "a cell that trained them from random weights gives no accuracy",
)


def _two(batch: int) -> Needs:
    return Needs(gpus=2, what=f"--set parallel=dp --set devices=0,1 --set batch_size={batch // 2}: the seed's global {batch}")


def _global(batch: int) -> str:
    return (
        f"the seed's batch {batch} was global, over its two GPUs; the kit's batch_size is per GPU, so its dp cell at "
        f"batch_size={batch // 2} is the seed's run (the matrix's dp cells run 128 per GPU)"
    )


def _reading(batch: int, key: str, what: str, agg, band: Callable[[float], Expect], unit: str, scale: float = 1.0) -> Measured:
    """The seed's nvidia-smi reading WHAT of both GPUs at global BATCH, each in BAND around it."""
    a, b = (scale * x for x in seed.GPU[batch][what])
    return per_gpu(SEED_DP[batch], key, agg, (band(a), band(b)), unit)


def _gpu_claim(cid: str, text: str, where: str, batch: int, rule: Measured, seed_text: str, note: str = "") -> Claim:
    return Claim(cid, text, where, rule, seed_text=seed_text, needs=_two(batch), seed_hw=SEED_HW, note=_global(batch) + note)


# the seed's memory readings are nvidia-smi's: judged on NVML's memory in use (the CUDA context and the
# allocator's cached blocks in it), not on the cell's own peak that the cell-to-cell claims read
IN_USE_NOTE = (
    "; ours: NVML's memory in use per GPU, as nvidia-smi reads it (every process on the GPU: a cell alone on it "
    "reads its own; the cell-to-cell claims read torch's peak, other processes left out)"
)


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "gpu-over-cpu",
        "GPU over CPU (DenseNet-121 fine-tune, 224 px, batch 64)",
        "Abstract, Sec. VIII.D",
        Ratio({**GPU1, **SEED_RUN}, {**CPU1, **SEED_RUN}, metric=seed_runs_per_hour, free=SPEED_FREE),
        above(HUGE, f"at least {HUGE:g}x ('a huge advantage')"),
        seed.CPU_OVER_GPU,
        "13 h / 2 h for 20 epochs",
        headline=True,
        note="both sides: the seed's 20 epochs x 8,005 images, projected; its GPU side was two A6000s under DataParallel",
    ),
    Claim(
        "b128-over-b64",
        "GPU: batch 128 over batch 64",
        "Sec. VIII.D",
        Ratio(
            {"backend": "torch-cuda", "batch_size": 128},
            {"backend": "torch-cuda", "batch_size": 64},
            seed_runs_per_hour,
            free=WORK,
        ),
        seed=seed.B128_OVER_B64,
        seed_text="2 h / 1 h 15 min",
        headline=True,
        note="the seed's run projected on both sides; " + BATCH_NOTE,
    ),
    Claim(
        "gpu-util-b64",
        "At batch 64 the GPUs are barely used (GPU:0 3 %, GPU:1 14 %)",
        "Sec. VIII.A, Fig. 4",
        per_gpu(SEED_DP[64], UTIL, statistics.median, (below(LOW_UTIL, "below 20 %"),) * 2, "%"),
        seed_text="3 % / 14 % (nvidia-smi, one moment)",
        needs=_two(64),
        note=_global(64) + "; 'barely used' is the workload's, judged on any GPU",
    ),
    Claim(
        "gpu-util-b128-higher",
        "The GPU is busier at batch 128 than at 64",
        "Sec. VIII.A, Figs. 4, 7",
        Ratio(
            {"backend": "torch-cuda", "variant": "finetune", "batch_size": 128},
            {"backend": "torch-cuda", "variant": "finetune", "batch_size": 64},
            gpu(UTIL, 0),
            free=WORK,
        ),
        above(1.0, "busier at 128 (above 1x)"),
        69 / 3,
        "GPU:0 69 % / 3 % (GPU:1 14 % at both)",
        note="GPU:0's utilisation; " + BATCH_NOTE,
    ),
    Claim(
        "gpu0-busier-b128",
        "At batch 128, GPU:0 is busier than GPU:1 (69 % against 14 %)",
        "Sec. VIII.A, Fig. 7",
        Level(SEED_DP[128], gpu0_over_gpu1(UTIL, statistics.median), "x"),
        above(1.0, "GPU:0 above GPU:1"),
        69 / 14,
        "69 % / 14 %",
        needs=_two(128),
        note=_global(128) + "; at its batch 64 GPU:1 was the busier (14 % against 3 %)",
    ),
    Claim(
        "cpu-util",
        "The CPU runs at 60-63 % while training",
        "Sec. VIII.A",
        Level({"variant": "finetune", "parallel": "none", **SEED_RUN}, of(readout.CPU_SYSTEM), "%"),
        between(60 - UTIL_PTS, 63 + UTIL_PTS, f"60-63 %, {UTIL_PTS:g} points either side"),
        (60.0, 63.0),
        "62 %; (60-63) % (Windows Task Manager)",
        seed_hw=SEED_HOST,
        note="system-wide CPU %; the seed does not say whether GPU or CPU was training: one answer each",
    ),
    Claim(
        "cpu-procs-threads-clock",
        "307 processes and 5,410 threads run, the CPU clocked at 4.10 GHz",
        "Sec. VIII.A, Fig. 9",
        each(
            ("processes", Level({**CPU1, **SEED_RUN}, of(readout.PROCESSES_MAX, max), ""), None),
            ("clock", Level({**CPU1, **SEED_RUN}, of(readout.CPU_MHZ, scale=1e-3), "GHz"), None),
        ),
        seed_text="307 processes, 5,410 threads, 4.10 GHz",
        comparable="counts of the seed's whole Windows desktop and its turbo clock describe that system, not the workload "
        "(the system's thread count is not carried)",
    ),
    Claim(
        "cpu-loading-insignificant",
        "On the CPU most of each step is training; loading the data takes no significant share",
        "Sec. VIII.A, Figs. 5-6",
        each(
            (
                "data loading",
                Level({**CPU1, "pipeline": "loader"}, profile_pct(readout.LOADING_SHARE), "%"),
                below(LOAD_PCT, "below 10 %"),
            ),
            (
                "compute",
                Level({**CPU1, "pipeline": "loader"}, profile_pct(readout.COMPUTE_SHARE), "%"),
                above(MOST_PCT, "above 50 %"),
            ),
        ),
        seed_text="Figs. 5-6 (no figure in its text)",
        needs=Needs(real_data=True),
        note="shares of a profiled step; decoding costs what the JPEGs' sizes cost",
    ),
    _gpu_claim(
        "gpu-mem-b64",
        "At batch 64 GPU:0 holds about 3.4 GB, GPU:1 2.2 GB of 48 GB",
        "Sec. VIII.B, Fig. 4",
        64,
        _reading(64, IN_USE, "mem_mb", max, lambda x: around(x, READING_TOL, "MB"), "MB", MIB),
        "3,564 / 2,374 MiB",
        IN_USE_NOTE,
    ),
    _gpu_claim(
        "gpu-mem-b128",
        "At batch 128 GPU:0 holds about 5 GB and GPU:1 1.7 GB",
        "Sec. VIII.B, Fig. 7",
        128,
        _reading(128, IN_USE, "mem_mb", max, lambda x: around(x, READING_TOL, "MB"), "MB", MIB),
        "5,060 / 1,838 MiB",
        IN_USE_NOTE,
    ),
    Claim(
        "gpu0-memory",
        "Under nn.DataParallel GPU:0 holds more memory than GPU:1",
        "Sec. VIII.B, Figs. 4, 7",
        Level({k: v for k, v in DP.items() if k != "model"}, gpu0_over_gpu1(MEM, max), "x"),
        above(1.0, "GPU:0 above GPU:1"),
        (3564 / 2374, 5060 / 1838),
        "3,564 / 2,374 MiB at 64; 5,060 / 1,838 MiB at 128",
        needs=Needs(gpus=2, what="--set parallel=dp --set devices=0,1"),
        note="an ordering: every dp cell answers it, whatever its batch (the kit's batch_size is per GPU)",
    ),
    Claim(
        "gpu-mem-grows-with-batch",
        "Training at the larger batch takes more GPU memory in all",
        "Sec. VIII.B",
        Ratio(
            {"backend": "torch-cuda", "batch_size": 128},
            {"backend": "torch-cuda", "batch_size": 64},
            gpu_mem_total_mb,
            free=WORK,
        ),
        above(1.0, "more at 128 (above 1x)"),
        (5060 + 1838) / (3564 + 2374),
        "6,898 / 5,938 MiB (both GPUs)",
        note="every GPU of a cell, summed, each the cell's own peak (torch's allocator: other processes on the GPU left out); "
        + BATCH_NOTE,
    ),
    Claim(
        "cpu-mem-hparam-free",
        "On the CPU the hyperparameters (batch size, learning rate) do not change memory use",
        "Sec. VIII.B",
        answers.conditions(
            (
                "batch 128 / 64",
                Ratio({**CPU1, "batch_size": 128}, {**CPU1, "batch_size": 64}, of(readout.RSS_MAX, max), free=WORK),
                None,
            ),
            (
                "lr 0.03 / 0.003",
                Ratio({**CPU1, "lr": 0.03}, {**CPU1, "lr": 0.003}, of(readout.RSS_MAX, max), free=WORK),
                None,
            ),
        ),
        between(1 - NO_EFFECT, 1 + NO_EFFECT, f"within {NO_EFFECT:.0%} (no effect)"),
        seed_text="no effect (Task Manager)",
        needs=Needs(what="CPU cells at batch 128 or lr 0.03 beside the matrix's: --set batch_size=128, --set lr=0.03"),
        note="ours: the process tree's peak RSS; the seed's: the whole system's memory in use (32 of 512 GB)",
    ),
    Claim(
        "cpu-mem-32gb",
        "Training on the CPU takes 32 GB of the host's 512 GB",
        "Sec. VIII.B, Fig. 8",
        Level({**CPU1, **SEED_RUN}, of(readout.RSS_MAX, max, 1e-3), "GB"),
        seed=32.0,
        seed_text="32 GB of 512 GB (Task Manager)",
        comparable="the seed read its whole Windows system's memory in use; ours is the training process tree's peak RSS",
    ),
    _gpu_claim(
        "gpu-temp-b64",
        "At batch 64 GPU:0 reaches 59 °C and GPU:1 38 °C ('considered normal')",
        "Sec. VIII.C, Fig. 4",
        64,
        _reading(64, TEMP, "temp_c", max, lambda x: near(x, TEMP_C, "°C"), "°C"),
        "59 / 38 °C",
    ),
    _gpu_claim(
        "gpu-temp-b128",
        "At batch 128 GPU:0 reaches 69 °C and GPU:1 41 °C",
        "Sec. VIII.C, Fig. 7",
        128,
        _reading(128, TEMP, "temp_c", max, lambda x: near(x, TEMP_C, "°C"), "°C"),
        "69 / 41 °C",
    ),
    _gpu_claim(
        "gpu-power-b64",
        "At batch 64 GPU:0 draws 77 W and GPU:1 23 W of 300 W",
        "Fig. 4",
        64,
        _reading(64, POWER, "power_w", statistics.median, lambda x: around(x, READING_TOL, "W"), "W"),
        "77 / 23 W",
    ),
    _gpu_claim(
        "gpu-power-b128",
        "At batch 128 GPU:0 draws 152 W of 300 W and GPU:1 only 23 W",
        "Sec. VIII.C, Fig. 7",
        128,
        _reading(128, POWER, "power_w", statistics.median, lambda x: around(x, READING_TOL, "W"), "W"),
        "152 / 23 W",
    ),
    Claim(
        "cpu-temp",
        "The CPU stays at 60-70 °C whatever the batch size",
        "Sec. VIII.C, Fig. 9",
        Measured(_not_read),
        seed_text="60-70 °C",
        needs=Needs(what="a CPU temperature reading, which the kit's sampler does not take"),
    ),
    Claim(
        "b128-keeps-accuracy",
        "Batch 128 trains faster without hampering the accuracy",
        "Sec. VIII.D",
        Ratio({**GPU1, **WHOLE, "batch_size": 128}, {**GPU1, **WHOLE, "batch_size": 64}, final_acc_pct, free=WORK),
        above(1 - ACC_PTS / 100, f"b128's accuracy at most {ACC_PTS:g} % below b64's"),
        seed_text="'without hampering the accuracy'",
        needs=IMAGENET,
        note="the last epoch's test accuracy, b128 over b64; " + BATCH_NOTE,
    ),
    Claim(
        "copy-dominates",
        "Copying data to the GPU takes the most time in training (the 't' operator)",
        "Sec. VIII.D, Fig. 11",
        Level({"backend": "torch-cuda", "variant": "finetune", "pipeline": "loader"}, copy_over_kernels, "x"),
        above(1.0, "copies above the kernels' time"),
        seed_text="'t', the top operator (Fig. 11)",
        note="copies' share of a profiled step over the kernels'; aten::t is a transpose, not a copy",
    ),
    Claim(
        "inference-per-image",
        "Testing one image takes about 5 s on the CPU and 2-3 s on the GPU",
        "Sec. VIII.E",
        Ratio({**GPU1, **SEED_RUN}, {**CPU1, **SEED_RUN}, metric=eval_img_per_s, free=SPEED_FREE),
        seed=(seed.INFERENCE_S_CPU / seed.INFERENCE_S_GPU[1], seed.INFERENCE_S_CPU / seed.INFERENCE_S_GPU[0]),
        seed_text="5 s / 2-3 s per image",
        comparable="the seed timed single images, seconds each; the kit times batched evaluation: ours is per image in a batch",
    ),
    Claim(
        "accuracy",
        "Test accuracy about 98-99 % on both CPU and GPU, with no significant difference",
        "Sec. VIII.D, VIII.F",
        answers.conditions(
            (
                "CPU",
                Level({**CPU1, **WHOLE}, final_acc_pct, "%"),
                between(98 - ACC_PTS, 99 + ACC_PTS, "98-99 %, a point either side"),
            ),
            (
                "GPU",
                Level({**GPU1, **WHOLE}, final_acc_pct, "%"),
                between(98 - ACC_PTS, 99 + ACC_PTS, "98-99 %, a point either side"),
            ),
            ("CPU / GPU", Ratio({**CPU1, **WHOLE}, {**GPU1, **WHOLE}, final_acc_pct, free=WORK), None),
        ),
        between(1 - ACC_PTS / 100, 1 + ACC_PTS / 100, f"within {ACC_PTS:g} % of each other"),
        seed_text="98-99 %, CPU and GPU alike",
        needs=IMAGENET,
        note="the whole splits on both sides (the CPU's default protocol cannot judge it)",
    ),
    Claim(
        "simpler-net-small-gain",
        "For a simpler network the GPU gains little over the CPU",
        "Abstract",
        Ratio(
            {**GPU1, **SEED_RUN, "model": SIMPLER},
            {**CPU1, **SEED_RUN, "model": SIMPLER},
            metric=seed_runs_per_hour,
            free=SPEED_FREE,
        ),
        below(SMALL_GAIN, f"below {SMALL_GAIN:g}x ('not many significant improvements')"),
        seed_text="'not many significant improvements'",
        needs=Needs(what=f"--set model={SIMPLER} on both platforms"),
        note=f"the seed names and ran no simpler network; {SIMPLER} stands in (--set model={SIMPLER} on both platforms), "
        "timed as gpu-over-cpu",
    ),
    Claim(
        "gpu0-busier",
        "Under nn.DataParallel GPU:0 is busier than GPU:1",
        "Sec. VIII.A, Figs. 4, 7",
        Level({k: v for k, v in DP.items() if k != "model"}, gpu0_over_gpu1(UTIL, statistics.median), "x"),
        above(1.0, "GPU:0 above GPU:1"),
        69 / 14,
        "69 % / 14 % at 128 (at 64 GPU:1 was the busier: 14 % against 3 %)",
        needs=Needs(gpus=2, what="--set parallel=dp --set devices=0,1"),
        note="an ordering: every dp cell answers it, whatever its batch (the kit's batch_size is per GPU)",
    ),
    # the kit's own comparisons (the seed ran its two GPUs, never against one): images per second,
    # the same batch per GPU on both sides
    Claim(
        "dp-over-one",
        "2 GPUs (DataParallel, cudnn.benchmark on: the seed's) over 1",
        "the kit (Sec. VIII.A's two GPUs)",
        Ratio(
            {"backend": "torch-cuda", "gpus": 2, "parallel": "dp", "cudnn_benchmark": True},
            {"backend": "torch-cuda", "gpus": 1, "parallel": "none", "cudnn_benchmark": True},
            of(readout.IPS),
            free=WORK,
        ),
        headline=True,
        kit=True,
        note=DP_ON_NOTE,
    ),
    Claim(
        "dp-nobench-over-one",
        "2 GPUs (DataParallel, cudnn.benchmark off) over 1 (benchmark on)",
        "the kit",
        Ratio(
            {"backend": "torch-cuda", "gpus": 2, "parallel": "dp", "cudnn_benchmark": False},
            {"backend": "torch-cuda", "gpus": 1, "parallel": "none", "cudnn_benchmark": True},
            of(readout.IPS),
            free=WORK,
        ),
        kit=True,
        note="DataParallel scatters, replicates the model and gathers on GPU:0 every step, from one process",
    ),
    Claim(
        "ddp-over-one",
        "2 GPUs (DDP) over 1",
        "the kit",
        Ratio(
            {"backend": "torch-cuda", "gpus": 2, "parallel": "ddp"},
            {"backend": "torch-cuda", "gpus": 1, "parallel": "none"},
            of(readout.IPS),
            free=WORK,
        ),
        headline=True,
        kit=True,
    ),
    Claim(
        "ddp-efficiency-2",
        "DDP over 2 GPUs scales at 0.95 or better (the kit's target)",
        "the kit",
        Ratio(
            {"backend": "torch-cuda", "gpus": 2, "parallel": "ddp"},
            {"backend": "torch-cuda", "gpus": 1, "parallel": "none"},
            of(readout.IPS),
            free=WORK,
        ),
        above(2 * SCALING, f"2 GPUs at least {2 * SCALING:g}x one (scaling efficiency {SCALING:g})"),
        kit=True,
    ),
    Claim(
        "ddp-efficiency-4",
        "DDP over 4 GPUs scales at 0.95 or better (the kit's target)",
        "the kit",
        Ratio(
            {"backend": "torch-cuda", "gpus": 4, "parallel": "ddp"},
            {"backend": "torch-cuda", "gpus": 1, "parallel": "none"},
            of(readout.IPS),
            free=WORK,
        ),
        above(4 * SCALING, f"4 GPUs at least {4 * SCALING:g}x one (scaling efficiency {SCALING:g})"),
        kit=True,
    ),
    Claim(
        "ddp-over-dp",
        "DDP over DataParallel, 2 GPUs, cudnn.benchmark off",
        "the kit",
        Ratio(
            {"backend": "torch-cuda", "gpus": 2, "parallel": "ddp", "cudnn_benchmark": True},
            {"backend": "torch-cuda", "gpus": 2, "parallel": "dp", "cudnn_benchmark": False},
            of(readout.IPS),
            free=WORK,
        ),
        kit=True,
        note="DDP's ranks keep cuDNN's benchmark on (one process, one thread each); DataParallel's best is benchmark off",
    ),
)
