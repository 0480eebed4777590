"""A verdict for each of the seed's claims (seed.CLAIMS), computed from the cells of a report,
with the numbers it rests on. Host side: standard library only.

Verdicts: holds | does not hold | needs real data | needs a 2-GPU host | not measured here.
Thresholds, each the reading of a word in the claim:
    FAR = 2.0        "far faster": the CPU's projected time at least 2x the GPU's (the seed: 6.5x)
    FASTER = 1.05    "faster": at least 5 % (one run's epochs vary by a few %)
    MUCH_MORE = 1.2  "much more memory": GPU:0 at least 1.2x GPU:1 (the seed: 1.5x and 2.9x)
    LOW_UTIL = 20.0  "low utilisation": below 20 % (the seed: 3 % and 14 %)
    ACC = 0.97       "98-99 %": 97 % or more, the whole test split
    POWER_TOL = 0.25 "152 W": within 25 %, on the seed's GPU (an RTX A6000) only
"""

from __future__ import annotations

from collections.abc import Callable

from bench.core.claims import WORK_AMOUNT, faster
from bench.core.resultset import ResultCell as Cell
from bench.studies.profile import seed
from bench.studies.profile.readout import (
    cpu_gpu_pairs,
    gpus,
    is_backend,
    label,
    med,
    num,
    param,
    profile_doc,
    projection,
    rows,
)

HOLDS, FAILS, NEEDS_REAL, NEEDS_2GPU, NOT_HERE = (
    "holds",
    "does not hold",
    "needs real data",
    "needs a 2-GPU host",
    "not measured here",
)
VERDICTS = (HOLDS, FAILS, NEEDS_REAL, NEEDS_2GPU, NOT_HERE)
FAR, FASTER, MUCH_MORE, LOW_UTIL, ACC, POWER_TOL = 2.0, 1.05, 1.2, 20.0, 0.97, 0.25
SEED_CPU_GPU = seed.TRAINING_TIME_H["cpu"] / seed.TRAINING_TIME_H["gpu_b64"]  # 6.5
SEED_B128 = seed.TRAINING_TIME_H["gpu_b64"] / seed.TRAINING_TIME_H["gpu_b128"]  # 1.6

Verdict = tuple[str, str]  # (verdict, evidence)


def _one_gpu(c: Cell) -> bool:
    return is_backend(c, "torch-cuda") and (c.first.get("parallel") or "none") == "none" and bool(rows(c, "epoch"))


def _h(x: float) -> str:
    return f"{x * 60:.1f} min" if x < 1 else f"{x:.1f} h" if x < 100 else f"{x:,.0f} h"


def gpu_vs_cpu(cells: list[Cell]) -> Verdict:
    pairs = [(a, b) for a, b in cpu_gpu_pairs(cells) if a.first.get("variant") == "finetune" and a.first.get("batch_size") == 64]
    if not pairs:
        cpu = [c for c in cells if is_backend(c, "torch-cpu") and rows(c, "epoch")]
        ran = sorted(
            {f"{c.first.get('variant')} at {num(param(c, 'image_size')) or 0:.0f} px, b{c.first.get('batch_size')}" for c in cpu}
        )
        why = "no CPU fine-tuning cell at the seed's 224 px, b64 beside a one-GPU one"
        why += f" (the CPU cells: {'; '.join(ran)})" if ran else " (no CPU cell ran)"
        why += "; --platform cpu --profile default runs it"
        if not any(_one_gpu(c) for c in cells):
            why += "; no GPU cell ran (--platform cuda --profile default)"
        return NOT_HERE, why
    out, ratios = [], []
    for on_cpu, on_gpu in pairs:
        a, b = projection(on_cpu), projection(on_gpu)
        if not a or not b or b["hours"] <= 0:
            continue
        r = a["hours"] / b["hours"]
        ratios.append(r)
        out.append(
            f"{on_cpu.device} {_h(a['hours'])} ({a['protocol']}) vs {on_gpu.device} ({on_gpu.first.get('pipeline')}) "
            f"{_h(b['hours'])}: {r:,.1f}x"
        )
    if not ratios:
        return NOT_HERE, "no timed epoch to project"
    ev = "; ".join(out) + f" (projected to 20 x 8,005 images; seed {SEED_CPU_GPU:.1f}x)"
    return (HOLDS if min(ratios) >= FAR else FAILS), ev


def b128_vs_b64(cells: list[Cell]) -> Verdict:
    groups: dict[tuple, dict[int, Cell]] = {}
    for c in cells:
        if _one_gpu(c) and str(c.first.get("variant", "")).split("+")[0] == "finetune":
            b = c.first.get("batch_size")
            if b in (64, 128):
                groups.setdefault((c.device, c.first.get("variant"), c.first.get("pipeline")), {})[b] = c
    out, ratios = [], []
    for (dev, var, pipe), by in sorted(groups.items(), key=str):
        if 64 in by and 128 in by:
            a, b = projection(by[64]), projection(by[128])
            if a and b and b["hours"] > 0:
                r = a["hours"] / b["hours"]
                ratios.append(r)
                out.append(f"{dev} {var} {pipe}: {_h(a['hours'])} at b64, {_h(b['hours'])} at b128: {r:.2f}x")
    if not ratios:
        return NOT_HERE, "no GPU cells at both batch 64 and 128 on one pipeline and variant"
    ev = "; ".join(out) + f" (projected; seed {SEED_B128:.1f}x)"
    return (HOLDS if min(ratios) >= FASTER else FAILS), ev


def gpu0_memory(cells: list[Cell]) -> Verdict:
    dp = [c for c in cells if is_backend(c, "torch-cuda") and c.first.get("parallel") == "dp" and rows(c, "epoch")]
    out, ratios = [], []
    for c in dp:
        g = gpus(c)
        if len(g) < 2:
            continue
        ep = rows(c, "epoch")
        m0, m1 = med(ep, f"gpu{g[0]}_mem_used_mb_max"), med(ep, f"gpu{g[1]}_mem_used_mb_max")
        if m0 and m1:
            ratios.append(m0 / m1)
            out.append(f"{label(c)}: GPU:0 {m0:,.0f} MB, GPU:1 {m1:,.0f} MB ({m0 / m1:.2f}x)")
    if not ratios:
        wanted = [c for c in cells if is_backend(c, "torch-cuda") and (param(c, "parallel") or "none") != "none"]
        why = sorted({str(c.first.get("reason") or c.status) for c in wanted if not rows(c, "epoch")})
        return NEEDS_2GPU, "no DataParallel cell ran" + (f" ({'; '.join(why)[:200]})" if why else "")
    return (HOLDS if min(ratios) >= MUCH_MORE else FAILS), "; ".join(out) + " (seed 1.5x at b64, 2.9x at b128)"


def low_util_b64(cells: list[Cell]) -> Verdict:
    util: dict[tuple, dict[int, float]] = {}
    for c in cells:
        if _one_gpu(c) and c.first.get("variant") == "finetune" and gpus(c):
            u = med(rows(c, "epoch"), f"gpu{gpus(c)[0]}_util_pct_mean")
            if u is not None and c.first.get("batch_size") in (64, 128):
                util.setdefault((c.device, c.first.get("pipeline")), {})[int(c.first["batch_size"])] = u
    if not any(64 in v for v in util.values()):
        return NOT_HERE, "no one-GPU fine-tuning cell at batch 64 with NVML utilisation"
    out, low, higher = [], [], []
    for (dev, pipe), by in sorted(util.items(), key=lambda kv: (kv[0][1] != "loader", str(kv[0]))):
        if 64 not in by:
            continue
        s = f"{dev} {pipe}: b64 {by[64]:.0f} %"
        low.append(by[64] < LOW_UTIL)
        if 128 in by:
            s += f", b128 {by[128]:.0f} %"
            higher.append(by[128] > by[64])
        out.append(s)
    ok = all(low) and all(higher)
    ev = (
        "; ".join(out)
        + f" (GPU:0; seed 3 % / 14 % at b64, 69 % at b128; 'low' read as < {LOW_UTIL:.0f} %); GPU:1 needs a 2-GPU host"
    )
    return (HOLDS if ok else FAILS), ev


def power_b128(cells: list[Cell]) -> Verdict:
    got = []
    for c in cells:
        if _one_gpu(c) and c.first.get("batch_size") == 128 and gpus(c):
            p = med(rows(c, "epoch"), f"gpu{gpus(c)[0]}_power_w_mean")
            if p is not None:
                got.append((c, p))
    if not got:
        return NOT_HERE, "no GPU cell at batch 128 with NVML power"
    ev = "; ".join(f"{c.device} {c.first.get('variant')} {c.first.get('pipeline')}: {p:.0f} W mean" for c, p in got)
    seeds = [p for c, p in got if "A6000" in c.device]
    if not seeds:
        return NOT_HERE, f"another GPU: {ev}; the seed's 152 W is an RTX A6000's (300 W board)"
    return (HOLDS if all(abs(p - 152) <= POWER_TOL * 152 for p in seeds) else FAILS), ev + " (seed 152 W)"


def copy_dominates(cells: list[Cell]) -> Verdict:
    out, held = [], []
    for c in cells:
        if not is_backend(c, "torch-cuda"):
            continue
        doc = profile_doc(c)
        got = doc.get("breakdown")
        br: dict = got if isinstance(got, dict) else {}
        mc, k = num(br.get("memcpy_share")), num(br.get("kernel_share"))
        if mc is None or k is None:
            continue
        ops = [o for o in doc.get("ops_self_device") or [] if isinstance(o, dict) and o.get("device_type", "cpu") == "cpu"]
        names = [str(o.get("name")) for o in ops]
        t = f"aten::t #{names.index('aten::t') + 1}" if "aten::t" in names else f"aten::t not in the top {len(names)}"
        held.append(mc > k)
        out.append(
            f"{label(c)}: memcpy {mc:.1%} of the profiled step, kernels {k:.1%}, top operator {names[0] if names else '?'}, {t}"
        )
    if not held:
        return NOT_HERE, "no GPU cell with a profiled step breakdown"
    return (HOLDS if all(held) else FAILS), "; ".join(out)


def accuracy(cells: list[Cell]) -> Verdict:
    ran = [c for c in cells if rows(c, "epoch")]
    real = [
        c
        for c in ran
        if c.first.get("dataset_real") and rows(c, "epoch")[-1].get("weights") == "imagenet" and not num(param(c, "max_steps"))
    ]
    if not real:
        data = sorted({f"{c.first.get('dataset')}" + ("" if c.first.get("dataset_real") else " (synthetic)") for c in ran})
        return NEEDS_REAL, f"the cells ran on {', '.join(data) or 'nothing'}, whole split and ImageNet weights in none"
    out, ok = [], []
    for c in real:
        a = num(rows(c, "epoch")[-1].get("test_acc"))
        if a is not None:
            ok.append(a >= ACC)
            out.append(f"{label(c)}: {a:.1%}")
    if not ok:
        return NOT_HERE, "no test accuracy in the real-data cells"
    sides = {c.first.get("backend") for c in real}
    tail = "" if sides >= {"torch-cpu", "torch-cuda"} else f" (only {', '.join(sorted(str(s) for s in sides))} on real data)"
    return (HOLDS if all(ok) else FAILS), "; ".join(out) + tail


VERDICT_OF: dict[str, Callable[[list[Cell]], Verdict]] = {
    "gpu-vs-cpu": gpu_vs_cpu,
    "b128-vs-b64": b128_vs_b64,
    "gpu0-memory": gpu0_memory,
    "low-util-b64": low_util_b64,
    "power-b128": power_b128,
    "copy-dominates": copy_dominates,
    "accuracy": accuracy,
}


def table(cells: list[Cell]) -> list[dict]:
    """One row per seed claim: claim, verdict, evidence, read from, needs."""
    out = []
    for key, claim, read_from, needs in seed.CLAIMS:
        verdict, evidence = VERDICT_OF[key](cells)
        out.append({"key": key, "claim": claim, "verdict": verdict, "evidence": evidence, "read_from": read_from, "needs": needs})
    return out


CLAIMS = (
    faster(
        "gpu-over-cpu",
        "GPU over CPU (DenseNet-121 fine-tune)",
        {"backend": "torch-cuda", "variant": "finetune"},
        {"backend": "torch-cpu", "variant": "finetune"},
        "Table 2",
        13 / 2,
        "13 h / 2 h (batch 64)",
    ),
    faster(
        "b128-over-b64",
        "GPU: batch 128 over batch 64",
        {"backend": "torch-cuda", "batch_size": 128},
        {"backend": "torch-cuda", "batch_size": 64},
        "Table 2",
        2 / 1.25,
        "2 h / 1 h 15 min",
        free=WORK_AMOUNT,
    ),
    faster(
        "dp-over-one",
        "2 GPUs (DataParallel) over 1",
        {"backend": "torch-cuda", "gpus": 2, "parallel": "dp"},
        {"backend": "torch-cuda", "gpus": 1, "parallel": "none"},
        "Sec. 4",
        free=WORK_AMOUNT,
    ),
    faster(
        "ddp-over-one",
        "2 GPUs (DDP) over 1",
        {"backend": "torch-cuda", "gpus": 2, "parallel": "ddp"},
        {"backend": "torch-cuda", "gpus": 1, "parallel": "none"},
        "the kit",
        free=WORK_AMOUNT,
    ),
)
