"""roofline's report section: per device the measured roofs with every model's training and
validation points and the batch-sweep paths (a log-log roofline per device, and one per
model across devices), the seed's Tables 1-8 in its layout with its numbers beside ours
where comparable, the loader-vs-synthetic-gpu gap, and which claims need the real data.

Host side: standard library, numpy and matplotlib only (rows and system.json; no torch).
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.tables import fmt, markdown, sig
from bench.core.text import md as md_text
from bench.core.text import md_alt, plot_text
from bench.studies.roofline import seed
from bench.studies.roofline.roofmath import attainable

PLATFORM = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}
SEED_DEVICE = {"cpu": "CPU", "cuda": "T4", "mps": "MPS"}  # the seed's device of the same kind
MODELS = ("resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1")
COLORS = {"resnet18": "tab:blue", "mobilenet_v2": "tab:orange", "resnet50": "tab:green", "squeezenet1_1": "tab:red"}


def _ok(c: Cell, phase: str) -> list[dict]:
    return [r for r in c.rows if r.get("phase") == phase and r.get("status") == "ok"]


def _med(g: list[Cell], phase: str, key: str, scale: float = 1.0) -> float | None:
    vals = [float(r[key]) for c in g for r in _ok(c, phase) if isinstance(r.get(key), (int, float)) and r.get(key) is not None]
    return statistics.median(vals) * scale if vals else None


def _p(c: Cell) -> dict:
    first = next((r for r in c.rows if r.get("model")), c.first)
    return {
        "model": first.get("model") or (c.spec.get("params") or {}).get("model"),
        "scenario": first.get("scenario") or (c.spec.get("params") or {}).get("scenario"),
        "pipeline": first.get("pipeline"),
        "precision": first.get("precision") or c.first.get("variant"),
        "platform": PLATFORM.get(str(c.first.get("backend")), "?"),
        "batch": (c.spec.get("params") or {}).get("batch_size"),
    }


def _config(c: Cell) -> str:
    p = _p(c)
    return f"{p['precision']}, {p['pipeline']}" + (" ⚑" if c.flags else "")


def _roofs_by_device(cells: list[Cell]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for c in cells:
        r = c.system.get("roofs")
        if isinstance(r, dict) and r.get("roofs"):
            out.setdefault(c.device, r)
    return out


def _roof(r: dict, name: str) -> float | None:
    v = (r.get("roofs") or {}).get(name)
    return float(v["value"]) if isinstance(v, dict) else None


def _compute(r: dict, prec: str) -> float | None:
    vals = [v for v in (_roof(r, f"gemm_{prec}"), _roof(r, f"conv_{prec}")) if v]
    return max(vals) if vals else None


def _bandwidth(r: dict) -> float | None:
    vals = [v for v in (_roof(r, "copy"), _roof(r, "triad")) if v]
    return max(vals) if vals else None


# ---- tables ---------------------------------------------------------------------------------
def complexity_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Tables 1-2 beside our counts (64 px, FLOPs not MACs; AI from counted bytes)."""
    seen: dict[str, dict] = {}
    for g in groups:
        c = g[0]
        rows = _ok(c, "train") or _ok(c, "sweep")
        if not rows or _p(c)["precision"] != "fp32" or _p(c)["model"] in seen:
            continue
        r = rows[0]
        m = str(r["model"])
        s = seed.COMPLEXITY.get(m, (None, None, None, None))
        seen[m] = {
            "model": m,
            "params": r.get("n_params", 0) / 1e6,
            "seed_params": s[0],
            "fwd": r["forward_flops_per_sample"] / 1e9,
            "train": r["train_flops_per_sample"] / 1e9,
            "seed_g224": s[1],
            "seed_as64": s[1] * 2 * (64 / 224) ** 2 if s[1] else None,
            "why": r.get("train_flops_why"),
            "ai": f"{fmt(r['ai_low_flops_per_byte'])} .. {fmt(r['ai_high_flops_per_byte'])} (b{r.get('batch_size')})",
            "seed_ai": s[3],
        }
    return [seen[m] for m in MODELS if m in seen]


def perf_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Table 3 (throughput, TFLOP/s, peak memory), Table 4 (pass times) and Table 5
    (utilisation) as one row per configuration; the seed's device of the same kind beside."""
    out = []
    for g in sorted(groups, key=lambda g: MODELS.index(_p(g[0])["model"]) if _p(g[0])["model"] in MODELS else 9):
        c = g[0]
        if not _ok(c, "train"):
            continue
        p = _p(c)
        sd = SEED_DEVICE.get(p["platform"], "")
        sp, se, su = seed.PERF.get((p["model"], sd)), seed.EPOCH.get((p["model"], sd)), seed.UTIL.get((p["model"], sd))
        gpu = _med(g, "train", "gpu_alloc_peak_mb")
        out.append(
            {
                "model": p["model"],
                "device": c.device,
                "config": _config(c),
                "batch": p["batch"],
                "train_ips": _med(g, "train", "img_per_s"),
                "val_ips": _med(g, "val", "img_per_s"),
                "tf_train": _med(g, "train", "achieved_flop_per_s", 1e-12),
                "tf_val": _med(g, "val", "achieved_flop_per_s", 1e-12),
                "frac": _med(g, "train", "roof_fraction", 100),
                "mem": gpu if gpu is not None else _med(g, "train", "rss_peak_mb"),
                "mem_kind": "GPU alloc" if gpu is not None else "RSS",
                "train_s": _med(g, "train", "epoch_s"),
                "val_s": _med(g, "val", "epoch_s"),
                "batches": f"{_med(g, 'train', 'steps'):.0f}/{_med(g, 'val', 'steps') or 0:.0f}",
                "proj_s": _med(g, "train", "seed_epoch_projected_s"),
                "gpu_util": _med(g, "train", "gpu_util_pct"),
                "sm_mhz": _med(g, "train", "gpu_sm_mhz_median"),
                "cpu_sys": _med(g, "train", "cpu_util_system_pct"),
                "cpu_proc": _med(g, "train", "cpu_util_process_pct"),
                "seed": f"{sd}: {sp[0]} / {sp[1]} img/s, {sp[2]} / {sp[3]} TFLOP/s" if sp else "",
                "seed_epoch": f"{sd}: {se[0]} / {se[1]} s" if se else "",
                "seed_util": f"{sd}: GPU {fmt(su[0]) or 'N/A'} %, CPU {su[1]} %" if su else "",
                "n": len(g),
            }
        )
    return out


def gap_table(groups: list[list[Cell]]) -> list[dict]:
    """Real loader vs synthetic-gpu, training img/s, per model, device and precision."""
    by: dict[tuple, dict[str, float | None]] = {}
    for g in groups:
        p = _p(g[0])
        if _ok(g[0], "train"):
            by.setdefault((p["model"], g[0].device, p["precision"], p["batch"]), {})[p["pipeline"]] = _med(
                g, "train", "img_per_s"
            )
    out = []
    for (m, dev, prec, b), v in by.items():
        lo, syn = v.get("loader"), v.get("synthetic-gpu")
        out.append(
            {
                "model": m,
                "device": dev,
                "precision": prec,
                "batch": b,
                "loader": lo,
                "synthetic": syn,
                "ratio": (lo / syn) if lo and syn else None,
            }
        )
    return out


def sweep_table(groups: list[list[Cell]]) -> list[dict]:
    out = []
    for g in groups:
        c = g[0]
        end = next(iter(_ok(c, "sweep_end")), None)
        if end is None:
            continue
        p = _p(c)
        pts = _ok(c, "sweep")
        for r in pts:
            out.append(
                {
                    "model": p["model"],
                    "device": c.device,
                    "precision": p["precision"],
                    "batch": r["batch_size"],
                    "ips": r["img_per_s"],
                    "gflops": r["achieved_flop_per_s"] / 1e9,
                    "ai": f"{fmt(r['ai_low_flops_per_byte'])} .. {fmt(r['ai_high_flops_per_byte'])}",
                    "frac": r.get("roof_fraction", 0) * 100 if r.get("roof_fraction") is not None else None,
                    "mem": r.get("gpu_alloc_peak_mb") or r.get("rss_peak_mb"),
                    "note": "NaN loss ⚑" if r.get("loss_finite") is False else "",
                }
            )
        out.append(
            {
                "model": p["model"],
                "device": c.device,
                "precision": p["precision"],
                "batch": end.get("sweep_stop_batch") or "",
                "note": f"end: {end.get('sweep_stop')}: {end.get('sweep_stop_reason')}",
            }
        )
    return out


def roofs_table(roofs: dict[str, dict]) -> list[dict]:
    out = []
    for dev, r in roofs.items():
        sheet = r.get("datasheet") or {}
        load = (r.get("conditions") or {}).get("load_avg_1m_before")
        out.append(
            {
                "device": dev,
                "fp32": (_compute(r, "fp32") or 0) / 1e9 or None,
                "tf32": (_compute(r, "tf32") or 0) / 1e9 or None,
                "bf16": (_compute(r, "bf16") or 0) / 1e9 or None,
                "bw": (_bandwidth(r) or 0) / 1e9 or None,
                "sheet": f"{sheet.get('product')}: fp32 {sheet.get('fp32_tflop_per_s')} TFLOP/s, {sheet.get('mem_tb_per_s')} TB/s"
                if sheet
                else "",
                "when": f"{r.get('measured_at')}" + (f", load {load:.1f}" if isinstance(load, (int, float)) else ""),
            }
        )
    for name, (gf, bw) in seed.PEAKS.items():
        out.append({"device": f"seed: {name}", "fp32": gf, "bw": bw, "sheet": "the seed's (datasheet / approximate)"})
    return out


def speedup_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Table 8: per model, training img/s of one device over another's (fp32, loader:
    the seed's set-up); every pair of devices present, the seed's ratio for the same kinds."""
    per: dict[str, dict[str, tuple[str, float]]] = {}
    for g in groups:
        p = _p(g[0])
        v = _med(g, "train", "img_per_s")
        if v and p["precision"] == "fp32" and p["pipeline"] == "loader":
            per.setdefault(p["model"], {})[g[0].device] = (p["platform"], v)
    seed_idx = {("cuda", "mps"): 0, ("cuda", "cpu"): 1, ("mps", "cpu"): 2}
    out = []
    for m, devs in per.items():
        items = sorted(devs.items(), key=lambda kv: -kv[1][1])
        for i, (da, (pa, va)) in enumerate(items):
            for db, (pb, vb) in items[i + 1 :]:
                k = seed_idx.get((pa, pb))
                out.append(
                    {
                        "model": m,
                        "pair": f"{da} / {db}",
                        "ours": va / vb,
                        "seed": f"{seed.SPEEDUP[m][k]}x" if k is not None and m in seed.SPEEDUP else "",
                    }
                )
    return out


CLAIMS = [
    ("GPUs outperform CPUs ~10x (light models) to ~50x (compute-heavy)", "a GPU and a CPU cell of the same model", "GPU run"),
    (
        "MobileNetV2 has the lowest AI, the most memory-bound",
        "AI from counted bytes (Tables 1-2 here)",
        "none: counts are data-independent",
    ),
    ("Larger batches move points toward the compute roof", "the sweep paths", "none: the sweep uses a fixed device batch"),
    ("SqueezeNet NaNs at batch 128", "loss_finite in the sweep rows", "real data for the loss; a GPU for the seed's device"),
    (
        "Epoch times (Table 4)",
        "our pass times cover max_*_batches; 'projected' = 100,000 / img/s",
        "the real tree (100,000 JPEGs) for a full epoch",
    ),
    ("Loader-bound throughput on GPUs", "loader vs synthetic-gpu gap", "the real tree: its JPEGs and its size (page cache)"),
]


# ---- figures --------------------------------------------------------------------------------
def _roofline_axes(ax, r: dict, precisions: set[str], xs) -> None:
    import numpy as np

    bw = _bandwidth(r)
    for prec, style in (("fp32", "-"), ("tf32", "--"), ("bf16", ":")):
        comp = _compute(r, prec)
        if not comp or not bw or (prec not in precisions and prec != "fp32"):
            continue
        ys = [attainable(x, comp, bw)[0] for x in xs]
        ax.plot(xs, ys, "k" + style, lw=1.2, label=f"roof {prec}: {comp / 1e12:.3g} TFLOP/s, {bw / 1e9:.3g} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte; bar: unfused .. compulsory bytes)")
    ax.set_ylabel("achieved FLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    del np


def _points(ax, c: Cell, label_prefix: str = "") -> None:
    p = _p(c)
    col = COLORS.get(p["model"], "tab:gray")
    syn = p["pipeline"] == "synthetic-gpu"
    for phase, marker, fill in (("train", "D" if syn else "o", col), ("val", "d" if syn else "s", "none")):
        for r in _ok(c, phase):
            lo, hi, y = r["ai_low_flops_per_byte"], r["ai_high_flops_per_byte"], r["achieved_flop_per_s"]
            ax.plot([lo, hi], [y, y], "-", color=col, alpha=0.5, lw=1)
            ax.plot(
                [hi],
                [y],
                marker,
                mfc=fill,
                mec=col,
                ms=7,
                label=label_prefix + plot_text(f"{p['model']} {phase} ({p['precision']}, {p['pipeline']})"),
            )
    sw = _ok(c, "sweep")
    if sw:
        ax.plot(
            [r["ai_high_flops_per_byte"] for r in sw],
            [r["achieved_flop_per_s"] for r in sw],
            "^-",
            color=col,
            alpha=0.8,
            ms=5,
            label=label_prefix
            + plot_text(f"{p['model']} sweep b{sw[0]['batch_size']}-{sw[-1]['batch_size']} ({p['precision']})"),
        )
        for r in sw:
            ax.annotate(plot_text(r["batch_size"]), (r["ai_high_flops_per_byte"], r["achieved_flop_per_s"]), fontsize=6)


def _span(cells: list[Cell]):
    import numpy as np

    ais = [
        v
        for c in cells
        for r in c.ok_rows
        for v in (r.get("ai_low_flops_per_byte"), r.get("ai_high_flops_per_byte"))
        if isinstance(v, (int, float)) and v > 0
    ]
    lo, hi = (min(ais) / 4, max(ais) * 4) if ais else (0.1, 1000)
    return np.logspace(np.log10(min(lo, 0.1)), np.log10(max(hi, 100)), 200)


def figures(cells: list[Cell], roofs: dict[str, dict], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = []
    devices = sorted({c.device for c in cells})
    for i, dev in enumerate(devices):
        mine = [c for c in cells if c.device == dev]
        r = roofs.get(dev)
        fig, ax = plt.subplots(figsize=(12, 6))
        xs = _span(mine)
        if r:
            precisions = {"bf16" if _p(c)["precision"] == "bf16-cl" else str(_p(c)["precision"]) for c in mine}
            _roofline_axes(ax, r, precisions, xs)
        for c in mine:
            _points(ax, c)
        ax.set_title(
            f"roofline: {plot_text(dev)}\nfilled: train, hollow: val; circle/square: loader, diamond: synthetic-gpu; "
            "^: batch sweep (labels: batch)",
            fontsize=9,
        )
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        name = f"roofline_device{i + 1}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        md.append(f"![roofline: {md_alt(dev)}]({name})")
    models = [m for m in MODELS if any(_p(c)["model"] == m for c in cells)]
    if models:
        fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 6.5), squeeze=False)
        for ax, m in zip(axes[0], models):
            mine = [c for c in cells if _p(c)["model"] == m]
            xs = _span(mine)
            for j, dev in enumerate(sorted({c.device for c in mine})):
                r = roofs.get(dev)
                bw, comp = (_bandwidth(r), _compute(r, "fp32")) if r else (None, None)
                if bw and comp:
                    ax.plot(
                        xs,
                        [attainable(x, comp, bw)[0] for x in xs],
                        ("-", "--", ":", "-.")[j % 4],
                        color="k",
                        lw=1,
                        label=plot_text(f"{dev[:30]} fp32 roof"),
                    )
                for c in mine:
                    if c.device == dev:
                        _points(ax, c, label_prefix=plot_text(f"{dev[:14]}: "))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(m, fontsize=9)
            ax.set_xlabel("FLOP/byte")
            ax.legend(fontsize=5, loc="upper center", bbox_to_anchor=(0.5, -0.18))
        axes[0][0].set_ylabel("achieved FLOP/s")
        fig.tight_layout()
        fig.savefig(out / "roofline_per_model.png", dpi=100)
        plt.close(fig)
        md.append("![per-model rooflines across devices](roofline_per_model.png)")
    return md


# ---- the section --------------------------------------------------------------------------
PERF_COLS = [
    ("model", "model"),
    ("device", "device"),
    ("config", "precision, pipeline"),
    ("batch", "batch"),
    ("train_ips", "train img/s"),
    ("val_ips", "val img/s"),
    ("tf_train", "TFLOP/s train"),
    ("tf_val", "TFLOP/s val"),
    ("frac", "% of roof (train)"),
    ("mem", "peak MB"),
    ("mem_kind", "memory"),
    ("seed", "seed (same kind of device)"),
    ("n", "n"),
]
EPOCH_COLS = [
    ("model", "model"),
    ("device", "device"),
    ("config", "precision, pipeline"),
    ("batches", "batches train/val"),
    ("train_s", "train pass s"),
    ("val_s", "val pass s"),
    ("proj_s", "projected 100k-image epoch s"),
    ("seed_epoch", "seed train / val epoch"),
]
UTIL_COLS = [
    ("model", "model"),
    ("device", "device"),
    ("config", "precision, pipeline"),
    ("gpu_util", "GPU util % (NVML)"),
    ("sm_mhz", "SM MHz"),
    ("cpu_sys", "CPU util % (all CPUs)"),
    ("cpu_proc", "CPU util % (this process, 100 = 1 core)"),
    ("seed_util", "seed"),
]


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = [c for c in cells if c.status == "ok"]
    if not cells:
        return []
    out.mkdir(parents=True, exist_ok=True)
    groups = group_repeats(cells)
    roofs = _roofs_by_device(cells)
    data = sorted({(str(c.first.get("dataset")), bool(c.first.get("dataset_real"))) for c in cells})
    md = [
        "torchvision ResNet-18/50, MobileNetV2, SqueezeNet1.1 (weights=None, one output per class) at 64x64, SGD lr 0.01 "
        "momentum 0.9 everywhere. Scenario A: one training pass of at most `max_train_batches` steps, then a validation "
        "pass, each timed as a whole with the device synced; `loader` reads the JPEG tree through a DataLoader "
        "(workers decode), `synthetic-gpu` reuses one batch on the device (the upper bound). Scenario B: a batch sweep on "
        "a device batch, powers of two until the first OOM, a predicted-memory bound or the largest size. FLOPs are "
        "counted at the 64-px input (torch's FlopCounterMode, cross-checked analytically; the analytic count is used "
        "where the counter overcounts grouped-conv backward); AI from dispatch-level byte counts (bar from unfused "
        "traffic to compulsory bytes); roofs are each device's MEASURED GEMM/conv and copy/triad ceilings "
        "(bench.measure.roofs), and '% of roof' is achieved / min(compute, bandwidth x AI) at the compulsory AI.",
        "",
        "Data: " + ", ".join(f"{md_text(n)} ({'real' if r else 'synthetic: NOT Tiny-ImageNet'})" for n, r in data) + ".",
        "",
    ]
    if not all(r for _, r in data):
        md += [
            "**The loader figures here decode synthetic JPEGs in Tiny-ImageNet's layout (same size and format, far fewer "
            "files): throughput, decode cost and the loader gap are indicative; the seed's epoch times and any loss/NaN "
            "claim need the real tree (`orchestrate.py data fetch tinyimagenet --allow-http`).**",
            "",
        ]
    md += ["#### Measured roofs (seed Table 7 beside)", "", markdown(roofs_table(roofs), [
        ("device", "device"), ("fp32", "fp32 GFLOP/s"), ("tf32", "tf32 GFLOP/s"), ("bf16", "bf16 GFLOP/s"),
        ("bw", "memory GB/s"), ("sheet", "datasheet"), ("when", "measured"),
    ]), ""]  # fmt: skip
    md += [
        "#### Model complexity (seed Tables 1-2 beside: its 'FLOPs' are MACs at 224 px, its AI divides by the model size)",
        "",
        markdown(
            complexity_table(groups),
            [
                ("model", "model"),
                ("params", "params M"),
                ("seed_params", "seed params M"),
                ("fwd", "fwd GFLOP/img (64 px)"),
                ("train", "train GFLOP/img"),
                ("seed_g224", "seed G/img (224, MACs)"),
                ("seed_as64", "seed as FLOPs at 64 px"),
                ("why", "train count source"),
                ("ai", "our train AI FLOP/B"),
                ("seed_ai", "seed AI"),
            ],
        ),  # fmt: skip
        "",
    ]
    md += [
        "#### Scenario A: throughput, achieved compute, memory (seed Table 3)",
        "",
        markdown(perf_table(groups), PERF_COLS),
        "",
    ]
    md += ["#### Pass times (seed Table 4)", "", markdown(perf_table(groups), EPOCH_COLS), ""]
    md += [
        "#### Utilisation (seed Table 5)",
        "",
        "CPU: psutil, primed before the region (an unprimed first call reads 0.0, as many of the seed's figures do). "
        "GPU: NVML's utilisation is the share of time one or more kernels ran, not occupancy or a fraction of peak.",
        "",
        markdown(perf_table(groups), UTIL_COLS),
        "",
    ]
    gap = gap_table(groups)
    if gap:
        md += ["#### Real loader vs synthetic-gpu (training img/s)", "", markdown(gap, [
            ("model", "model"), ("device", "device"), ("precision", "precision"), ("batch", "batch"),
            ("loader", "loader img/s"), ("synthetic", "synthetic-gpu img/s"), ("ratio", "loader / synthetic"),
        ]), ""]  # fmt: skip
    sw = sweep_table(groups)
    if sw:
        md += ["#### Scenario B: batch sweep (seed Table 6: SqueezeNet1.1 " + "; ".join(f"b{b} {t} img/s {g} GFLOP/s" for b, t, g in seed.SWEEP) + ")", "", markdown(sw, [
            ("model", "model"), ("device", "device"), ("precision", "precision"), ("batch", "batch"), ("ips", "img/s"),
            ("gflops", "GFLOP/s"), ("ai", "AI FLOP/B"), ("frac", "% of roof"), ("mem", "peak MB"), ("note", "note"),
        ]), ""]  # fmt: skip
    sp = speedup_table(groups)
    md += ["#### Cross-device speedups (seed Table 8)", ""]
    md += (
        [markdown(sp, [("model", "model"), ("pair", "devices"), ("ours", "ours (train img/s ratio)"), ("seed", "seed")]), ""]
        if sp
        else ["One device in these results: speedups need a second device's cells (merge result dirs in `report`).", ""]
    )
    md += ["#### The seed's claims and what checking them needs", "", markdown(
        [{"claim": a, "ours": b, "needs": n} for a, b, n in CLAIMS], [("claim", "seed's claim"), ("ours", "read from"), ("needs", "needs")]
    ), ""]  # fmt: skip
    flagged = [f"{md_text(c.dir.name)}: {md_text(c.flags)}" for c in cells if c.flags]
    if flagged:
        md += ["⚑ flagged cells: " + "; ".join(flagged), ""]
    md += figures(cells, roofs, out)
    return md


def summary(cells: list[Cell]) -> tuple[list[str], dict]:
    cells = [c for c in cells if c.status == "ok"]
    rows = perf_table(group_repeats(cells))
    lines = textwrap.wrap(
        "per configuration, median over repeats: training and validation throughput (img/s), the training FLOP/s "
        "achieved (TFLOP/s), and that as % of the roof (the most the device's measured peaks allow at the "
        "model's arithmetic intensity)",
        120,
    ) if rows else []  # fmt: skip
    lines += [
        f"  {r['model']:<14} {r['config']:<24} train {sig(r['train_ips'])} img/s, val {sig(r['val_ips'])} img/s, "
        f"{sig(r['tf_train'])} TFLOP/s, {sig(r['frac'], 2)}% of roof"
        for r in rows
    ]
    ends = [
        f"batch-size sweep {_p(c)['model']} {_p(c)['precision']} ended: {e.get('sweep_stop_reason')}"
        for c in cells
        for e in _ok(c, "sweep_end")
    ]
    return lines + ends, {"configurations": rows}
