"""profile's many-GPU section: one GPU, DDP under torchrun and nn.DataParallel (the seed's), per
configuration over its repeats, and the measured cause of DataParallel's collapse.

    configs(cells)      the GPU cells grouped by configuration (one run's repeats of one spec)
    scaling_table       per (variant, parallel mode, GPU count): throughput with its interval,
                        scaling efficiency = (N-GPU / 1-GPU) / N with its interval, per-GPU
                        memory, utilisation and energy per image
    versus_dp_table     DDP over DataParallel (cudnn.benchmark on and off), same GPUs and run
    collapse_lines      the DP cells' own profiles (CUDA kernels and time per step against the
                        one-GPU cell's) and the run's lab/dp_collapse.json (labfiles.py), with
                        the cause where those numbers show it
    scaling_figure      throughput and efficiency over 1, 2, 4 ... GPUs with their intervals

Intervals are `bench.core.stats`: a repeat (one fresh process) is the unit, its figure the
median over its timed epochs; a ratio pairs repeat i with repeat i of the same run. Every figure
is readout.py's (per repeat, over repeats, the efficiency); this module groups and shows them.
Numbers only: the seed's claims are the answer engine's (claims.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import figure_layout, palette
from bench.core.figures import figure
from bench.core.labels import distinct, environments
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.stats import INTERVAL_TEXT, Summary
from bench.core.tables import markdown
from bench.core.text import md as md_text
from bench.core.text import md_alt, md_reason, one_line, plot_text, short, sig
from bench.studies.profile import readout
from bench.studies.profile.readout import gpus as _gpus
from bench.studies.profile.readout import label as _label

MODE_NAMES = {"none": "one GPU", "ddp": "DDP", "dp": "DataParallel"}
SAME_WORK = ("backend", "variant", "pipeline", "batch_size", "model", "image_size")  # what a 1-GPU base shares
# the cuDNN change that would end the collapse (evidence: lab/dp_collapse.py's docstring; the PR page)
CUDNN_PR = 'PyTorch PR #191744, "Share benchmarked conv plans across threads", is open'


@dataclass
class Config:
    """One configuration's cells in one run, one per repeat (the first cell of a repeat kept)."""

    cells: list[Cell]
    name: str = ""
    ips: dict[int, float] = field(default_factory=dict)  # repeat -> median img/s over its timed epochs

    def __post_init__(self) -> None:
        kept: dict[int, Cell] = {}
        for c in self.cells:
            v = readout.ips(c)
            if v is not None and c.repeat not in kept:
                kept[c.repeat] = c
                self.ips[c.repeat] = v
        self.cells = [kept[k] for k in sorted(kept)]
        self.name = self.name or (_label(self.first) if self.cells else "")

    @property
    def first(self) -> Cell:
        return self.cells[0]

    def row(self, key: str) -> object:
        return self.first.first.get(key)

    @property
    def mode(self) -> str:
        return str(self.row("parallel") or "none")

    @property
    def benchmark(self) -> bool:
        return self.row("cudnn_benchmark") is not False

    @property
    def gpus(self) -> int:
        return readout.gpu_count(self.first)

    @property
    def run(self) -> str:
        return self.first.run_label

    @property
    def mode_name(self) -> str:
        name = MODE_NAMES.get(self.mode, self.mode)
        return name + (f", cudnn.benchmark {'on' if self.benchmark else 'off'}" if self.mode == "dp" else "")

    def per_repeat(self, fn: Callable[[Cell], float | None]) -> dict[int, float]:
        return {c.repeat: v for c in self.cells if (v := fn(c)) is not None}

    def median_of(self, fn: Callable[[Cell], float | None]) -> float | None:
        return readout.median_over(self.per_repeat(fn).values())

    def same_place(self, other: Config) -> bool:
        return self.run == other.run and self.first.device == other.first.device


def configs(cells: list[Cell]) -> list[Config]:
    """The GPU cells that timed epochs, grouped by configuration (ResultCell.config_key), named
    by the cell's label plus what tells two runs apart where two share it."""
    got = [Config(g) for g in group_repeats([c for c in cells if c.first.get("backend") != "torch-cpu"])]
    got = [g for g in got if g.cells]
    names = distinct([g.name for g in got], [g.run for g in got], *environments([g.first for g in got]),
                     [g.first.device for g in got])  # fmt: skip
    for g, n in zip(got, names, strict=True):
        g.name = n
    return sorted(got, key=lambda g: (g.run, str(g.row("variant")), g.gpus, g.mode != "none", g.mode, not g.benchmark))


def base_of(g: Config, every: list[Config]) -> Config | None:
    """G's one-GPU configuration: same run and device, same work per GPU; None unless exactly one."""
    found = [
        b for b in every if b.mode == "none" and b.gpus == 1 and b.same_place(g) and all(b.row(k) == g.row(k) for k in SAME_WORK)
    ]
    return found[0] if len(found) == 1 else None


def _interval(s: Summary | None, fmt: str) -> str:
    return "" if s is None else s.interval(fmt)


def _per_gpu(g: Config, key: str) -> list[float | None]:
    """gpu<i>_KEY per GPU the cells name (in their order): per repeat the median over its epochs,
    then the median over repeats."""

    def of(i: int) -> Callable[[Cell], float | None]:
        return lambda c: readout.gpu_median(c, i, key)

    return [g.median_of(of(i)) for i in _gpus(g.first)]


def _joined(vals: list[float | None], digits: int) -> str:
    return " · ".join("-" if v is None else sig(v, digits) for v in vals)


def scaling(every: list[Config]) -> list[tuple[Config, Summary, Summary | None]]:
    """(configuration, throughput over repeats, scaling efficiency or None) of every configuration
    in a run that holds a many-GPU one."""
    runs = {g.run for g in every if g.gpus > 1}
    out = []
    for g in every:
        if g.run not in runs:
            continue
        base = base_of(g, every) if g.gpus > 1 else None
        eff = readout.efficiency(g.ips, base.ips, g.gpus) if base else None
        out.append((g, readout.over_repeats(g.ips), eff))
    return out


def scaling_table(rows: list[tuple[Config, Summary, Summary | None]]) -> list[str]:
    out = []
    for g, s, eff in rows:
        out.append(
            {
                "cfg": g.name,
                "mode": g.mode_name,
                "gpus": g.gpus,
                "n": len(g.ips),
                "ips": sig(s.median, 4),
                "ci": s.interval("{:,.0f}"),
                "eff": "" if eff is None else f"{eff.median:.3f}",
                "eci": _interval(eff, "{:.3f}") if eff else ("(the base)" if g.gpus == 1 else "no one-GPU configuration"),
                "mem": _joined(_per_gpu(g, readout.GPU_MEM), 3),
                "util": _joined(_per_gpu(g, readout.GPU_UTIL), 2),
                "jpi": _joined(_per_gpu(g, readout.GPU_J_PER_IMG), 3),
            }
        )
    return [
        markdown(
            out,
            [
                ("cfg", "configuration"),
                ("mode", "parallel"),
                ("gpus", "GPUs"),
                ("n", "repeats"),
                ("ips", "img/s (median)"),
                ("ci", "interval"),
                ("eff", "scaling efficiency"),
                ("eci", "interval"),
                ("mem", "own memory MB per GPU (max, torch)"),
                ("util", "util % per GPU (mean)"),
                ("jpi", "J / image per GPU"),
            ],
        ),
        "",
    ]


def versus_dp_table(every: list[Config]) -> list[str]:
    """DDP over DataParallel (on and off) at the same GPU count, run and work per GPU; a
    DataParallel setting that another variant of the run has but this one lacks is 'not run'."""
    out = []
    for d in (g for g in every if g.mode == "ddp"):
        dps = [g for g in every if g.mode == "dp" and g.gpus == d.gpus and g.same_place(d)]
        if not dps:
            continue
        for bench in (True, False):
            if not any(g.benchmark is bench for g in dps):
                continue
            match = [g for g in dps if g.benchmark is bench and all(g.row(k) == d.row(k) for k in SAME_WORK)]
            row = {"ddp": d.name, "dp": f"DataParallel x{d.gpus}, cudnn.benchmark {'on' if bench else 'off'}"}
            row["ddp_ips"] = sig(readout.median_over(d.ips.values()), 4)
            if len(match) != 1:
                row["dp_ips"] = "not run here" if not match else "more than one configuration"
            else:
                r = readout.paired(d.ips, match[0].ips)
                row |= {"dp_ips": sig(readout.median_over(match[0].ips.values()), 4), "n": f"{len(d.ips)} / {len(match[0].ips)}"}
                row |= {"x": f"{short(r.median)}x", "ci": r.interval(short)}  # the claims' format: one figure
            out.append(row)
    if not out:
        return []
    return [
        "DDP against DataParallel at the same GPU count and batch per GPU (ratio of median throughputs; paired by "
        "repeat where both sides ran the same repeats, else the two sides' ranges):",
        "",
        markdown(
            out,
            [
                ("ddp", "DDP configuration"),
                ("dp", "against"),
                ("ddp_ips", "DDP img/s"),
                ("dp_ips", "DataParallel img/s"),
                ("n", "repeats (DDP / DP)"),
                ("x", "DDP / DataParallel"),
                ("ci", "interval"),
            ],
        ),
        "",
    ]


def _breakdown(key: str) -> Callable[[Cell], float | None]:
    """KEY of a cell's step-time breakdown (readout.breakdown_figure)."""
    return lambda c: readout.breakdown_figure(c, key)


def profiled_table(every: list[Config]) -> tuple[list[str], dict[int, dict[str, float]]]:
    """(lines, {id(config): figures}) for the one-GPU and DataParallel configurations of runs that
    hold DataParallel cells: step time timed and profiled, CUDA kernels per profiled step."""
    runs = {g.run for g in every if g.mode == "dp"}
    out, got = [], {}
    for g in every:
        if g.run not in runs or g.mode == "ddp":
            continue
        kernels = g.median_of(_breakdown(readout.KERNEL_COUNT))
        if kernels is None:
            continue
        base = base_of(g, every) if g.mode != "none" else g
        base_k = base.median_of(_breakdown(readout.KERNEL_COUNT)) if base else None
        rel = readout.ratio_of(kernels, base_k)
        fig = {
            "kernels": kernels,
            "timed": g.median_of(readout.step_ms),
            "profiled": g.median_of(_breakdown(readout.PROFILED_MS)),
            "idle": g.median_of(_breakdown(readout.IDLE_SHARE)),
        }
        got[id(g)] = {k: v for k, v in fig.items() if v is not None}
        out.append(
            {
                "cfg": g.name,
                "mode": g.mode_name,
                "n": len(g.per_repeat(_breakdown(readout.KERNEL_COUNT))),
                "img": f"{n:,.0f}" if (n := readout.images_a_step(g.first)) else "",
                "timed": fig["timed"],
                "profiled": fig["profiled"],
                "kernels": f"{kernels:,.0f}",
                "rel": f"{rel:.2f}x" if base_k and rel is not None else "",
                "idle": f"{fig['idle']:.0%}" if fig["idle"] is not None else "",
            }
        )
    if not out:
        return [], got
    return [
        "(a) The cells' own profiles: CUDA kernels per profiled step (every GPU's, from the trace: "
        "`mean_kernel_count` of profile.json's breakdown) and the step's time, timed (the unprofiled epochs) and "
        "profiled; medians over the repeats that profiled.",
        "",
        markdown(
            out,
            [
                ("cfg", "configuration"),
                ("mode", "parallel"),
                ("n", "repeats"),
                ("img", "images a step"),
                ("timed", "step ms (timed)"),
                ("profiled", "step ms (profiled)"),
                ("kernels", "CUDA kernels a step"),
                ("rel", "kernels over one GPU's"),
                ("idle", "GPU idle share (profiled)"),
            ],
        ),
        "",
    ], got


PLACE_NAMES = {
    "main": "main thread (the one-GPU cell's way)",
    "fresh": "a fresh thread every step (nn.DataParallel's parallel_apply)",
    "worker": "one kept worker thread",
    "dp": "nn.DataParallel over 2 GPUs",
}


def lab_table(doc, run: str) -> list[str]:
    """lab/dp_collapse.json of RUN as a table, then the cause where its numbers show it."""
    o = doc.meta.options
    out = []
    for place in ("main", "fresh", "worker", "dp"):
        on, off = doc.get(place, True), doc.get(place, False)
        if not on and not off:
            continue
        row: dict[str, object] = {"place": PLACE_NAMES[place]}
        for tag, p in (("on", on), ("off", off)):
            if p:
                k = "" if p.events_per_step is None else f"{p.events_per_step:,}"
                row |= {
                    f"{tag}_first": p.first_step_ms,
                    f"{tag}_med": p.median_ms,
                    f"{tag}_k": k or "not counted: " + one_line(p.events_error),
                }
        if on and off:
            row["x"] = f"{on.median_ms / off.median_ms:.2f}x"
        out.append(row)
    events = next((p.events for p in doc.places), "events")
    lines = [
        f"(b) `lab/dp_collapse.json` of run {md_text(run)} (`python -m lab.dp_collapse`): one {md_text(o.model)} training "
        f"step at {o.batch} images a GPU, {o.image_size} px, on {md_text(doc.meta.device_name)} (torch {md_text(doc.meta.torch)}, "
        f"cuDNN {doc.meta.cudnn or 'not used'}), timed where nn.DataParallel runs it; the first step, then the median of {o.steps} "
        f"more (device synced around each), and {md_text(events)} in one more step under the profiler.",
        "",
        markdown(
            out,
            [
                ("place", "where the step ran"),
                ("on_first", "benchmark on: first step ms"),
                ("on_med", "on: step ms (median)"),
                ("on_k", f"on: {events} a step"),
                ("off_first", "benchmark off: first step ms"),
                ("off_med", "off: step ms (median)"),
                ("off_k", f"off: {events} a step"),
                ("x", "on / off"),
            ],
        ),
        "",
    ]
    for p, why in doc.meta.skipped.items():
        lines += [f"Not measured: {md_text(p)}: {md_reason(why)}.", ""]
    return lines + [cause(doc), ""]


def cause(doc) -> str:
    """The cause in one sentence where the lab's numbers show its signature: with benchmark on, a
    fresh thread's every step costs about a kept thread's first (the search), with more kernels
    than the main thread's step; a kept thread, after its first step, runs as the main thread;
    benchmark off takes the cost away. Else what the numbers show, without a cause."""
    main, fresh, worker, fresh_off = (
        doc.get("main", True),
        doc.get("fresh", True),
        doc.get("worker", True),
        doc.get("fresh", False),
    )
    if not (main and fresh and worker and fresh_off):
        return "The cause is not stated: the run's dp_collapse.json lacks the main, fresh or worker place."
    k_main, k_fresh = main.events_per_step, fresh.events_per_step
    shows = (
        fresh.median_ms >= 0.5 * worker.first_step_ms
        and worker.median_ms <= 1.5 * main.median_ms
        and fresh_off.median_ms <= 0.5 * fresh.median_ms
        and k_main is not None
        and k_fresh is not None
        and k_fresh > k_main
    )
    nums = (
        f"a step took {main.median_ms:,.1f} ms in the main thread, {fresh.median_ms:,.0f} ms in a fresh thread per step"
        + (f" with {k_fresh:,} {md_text(doc.places[0].events)} a step against {k_main:,}" if k_main and k_fresh else "")
        + f", and {worker.median_ms:,.1f} ms in one kept worker thread after its first step ({worker.first_step_ms:,.0f} ms)"
    )
    if shows:
        return (
            "**Cause.** cuDNN's benchmarked algorithm choices are cached per thread (" + CUDNN_PR + "), and "
            "nn.DataParallel runs each replica in a fresh thread every forward, so every step repeats cuDNN's search for "
            f"every convolution: {nums}."
        )
    return f"These numbers do not show a per-thread search repeated every step, so no cause is stated: {nums}."


def _yerr(s: Summary) -> tuple[float, float]:
    return (s.median - s.lo, s.hi - s.median) if s.lo is not None and s.hi is not None else (0.0, 0.0)


def scaling_figure(rows: list[tuple[Config, Summary, Summary | None]], out: Path, name: str) -> str | None:
    """Throughput and scaling efficiency over the GPU count: a line per variant through its one-GPU
    and DDP configurations, DataParallel as points; bars: the intervals (the range below 6 repeats)."""
    many = [r for r in rows if r[0].gpus > 1]
    if not many:
        return None
    variants = list(dict.fromkeys(str(g.row("variant")) for g, _, _ in rows))
    fam = {str(g.row("variant")): palette.family(g.first.device, g.row("backend")) for g, _, _ in rows}
    colour = palette.colors([(v, fam[v]) for v in variants])
    plan = []
    for v in variants:
        line = sorted(
            (r for r in rows if str(r[0].row("variant")) == v and r[0].mode in ("none", "ddp")), key=lambda r: r[0].gpus
        )
        dp = [r for r in rows if str(r[0].row("variant")) == v and r[0].mode == "dp"]
        plan.append(
            {
                "variant": v,
                "colour": colour[v],
                "line": [(g.gpus, s.median, _yerr(s)) for g, s, _ in line],
                "one": next((s.median for g, s, _ in line if g.gpus == 1), None),
                "eff": [(g.gpus, e.median, _yerr(e)) for g, _, e in line if e is not None],
                "dp": [
                    (g.gpus, s.median, _yerr(s), bool(g.benchmark), None if e is None else (e.median, _yerr(e))) for g, s, e in dp
                ],
            }
        )
    g0 = many[0][0]
    title = plot_text(f"{g0.run}: {g0.first.device}, {g0.row('model')} at b{g0.row('batch_size')} a GPU")
    data = {"variants": plan, "ticks": sorted({g.gpus for g, _, _ in rows}), "title": title}
    return figure(out, name, draw_scaling, data)


def draw_scaling(d: dict, path: Path) -> None:
    """The scaling figure from its data (bench.core.figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 3.8))
    for p in d["variants"]:
        v, col = p["variant"], p["colour"]
        if p["line"]:
            xs = [x for x, _, _ in p["line"]]
            ax_t.errorbar(xs, [m for _, m, _ in p["line"]], yerr=list(zip(*(e for _, _, e in p["line"]))), marker="o",
                          color=col, capsize=3, label=plot_text(f"{v}: one GPU, DDP"))  # fmt: skip
            if p["one"]:
                ax_t.plot(xs, [p["one"] * x for x in xs], ls=":", lw=1, color=col, label=plot_text(f"{v}: N x one GPU"))
            if p["eff"]:
                ax_e.errorbar([x for x, _, _ in p["eff"]], [m for _, m, _ in p["eff"]], yerr=list(zip(*(e for _, _, e in p["eff"]))),
                              marker="o", color=col, capsize=3, label=plot_text(f"{v}: DDP"))  # fmt: skip
        for gpus, med, err, bench, eff in p["dp"]:
            mark = "x" if bench else "s"
            what = plot_text(f"{v}: DataParallel, benchmark {'on' if bench else 'off'}")
            ax_t.errorbar([gpus], [med], yerr=[[a] for a in err], marker=mark, ls="none", color=col,
                          mfc="none", capsize=3, label=what)  # fmt: skip
            if eff is not None:
                ax_e.errorbar([gpus], [eff[0]], yerr=[[a] for a in eff[1]], marker=mark, ls="none", color=col,
                              mfc="none", capsize=3, label=what)  # fmt: skip
    ax_e.axhline(1.0, color="#888888", lw=0.8, ls="--")
    for ax, what in ((ax_t, "training img/s (median over repeats)"), (ax_e, "scaling efficiency (N-GPU / 1-GPU) / N")):
        ax.set_xticks(d["ticks"])
        ax.set_xlabel("GPUs")
        ax.set_ylabel(what, fontsize=8)
        ax.set_ylim(0, max(1.1, ax.get_ylim()[1]) if ax is ax_e else None)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(d["title"] + " (bars: the interval over repeats; dotted: N x one GPU)", fontsize=9)
    figure_layout.place(fig, left=0.75, right=0.15, top=0.4, bottom=0.5, wspace=0.8)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _busbw(every: list[Config]) -> str:
    """The all-reduce bus bandwidth the ranks measured after their steps, per GPU count (system.json)."""
    by: dict[int, list[float]] = {}
    for g in every:
        for c in g.cells:
            if (bw := readout.busbw(c)) is not None:
                by.setdefault(g.gpus, []).append(bw)
    if not by:
        return ""
    parts = [f"{n} GPUs {readout.median_over(v):,.0f} GB/s ({len(v)} cells)" for n, v in sorted(by.items())]
    return (
        "All-reduce bus bandwidth the DDP ranks measured after their steps (NCCL, median over cells): " + ", ".join(parts) + "."
    )


def section(cells: list[Cell], out: Path) -> list[str]:
    """The many-GPU section: tables, the collapse's cause and the scaling figure (files under OUT)."""
    from bench.studies.profile import labfiles

    multi = [
        c
        for c in cells
        if (c.first.get("parallel") or "none") != "none" or (c.spec.get("params") or {}).get("parallel") not in (None, "none")
    ]
    if not multi:
        return []
    lines = ["#### Two GPUs: nn.DataParallel (the seed's) vs DDP under torchrun", ""]
    every = configs(cells)
    rows = scaling(every)
    if not any(g.gpus > 1 for g, _, _ in rows):
        reasons = sorted({str(c.first.get("reason") or c.note or c.status) for c in multi})
        return lines + [f"Not run here: {'; '.join(md_reason(w) for w in reasons)}.", ""]
    lines += [
        "Per configuration over its repeats (each a fresh process; its figure the median over its timed epochs): "
        f"throughput, the median over repeats with {INTERVAL_TEXT}; scaling efficiency = (N-GPU / one-GPU throughput) / N "
        "at the same batch per GPU, the ratio paired by repeat within the run (`bench.core.stats.ratio`), so one repeat "
        "gives no interval; per GPU (in the order the cell names them): memory, utilisation and energy per image (each "
        "GPU's energy above its idle power over the images it trained), medians over repeats. The one-GPU cells run "
        "cudnn.benchmark on (the kit's default).",
        "",
    ]
    lines += scaling_table(rows)
    bw = _busbw([g for g in every if g.mode == "ddp"])
    lines += [bw, ""] if bw else []
    for run_dir, run in sorted({(g.first.dir.parent.parent, g.run) for g in every if g.gpus > 1}, key=lambda x: x[1]):
        kb, why = labfiles.kit_vs_bare(run_dir)
        if kb:
            r = kb.ratio()
            lines += [
                f"The kit's DDP cell against a bare DDP loop over {kb.world} GPUs (run {md_text(run)}, "
                f"`lab/kit_vs_bare_ddp.json`, `python -m lab.bare_ddp`; paired by repeat): kit / bare "
                f"{r.median:.3f}{r.bracket('{:.3f}')} over {r.n} repeats.",
                "",
            ]
        elif why:
            lines += [f"`{labfiles.KIT_VS_BARE}` of run {md_text(run)} not read: {md_reason(why)}.", ""]
    lines += versus_dp_table(every)
    prof, _ = profiled_table(every)
    docs = []
    for run_dir, run in sorted({(g.first.dir.parent.parent, g.run) for g in every if g.mode == "dp"}, key=lambda x: x[1]):
        doc, why = labfiles.dp_collapse(run_dir)
        if doc:
            docs += lab_table(doc, run)
        elif why:
            docs += [f"`{labfiles.DP_COLLAPSE}` of run {md_text(run)} not read: {md_reason(why)}.", ""]
    if prof or docs:
        lines += ["##### Why DataParallel collapses", ""] + prof + docs
    for n, run in enumerate(sorted({g.run for g, _, _ in rows})):
        f = scaling_figure([r for r in rows if r[0].run == run], out, f"profile_scaling_{n}.png")
        if f:
            lines += [f"![scaling over GPUs: {md_alt(run)}]({f})", ""]
    return lines
