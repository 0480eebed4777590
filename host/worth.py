"""Is the GPU worth it? The report's section beside the headline and beside each study's claims,
its plot per study, report.json's `worth`, and `orchestrate.py worth` (for N samples: time,
energy, cost, which wins). Renders bench.core.worth's figures; names no study.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.core import stats
from bench.core import worth as W
from bench.core.tables import md_row, md_sep
from bench.core.text import md as md_text
from bench.core.text import plot_text, short, term

THIS = "this machine"
# figures per worth section, this machine's rows first: each 20-25 KB inlined, and the merged
# references' page holds 51 rows (it stays under 3.5 MB, tests/test_answers.py); the table has every row
MAX_FIGURES = 4

LEGEND = (
    "**time** is the GPU side's training throughput over the CPU side's (the headline's ratio, as the GPU's "
    "advantage), **energy** the CPU side's net joules per sample over the GPU side's, **cost** the CPU side's "
    "dollars per sample over the GPU side's at the prices given: above 1x the GPU is ahead. **GPU first above** "
    "is the work (samples, and epochs of the dataset) above which the GPU finishes first once each side's fixed "
    "costs count (every one-off cost: its process's start-up, from process start to the first timed step, and any "
    "work done once before training, such as a hyperparameter search); **GPU cheaper above** the same for cost. "
    "Energy per sample comes only from energy-counter windows of 1 s or more within the board's power limit. "
    "Intervals as "
    f"the headline's ({stats.INTERVAL_TEXT}); a break-even's is the range over the repeat pairs."
)


def ratio_text(s: stats.Summary | None, why: str) -> str:
    if s is None:
        return why or "–"
    return f"{short(s.median)}x" + s.bracket()


def count(n: float) -> str:
    if math.isinf(n):
        return "never"
    n = float(f"{n:.3g}")  # 999.9999 is 1k
    for unit, k in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= k:
            return f"{short(n / k)}{unit}"
    return short(n)


def even_text(e: W.Even | None, why: str, epoch: int | None) -> str:
    """'above 12.3k samples (0.21 epochs) [9.1k–15k, range of 9 pairs]', 'from the first sample', ..."""
    if e is None:
        return why or "–"
    ep = f" ({short(e.n / epoch)} epochs)" if epoch and not math.isinf(e.n) else ""
    bracket = f" [{count(e.lo)}–{count(e.hi)}, range of {e.pairs} pairs]" if e.lo is not None and e.hi is not None else ""
    split = f"; {e.split}" if e.split else ""
    if e.kind == W.ALWAYS:
        return f"from the first sample{bracket}{split}"
    if e.kind == W.NEVER:
        return f"never{bracket}{split}"
    if e.kind == W.BELOW:
        return f"only below {count(e.n)} samples{ep}{bracket}{split}"
    return f"above {count(e.n)} samples{ep}{bracket}{split}"


def mine(x: W.Facts, here: bool) -> bool:
    """Whether side X is this machine's: HERE (the report or command has context) and its cells
    are not context (host/answers.py `mine`)."""
    return here and not x.side.context


def device_label(x: W.Facts, here: bool) -> str:
    """X's device, 'this machine (2-core AMD EPYC)' where it is this machine's."""
    return f"{THIS} ({x.name})" if mine(x, here) else x.name


def is_mine(w: W.Worth, here: bool) -> bool:
    """Whether W has a side of this machine."""
    return mine(w.gpu, here) or mine(w.cpu, here)


def this_first(worths: list[W.Worth], here: bool) -> list[W.Worth]:
    """WORTHS with this machine's first: both sides its own, then one; each group in its order."""
    if not here:
        return list(worths)
    return sorted(worths, key=lambda w: 2 - mine(w.gpu, here) - mine(w.cpu, here))


def _on(w: W.Worth, here: bool = False) -> str:
    return f"{device_label(w.gpu, here)} / {device_label(w.cpu, here)}"


def table(worths: list[W.Worth], first: int = 1, here: bool = False) -> list[str]:
    md = [
        md_row(
            [
                "#",
                "comparison",
                "time",
                "GPU first above",
                "energy per sample",
                "cost per sample",
                "GPU cheaper above",
                "GPU / CPU",
            ]
        ),
        md_sep(8),
    ]
    for i, w in enumerate(worths, first):
        md.append(
            md_row(
                [
                    i,
                    f"{w.answer.study}: {w.answer.label}",
                    ratio_text(w.time, "–"),
                    even_text(w.even_time, "not formed", w.epoch),
                    ratio_text(w.energy, "not measured"),
                    ratio_text(w.cost, cost_gap(w)),
                    even_text(w.even_cost, "–" if w.even_cost_why == "no price given" else "not formed", w.epoch),
                    _on(w, here),
                ]
            )
        )
    return md + [""]


def cost_gap(w: W.Worth) -> str:
    """What the cost column says where there is no ratio: no price, a free side, or not measured."""
    if w.free:
        return f"{w.free} free" if w.free != "both" else "both free"
    return "no price" if w.cost_why == "no price given" else "not measured"


def _mid(v: dict) -> float:
    return sorted(v.values())[len(v) // 2]


def fixed_text(x: W.Facts) -> str:
    """'fixed 19.3 s (start-up 9.37 s + the hyperparameter search 9.92 s)', its start-up's source where
    a part shares its cell's process; '*' marks a start-up recorded as open() alone."""
    if not x.fixed:
        return "no fixed costs recorded" + (f" ({x.fixed_why})" if x.fixed_why else "")
    mark = "*" if x.fixed_what == W.OLD_FIXED else ""
    once = [k for k in x.fixed_parts if k != W.STARTUP]
    split = [f"{W.STARTUP} {short(_mid(x.fixed_parts[W.STARTUP]))} s{mark}"] if once and W.STARTUP in x.fixed_parts else []
    split += [f"{W.ONE_OFF[k][1]} {short(_mid(x.fixed_parts[k]))} s" for k in once if k in W.ONE_OFF]
    bits = [" + ".join(split)] if split else []
    bits += [f"{W.STARTUP}: {x.fixed_shared}"] if x.fixed_shared else []
    return f"fixed {short(_mid(x.fixed))} s{'' if split else mark}" + (f" ({'; '.join(bits)})" if bits else "")


def fixed_footnote(worths: list[W.Worth]) -> list[str]:
    """What the fixed costs of WORTHS (numbered from 1) count beyond each process's start-up, row by row:
    every one-off work a side's rows record, and the parts whose process is shared."""
    lines = []
    for k, (key, what) in W.ONE_OFF.items():
        rows = [str(i) for i, w in enumerate(worths, 1) if any(k in x.fixed_parts for x in (w.gpu, w.cpu))]
        if rows:
            lines.append(f"{what} ({key} in the side's {k} row), done once before training (rows {', '.join(rows)})")
    shared = [str(i) for i, w in enumerate(worths, 1) if w.gpu.fixed_shared or w.cpu.fixed_shared]
    if shared:
        lines.append(
            "for a part run beside others in one cell process, the start-up of its own cell in the same run "
            f"where there is one, else the shared process's, said on its line (rows {', '.join(shared)})"
        )
    if not lines:
        return []
    return [f"Fixed costs count each side's process start-up and every one-off cost it records: {'; '.join(lines)}.", ""]


def detail(w: W.Worth, here: bool = False) -> str:
    """One line: each side's rate, fixed costs, energy and price; why a figure is missing (once)."""
    bits = []
    for x, role in ((w.gpu, "GPU"), (w.cpu, "CPU")):
        got = [f"{short(_mid(x.rate))} samples/s" if x.rate else "no rate", fixed_text(x)]
        if x.energy:
            got.append(f"{short(_mid(x.energy) * 1e3)} mJ/sample" + (f" ({x.energy_domain})" if x.energy_domain else ""))
        if x.price is not None:
            got.append(f"{x.price.usd_per_hour:g} USD/h" + (f" x {x.devices} GPUs" if x.devices > 1 else ""))
        bits.append(f"{role} {device_label(x, here)}: {', '.join(got)}")
    if w.energy is None and w.energy_why:
        bits.append(f"energy {w.energy_why}")
    if w.cost is None and w.cost_why and w.cost_why != "no price given":
        bits.append(f"cost {w.cost_why}")
    if w.kwh is not None:
        bits.append(f"electricity at {w.kwh:g} USD/kWh on top of the hourly prices")
    return ". ".join(bits)


def section(worths: list[W.Worth], heading: str, out: Path | None, name: str, prices: Any, here: bool = False) -> list[str]:
    """The worth table of WORTHS under HEADING, a line per row, the plot into OUT (as NAME_worth.png);
    HERE (the report has context): this machine's rows first, its devices named so."""
    if not worths:
        return []
    worths = this_first(worths, here)
    md = [heading, "", LEGEND, ""]
    if prices is None:
        md += ["_No price given: no cost column (`--price DEVICE=USD_PER_HOUR` or `--prices FILE`; never a default)._", ""]
    md += ['<div class="worth">', "", *table(worths, here=here), "</div>", ""]  # laid out to the page's width
    md += [f"{i}. {md_text(detail(w, here))}" for i, w in enumerate(worths, 1)] + [""]
    md += [md_text(x) if x else x for x in fixed_footnote(worths)]
    if any(x.fixed_what == W.OLD_FIXED for w in worths for x in (w.gpu, w.cpu)):
        md += [
            "\\* fixed costs of results made before the kit recorded them phase by phase: open() alone "
            "(data, model, warm-up), without the process start and imports, which their break-even leaves out.",
            "",
        ]
    if out is not None:
        drawn = [w for w in worths if w.lines("time")][:MAX_FIGURES]
        for i, w in enumerate(drawn):
            fig = plot(w, out, f"{name}_worth" if i == 0 else f"{name}_worth_{i + 1}", here)
            if fig:
                md += [f"![{md_text(w.answer.label)}: time and cost to finish against the work]({fig})", ""]
                if w.free and w.lines("cost"):
                    md += [f"_No cost panel: {md_text(W.FREE_TEXT[w.free])}; a cost of 0 has no place on a log axis._", ""]
        rest = len([w for w in worths if w.lines("time")]) - len(drawn)
        if rest > 0:
            md += [f"_Figures for the first {len(drawn)} rows; the table gives the other {rest} rows' break-even._", ""]
    return md


def this_dirs(dirs: list[Path], this: list[Path] | None, references: Path) -> tuple[list[Path], list[Path]]:
    """(this machine's dirs, the others) among DIRS (those holding results): THIS where given (each
    one of DIRS, else UsageError), else the one dir outside REFERENCES where exactly one is; with
    neither, ([], DIRS): no dir is this machine."""
    from bench.core.errors import UsageError

    by = {d.resolve(): d for d in dirs}
    if this:
        mine = []
        for t in this:
            if t.resolve() not in by:
                raise UsageError(f"--this {t}: no results there (expected <dir>/<study>/<cell>/rows.jsonl)")
            mine.append(by[t.resolve()])
    else:
        refs = references.resolve()
        outside = [d for d in dirs if not d.resolve().is_relative_to(refs)]
        mine = outside if len(outside) == 1 else []
    chosen = {m.resolve() for m in mine}
    return list(dict.fromkeys(mine)), [d for d in dirs if d.resolve() not in chosen]


def no_answer_line(registry: dict, cells: list, beside: list, only: str | None = None) -> str:
    """One line (terminal text): this machine (CELLS) forms no GPU-over-CPU answer, and why, per
    GPU-over-CPU claim of the studies at hand (ONLY: that study's), grouped and counted."""
    from host import answers as H

    gpus = H.machine_gpus(cells)
    reasons = []
    for name, st in registry.items():
        mine = [c for c in cells if c.study == name]
        theirs = [c for c in beside if c.study == name]
        if (only is not None and name != only) or not (mine or theirs):
            continue
        reasons += [H.lack(st, c, mine, theirs, gpus) for c in getattr(st, "claims", ()) if W.claim_is_gpu_over_cpu(st, c)]
    groups = H.reason_groups(reasons, markdown=False)
    why = "; ".join(f"{n} {text}" for n, text in groups)
    head = f"{THIS} ({H.machine_label(cells)}) forms no GPU-over-CPU answer"
    return f"{head}: of {len(reasons)} GPU-over-CPU comparisons, {why}" if why else head


def prices_lines(prices: Any) -> list[str]:
    if prices is None:
        return []
    md = []
    if prices.entries:
        md.append(
            "Prices used (the user's own; never measured by the kit): "
            + "; ".join(
                f"{p.match} {p.usd_per_hour:g} USD/h ({p.source}{', ' + p.date if p.date else ''})" for p in prices.entries
            )
        )
    if prices.kwh_usd is not None:
        md.append(f"Electricity: {prices.kwh_usd:g} USD/kWh ({prices.kwh_source}).")
    md += [f"Not used: {p}" for p in prices.problems]
    return [f"- {md_text(x)}" for x in md] + [""] if md else []


def plot(w: W.Worth, out: Path, name: str, here: bool = False) -> str | None:
    """Time (and cost) to finish against the work for W (both sides, the crossing marked; log-log)
    into OUT as NAME.png. Returns the file name, or None where W has no time lines."""
    from bench.core.figures import figure

    if not w.lines("time"):
        return None
    # a free side's cost is 0 at every N: no line on a log axis (the table says it is the cheaper)
    kinds = [k for k in ("time", "cost") if w.lines(k) and not (k == "cost" and w.free)]
    evens = {"time": w.even_time, "cost": w.even_cost}
    top = max((e.n for e in evens.values() if e and not math.isinf(e.n) and e.n > 0), default=0.0)
    epoch = w.epoch or 1000
    hi = max(100.0 * epoch, 10 * top, 1e3)
    n = [10 ** (k / 40) for k in range(int(40 * math.log10(hi)) + 1)]
    panels = []
    for kind in kinds:
        g, c = w.lines(kind)  # type: ignore[misc]
        e = evens[kind]
        cross = e.n if e is not None and e.kind in (W.ABOVE, W.BELOW) and 0 < e.n < hi else None
        panels.append(
            {
                "kind": kind,
                "gpu": [g.at(x) for x in n],
                "cpu": [c.at(x) for x in n],
                "cross": None if cross is None else (cross, g.at(cross), count(cross)),
            }
        )
    data = {
        "n": n,
        "panels": panels,
        "gpu": plot_text(f"GPU: {device_label(w.gpu, here)}"[:40]),
        "cpu": plot_text(f"CPU: {device_label(w.cpu, here)}"[:40]),
        "epoch": w.epoch,
        "title": plot_text(f"{w.answer.study}: {w.answer.label}"[:90]),
    }
    return figure(out, f"{name}.png", draw_worth, data)


def draw_worth(d: dict, path: Path) -> None:
    """The worth figure from its data (plot; bench.core.figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.core import palette
    from bench.core.figure_layout import place

    fig, axes = plt.subplots(1, len(d["panels"]), figsize=(4.6 * len(d["panels"]), 3.3), squeeze=False)
    for ax, p in zip(axes[0], d["panels"]):
        ax.plot(d["n"], p["gpu"], color=palette.SHADES["nvidia"][0], label=d["gpu"])
        ax.plot(d["n"], p["cpu"], color=palette.SHADES["cpu"][0], label=d["cpu"])
        if p["cross"] is not None:
            x, y, text = p["cross"]
            ax.axvline(x, color="0.4", ls="--", lw=0.8)
            ax.plot([x], [y], "o", color="k", ms=4)
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, -10), fontsize=8)
        if d["epoch"]:
            ax.axvline(d["epoch"], color="0.75", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("samples trained" + (" (dotted: one epoch)" if d["epoch"] else ""), fontsize=9)
        ax.set_ylabel("seconds to finish" if p["kind"] == "time" else "USD to finish", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(d["title"], fontsize=9)
    place(fig, left=0.55, right=0.15, top=0.3, bottom=0.4, wspace=0.6)
    fig.savefig(path, dpi=100)  # 460 x 330 px a panel, 8-9 pt text: legible at the page's width
    plt.close(fig)


def as_json(worths: list[W.Worth], here: bool = False) -> list[dict]:
    def s(x: stats.Summary | None) -> dict | None:
        return None if x is None else {"value": x.median, "lo": x.lo, "hi": x.hi, "interval": x.kind, "n": x.n}

    def e(x: W.Even | None) -> dict | None:
        if x is None:
            return None

        def fin(v: float | None) -> float | None:
            return None if v is None or math.isinf(v) else v

        return {"kind": x.kind, "samples": fin(x.n), "lo": fin(x.lo), "hi": fin(x.hi), "pairs": x.pairs, "split": x.split}

    return [
        {
            "study": w.answer.study,
            "claim": w.answer.claim.id,
            "text": w.answer.label,
            "scope": w.answer.scope_label,
            "gpu": w.gpu.name,
            "cpu": w.cpu.name,
            "time_ratio": s(w.time),
            "energy_ratio": s(w.energy),
            "energy_why": w.energy_why,
            "sides": {role: side_json(x) for role, x in (("gpu", w.gpu), ("cpu", w.cpu))},
            "cost_ratio": s(w.cost),
            "cost_why": w.cost_why,
            "free": w.free or None,
            "break_even_time": e(w.even_time),
            "break_even_cost": e(w.even_cost),
            "epoch_samples": w.epoch,
            "this_machine": is_mine(w, here),
        }
        for w in worths
    ]


def side_json(x: W.Facts) -> dict:
    """One side's medians in report.json's `worth`: samples/s, J/sample (or why not), fixed s and its parts."""
    return {
        "samples_per_s": _mid(x.rate) if x.rate else None,
        "energy_j_per_sample": _mid(x.energy) if x.energy else None,
        "energy_why": x.energy_why,
        "energy_domain": x.energy_domain,
        "fixed_s": _mid(x.fixed) if x.fixed else None,
        "fixed_parts_s": {k: _mid(v) for k, v in x.fixed_parts.items()},
        "fixed_how": x.fixed_what,
        "fixed_shared": x.fixed_shared,
        "fixed_why": x.fixed_why,
    }


def for_work(w: W.Worth, samples: float, here: bool = False) -> dict:
    """`orchestrate.py worth`: for SAMPLES on each side at the medians: seconds, joules, USD, who wins;
    HERE (the command names this machine's dirs beside others): which sides are this machine's."""
    out: dict[str, Any] = {
        "comparison": f"{w.answer.study}: {w.answer.label}",
        "samples": samples,
        "this_machine": is_mine(w, here),
    }
    t = w.lines("time")
    c = w.lines("cost")
    for x, role, k in ((w.gpu, "gpu", 0), (w.cpu, "cpu", 1)):
        rate = sorted(x.rate.values())[len(x.rate) // 2] if x.rate else None
        energy = sorted(x.energy.values())[len(x.energy) // 2] if x.energy else None
        out[role] = {
            "device": x.name,
            "this_machine": mine(x, here),
            "seconds": t[k].at(samples) if t else (samples / rate if rate else None),
            "seconds_note": "" if t else "fixed costs not recorded: the rate alone",
            "joules": energy * samples if energy is not None else None,
            "joules_note": "" if energy is not None else x.energy_why,
            "usd": c[k].at(samples) if c else None,
            "usd_note": "" if c else (w.cost_why or "no price"),
        }
    for what in ("seconds", "joules", "usd"):
        g, p = out["gpu"][what], out["cpu"][what]
        out[f"{what}_winner"] = None if g is None or p is None else ("GPU" if g < p else "CPU" if p < g else "tie")
    return out


def work_text(g: dict) -> str:
    """`orchestrate.py worth`'s lines for one comparison (for_work's dict)."""

    def val(v: float | None, unit: str) -> str:
        if v is None:
            return "not measured"
        if unit == "USD" and v == 0:
            return "0 USD (free)"
        return {"s": f"{v:,.1f} s", "J": f"{short(v / 3.6e6)} kWh ({v:,.0f} J)", "USD": f"{short(v, 4)} USD"}[unit]

    def dev(x: dict) -> str:
        return f"{THIS} ({x['device']})" if x.get("this_machine") else str(x["device"])

    lines = [f"{g['comparison']}: {count(g['samples'])} samples"]
    for what, unit, label in (("seconds", "s", "time"), ("joules", "J", "energy"), ("usd", "USD", "cost")):
        gp, cp = g["gpu"], g["cpu"]
        win = g[f"{what}_winner"]
        note = gp[f"{what}_note"] or cp[f"{what}_note"]
        text = f"  {label:6} GPU {dev(gp)}: {val(gp[what], unit)}; CPU {dev(cp)}: {val(cp[what], unit)}"
        text += (" -> neither: the same" if win == "tie" else f" -> {win} wins") if win else ""
        lines.append(text + (f" ({note})" if note and not win else ""))
    return "\n".join(term(x) for x in lines)  # device names come from result dirs: nothing the terminal acts on


__all__ = [
    "as_json",
    "cost_gap",
    "device_label",
    "even_text",
    "fixed_footnote",
    "fixed_text",
    "for_work",
    "is_mine",
    "no_answer_line",
    "plot",
    "prices_lines",
    "section",
    "side_json",
    "table",
    "this_dirs",
    "this_first",
    "work_text",
]
