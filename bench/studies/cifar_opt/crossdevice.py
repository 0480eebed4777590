"""GPU over CPU: a GPU configuration beside a CPU one (the seed's Default / Default, AMP /
Default, Tuned / Tuned, and the kit's fastest form on each side), per model and per pair of
hosts, from whatever result dirs the report was given.

Two ratios per row, each "how many times faster the GPU is", the median over seeds with its
95 % bootstrap interval (bench.core.stats.ratio): training img/s (GPU / CPU) and batch-1
inference latency p50 (CPU / GPU). The two sides are paired by seed only when they came from
one run (ResultCell.run_label: one results dir, the repeats interleaved); from two runs (two
hosts, two days) they are resampled independently (`paired=False`). Where one side has no
cell, the row names the missing side and the command that makes it. The ratios are readout.py's
(cross_ratios: the one place the rows become numbers); this module pairs the groups and words
the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core import stats
from bench.core.resultset import ResultCell as Cell
from bench.studies.cifar_opt.readout import (
    GPU_PLATFORMS,
    SEED_NAMES,
    cross_ratios,
    model,
    n_train,
    param,
    platform,
    ratio_text,
    run_labels,
)


@dataclass(frozen=True)
class Pair:
    name: str  # "Default / Default"
    gpu_variant: str
    gpu_pipeline: str
    cpu_variant: str
    gpu_form: str  # the deployment form whose latency stands for the side (its fp32/AMP eager form, or the fastest)
    cpu_form: str


PAIRS = (
    Pair("Default / Default", "default", "loader", "default", "eager-fp32", "fp32-eager"),
    Pair("AMP / Default", "amp", "loader", "default", "eager-fp16", "fp32-eager"),
    Pair("Tuned / Tuned (Optuna on each side)", "optuna", "loader", "optuna", "eager-fp32", "fp32-eager"),
    Pair(
        "kit-tuned (bf16+cl+compile+graphs) / Quantized (int8 PT2E): each side's fastest",
        "tuned",
        "resident",
        "int8",
        "graph-bf16",
        "int8-pt2e",
    ),
)


def _is(g: list[Cell], plats: tuple[str, ...], variant: str, pipeline: str | None = None) -> bool:
    c = g[0]
    if platform(c) not in plats or c.first.get("variant") != variant:
        return False
    if param(c, "batch_size", 32) != 32:  # the seed's batch sweep is not a configuration of its own here
        return False
    return pipeline is None or param(c, "pipeline", "loader") == pipeline


def command(plat: str, variant: str, mdl: str) -> str:
    """The command that makes the missing side: its matrix cells, 3 seeds, into a dir of their own."""
    return (
        f"python -m bench matrix cifar-opt --platform {plat} --profile default --only variant={variant} "
        f"--only model={mdl} --repeats 3 --out results/{plat}-cifar-opt"
    )


def _side(g: list[Cell]) -> str:
    labels = sorted(run_labels(g))
    return f"{g[0].device} ({', '.join(labels)})"


def cross_device(groups: list[list[Cell]]) -> list[dict]:
    """One row per model x pair x (GPU group, CPU group); a row naming the missing side where
    only one side ran."""
    out: list[dict] = []
    models = sorted({model(g[0]) for g in groups})
    for mdl in models:
        mine = [g for g in groups if model(g[0]) == mdl]
        for pair in PAIRS:
            gpus = [g for g in mine if _is(g, GPU_PLATFORMS, pair.gpu_variant, pair.gpu_pipeline)]
            cpus = [g for g in mine if _is(g, ("cpu",), pair.cpu_variant)]
            cpu_name = SEED_NAMES[("cpu", pair.cpu_variant)]
            gpu_name = SEED_NAMES[("cuda", pair.gpu_variant)]
            base = {"model": mdl, "pair": pair.name}
            if not gpus and not cpus:
                continue
            if not cpus or not gpus:
                have = gpus or cpus
                plat, variant = ("cpu", pair.cpu_variant) if not cpus else ("cuda", pair.gpu_variant)
                for g in have:
                    out.append(
                        {
                            **base,
                            "gpu": _side(g) if gpus else f"missing: no {gpu_name} cell",
                            "cpu": _side(g) if cpus else f"missing: no {cpu_name} cell",
                            "train": "",
                            "latency": "",
                            "n": "",
                            "note": f"run {command(plat, variant, mdl)}, then report both dirs",
                            "missing": plat,
                        }
                    )
                continue
            for gg in gpus:
                for cg in cpus:
                    out.append({**base, **_row(gg, cg, pair)})
    return out


def _row(gg: list[Cell], cg: list[Cell], pair: Pair) -> dict:
    one_run = len(run_labels(gg) | run_labels(cg)) == 1
    paired = None if one_run else False
    notes = ["paired by seed (one run)" if one_run else "unpaired (two runs)"]
    tr: stats.Summary | None
    lt: stats.Summary | None
    tr, lt = cross_ratios(gg, cg, pair.gpu_form, pair.cpu_form, paired)
    train = ratio_text(tr) if tr is not None else ""
    lat = f"{ratio_text(lt)} ({pair.gpu_form} vs {pair.cpu_form})" if lt is not None else ""
    ng, nc = n_train(gg), n_train(cg)
    if ng and nc and ng != nc:
        notes.append(f"images per epoch: GPU {ng:,}, CPU {nc:,}")
    if any(c.flags for c in gg + cg):
        notes.append("⚑ a side is flagged")
    return {
        "gpu": _side(gg),
        "cpu": _side(cg),
        "train": train,
        "latency": lat,
        "n": f"{min(len(gg), len(cg))}",
        "note": "; ".join(notes),
        "train_ratio": tr,
        "latency_ratio": lt,
    }


COLS = [
    ("model", "model"),
    ("pair", "GPU / CPU configuration"),
    ("gpu", "GPU (run)"),
    ("cpu", "CPU, cores (run)"),
    ("train", "training img/s, GPU ÷ CPU [interval]"),
    ("latency", "batch-1 p50 latency, CPU ÷ GPU [interval] (forms)"),
    ("n", "seeds"),
    ("note", "note"),
]
