"""Seed 003's claims, as data (bench.core.claims): every checkable statement of its Tables 1-3
and 5-8 and of its key findings, roofline interpretation and conclusion, each with the rule
that measures it from cells (readout.py's metrics and findings: the one place the rows become
numbers); bench.core.answers judges them all by one policy.

The seed's devices: its T4 is our torch-cuda `fp32` (TF32 off: a T4 has none), its M3 Pro our
torch-mps, its 4-vCPU e2-standard-4 our torch-cpu; scenario A at its batch (128; SqueezeNet1.1
64, config.SEED_BATCH), its loader (`pipeline=loader`). A ratio between two of OUR devices
tests the claim's shape (which model gains most, which side of a ridge a point lies); its size
belongs to those two devices. Absolute figures (Tables 3, 5, 7) are judged only on the seed's
own device (`seed_hw`), elsewhere "not comparable" with ours beside, and "needs the seed's
hardware" where ours did not run on the real tree either; anything the input pipeline, a loss or
a NaN touches needs the real Tiny-ImageNet tree.

Which pipeline a claim reads, and its label says so: a claim about the loader (the headline's GPU
over CPU, Table 3, the loader gap) reads `loader`, and through a loader of synthetic JPEGs the
loader's decode cost is in every rate and ratio, not the model's alone; a claim about the model on
its device (how near its roof it trains) reads `synthetic-gpu`, one batch kept on the device, the
model's own speed, which no loader caps.

Not declared: Table 4 (epoch times) restates Table 3: its seconds x Table 3's img/s = the
seed's epoch, 6,400 images in 22 of 24 entries (3,200 for SqueezeNet1.1 on the T4), so each is
Table 3's throughput again; the report projects ours to that epoch beside it. Hypotheses (1.2),
the "why T4 / why CPU" explanations and 7.2's "clear benefits" are not results.

Thresholds, each the reading of a word:
    TIME_TOL = 0.25       Table 3's img/s "agree" within 25 % (on the seed's device only)
    PARAMS_TOL = 5e3      "11.69 M parameters": the count to two decimals of a million
    PEAK_SHARE = 0.5-1.1  Table 7's "peak" (its CPU's "approximate"): a measured ceiling on the
                          seed's device reaches at least half of it and not 10 % past it (the
                          H100 reference's GEMM and triad reach 77 % and 90 % of its datasheet)
    GPU_CPU = 10-50x      "GPU provides 10-50x acceleration" (7.3; 7.1: "~10x ... up to ~50x")
    M3_CPU = 7-15x        "substantial acceleration over CPU (~7x-15x)"
    1x                    every "faster", "gains more", "improve", "lowest", "highest",
                          "climbs toward the roof": the ratio's interval wholly above (or below) 1
    the ridge             "memory-bound", "on the bandwidth slope": a point's intensity left of
                          its device's ridge at both bounds (its unfused and its compulsory
                          bytes); right of it at both: the compute side; between: undecided
    one pass              "gives NaNs": one training pass with a non-finite loss
"""

from __future__ import annotations

from bench.core import answers
from bench.core.claims import Claim, Expect, Level, Needs, Ratio, above, below, between, faster
from bench.core.study import free_work
from bench.studies.roofline import seed
from bench.studies.roofline.config import MODELS, SEED_BATCH, RooflineConfig
from bench.studies.roofline.readout import (
    Part,
    ai_order,
    bar,
    bw_roof,
    compute_roof,
    cpu_util,
    gain,
    gpu_util,
    nan_count,
    params_at,
    per_config,
    sweep_climb,
    sweep_gain,
    train_ips,
    train_roof_pct,
    val_ips,
    val_roof_pct,
)

TIME_TOL, PARAMS_TOL, PEAK_SHARE = 0.25, 5e3, (0.5, 1.1)
GPU_CPU, M3_CPU = (10.0, 50.0), (7.0, 15.0)
LIGHT, HEAVY = ("mobilenet_v2", "squeezenet1_1"), ("resnet18", "resnet50")
SEED_CLASSES = 1000  # the seed's torchvision models kept ImageNet's head (Table 1's counts); ours have 200
WORK = free_work(RooflineConfig)  # its work params (config.py marks them): a Level's default `free`
SPEED_FREE = (*WORK, "dataset")  # a speed claim's (bench.core.claims: the dataset's name is no part of a rate)

GPU, MPS_B, CPU = "torch-cuda", "torch-mps", "torch-cpu"
# the seed's device -> our backend, its hardware (substrings of a device name), what it needs
DEVICES = {
    "T4": (GPU, ("T4",), "the seed's Tesla T4 (torch-cuda)"),
    "MPS": (MPS_B, ("M3 Pro",), "an Apple GPU (torch-mps)"),
    "CPU": (CPU, ("e2-standard-4",), "the seed's 4-vCPU e2-standard-4 (torch-cpu)"),
}
MPS = Needs(what=DEVICES["MPS"][2])
FREE = (*SPEED_FREE, "batch_size")  # one model beside another: each at its own batch (SqueezeNet1.1's 64)
ONE_ABOVE, ONE_BELOW = above(1.0, "above 1x"), below(1.0, "below 1x")
LEFT = below(1.0, "left of the ridge (below 1x)")
RIGHT = above(1.0, "right of the ridge (above 1x)")


def side(backend: str, model: str) -> dict:
    """The seed's scenario-A set-up on BACKEND: fp32, its loader."""
    return {"backend": backend, "variant": "fp32", "model": model, "pipeline": "loader", "scenario": "A"}


def side_any(model: str, pipeline: str) -> dict:
    """Scenario A at fp32 through PIPELINE on any backend (a pair stays on one)."""
    return {"variant": "fp32", "model": model, "pipeline": pipeline, "scenario": "A"}


def on_device(backend: str, model: str) -> dict:
    """The seed's scenario-A set-up on BACKEND, one batch kept on the device (synthetic-gpu): the
    model's own speed, which no input pipeline caps."""
    return {**side(backend, model), "pipeline": "synthetic-gpu"}


def point(platform: str, model: str) -> dict:
    """MODEL's scenario-A training point on any PLATFORM backend at fp32 and the seed's batch."""
    return {"platform": platform, "variant": "fp32", "scenario": "A", "model": model, "batch_size": SEED_BATCH.get(model, 128)}


def speedup(a: str, b: str, model: str) -> Ratio:
    """MODEL's img/s on backend A over B's (the seed's Table 8 where A and B are two of its devices)."""
    return Ratio(side(a, model), side(b, model), free=SPEED_FREE)


# ---- Table 8 and the findings that read it -----------------------------------------------------
def _table8() -> list[Claim]:
    out = []
    for m, (gpu_m3, _, m3_cpu) in seed.SPEEDUP.items():
        out.append(
            faster(
                f"t8-{m}-gpu-m3",
                f"GPU over M3 Pro, {m} (fp32, scenario A, loader)",
                side(GPU, m),
                side(MPS_B, m),
                "Table 8",
                gpu_m3,
                f"Table 8: {gpu_m3}x",
                headline=False,
                needs=MPS,
                free=SPEED_FREE,
            )
        )
        out.append(
            faster(
                f"t8-{m}-m3-cpu",
                f"M3 Pro over CPU, {m} (fp32, scenario A, loader)",
                side(MPS_B, m),
                side(CPU, m),
                "Table 8",
                m3_cpu,
                f"Table 8: {m3_cpu}x",
                headline=False,
                needs=MPS,
                free=SPEED_FREE,
            )
        )
    return out


def device_speedup(a: str, b: str, model: str) -> Ratio:
    """MODEL's img/s on backend A over B's with one batch kept on each device (synthetic-gpu): the
    model's own speedup, which no loader caps on either side."""
    return Ratio(on_device(a, model), on_device(b, model), free=SPEED_FREE)


def _gains_over(a: str, b: str, pairs: list[tuple[str, str]]) -> list[Part]:
    """For each (X, Y): model X's A-over-B speedup over model Y's, claimed above 1x. A claim about
    the models (compute-heavy gains most) reads their on-device speedups: through the loader the
    light models' GPU rate is capped by decoding synthetic JPEGs, which is the loader's property,
    not the model's."""
    return [gain(f"{x} / {y}", device_speedup(a, b, x), device_speedup(a, b, y), ONE_ABOVE) for x, y in pairs]


LOADER_NOTE = "on synthetic JPEGs the loader's decode cost is in this ratio (synthetic-gpu: the section's table)"
HEADLINE = tuple(
    faster(
        f"gpu-over-cpu-{m}",
        f"GPU over CPU, {m} (fp32, scenario A, loader)",
        side(GPU, m),
        side(CPU, m),
        "Table 8",
        s[1],
        f"Table 8: {s[1]}x",
        note=LOADER_NOTE,
        free=SPEED_FREE,
    )
    for m, s in seed.SPEEDUP.items()
)

FINDINGS = (
    Claim(
        "gpu-cpu-10-50x",
        "GPUs outperform CPUs by 10-50x, from ~10x on light models up to ~50x on compute-heavy ones",
        "7.1 #1, 7.3, 8 #1",
        answers.conditions(*((m, speedup(GPU, CPU, m), None) for m in MODELS), by_device=True),
        between(*GPU_CPU, "10-50x"),
        seed_text="10-50x (its own Table 8: 14.2-35.5x)",
        note=(
            "the size of a GPU/CPU ratio belongs to the two devices: an H100 over 2 EPYC cores is not a T4 over 4 vCPUs; "
            + LOADER_NOTE
        ),
    ),
    Claim(
        "heavy-gains-most",
        "ResNet50 (compute-heavy) gains most from the GPU; MobileNetV2 and SqueezeNet (memory-bound) gain least",
        "7.1 #3, 7.3, 7.4, 8 #2",
        answers.conditions(
            *_gains_over(GPU, CPU, [("resnet50", m) for m in MODELS if m != "resnet50"] + [("resnet18", m) for m in LIGHT])
        ),
        ONE_ABOVE,
        seed_text="its own Table 8 ranks ResNet18 (35.5x) above ResNet50 (29.2x)",
        note=(
            "each value is one model's GPU/CPU speedup over another's (per repeat, the GPU's model-over-model img/s over "
            "the CPU's), both sides with one batch kept on the device (synthetic-gpu): through the loader the light "
            "models' GPU rate is capped by decoding synthetic JPEGs, which would make 'compute-heavy gains most' partly "
            "the loader's; the seed's own Table 8 ratios (through its loader) are the gpu-over-cpu rows"
        ),
    ),
    Claim(
        "m3-between",
        "The Apple M3 Pro (MPS) lands between the CPU and the NVIDIA GPU",
        "7.1 #2, 8 #1, 8 #3",
        answers.conditions(
            *((f"{m} GPU / MPS", speedup(GPU, MPS_B, m), None) for m in MODELS),
            *((f"{m} MPS / CPU", speedup(MPS_B, CPU, m), None) for m in MODELS),
        ),
        ONE_ABOVE,
        seed_text="GPU/M3 1.93-2.87x, M3/CPU 7.3-15.0x",
        needs=MPS,
        note="'closer to the GPU for many workloads' is not judged: it names no measure of closeness",
    ),
    Claim(
        "m3-cpu-7-15x",
        "The M3 Pro accelerates training over the CPU by ~7-15x, more for deeper models",
        "7.3",
        answers.conditions(
            *((m, speedup(MPS_B, CPU, m), between(*M3_CPU, "7-15x")) for m in MODELS),
            *_gains_over(MPS_B, CPU, [("resnet50", m) for m in LIGHT]),
            by_device=True,
        ),
        ONE_ABOVE,
        seed_text="~7-15x (its Table 8: 7.3-15.0x, ResNet50 highest)",
        needs=MPS,
    ),
    Claim(
        "mbv2-lowest-ai",
        "MobileNetV2 has the lowest arithmetic intensity: the most memory-bound model",
        "3.2, 6.4",
        answers.conditions(
            *(ai_order(f"mobilenet_v2 / {m}", "mobilenet_v2", m, ONE_BELOW) for m in MODELS if m != "mobilenet_v2")
        ),
        ONE_BELOW,
        seed_text="AI 0.0240 against 0.0392-0.0423 (FLOPs over the model's size)",
        note=(
            "each value is one model's training FLOPs per byte over another's at batch 128, fp32, its bounds the two byte "
            "counts (unfused op-by-op traffic, compulsory bytes); counts are data-independent. The seed divided FLOPs by "
            "the model's size instead"
        ),
    ),
    Claim(
        "resnet50-highest-ai",
        "ResNet50 has the highest arithmetic intensity and benefits most from GPU compute",
        "3.2",
        answers.conditions(*(ai_order(f"resnet50 / {m}", "resnet50", m, ONE_ABOVE) for m in MODELS if m != "resnet50")),
        ONE_ABOVE,
        seed_text="AI 0.0423 against 0.0240-0.0408 (FLOPs over the model's size)",
        note="its intensities as mbv2-lowest-ai's; 'benefits most from GPU compute' is heavy-gains-most",
    ),
    Claim(
        "cpu-memory-bound",
        "The cloud CPU is always memory-bound: every model on the bandwidth slope, even ResNet50",
        "6.4, 7.1 #5, 8 #5",
        answers.conditions(*(bar(m, point("cpu", m), LEFT) for m in MODELS)),
        LEFT,
        seed_text="all models far below the compute roof, on the bandwidth slope",
        note=(
            "each value is a model's fp32 training intensity over the CPU's measured ridge, its bounds from the unfused "
            "to the compulsory bytes: the run's real traffic lies between them"
        ),
    ),
    Claim(
        "t4-bound-sides",
        "On the GPU, MobileNetV2 and SqueezeNet lie on the bandwidth slope; the ResNets reach the compute side",
        "6.4, 8 #5",
        answers.conditions(
            *(bar(m, point("cuda", m), LEFT) for m in LIGHT),
            *(bar(m, point("cuda", m), RIGHT) for m in HEAVY),
        ),
        seed_text="T4: light models memory-bound, ResNet50 toward the compute ceiling",
        note="each value as cpu-memory-bound's, against the GPU's fp32 ridge (the seed's precision)",
    ),
    Claim(
        "mps-mixed-bound",
        "On the M3 Pro, MobileNetV2 and SqueezeNet remain memory-bound (MPS is mixed-bound depending on model)",
        "6.4, 8 #5",
        answers.conditions(*(bar(m, point("mps", m), LEFT) for m in LIGHT)),
        LEFT,
        seed_text="small models memory-bound; ResNet50 closer to compute-bound",
        needs=MPS,
        note="'ResNet50 is closer to compute-bound but still below the roof' is not judged: 'closer' names no side of the ridge",
    ),
    Claim(
        "resnet50-only-toward-roof",
        "ResNet50 is the only model that climbs significantly toward the compute roof on the GPU (synthetic-gpu)",
        "6.4",
        answers.conditions(
            *(
                (f"resnet50 / {m}", Ratio(on_device(GPU, "resnet50"), on_device(GPU, m), train_roof_pct, "x", FREE), None)
                for m in MODELS
                if m != "resnet50"
            ),
            by_device=True,
        ),
        ONE_ABOVE,
        seed_text="ResNet50 at 16 % of the T4's peak",
        note=(
            "each value is ResNet50's % of roof over another model's, fp32 training on synthetic-gpu (the model's own "
            "speed); the loader of synthetic JPEGs caps the lighter ones (the H100 reference's ResNet-18: 7,780 img/s "
            "through it, 16,924 on the device)"
        ),
    ),
    Claim(
        "resnet50-16pct-of-peak",
        "ResNet50 on the T4 reaches 1.3 TFLOP/s, 16 % of its peak",
        "6.4",
        Level(side(GPU, "resnet50"), val_roof_pct, "% of roof"),
        seed=16.0,
        seed_text="1.3 TFLOP/s of 8.1",
        comparable=(
            "the seed's 1.3 TFLOP/s is Table 3's val img/s x its 224-px MAC count over the T4's datasheet peak; ours is "
            "the validation pass's 64-px FLOPs over the measured roof (t3-resnet50-t4 judges the img/s)"
        ),
    ),
    Claim(
        "loader-dominates-light",
        "Memory bandwidth and input-pipeline time dominate for the lighter models",
        "7.3, 7.6",
        answers.conditions(
            *(
                gain(
                    f"{lt} / {h}",
                    Ratio(side_any(lt, "loader"), side_any(lt, "synthetic-gpu"), free=SPEED_FREE),
                    Ratio(side_any(h, "loader"), side_any(h, "synthetic-gpu"), free=SPEED_FREE),
                    ONE_BELOW,
                )
                for lt in LIGHT
                for h in HEAVY
            )
        ),
        ONE_BELOW,
        seed_text="'Python input pipeline overhead'",
        needs=Needs(real_data=True),
        note=(
            "each value is a light model's loader / synthetic-gpu img/s over a ResNet's on one device and run: below 1x, "
            "the loader costs the light model more"
        ),
    ),
)


# ---- the batch sweep (Table 6, 6.3, 7.1 #4) -------------------------------------------------
SQ_SWEEP = {"model": "squeezenet1_1", "scenario": "B", "variant": "fp32"}
BATCH = (
    Claim(
        "batch-toward-roof",
        "Larger batches raise achieved FLOP/s toward the compute roof, until memory pressure or instability",
        "1.2, 6.3, 7.1 #4, 7.5, 8 #4",
        answers.conditions(per_config({"scenario": "B"}, sweep_climb, "x"), required=()),
        above(1.0, "the sweep's peak above its smallest batch (above 1x)"),
        seed_text="SqueezeNet1.1: b32 ~50, b64 ~80 GFLOP/s",
        note="each value is a sweep's highest achieved FLOP/s over its smallest batch's (one batch kept on the device)",
    ),
    Claim(
        "sweep-b32-b64",
        "SqueezeNet1.1's throughput and FLOP/s improve from batch 32 to 64 on the GPU",
        "Table 6",
        answers.conditions(
            ("img/s b64 / b32", Level({**SQ_SWEEP, "platform": "cuda"}, sweep_gain(64, 32), "x"), None),
            ("img/s b64 / b32", Level({**SQ_SWEEP, "platform": "mps"}, sweep_gain(64, 32), "x"), None),
            by_device=True,
        ),
        above(1.0, "b64 faster than b32 (above 1x)"),
        300 / 160,
        "~300 / ~160 img/s",
        note=(
            "'batch 64 is optimal' is not judged: it rests on batch 128's NaNs (squeezenet-nan-b128); the seed's caption "
            "says T4, its text MPS; its sweep went through its loader, ours trains one batch kept on the device"
        ),
    ),
    Claim(
        "squeezenet-nan-b128",
        "SqueezeNet1.1 gives NaNs at batch 128",
        "2.3, Table 6, 7.1 #4",
        answers.conditions(
            nan_count(
                "non-finite passes",
                {"model": "squeezenet1_1", "variant": "fp32", "scenario": "A", "batch_size": 128},
                above(0.5, "one pass or more"),
            )
        ),  # fmt: skip
        seed_text="NaNs / unstable at b128 (on its T4 under PyTorch 2.8)",
        needs=Needs(
            real_data=True,
            what="a scenario-A pass at batch 128: --only model=squeezenet1_1 --only scenario=A --set batch_size=128",
        ),
        note="the sweep's finite losses settle nothing: it trains on one random-noise batch",
    ),
    Claim(
        "sweep-mps-128-256-512",
        "On the M3 Pro, SqueezeNet1.1 gains strongly from batch 128 to 256 and regresses at 512",
        "6.3",
        answers.conditions(
            ("img/s b256 / b128", Level({**SQ_SWEEP, "backend": MPS_B}, sweep_gain(256, 128), "x"), ONE_ABOVE),
            ("img/s b512 / b256", Level({**SQ_SWEEP, "backend": MPS_B}, sweep_gain(512, 256), "x"), ONE_BELOW),
            by_device=True,
        ),
        seed_text="gain 128 to 256, drop at 512 (its 5.2 names CSVs of 128/256/512; Table 6 shows 32/64/128)",
        needs=MPS,
    ),
)


# ---- the seed's tables: 1-2 (counts), 3 (throughput), 5 (utilisation), 7 (peaks) -------------
CX_NOTE = (
    "counted with the seed's 1,000-class head (ours train 200); its FLOPs (MACs at 224 px, 1,000 classes) and AI (FLOPs "
    "over the model's size) do not convert to ours: the complexity table shows them beside"
)


def _complexity() -> list[Claim]:
    out = []
    for m, (p, g224, mb, ai) in seed.COMPLEXITY.items():
        n = p * 1e6
        out.append(
            Claim(
                f"cx-{m}",
                f"{m} has {p} M parameters (with the seed's 1,000-class head)",
                "Tables 1-2",
                answers.conditions(
                    ("parameters", Level({"model": m}, params_at(SEED_CLASSES), "params"), None),
                    exact=True,  # a count that no device changes: one answer, wherever it ran
                ),
                between(n - PARAMS_TOL, n + PARAMS_TOL, f"{p} M to two decimals"),
                seed_text=f"{p} M params; {g224} G 'FLOPs' (MACs) per 224-px image; {mb} MB; AI {ai}",
                note=CX_NOTE,
            )
        )
    return out


def _perf() -> list[Claim]:
    out = []
    for (m, dev), (tr, va, tf_tr, tf_va, mem) in seed.PERF.items():
        backend, hw, what = DEVICES[dev]
        s = {**side(backend, m), "batch_size": SEED_BATCH.get(m, 128)}

        def band(x: float) -> Expect:
            return between(x * (1 - TIME_TOL), x * (1 + TIME_TOL), f"within {TIME_TOL:.0%} of {x:,}")

        mem_text = f"; {mem:,} MB peak GPU memory" if mem else ""
        out.append(
            Claim(
                f"t3-{m}-{dev.lower()}",
                f"{m} on the seed's {dev}: training and validation img/s (loader)",
                "Table 3",
                answers.conditions(
                    ("train img/s", Level(s, train_ips, "img/s"), band(tr)),
                    ("val img/s", Level(s, val_ips, "img/s"), band(va)),
                    by_device=True,
                ),
                seed_text=f"{tr} / {va} img/s; {tf_tr} / {tf_va} TFLOP/s{mem_text}",
                needs=Needs(real_data=True, what=what),
                seed_hw=hw,
                note="not judged: its TFLOP/s (img/s x 224-px MACs)" + (", its GPU MB (no counter named)" if mem else ""),
            )
        )
    return out


UTIL_NOTE = (
    "ours are read through the timed pass; the seed's were not: its CPU reads 0.0 in 5 of 12 (an unprimed "
    "psutil.cpu_percent()), its T4 0-3 % busy while training at 100-350 img/s"
)


def _util() -> list[Claim]:
    out = []
    for dev in ("T4", "MPS", "CPU"):
        backend, hw, what = DEVICES[dev]
        items = []
        for m in MODELS:
            s = side(backend, m)
            if dev == "T4":
                items.append((f"{m} GPU %", Level(s, gpu_util, "%"), None))
            items.append((f"{m} CPU %", Level(s, cpu_util, "%"), None))
        figs = "; ".join(
            f"{m} " + ("GPU N/A" if g is None else f"GPU {g}") + f", CPU {c} %"
            for (m, d), (g, c) in seed.UTIL.items()
            if d == dev
        )
        out.append(
            Claim(
                f"t5-util-{dev.lower()}",
                f"GPU and CPU utilisation on the seed's {dev}",
                "Table 5",
                answers.conditions(*items, by_device=True),
                seed_text=figs,
                needs=Needs(what=what),
                comparable=UTIL_NOTE,
            )
        )
    return out


def _peaks() -> list[Claim]:
    out = []
    for (name, (gf, bw)), dev in zip(seed.PEAKS.items(), ("MPS", "CPU", "T4")):
        backend, hw, what = DEVICES[dev]
        s = {"backend": backend, "variant": "fp32"}
        lo, hi = PEAK_SHARE
        out.append(
            Claim(
                f"t7-peaks-{'m3' if dev == 'MPS' else dev.lower()}",
                f"{name}: peak fp32 {gf:,} GFLOP/s, memory {bw} GB/s",
                "Table 7",
                answers.conditions(
                    (
                        "fp32 GFLOP/s",
                        Level(s, compute_roof, "GFLOP/s"),
                        between(gf * lo, gf * hi, f"{lo:.0%}-{hi:.0%} of {gf:,}"),
                    ),
                    ("GB/s", Level(s, bw_roof, "GB/s"), between(bw * lo, bw * hi, f"{lo:.0%}-{hi:.0%} of {bw}")),
                    by_device=True,
                ),
                seed_text=f"{gf:,} GFLOP/s, {bw} GB/s",
                needs=Needs(what=what),
                seed_hw=hw,
                note="ours are the measured ceilings its points were held against (best of GEMM/conv, of copy/triad)",
            )
        )
    return out


CLAIMS: tuple[Claim, ...] = (*HEADLINE, *FINDINGS, *BATCH, *_table8(), *_perf(), *_complexity(), *_util(), *_peaks())
