"""mlp-scratch report sections: seed 001's Table 3 (times, speedups), Table 4 (ops),
Table 5 (memory) and Fig. 3 (convergence). Speedups are NumPy / variant, medians over the
interleaved repeats of one cell (one host, one session)."""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.core.resultset import ResultCell as Cell
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


def table3(cell: Cell) -> list[str]:
    plain = [r for r in cell.rows if r.get("phase") == "plain" and r.get("status") == "ok"]
    vs = _variants(cell)
    base = {k: _med([r for r in plain if r["backend"] == "numpy"], k) for k in ("total_s", "per_iter_median_ms")}
    out = [
        "| variant | Total (s) | Per iteration (ms, median) | Forward (ms) | Backward + update (ms) | Final val acc | Speedup vs NumPy |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in vs:
        rs = [r for r in plain if r["backend"] == v]
        tot = _med(rs, "total_s")
        sp = f"{base['total_s'] / tot:.1f}x" if base["total_s"] and tot and v != "numpy" else ""
        out.append(
            f"| {v} | {fmt(tot)} | {fmt(_med(rs, 'per_iter_median_ms'))} | {fmt(_med(rs, 'forward_median_ms'))} | "
            f"{fmt(_med(rs, 'backward_median_ms'))} | {fmt(_med(rs, 'final_val_acc'))} | {sp} |"
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
    for c in cells:
        r0 = c.rows[0]
        gpu = (c.system.get("gpu") or {}).get("name")
        on_gpu = any(v != "numpy" for v in _variants(c))  # only then did the cell use the GPU
        where = f"{r0.get('cell', '').rsplit('-', 1)[0]} on {c.system.get('cpu_model', '?')}" + (
            f" + {gpu}" if gpu and on_gpu else ""
        )
        md += [
            f"#### {where} ({r0.get('dtype')}, {r0.get('iterations')} iterations, {r0.get('dataset')}"
            f"{'' if r0.get('dataset_real') else ', not the real dataset'}, {r0.get('n_train')} train / {r0.get('n_val')} val)",
            "",
            "Table 3: time",
            "",
            *table3(c),
            "",
            "Table 4: operations",
            "",
            *table4(c),
            "",
            "Table 5: memory (MB = 10^6 bytes; each variant measured in a fresh process)",
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
