"""roofline's report section. First what a reader asks: how much faster one device is than
another per model (seed Table 8, both pipelines, with 95 % intervals over repeats); then the
rooflines (per device, every point under the roof of its own precision and run, and per model
across devices), then the seed's Tables 1-7 in its layout with its numbers beside ours, the
loader-vs-synthetic-gpu gap and the batch sweep. Numbers and intervals only: whether each of
the seed's claims holds is the answer engine's table after this section (claims.py declares
them, bench.core.answers judges them).

Host side: standard library, numpy and matplotlib only (rows and system.json; no torch).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from bench.core import palette, stats
from bench.core.claims import ALWAYS_FREE
from bench.core.figure_layout import legend_below, place
from bench.core.figures import figure
from bench.core.labels import distinct, qualify
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.study import work_params
from bench.core.tables import fmt, markdown
from bench.core.text import md as md_text
from bench.core.text import md_alt, md_code, plot_text, short, sig
from bench.studies.roofline import readout, roofmath, seed
from bench.studies.roofline.config import PRECISIONS, ROOF_OF, RooflineConfig
from bench.studies.roofline.readout import params
from bench.studies.roofline.roofmath import attainable

SEED_DEVICE = seed.KIND  # the seed's device of the same kind
MODELS = ("resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1")
COLORS = {"resnet18": "tab:blue", "mobilenet_v2": "tab:orange", "resnet50": "tab:green", "squeezenet1_1": "tab:red"}


def _config(c: Cell) -> str:
    p = params(c)
    return f"{p['precision_step']}, {p['pipeline']}" + (" ⚑" if c.flags else "")


def _roofs_by_run(cells: list[Cell]) -> dict[tuple[str, str], dict]:
    """(device, run) -> the roofs system.json says that run measured (or took from its cache) on
    that device; a run whose roofs are another run's of the same device (one cache) is left out."""
    out: dict[tuple[str, str], dict] = {}
    for c in cells:
        r = c.system.get("roofs")
        if isinstance(r, dict) and r.get("roofs") and (c.device, c.run_label) not in out:
            if not any(dev == c.device and seen == r for (dev, _), seen in out.items()):
                out[(c.device, c.run_label)] = r
    return out


# ---- tables ---------------------------------------------------------------------------------
def complexity_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Tables 1-2 beside our counts (64 px, FLOPs not MACs; AI from counted bytes)."""
    seen: dict[str, dict] = {}
    for g in groups:
        c = g[0]
        k = readout.counts(c)
        if k is None or params(c)["precision"] != "fp32" or params(c)["model"] in seen:
            continue
        m = k.model
        s = seed.COMPLEXITY.get(m, (None, None, None, None))
        seen[m] = {
            "model": m,
            "params": k.params_m,
            "seed_params": s[0],
            "fwd": k.fwd_gflop,
            "train": k.train_gflop,
            "seed_g224": s[1],
            "seed_as64": s[1] * 2 * (64 / 224) ** 2 if s[1] else None,
            "why": k.why,
            "ai": f"{fmt(k.ai_low)} .. {fmt(k.ai_high)} (b{k.batch})",
            "seed_ai": s[3],
        }
    return [seen[m] for m in MODELS if m in seen]


def perf_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Table 3 (throughput, TFLOP/s, peak memory), Table 4 (pass times) and Table 5
    (utilisation) as one row per configuration; the seed's device of the same kind beside."""
    out = []
    for g in sorted(groups, key=lambda g: MODELS.index(params(g[0])["model"]) if params(g[0])["model"] in MODELS else 9):
        c = g[0]
        if not readout.cell_rows(c, readout.TRAIN):
            continue
        p = params(c)
        sd = SEED_DEVICE.get(p["platform"], "")
        sp, se, su = seed.PERF.get((p["model"], sd)), seed.EPOCH.get((p["model"], sd)), seed.UTIL.get((p["model"], sd))
        f = readout.perf(g)
        # the seed's epoch, not the rows' seed_epoch_projected_s: rows before this kit version used 100,000 images
        n_seed = seed.epoch_images(str(p["model"]), sd)
        proj_train, proj_val = f.projected(n_seed)
        out.append(
            {
                "model": p["model"],
                "device": c.device,
                "config": _config(c),
                "batch": p["batch"],
                "train_ips": f.train_ips,
                "val_ips": f.val_ips,
                "tf_train": f.tf_train,
                "tf_val": f.tf_val,
                "frac": f.roof_pct,
                "mem": f.gpu_mb if f.gpu_mb is not None else f.rss_mb,
                "mem_kind": "GPU alloc" if f.gpu_mb is not None else "RSS",
                "train_s": f.train_s,
                "val_s": f.val_s,
                "batches": f"{f.train_steps or 0:.0f}/{f.val_steps or 0:.0f}",
                "seed_images": f"{n_seed:,}",
                "proj_s": f"{fmt(proj_train) or '–'} / {fmt(proj_val) or '–'}",
                "gpu_util": f.gpu_util,
                "sm_mhz": f.sm_mhz,
                "cpu_sys": f.cpu_system,
                "cpu_proc": f.cpu_process,
                "seed": f"{sd}: {sp[0]} / {sp[1]} img/s, {sp[2]} / {sp[3]} TFLOP/s" if sp else "",
                "seed_epoch": f"{sd}: {se[0]} / {se[1]} s" if se else "",
                "seed_util": f"{sd}: GPU {fmt(su[0]) or 'N/A'} %, CPU {su[1]} %" if su else "",
                "n": len(g),
                "run": c.run_label,
                "env": c.env_name,
                "environment": c.environment,
            }
        )
    return qualify(out, ("model", "device", "config", "batch"), "device", *_run_env(out))  # two runs: two rows


def gap_table(groups: list[list[Cell]]) -> list[dict]:
    """Real loader vs synthetic-gpu, training img/s, per model, device, precision and run (the two
    pipelines of one run side by side, never one run's loader over another's synthetic-gpu)."""
    by: dict[tuple, dict[str, float | None]] = {}
    for g in groups:
        p = params(g[0])
        if readout.cell_rows(g[0], readout.TRAIN):
            side = (p["model"], g[0].device, p["precision_step"], p["batch"], g[0].run_label, g[0].env_name, g[0].environment)
            by.setdefault(side, {})[p["pipeline"]] = readout.pooled_ips(g, readout.TRAIN)
    out = []
    for (m, dev, prec, b, run, env, environment), v in by.items():
        lo, syn = v.get("loader"), v.get("synthetic-gpu")
        out.append(
            {
                "model": m,
                "device": dev,
                "precision": prec,
                "batch": b,
                "loader": lo,
                "synthetic": syn,
                "ratio": readout.loader_gap(lo, syn),
                "run": run,
                "env": env,
                "environment": environment,
            }
        )
    return qualify(out, ("model", "device", "precision", "batch"), "device", *_run_env(out))


def sweep_table(groups: list[list[Cell]]) -> list[dict]:
    """Seed Table 6's sweep: per configuration and batch, the medians over its repeats (n), then
    where and why each repeat's sweep ended."""
    out = []
    for g in groups:
        ends = [e for c in g for e in readout.sweep_ends(c.rows)]
        if not ends:
            continue
        c, p = g[0], params(g[0])
        for x in readout.sweep(g):
            notes = ["NaN loss ⚑"] if x.nan else []
            if x.paced:
                notes.append("launch-paced" if p["step"] == "cuda-graph" else "host-paced")
            out.append(
                {
                    "model": p["model"],
                    "device": c.device,
                    "precision": p["precision_step"],
                    "batch": int(x.batch) if x.batch.is_integer() else x.batch,
                    "ips": x.ips,
                    "gflops": x.gflops,
                    "ai": f"{fmt(x.ai_low)} .. {fmt(x.ai_high)}",
                    "frac": x.roof_pct,
                    "mem": x.mem_mb,
                    "n": x.n,
                    "note": "; ".join(notes),
                    "run": c.run_label,
                    "env": c.env_name,
                    "environment": c.environment,
                }
            )
        stops = sorted({f"{e.stop}: {e.reason}" for e in ends})
        out.append(
            {
                "model": p["model"],
                "device": c.device,
                "precision": p["precision_step"],
                "batch": ends[0].batch or "",
                "end": True,  # never one repeat's point at the batch where another's sweep stopped
                "note": "end: " + "; ".join(stops),
                "run": c.run_label,
                "env": c.env_name,
                "environment": c.environment,
            }
        )
    keys = ("model", "device", "precision", "batch", "end")  # not the note: two runs' b16 is two rows, marked or not
    return qualify(out, keys, "device", *_run_env(out))


def _run_env(rows: list[dict]) -> tuple[list, list, list]:
    """The qualifiers that tell two rows of one configuration apart: the run, then its environment."""
    return [r.get("run", "") for r in rows], [r.get("env", "") for r in rows], [r.get("environment", "") for r in rows]


def roofs_table(roofs: dict[tuple[str, str], dict]) -> list[dict]:
    out = []
    for (dev, run), r in roofs.items():
        sheet = r.get("datasheet") if isinstance(r.get("datasheet"), dict) else {}
        load = readout.roof_load(r)
        out.append(
            {
                "device": dev,
                "fp32": readout.roof_gflops(r, "fp32"),
                "tf32": readout.roof_gflops(r, "tf32"),
                "bf16": readout.roof_gflops(r, "bf16"),
                "bw": readout.roof_gflops(r, None),
                "sheet": f"{sheet.get('product')}: fp32 {sheet.get('fp32_tflop_per_s')} TFLOP/s, {sheet.get('mem_tb_per_s')} TB/s"
                if sheet
                else "",
                "when": f"{r.get('measured_at')}" + (f", load {load:.1f}" if load is not None else ""),
                "run": run,
            }
        )
    for name, (gf, bw) in seed.PEAKS.items():
        out.append({"device": f"seed: {name}", "fp32": gf, "bw": bw, "sheet": "the seed's (datasheet / approximate)"})
    return qualify(out, ("device",), "device", [r.get("run", "") for r in out])  # two runs of one device: two rows


# a ratio's numerator comes first in this order: GPU over Apple GPU over CPU (the seed's Table 8)
KIND_ORDER = {"cuda": 0, "mps": 1, "cpu": 2}


@dataclass
class Side:
    """One device's cells of one configuration in one run: training img/s per repeat."""

    device: str
    platform: str
    run: str  # ResultCell.run_label: two sides of one run share its repeats' noise
    backend: str
    host_cpu: str  # the host's CPU (for a GPU side: the one decoding the loader's JPEGs)
    threads: object = None  # torch intra-op threads the cells ran with
    per: dict[int, float] = field(default_factory=dict)


@dataclass
class Speedup:
    """Training img/s of side A over side B for one model, precision, pipeline and batch."""

    model: str
    precision: str
    pipeline: str
    batch: object
    a: Side
    b: Side
    ratio: stats.Summary
    paired: bool


def _host_cpu(c: Cell) -> str:
    cores = c.system.get("cpu_affinity") or c.system.get("cpu_logical_cores")
    return str(c.system.get("cpu_model") or "unknown CPU") + (f", {cores} cores" if cores else "")


def _workload(c: Cell) -> str:
    """What a cell computes: its params but its work (config.py marks it: the pass lengths, warm-up,
    sweep and roof sizes) and what never tells work apart (threads, workers, devices, the data's
    checksum); the dataset's name stays. Parameters a
    spec predates take today's defaults (a cell made before `step` ran step=eager)."""
    given = c.spec.get("params")
    full = {**asdict(RooflineConfig()), **(given if isinstance(given, dict) else {})}
    amounts = work_params(RooflineConfig)
    work = {k: v for k, v in full.items() if k not in amounts and k not in ALWAYS_FREE}
    return json.dumps(work, sort_keys=True, default=str)


def speedups(groups: list[list[Cell]]) -> list[Speedup]:
    """Seed Table 8 for every pair of devices that ran the same workload (model, precision,
    pipeline, batch, dataset and every other setting but the pass lengths; scenario A): the
    ratio of median training img/s over repeats with its 95 % interval (bench.core.stats.ratio),
    paired by repeat only when both sides come from one run. A real-data run never meets a
    synthetic one here (the seed's claims, judged by bench.core.answers, pair them and say so)."""
    sides: dict[tuple, dict[tuple[str, str], Side]] = {}
    for g in groups:
        for c in g:
            p, v = params(c), readout.ips(c.rows, readout.TRAIN)
            if not v or p["scenario"] != "A":
                continue
            key = tuple(
                v if isinstance(v, (str, int, float)) else str(v) for v in (p["model"], p["precision"], p["pipeline"], p["batch"])
            ) + (_workload(c),)
            side = sides.setdefault(key, {}).setdefault(
                (c.device, c.run_label),
                Side(
                    c.device,
                    str(p["platform"]),
                    c.run_label,
                    str(c.first.get("backend")),
                    _host_cpu(c),
                    readout.threads(c),
                ),
            )
            side.per[c.repeat] = v
    out = []
    for (model, prec, pipe, batch, _), by in sides.items():
        ordered = sorted(by.values(), key=lambda s: (KIND_ORDER.get(s.platform, 9), s.device, s.run))
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if a.device == b.device:
                    continue  # one device in two runs: `orchestrate.py compare` is for that
                paired = a.run == b.run
                r = readout.speedup(a.per, b.per, paired)
                out.append(Speedup(str(model), str(prec), str(pipe), batch, a, b, r, paired and r.n >= 2))
    order = {m: i for i, m in enumerate(MODELS)}
    out.sort(key=lambda x: (order.get(x.model, 9), PRECISIONS.index(x.precision) if x.precision in PRECISIONS else 9))
    return out


def _x(s: stats.Summary | None) -> str:
    return "" if s is None else f"{short(s.median)}x"


def _ci(s: stats.Summary | None) -> str:
    return "" if s is None else s.interval(lambda v: f"{short(v)}x")


def speedup_table(sp: list[Speedup]) -> list[dict]:
    """One row per model, precision, batch and pair of devices: both pipelines side by side,
    each with its interval and repeats, and the seed's Table 8 figure for the same kinds."""
    rows: dict[tuple, dict] = {}
    seed_idx = {("cuda", "mps"): 0, ("cuda", "cpu"): 1, ("mps", "cpu"): 2}
    # a device measured in several runs (two lent H200s, each "NVIDIA H200") is named with its run
    runs: dict[str, set] = {}
    for x in sp:
        for side in (x.a, x.b):
            runs.setdefault(side.device, set()).add(side.run)

    def name(side: Side) -> str:
        return side.device + (f" ({side.run})" if len(runs[side.device]) > 1 else "")

    for x in sp:
        key = (x.model, x.precision, x.batch, x.a.device, x.a.run, x.b.device, x.b.run)
        k = seed_idx.get((x.a.platform, x.b.platform))
        seed_fig = seed.SPEEDUP.get(x.model)
        row = rows.setdefault(
            key,
            {
                "model": x.model,
                "precision": x.precision,
                "batch": x.batch,
                "pair": f"{name(x.a)} / {name(x.b)}",
                "seed": f"{seed_fig[k]}x ({_SEED_PAIR[k]})" if k is not None and seed_fig and x.precision == "fp32" else "",
            },
        )
        tag = "loader" if x.pipeline == "loader" else "synthetic"
        row[tag] = _x(x.ratio)
        row[f"{tag}_ci"] = _ci(x.ratio)
        row[f"{tag}_n"] = f"{len(x.a.per)} / {len(x.b.per)}" + (", paired" if x.paired else "")
    out = list(rows.values())
    for r in out:
        ns = {r.get("loader_n"), r.get("synthetic_n")} - {None}
        r["n"] = ns.pop() if len(ns) == 1 else f"loader {r.get('loader_n', '–')}; synthetic-gpu {r.get('synthetic_n', '–')}"
    return out


_SEED_PAIR = ("T4 / M3 Pro", "T4 / 4-vCPU e2-standard-4", "M3 Pro / 4-vCPU e2-standard-4")
SPEEDUP_COLS = [
    ("model", "model"),
    ("precision", "precision"),
    ("batch", "batch"),
    ("pair", "devices (first / second)"),
    ("loader", "loader: ours"),
    ("loader_ci", "loader: interval"),
    ("synthetic", "synthetic-gpu: ours"),
    ("synthetic_ci", "synthetic-gpu: interval"),
    ("n", "repeats (first / second)"),
    ("seed", "seed Table 8 (fp32, its loader)"),
]


def speedup_sides(sp: list[Speedup]) -> list[str]:
    """One line per device side of the table: which device, backend, run, repeats and host CPU."""
    seen: dict[tuple[str, str], Side] = {}
    reps: dict[tuple[str, str], set[int]] = {}
    for x in sp:
        for s in (x.a, x.b):
            seen.setdefault((s.device, s.run), s)
            reps.setdefault((s.device, s.run), set()).update(s.per)
    out = []
    for (dev, run), s in sorted(seen.items(), key=lambda kv: (KIND_ORDER.get(kv[1].platform, 9), kv[0])):
        n = len(reps[(dev, run)])
        what = (
            f"{s.backend}, {s.threads} torch threads"
            if s.platform == "cpu"
            else f"{s.backend}; its host's CPU, which decodes the loader's JPEGs: {s.host_cpu}"
        )
        out.append(f"- **{md_text(dev)}** ({md_text(what)}): run {md_code(run)}, {n} repeat{'s' if n != 1 else ''}")
    return out


# ---- figures --------------------------------------------------------------------------------
# a point's precision: its roof's line style, its marker's fill, its sweep's line style
FillStyle = Literal["full", "left", "right", "bottom", "top", "none"]
PREC_STYLE: dict[str, tuple[str, FillStyle]] = {"fp32": ("-", "full"), "tf32": ("--", "left"), "bf16-cl": (":", "none")}
MARKERS = {("train", "loader"): "o", ("train", "synthetic-gpu"): "D", ("val", "loader"): "s", ("val", "synthetic-gpu"): "p"}


@dataclass(frozen=True)
class RoofLine:
    """One roof to draw: a device's compute ceiling for one precision and its bandwidth ceiling."""

    device: str
    precision: str  # the points' precision (fp32 | tf32 | bf16-cl)
    compute_name: str  # gemm_bf16, conv_fp32, ...
    compute: float  # FLOP/s
    bandwidth_name: str  # copy | triad
    bandwidth: float  # B/s
    run: str = ""  # the run whose points were held against it (ResultCell.run_label)

    @property
    def ridge(self) -> float:  # FLOP/B
        return self.compute / self.bandwidth

    @property
    def key(self) -> tuple[str, str, float, float]:
        """What makes it the same roof in two runs."""
        return (self.device, self.precision, self.compute, self.bandwidth)

    def label(self, with_device: bool = False) -> str:
        who = f"{self.device[:30]} " if with_device else ""
        return plot_text(
            f"{who}roof {self.precision}: {self.compute / 1e12:.3g} TFLOP/s ({self.compute_name}), "
            f"{self.bandwidth / 1e9:,.0f} GB/s ({self.bandwidth_name})"
        )


def roof_lines(cells: list[Cell]) -> list[RoofLine]:
    """The roofs to draw under CELLS' points: one per device, run and precision present among
    them, each the roof that run's roof fractions were computed against (the rows' roof_*
    fields; system.json's measured roofs for rows that predate them); two runs of one device
    that held their points against the same roof draw it once."""
    seen: dict[tuple[str, str, str], RoofLine] = {}
    for c in cells:
        prec = str(params(c)["precision"])
        if not readout.points(c.rows) or (c.device, c.run_label, prec) in seen:
            continue
        line = None
        held = readout.row_roofs(c)
        if held:
            line = RoofLine(c.device, prec, held[0], held[1], held[2], held[3], c.run_label)
        else:
            roofs = c.system.get("roofs")
            if isinstance(roofs, dict) and isinstance(roofs.get("roofs"), dict):
                comp, bw = readout.roof_compute(roofs, ROOF_OF.get(prec, prec)), readout.roof_bandwidth(roofs)
                if comp and bw:
                    line = RoofLine(c.device, prec, ROOF_OF.get(prec, prec), comp, "copy/triad", bw, c.run_label)
        if line and all(x.key != line.key for x in seen.values()):
            seen[(c.device, c.run_label, prec)] = line
    order = {p: i for i, p in enumerate(PRECISIONS)}
    return sorted(seen.values(), key=lambda x: (x.device, order.get(x.precision, 9), x.run))


def roof_labels(lines: list[RoofLine], with_device: bool = False) -> list[str]:
    """Each line's legend label, its run added where one device has this precision's roof from
    several runs (then '#1', '#2' where even that would read alike)."""
    runs: dict[tuple[str, str], set[str]] = {}
    for x in lines:
        runs.setdefault((x.device, x.precision), set()).add(x.run)
    named = [x.label(with_device) + (plot_text(f" [{x.run}]") if len(runs[(x.device, x.precision)]) > 1 else "") for x in lines]
    return distinct(named)


def _roof_curve(line: RoofLine, xs: list[float], color: str = "k") -> dict:
    """LINE drawn over the intensities XS: its attainable FLOP/s there, its precision's style."""
    ys = [attainable(x, line.compute, line.bandwidth)[0] for x in xs]
    return {"xs": xs, "ys": ys, "ls": PREC_STYLE.get(line.precision, ("-.",))[0], "color": color}


def _axes(ax) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)


def _points(c: Cell, col: str) -> dict:
    """C's points as data: a bar from the unfused to the compulsory AI, the marker at the compulsory end."""
    p = params(c)
    ls, fill = PREC_STYLE.get(str(p["precision"]), ("-.", "full"))
    bars = []
    for phase in (readout.TRAIN, readout.VAL):
        marker = MARKERS.get((phase, str(p["pipeline"])), "x")
        for x in readout.plot_points(c, phase):
            bars.append((x.ai_low, x.ai_high, x.flop_s, marker))
    sw = readout.plot_points(c, readout.SWEEP)
    sweep = [(x.ai_high, x.flop_s) for x in sw]
    marks = [(plot_text(x.label), x.ai_high, x.flop_s) for x in (sw[:1] + sw[-1:] if sw else [])]
    return {"color": col, "ls": ls, "fill": fill, "bars": bars, "sweep": sweep, "marks": marks}


def _draw_points(ax, d: dict) -> None:
    for lo, hi, y, marker in d["bars"]:
        ax.plot([lo, hi], [y, y], "-", color=d["color"], alpha=0.4, lw=1)
        ax.plot([hi], [y], marker, color=d["color"], fillstyle=d["fill"], ms=7, mew=1.3)
    if d["sweep"]:
        ax.plot([x for x, _ in d["sweep"]], [y for _, y in d["sweep"]], "^", ls=d["ls"], color=d["color"], fillstyle=d["fill"],
                alpha=0.85, ms=5)  # fmt: skip
        for text, x, y in d["marks"]:
            ax.annotate(text, (x, y), fontsize=6)


def _draw_roofs(ax, roofs: list[dict]) -> None:
    for r in roofs:
        ax.plot(r["xs"], r["ys"], r["ls"], color=r["color"], lw=1.2)


def legend_handles(colors: dict[str, str], roofs: list[tuple[str, str, str]], precisions: list[str]) -> list:
    """Proxy entries: the roofs (label, line style, color), the colors (models or devices), the
    markers, the precisions' fills: a legend of a dozen entries however many points there are."""
    from matplotlib.lines import Line2D

    h = [Line2D([], [], color=col, ls=ls, label=label) for label, ls, col in roofs]
    h += [Line2D([], [], color=col, marker="o", ls="", label=plot_text(name)) for name, col in colors.items()]
    h += [Line2D([], [], color="gray", marker=m, ls="", label=f"{ph}, {pipe}") for (ph, pipe), m in MARKERS.items()]
    h.append(Line2D([], [], color="gray", marker="^", ls="-", label="batch sweep (first and last batch labelled)"))
    h += [
        Line2D([], [], color="gray", marker="o", fillstyle=PREC_STYLE[p][1], ls=PREC_STYLE[p][0], label=f"{p} (fill, line)")
        for p in precisions
        if p in PREC_STYLE
    ]
    return h


def _span(cells: list[Cell]) -> list[float]:
    import numpy as np

    ais = readout.intensities(cells)
    lo, hi = (max(min(ais) / 4, 1e-12), max(ais) * 4) if ais else (0.1, 1000)  # a log axis: from a positive end
    return [float(x) for x in np.logspace(np.log10(min(lo, 0.1)), np.log10(max(hi, 100)), 200)]


def _precisions(cells: list[Cell]) -> list[str]:
    present = {str(params(c)["precision"]) for c in cells}
    return [p for p in PRECISIONS if p in present] + sorted(present - set(PRECISIONS))


def figures(cells: list[Cell], out: Path) -> list[str]:
    """A roofline per device (its models in its family's shades) and one per model across devices."""
    md = []
    devices = sorted({c.device for c in cells})
    fam = {c.device: palette.family(c.device, c.first.get("backend")) for c in cells}
    for i, dev in enumerate(devices):
        mine = [c for c in cells if c.device == dev]
        xs = _span(mine)
        lines = roof_lines(mine)
        # one device per figure: its models in the shades of its family (bench.core.palette)
        present = [m for m in MODELS if any(params(c)["model"] == m for c in mine)]
        present += sorted({str(params(c)["model"]) for c in mine} - set(present))
        model_colors = palette.colors([(m, fam[dev]) for m in present])
        data = {
            "roofs": [_roof_curve(line, xs) for line in lines],
            "points": [_points(c, model_colors.get(str(params(c)["model"]), "tab:gray")) for c in mine],
            "title": f"roofline: {plot_text(dev)}: every point under the roof of its precision",
            "legend": (
                model_colors,
                [(lab, PREC_STYLE.get(x.precision, ("-.",))[0], "k") for x, lab in zip(lines, roof_labels(lines))],
                _precisions(mine),
            ),
        }
        name = figure(out, f"roofline_device{i + 1}.png", draw_device, data)
        md += [f"![roofline: {md_alt(dev)}]({name})", ""]
    models = [m for m in MODELS if any(params(c)["model"] == m for c in cells)]
    if models:
        dev_color = palette.colors([(d, fam[d]) for d in devices])  # colour = device, as in every plot
        panels = []
        for m in models:
            mine = [c for c in cells if params(c)["model"] == m]
            xs = _span(mine)
            panels.append(
                {
                    "title": m,
                    # each device's roof of every precision its points ran at
                    "roofs": [_roof_curve(line, xs, dev_color[line.device]) for line in roof_lines(mine)],
                    "points": [_points(c, dev_color[c.device]) for c in mine],
                }
            )
        every = roof_lines(cells)
        roofs = [
            (lab, PREC_STYLE.get(x.precision, ("-.",))[0], dev_color[x.device]) for x, lab in zip(every, roof_labels(every, True))
        ]
        data = {"panels": panels, "legend": ({}, roofs, _precisions(cells))}
        figure(out, "roofline_per_model.png", draw_per_model, data)
        md += ["![per-model rooflines across devices](roofline_per_model.png)", ""]
    return md


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_device(d: dict, path: Path) -> None:
    """One device's roofline (bench.core.figures)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9.7, 6))
    _draw_roofs(ax, d["roofs"])
    for p in d["points"]:
        _draw_points(ax, p)
    _axes(ax)
    ax.set_xlabel("arithmetic intensity (FLOP/byte; bar: unfused .. compulsory bytes, marker at compulsory)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(d["title"], fontsize=10, y=1.0)  # y given: no search for top ticks (none here)
    leg = ax.legend(handles=legend_handles(*d["legend"]), fontsize=7, ncol=3, loc="lower center")
    place(fig, left=0.9, right=0.3, top=0.4, bottom=0.65 + legend_below(fig, leg))
    fig.savefig(path, dpi=95)
    plt.close(fig)


def draw_per_model(d: dict, path: Path) -> None:
    """Every model's points on every device, a panel each (bench.core.figures)."""
    plt = _plt()
    panels = d["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4.8), squeeze=False)
    for ax, p in zip(axes[0], panels):
        _draw_roofs(ax, p["roofs"])
        for pt in p["points"]:
            _draw_points(ax, pt)
        _axes(ax)
        ax.set_title(p["title"], fontsize=10, y=1.0)  # y given: no search for top ticks (none here)
        ax.set_xlabel("FLOP/byte")
    axes[0][0].set_ylabel("achieved FLOP/s")
    fig.suptitle("per model, across devices: each device's roof (its color) for every precision its points ran at", fontsize=10)
    leg = fig.legend(handles=legend_handles(*d["legend"]), fontsize=7, ncol=3, loc="lower center")
    place(fig, left=0.9, right=0.2, top=0.6, bottom=0.6 + legend_below(fig, leg), wspace=0.75)
    fig.savefig(path, dpi=90)
    plt.close(fig)


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
    ("seed_images", "seed epoch, images"),
    ("proj_s", "ours projected to the seed epoch: train / val s"),
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
    roofs = _roofs_by_run(cells)
    md = intro(cells)
    md += speedup_section(speedups(groups))
    md += figures(cells, out)
    md += roofs_section(roofs) + complexity_section(groups) + scenario_a_sections(perf_table(groups))
    md += gap_section(groups) + sweep_section(groups)
    flagged = [f"{md_text(c.dir.name)}: {md_text(c.flags)}" for c in cells if c.flags]
    if flagged:
        md += ["⚑ flagged cells: " + "; ".join(flagged), ""]
    return md


def intro(cells: list[Cell]) -> list[str]:
    """What the study runs and measures, which data it ran on, and what synthetic data cannot show."""
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
    return md


def roofs_section(roofs: dict[tuple[str, str], dict]) -> list[str]:
    """Every device's measured roofs, seed Table 7 beside."""
    return ["#### Measured roofs (seed Table 7 beside)", "", markdown(roofs_table(roofs), [
        ("device", "device"), ("fp32", "fp32 GFLOP/s"), ("tf32", "tf32 GFLOP/s"), ("bf16", "bf16 GFLOP/s"),
        ("bw", "memory GB/s"), ("sheet", "datasheet"), ("when", "measured"),
    ]), ""]  # fmt: skip


def complexity_section(groups: list[list[Cell]]) -> list[str]:
    """Parameters, FLOPs and intensity per model, seed Tables 1-2 beside."""
    return [
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


def scenario_a_sections(perf: list[dict]) -> list[str]:
    """Scenario A's rows (perf_table) as the seed's Tables 3, 4 and 5."""
    return [
        "#### Scenario A: throughput, achieved compute, memory (seed Table 3)",
        "",
        markdown(perf, PERF_COLS),
        "",
        "#### Pass times (seed Table 4)",
        "",
        f"The seed's 'epoch' was its max-batch control: {seed.EPOCH_BATCHES} batches. Its Table 4 seconds x Table 3 img/s "
        f"= {seed.EPOCH_IMAGES:,} images (batch 128) in 22 of its 24 entries and 3,200 (batch 64) for SqueezeNet1.1 on the "
        "T4, not Tiny-ImageNet's 100,000 training images. Our passes ran the batches shown; each is projected to the "
        "seed's epoch for the same model and kind of device as seed-epoch images / our img/s.",
        "",
        markdown(perf, EPOCH_COLS),
        "",
        "#### Utilisation (seed Table 5)",
        "",
        "CPU: psutil, primed before the region (an unprimed first call reads 0.0, as many of the seed's figures do). "
        "GPU: NVML's utilisation is the share of time one or more kernels ran, not occupancy or a fraction of peak.",
        "",
        markdown(perf, UTIL_COLS),
        "",
    ]


def gap_section(groups: list[list[Cell]]) -> list[str]:
    """The real loader against synthetic-gpu, where both ran ([] otherwise)."""
    gap = gap_table(groups)
    if not gap:
        return []
    return ["#### Real loader vs synthetic-gpu (training img/s)", "", markdown(gap, [
        ("model", "model"), ("device", "device"), ("precision", "precision"), ("batch", "batch"),
        ("loader", "loader img/s"), ("synthetic", "synthetic-gpu img/s"), ("ratio", "loader / synthetic"),
    ]), ""]  # fmt: skip


def sweep_section(groups: list[list[Cell]]) -> list[str]:
    """Scenario B's batch sweep, seed Table 6 in the heading ([] where no sweep ran)."""
    sw = sweep_table(groups)
    if not sw:
        return []
    return ["#### Scenario B: batch sweep (seed Table 6: SqueezeNet1.1 " + "; ".join(f"b{b} {t} img/s {g} GFLOP/s" for b, t, g in seed.SWEEP) + ")", "", markdown(sw, [
        ("model", "model"), ("device", "device"), ("precision", "precision"), ("batch", "batch"), ("ips", "img/s"),
        ("gflops", "GFLOP/s"), ("ai", "AI FLOP/B"), ("frac", "% of roof"), ("mem", "peak MB"), ("n", "n"), ("note", "note"),
    ]), ""] + HOST_PACED_TEXT * any("host-paced" in str(r.get("note")) for r in sw) + LAUNCH_PACED_TEXT * any(
        "launch-paced" in str(r.get("note")) for r in sw
    )  # fmt: skip


HOST_PACED_TEXT = [
    f"*host-paced*: the step took at most {roofmath.HOST_PACED}x the sweep's floor (the median step of its three smallest "
    "batches, themselves within that factor of each other): several times the images in about the same time, so the "
    "device idled for most of the step and the host (Python, the dispatcher, the kernel launches) set its pace. Such a "
    "figure is the host's speed, and it wanders with the host: on the lent H100s fresh processes of one such cell "
    "differed by 10-30 %, and seconds of one process by as much (results/reference/H100-80GB-HBM3-harness/). Compare "
    "them with `--until-decided`, at a batch past the host-paced run, or with the step as a CUDA graph (`--set "
    "step=cuda-graph`), which takes the host out of the step.",
    "",
]
LAUNCH_PACED_TEXT = [
    "*launch-paced*: the same floor in a sweep whose step was a CUDA graph (`step=cuda-graph`, marked *graph*): the host "
    "is out of the step, so what is left is the device's side of it, its kernels one after another, each too small to "
    "fill the GPU (not profiled here). "
    "These figures are the device's and hold between fresh processes (on the lent H100, ResNet-50 bf16-cl: two sweeps "
    "within 1.9 % of each other at every batch, the eager step's up to 57 % apart below batch 2048; "
    "results/reference/H100-80GB-HBM3-roofline-graph/).",
    "",
]


def speedup_section(sp: list[Speedup]) -> list[str]:
    md = ["#### How much faster: cross-device speedups (seed Table 8)", ""]
    if not sp:
        return md + ["One device in these results: speedups need a second device's cells (merge result dirs in `report`).", ""]
    precs = [p for p in PRECISIONS if any(x.precision == p for x in sp)]
    md += [
        "Training img/s of the first device over the second's, same model, precision, batch and data (scenario A), in both "
        "pipelines: `loader` (the seed's set-up: JPEGs decoded by DataLoader workers on the host's CPU) and "
        "`synthetic-gpu` (one batch kept on the device: the hardware alone). **Ours** is the ratio of the medians over "
        f'repeats with {stats.INTERVAL_TEXT} (`bench.core.stats.ratio`; "range of 3"), paired by repeat only where '
        'both sides ran in one run; one repeat gives none ("n=1, no interval"). Precision: '
        + ", ".join(precs)
        + (
            " (TF32 off; the only precision a CPU runs, so GPU tf32 and bf16-cl cells have no CPU partner)"
            if "fp32" in precs
            else ""
        )
        + ". The seed's figure is its Table 8: fp32, its loader, a T4 over a 4-vCPU e2-standard-4.",
        "",
        "The devices compared:",
        "",
        *speedup_sides(sp),
        "",
        markdown(speedup_table(sp), SPEEDUP_COLS),
        "",
    ]
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
        f"  {str(r['model']):<14} {r['config']:<24} train {sig(r['train_ips'])} img/s, val {sig(r['val_ips'])} img/s, "
        f"{sig(r['tf_train'])} TFLOP/s, {sig(r['frac'], 2)}% of roof"
        for r in rows
    ]
    ends = [
        f"batch-size sweep {params(c)['model']} {params(c)['precision']} ended: {e.reason}"
        for c in cells
        for e in readout.sweep_ends(c.rows)
    ]
    return lines + ends, {"configurations": rows}
