"""profile's report section: CPU vs GPU training time, telemetry per GPU (tables and time series
from the sampler's CSV), energy per image against an idle baseline, the sampler's and the
profiler's overheads, the operator tables and bar chart, the step-time breakdown, and the
two-GPU comparison (DataParallel vs DDP: throughput, scaling efficiency, per-GPU memory).

Host side: standard library, numpy and matplotlib only (rows, system.json, profile.json and
telemetry.csv of each cell; no torch).
"""

from __future__ import annotations

import csv
import json
import statistics
import textwrap
from pathlib import Path

from bench.core.resultset import ResultCell as Cell
from bench.core.stats import ratio
from bench.core.tables import markdown, sig
from bench.core.text import md as md_text
from bench.core.text import md_alt, md_code, md_reason, plot_text
from bench.studies.profile import seed

PLATFORM = {"torch-cpu": "CPU", "torch-cuda": "GPU"}
SEED_IMAGES = 8005 * 20  # the seed's 20 epochs of 8,005 training images


def _rows(c: Cell, phase: str) -> list[dict]:
    return [r for r in c.rows if r.get("phase") == phase and r.get("status") == "ok"]


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _med(rows: list[dict], key: str) -> float | None:
    vals = [v for v in (_num(r.get(key)) for r in rows) if v is not None]
    return statistics.median(vals) if vals else None


def _label(c: Cell) -> str:
    r = c.first
    par = r.get("parallel") or "none"
    return f"{PLATFORM.get(str(r.get('backend')), '?')} {r.get('variant')}, {r.get('pipeline')}, b{r.get('batch_size')}" + (
        f", {par} x{r.get('world_size')}" if par != "none" else ""
    )


def _gpus(c: Cell) -> list[int]:
    return list((c.system.get("telemetry") or {}).get("gpus") or [])


def _csv(c: Cell) -> list[dict]:
    p = c.dir / "telemetry.csv"
    if not p.is_file():
        return []
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def _profile(c: Cell) -> dict:
    p = c.dir / "profile.json"
    try:
        return json.loads(p.read_text()) if p.is_file() else {}
    except (OSError, json.JSONDecodeError):
        return {}


# ---- tables --------------------------------------------------------------------------------


def training_table(cells: list[Cell]) -> list[str]:
    out = []
    for c in cells:
        ep = _rows(c, "epoch")
        if not ep:
            continue
        ips = _med(ep, "samples_per_s")
        seed_s = SEED_IMAGES / ips if ips else None
        out.append(
            {
                "cell": _label(c),
                "device": c.device,
                "data": f"{c.first.get('dataset')}" + ("" if c.first.get("dataset_real") else " (synthetic)"),
                "weights": ep[-1].get("weights"),
                "epochs": len(ep),
                "epoch_s": _med(ep, "epoch_s"),
                "ips": ips,
                "seed_h": seed_s / 3600 if seed_s else None,
                "acc": ep[-1].get("test_acc"),
                "loss": ep[-1].get("train_loss"),
                "warm": ep[-1].get("warmup_s"),
            }
        )
    if not out:
        return []
    return [
        "#### Training time, CPU vs GPU (timed epochs, unprofiled; seed: CPU 13 h, GPU 2 h at b64, 1 h 15 min at b128 for 20 epochs)",
        "",
        markdown(
            out,
            [
                ("cell", "cell"),
                ("device", "device"),
                ("data", "data"),
                ("weights", "weights"),
                ("epochs", "epochs"),
                ("epoch_s", "epoch s (median)"),
                ("ips", "train img/s"),
                ("seed_h", "seed's 20 x 8,005 images, h"),
                ("acc", "test acc (last)"),
                ("loss", "train loss (last)"),
                ("warm", "warm-up s"),
            ],
        ),
        "",
    ]


def telemetry_table(cells: list[Cell]) -> list[str]:
    out = []
    for c in cells:
        ep = _rows(c, "epoch")
        if not ep:
            continue
        gpus = _gpus(c)
        pf = (c.system.get("telemetry") or {}).get("power_fields") or {}
        slots: list[int | None] = list(gpus) or [None]
        for i in slots:
            g = f"gpu{i}_"
            out.append(
                {
                    "cell": _label(c),
                    "gpu": "" if i is None else f"GPU {i}",
                    "util": _med(ep, g + "util_pct_mean") if i is not None else None,
                    "memu": _med(ep, g + "mem_util_pct_mean") if i is not None else None,
                    "mem": _med(ep, g + "mem_used_mb_max") if i is not None else None,
                    "temp": _med(ep, g + "temp_c_max") if i is not None else None,
                    "pw": _med(ep, g + "power_w_mean") if i is not None else None,
                    "pwmax": _med(ep, g + "power_w_max") if i is not None else None,
                    "field": pf.get(f"gpu{i}_power_field", "") if i is not None else "",
                    "cpu": _med(ep, "cpu_system_pct_mean"),
                    "proc": _med(ep, "cpu_process_pct_mean"),
                    "rss": _med(ep, "rss_mb_max"),
                    "thr": _med(ep, "threads_max"),
                    "procs": _med(ep, "processes_system_max"),
                    "hz": _med(ep, "telemetry_hz"),
                }
            )
    if not out:
        return []
    return [
        "#### Telemetry over the timed epochs (medians over epochs of each window's mean / max)",
        "",
        "GPU: NVML (nvidia-ml-py). Its utilisation is the share of time one or more kernels ran, not occupancy or a "
        "fraction of peak; memory utilisation is the share of time the memory controller was busy. Power: the instant "
        "field where the driver has it, else the 1 s average (column 'power field'). CPU: psutil, primed (the first call "
        "reads a meaningless 0.0); process = this process and its children (DataLoader workers), 100 = one core. "
        f"Seed (nvidia-smi, one moment): b64 GPU:0/1 util {seed.GPU[64]['util_pct']} %, memory {seed.GPU[64]['mem_mb']} MiB, "
        f"{seed.GPU[64]['power_w']} W; b128 {seed.GPU[128]['util_pct']} %, {seed.GPU[128]['mem_mb']} MiB, {seed.GPU[128]['power_w']} W; "
        f"CPU {seed.CPU['util_pct']} %, {seed.CPU['processes']} processes, {seed.CPU['threads']} threads.",
        "",
        markdown(
            out,
            [
                ("cell", "cell"),
                ("gpu", "GPU"),
                ("util", "util %"),
                ("memu", "mem util %"),
                ("mem", "mem used MB (max)"),
                ("temp", "temp °C (max)"),
                ("pw", "power W (mean)"),
                ("pwmax", "power W (max)"),
                ("field", "power field"),
                ("cpu", "CPU % (system)"),
                ("proc", "CPU % (process)"),
                ("rss", "RSS MB"),
                ("thr", "threads"),
                ("procs", "processes (system)"),
                ("hz", "samples/s"),
            ],
        ),
        "",
    ]


def energy_table(cells: list[Cell]) -> list[str]:
    out = []
    for c in cells:
        ep = _rows(c, "epoch")
        if not ep:
            continue
        out.append(
            {
                "cell": _label(c),
                "src": ep[-1].get("energy_source")
                or "not measured: " + str(ep[-1].get("cpu_energy_note") or "no energy counter"),
                "idle": _med(ep, "gpu_idle_w") if _gpus(c) else None,
                "gross": _med(ep, "gpu_energy_j") if _gpus(c) else _med(ep, "cpu_energy_j"),
                "net": _med(ep, "energy_net_j"),
                "jpi": _med(ep, "j_per_img"),
                "ipj": _med(ep, "img_per_j"),
            }
        )
    if not out:
        return []
    return [
        "#### Energy per epoch (idle baseline subtracted: the device's idle power, measured before the cell, times the window)",
        "",
        markdown(
            out,
            [
                ("cell", "cell"),
                ("src", "source"),
                ("idle", "idle W"),
                ("gross", "energy J (epoch)"),
                ("net", "net J"),
                ("jpi", "J / image"),
                ("ipj", "images / J"),
            ],
        ),
        "",
    ]


def overhead_table(cells: list[Cell]) -> list[str]:
    out = []
    for c in cells:
        ov, pr = _rows(c, "overhead"), _rows(c, "profile")
        if not ov and not pr:
            continue
        o = ov[0] if ov else {}
        p = pr[0] if pr else {}
        pairs = o.get("sampler_cost_pairs") or []
        out.append(
            {
                "cell": _label(c),
                "on": o.get("step_ms_sampler_on"),
                "off": o.get("step_ms_sampler_off"),
                "cost": f"{o['sampler_cost']:+.2%}" if isinstance(o.get("sampler_cost"), float) else "",
                "pairs": ", ".join(f"{x:+.2%}" for x in pairs),
                "hz": o.get("telemetry_hz"),
                "unprof": p.get("unprofiled_step_ms"),
                "prof": p.get("mean_step_ms"),
                "pov": f"{p['profiler_overhead']:+.1%}" if isinstance(p.get("profiler_overhead"), float) else "",
            }
        )
    if not out:
        return []
    return [
        "#### What measuring costs: the telemetry sampler (blocks of steps with it on and off, alternated) and the profiler "
        "(its recorded steps against the unprofiled epochs' steps; the timed figures are never profiled)",
        "",
        markdown(
            out,
            [
                ("cell", "cell"),
                ("hz", "sampler Hz"),
                ("off", "step ms, sampler off"),
                ("on", "step ms, sampler on"),
                ("cost", "sampler cost"),
                ("pairs", "per block pair"),
                ("unprof", "step ms unprofiled"),
                ("prof", "step ms profiled"),
                ("pov", "profiler overhead"),
            ],
        ),
        "",
    ]


def breakdown_table(cells: list[Cell]) -> list[str]:
    out, keys = [], []
    for c in cells:
        br = _profile(c).get("breakdown") or {}
        if not br:
            continue
        row = {"cell": _label(c), "steps": br.get("n_steps"), "method": br.get("method")}
        for k, v in br.items():
            if k.startswith("mean_") and isinstance(v, (int, float)):
                row[k] = v
                if k not in keys:
                    keys.append(k)
            if k.endswith("_share") and isinstance(v, (int, float)):
                row[k] = f"{v:.1%}"
                if k not in keys:
                    keys.append(k)
        out.append(row)
    if not out:
        return []
    cols = [("cell", "cell"), ("steps", "steps")] + [
        (k, k.replace("mean_", "").replace("_ms", " ms").replace("_share", " share")) for k in keys
    ]
    method = next((r.get("method") for r in out if r.get("method")), "")
    return [
        "#### Step-time breakdown (profiled steps, from the trace's events)",
        "",
        markdown(out, cols),
        "",
        "How each figure is computed:",
        "",
        *([f"- {md_code(k)}: {md_text(v)}" for k, v in method.items()] if isinstance(method, dict) else [md_text(method)]),
        "",
    ]


def op_tables(cells: list[Cell], k: int = 10) -> list[str]:
    lines: list[str] = []
    for c in cells:
        prof = _profile(c)
        for key, title in (("ops_self_device", "self device time"), ("ops_self_cpu", "self CPU time")):
            ops = (prof.get(key) or [])[:k]
            if not ops or (key == "ops_self_device" and not any(_num(o.get("self_device_ms")) for o in ops)):
                continue
            rows = [
                {
                    **o,
                    "dev_share": f"{o['self_device_share']:.1%}" if isinstance(o.get("self_device_share"), (int, float)) else "",
                    "cpu_share": f"{o['self_cpu_share']:.1%}" if isinstance(o.get("self_cpu_share"), (int, float)) else "",
                }
                for o in ops
            ]
            lines += [
                f"##### {md_text(_label(c))}: top {len(ops)} operators by {title}",
                "",
                markdown(
                    rows,
                    [
                        ("name", "operator"),
                        ("calls", "calls"),
                        ("self_device_ms", "self device ms"),
                        ("dev_share", "of device time"),
                        ("self_cpu_ms", "self CPU ms"),
                        ("cpu_share", "of CPU time"),
                        ("device_memory_mb", "device mem MB"),
                        ("cpu_memory_mb", "CPU mem MB"),
                    ],
                ),
                "",
            ]
    if lines:
        lines = [
            "#### Operators (torch.profiler key_averages over the recorded steps)",
            "",
            f"The seed's top operator was {seed.TOP_OPERATOR}. `aten::t` is a transpose (a view of a Linear layer's weight), "
            "not a copy; host-device copies are `aten::copy_` / `aten::_to_copy` and, on the device, the memcpy share of the breakdown.",
            "",
        ] + lines
    return lines


# ---- two GPUs --------------------------------------------------------------------------------


def _ips_by_key(c: Cell) -> dict[int, float]:
    """Throughput per repeat (median over its epochs); one repeat: per epoch (stated in the table)."""
    ep = _rows(c, "epoch")
    by: dict[int, list[float]] = {}
    for r in ep:
        v = _num(r.get("samples_per_s"))
        if v is not None:
            by.setdefault(int(r.get("repeat") or 0), []).append(v)
    if len(by) >= 2:
        return {k: statistics.median(v) for k, v in by.items()}
    only = next(iter(by.values()), [])
    return dict(enumerate(only))


def scaling(cells: list[Cell]) -> list[str]:
    multi = [c for c in cells if (c.first.get("parallel") or "none") != "none"]
    wanted = [
        c
        for c in cells
        if c.first.get("backend") == "torch-cuda" and (c.spec.get("params") or {}).get("parallel") not in (None, "none")
    ]
    if not multi and not wanted:
        return []
    lines = ["#### Two GPUs: nn.DataParallel (the seed's) vs DDP under torchrun", ""]
    ran = [c for c in multi if _rows(c, "epoch")]
    if not ran:
        why = sorted({str(c.first.get("reason") or c.note or c.status) for c in wanted or multi})
        return lines + [f"Not run here: {'; '.join(md_reason(w) for w in why)}.", ""]
    out = []
    for c in ran:
        r0 = c.first
        base = [
            b
            for b in cells
            if b is not c
            and (b.first.get("parallel") or "none") == "none"
            and b.first.get("backend") == r0.get("backend")
            and b.first.get("variant") == r0.get("variant")
            and b.first.get("pipeline") == r0.get("pipeline")
            and b.first.get("batch_size") == r0.get("batch_size")
            and _rows(b, "epoch")
        ]
        row = {
            "cell": _label(c),
            "ips": _med(_rows(c, "epoch"), "samples_per_s"),
            "world": r0.get("world_size"),
        }
        ep = _rows(c, "epoch")
        for i in _gpus(c):
            row[f"mem{i}"] = _med(ep, f"gpu{i}_mem_used_mb_max")
            row[f"util{i}"] = _med(ep, f"gpu{i}_util_pct_mean")
        if base:
            one = _ips_by_key(base[0])
            two = _ips_by_key(c)
            world = int(r0.get("world_size") or 2)
            r = ratio(two, {k: v * world for k, v in one.items()})
            row["base"] = _med(_rows(base[0], "epoch"), "samples_per_s")
            row["eff"] = r.median
            row["ci"] = r.interval("{:.3f}")
        out.append(row)
    gpu_cols = sorted({k for r in out for k in r if k.startswith(("mem", "util"))}, key=lambda k: (k[-1], k))
    lines += [
        "Scaling efficiency = 2-GPU throughput / (2 x the 1-GPU throughput at the same per-GPU batch); its interval "
        "resamples repeats, or the epochs of a single repeat (not independent: a rough interval).",
        "",
        markdown(
            out,
            [
                ("cell", "cell"),
                ("world", "GPUs"),
                ("ips", "img/s"),
                ("base", "1-GPU img/s"),
                ("eff", "scaling efficiency"),
                ("ci", "95% interval"),
            ]
            + [(k, ("GPU " + k[-1] + (" mem MB" if k.startswith("mem") else " util %"))) for k in gpu_cols],
        ),
        "",
    ]
    return lines


# ---- figures ---------------------------------------------------------------------------------


def _series_figure(c: Cell, out: Path, name: str) -> str | None:
    rows = _csv(c)
    if len(rows) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def col(k: str) -> list[float | None]:
        vals: list[float | None] = []
        for r in rows:
            try:
                vals.append(float(r[k]) if r.get(k) not in (None, "") else None)
            except ValueError:
                vals.append(None)
        return vals

    t = [v or 0.0 for v in col("t_s")]
    gpus = _gpus(c)
    panels = [
        (
            plot_text(f"GPU {i}"),
            [
                (f"gpu{i}_util_pct", "util %"),
                (f"gpu{i}_mem_used_mb", "memory MB"),
                (f"gpu{i}_power_w", "power W"),
                (f"gpu{i}_temp_c", "temp °C"),
            ],
        )
        for i in gpus
    ]
    panels.append(
        ("CPU", [("cpu_system_pct", "system %"), ("cpu_process_pct", "process %"), ("rss_mb", "RSS MB"), ("threads", "threads")])
    )
    fig, axes = plt.subplots(len(panels), 4, figsize=(16, 2.6 * len(panels)), squeeze=False)
    for (title, series), ax_row in zip(panels, axes, strict=True):
        for (k, what), ax in zip(series, ax_row, strict=True):
            y = col(k)
            pts = [(a, b) for a, b in zip(t, y, strict=True) if b is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1)
            ax.set_title(f"{title}: {what}", fontsize=9)
            ax.set_xlabel("s", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(plot_text(_label(c)) + " (timed epochs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    return name


def _ops_figure(c: Cell, out: Path, name: str, k: int = 12) -> str | None:
    prof = _profile(c)
    dev = prof.get("ops_self_device") or []
    use_dev = any(_num(o.get("self_device_ms")) for o in dev)
    ops = (dev if use_dev else prof.get("ops_self_cpu") or [])[:k]
    key = "self_device_ms" if use_dev else "self_cpu_ms"
    if not ops:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.35 * len(ops) + 1.2))
    names = [plot_text(str(o.get("name"))[:48]) for o in ops][::-1]
    ax.barh(names, [float(o.get(key) or 0) for o in ops][::-1])
    ax.set_xlabel(key.replace("_", " "))
    ax.set_title(plot_text(_label(c)) + ": operators", fontsize=10)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(out / name, dpi=80)
    plt.close(fig)
    return name


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = sorted(cells, key=lambda c: (str(c.first.get("backend")), _label(c)))
    data = sorted({f"{c.first.get('dataset')}" for c in cells if c.first.get("dataset")})
    real = any(c.first.get("dataset_real") for c in cells)
    lines = [
        "torchvision DenseNet-121, classifier replaced for the data's classes, Adam; transfer learning frozen (classifier "
        "only) or finetune (every layer). Timed epochs are never profiled; the profiler runs after them on its own schedule.",
        "",
        f"Data: {md_text(', '.join(data)) or 'none'}"
        + ("" if real else " (synthetic: NOT cats vs dogs; accuracy claims need the real images)"),
        "",
    ]
    lines += training_table(cells) + telemetry_table(cells) + energy_table(cells) + overhead_table(cells)
    lines += scaling(cells) + breakdown_table(cells) + op_tables(cells)
    figs = []
    for n, c in enumerate(cells):
        if _rows(c, "epoch"):
            f = _series_figure(c, out, f"profile_telemetry_{n}.png")
            if f:
                figs.append(f"![telemetry: {md_alt(_label(c))}]({f})")
        if _rows(c, "profile"):
            f = _ops_figure(c, out, f"profile_ops_{n}.png")
            if f:
                figs.append(f"![operators: {md_alt(_label(c))}]({f})")
    if figs:
        lines += ["#### Figures", ""] + figs + [""]
    lines += [
        "#### The seed's claims and what checking them needs",
        "",
        markdown(
            [{"a": a, "b": b, "c": c} for a, b, c in seed.CLAIMS], [("a", "seed's claim"), ("b", "read from"), ("c", "needs")]
        ),
        "",
    ]
    skipped = [c for c in cells if c.status == "skipped"]
    if skipped:
        lines += [
            "Cells not run here: "
            + "; ".join(f"{md_text(c.first.get('cell'))}: {md_reason(c.first.get('reason'))}" for c in skipped),
            "",
        ]
    return lines


def summary(cells: list[Cell]) -> tuple[list[str], dict]:
    lines, data = [], {}
    for c in cells:
        ep = _rows(c, "epoch")
        if not ep:
            continue
        ips, jpi = _med(ep, "samples_per_s"), _med(ep, "j_per_img")
        over = next(iter(_rows(c, "overhead")), {})
        ov = over.get("sampler_cost")
        pairs = [p for p in over.get("sampler_cost_pairs") or [] if isinstance(p, (int, float))]
        cost = ""
        if isinstance(ov, float):
            cost = f", sampler cost {ov:+.1%}"
            if len(pairs) > 1:
                lo, hi = min(pairs), max(pairs)
                cost += f" (pairs {lo:+.1%} to {hi:+.1%}" + (": no measurable cost)" if lo <= 0 <= hi else ")")
        lines.append(f"  {_label(c):<44} {sig(ips)} img/s" + (f", {sig(jpi)} J/img" if jpi else "") + cost)
        data[c.first.get("cell") or c.dir.name] = {"img_per_s": ips, "j_per_img": jpi, "sampler_cost": ov}
    if lines:
        lines[:0] = textwrap.wrap(
            "per cell: training throughput (img/s, median over timed epochs); energy per image above the idle "
            "baseline (J/img, where the energy counter is readable); the telemetry sampler's cost: step time "
            "with it on over off, minus 1 (median over pairs of blocks; below 0 the blocks with the sampler ran "
            "faster: noise, not a cost)",
            120,
        )
    return lines, data
