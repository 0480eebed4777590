"""mlp-scratch report sections: seed 001's Table 3 (times, speedups), Table 4 (ops),
Table 5 (memory) and Fig. 3 (convergence). Speedups are NumPy / variant, medians over the
interleaved repeats of one cell (one host, one session)."""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.core import stats
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import group_repeats
from bench.core.tables import fmt
from bench.studies.mlp_scratch.runner import MEMORY_KEYS


def _med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _variants(cell: Cell) -> list[str]:
    seen = []
    for r in cell.rows:
        if r.get("phase") == "plain" and r["backend"] not in seen:
            seen.append(r["backend"])
    return seen


def _per_repeat(group: list[Cell], v: str, key: str) -> dict[int, float]:
    """repeat -> the median of KEY over that repeat's plain runs of variant V."""
    out = {}
    for c in group:
        m = _med([r for r in c.rows if r.get("phase") == "plain" and r.get("status") == "ok" and r["backend"] == v], key)
        if m is not None:
            out[c.repeat] = m
    return out


def table3(group: list[Cell]) -> list[str]:
    """Seed 001's Table 3 over repeats: per repeat the median of its plain runs, then the
    median over repeats with a 95 % bootstrap interval; speedups paired by repeat."""
    vs = _variants(group[0])
    plain = [r for c in group for r in c.rows if r.get("phase") == "plain" and r.get("status") == "ok"]
    base = _per_repeat(group, "numpy", "total_s")
    out = [
        "| variant | Total (s) | 95% CI | Per iteration (ms, median) | Forward (ms) | Backward + update (ms) "
        "| Final val acc | Speedup vs NumPy | Speedup 95% CI |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in vs:
        rs = [r for r in plain if r["backend"] == v]
        tot = _per_repeat(group, v, "total_s")
        if not tot:
            continue
        t = stats.summarize(list(tot.values()))
        sp = ci = ""
        if base and v != "numpy":
            r = stats.ratio(base, tot)
            sp = f"{r.median:.1f}x"
            ci = f"{r.lo:.1f}-{r.hi:.1f}x" if r.lo is not None and r.hi is not None else "n=1"
        out.append(
            f"| {v} | {fmt(t.median)} | {t.interval('{:.3g}')} | {fmt(_med(rs, 'per_iter_median_ms'))} | "
            f"{fmt(_med(rs, 'forward_median_ms'))} | {fmt(_med(rs, 'backward_median_ms'))} | "
            f"{fmt(_med(rs, 'final_val_acc'))} | {sp} | {ci} |"
        )
    return out


def table4(cell: Cell) -> list[str]:
    ops = [r for r in cell.rows if r.get("phase") == "op"]
    vs = [v for v in _variants(cell) if any(r["backend"] == v for r in ops)]
    names = []
    for r in ops:
        if r["op"] not in names:
            names.append(r["op"])
    ms = {(r["backend"], r["op"]): r["op_ms_per_iter"] for r in ops}
    others = [v for v in vs if v != "numpy"]
    head = "| op | " + " | ".join([f"{v} (ms/iter)" for v in vs] + [f"speedup {v}" for v in others]) + " |"
    out = [head, "|" + "---|" * (1 + len(vs) + len(others))]
    for op in names:
        a = ms.get(("numpy", op))
        sps = [f"{a / ms[(v, op)]:.1f}x" if a and ms.get((v, op)) else "" for v in vs if v != "numpy"]
        out.append(f"| {op} | " + " | ".join([fmt(ms.get((v, op))) for v in vs] + sps) + " |")
    return out


def table5(cell: Cell) -> list[str]:
    mem = {r["backend"]: r for r in cell.rows if r.get("phase") == "memory"}
    vs = list(mem)
    out = ["| component (MB) | " + " | ".join(vs) + " |", "|" + "---|" * (1 + len(vs))]
    for k in MEMORY_KEYS:
        out.append(
            f"| {k.replace('_bytes', '')} | "
            + " | ".join(fmt(mem[v][k] / 1e6) if mem[v].get(k) is not None else "" for v in vs)
            + " |"
        )
    return out


def convergence_plot(cells: list[Cell], out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    drawn = 0
    multi = len({c.device for c in cells}) > 1
    for c in cells:
        for v in _variants(c):
            pts = [r for r in c.rows if r.get("phase") == "convergence" and r["backend"] == v and r.get("iteration") is not None]
            if pts:
                ax.plot(
                    [p["iteration"] for p in pts],
                    [100 * p["val_acc"] for p in pts],
                    label=f"{v}" + (f" ({c.device})" if multi else ""),
                    marker=".",
                    ms=3,
                    ls="-" if v == "numpy" else "--",
                )
                drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("iteration")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title("mlp-scratch convergence (seed 001 Fig. 3)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    path = out / "mlp_convergence.png"
    tmp = path.with_name(".mlp_convergence.tmp.png")
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def section(cells: list[Cell], out: Path) -> list[str]:
    cells = [c for c in cells if c.status == "ok"]
    if not cells:
        return []
    md = [
        "784-10-10 MLP from scratch, full-batch gradient descent, lr 0.1. Totals come from the plain runs "
        "(no syncs inside); the op table comes from a separate run with a device sync around every op, "
        "so its numbers add up to more than the plain per-iteration time.",
        "",
    ]
    for group in group_repeats(cells):
        c = group[0]
        r0 = c.rows[0]
        n = len(group)
        flags = [f"r{x.repeat}: {x.flags}" for x in group if x.flags]
        gpu = (c.system.get("gpu") or {}).get("name")
        on_gpu = any(v != "numpy" for v in _variants(c))  # only then did the cell use the GPU
        where = f"{r0.get('cell', '').rsplit('-', 1)[0]} on {c.system.get('cpu_model', '?')}" + (
            f" + {gpu}" if gpu and on_gpu else ""
        )
        md += [
            f"#### {where} ({r0.get('dtype')}, {r0.get('iterations')} iterations, {r0.get('dataset')}"
            f"{'' if r0.get('dataset_real') else ', not the real dataset'}, {r0.get('n_train')} train / {r0.get('n_val')} val)",
            "",
            f"Table 3: time ({n} repeat{'s' if n > 1 else ''}, each a fresh process; medians over repeats)",
            "",
            *table3(group),
            "",
            *([f"⚑ flagged: {'; '.join(flags)}", ""] if flags else []),
            f"Table 4: operations (repeat {c.repeat})",
            "",
            *table4(c),
            "",
            f"Table 5: memory (MB = 10^6 bytes; each variant measured in a fresh process; repeat {c.repeat})",
            "",
            *table5(c),
            "",
        ]
        skipped = [r for r in c.rows if r.get("status") == "skipped"]
        md += [f"- {r['backend']} not run: {r.get('reason')}" for r in skipped] + ([""] if skipped else [])
    p = convergence_plot(cells, out)
    if p:
        md += ["![mlp convergence](mlp_convergence.png)", ""]
    return md
