"""`orchestrate.py report DIR...`: merge result dirs into results/report/."""
from __future__ import annotations

import csv
import io
from datetime import datetime, timezone
from pathlib import Path

from bench.report import plots, tables
from bench.report.merge import collect
from bench.results import atomic_write_text, write_json

SEED_TABLE1 = """| Platform (seed 000, RTX 4060 laptop / M4 Pro) | Avg Epoch Time (s) | Avg Throughput (samples/s) | Final Test Acc (%) |
|---|---|---|---|
| CPU (Numba, dense layers only) | 2.0928 | 30,501 | 96.33 |
| GPU CUDA (Numba, dense backprop on CPU) | 0.9268 | 71,758 | 96.68 |
| CPU PyTorch | 11.2687 | 5,340 | 97.57 |
| CUDA PyTorch | 8.7219 | 6,948 | 97.21 |
| MPS PyTorch | 9.0544 | 6,645 | 97.31 |"""


def build_report(dirs: list[Path], out: Path = Path("results/report")) -> dict:
    cells, notes = collect(dirs)
    out.mkdir(parents=True, exist_ok=True)
    rows = tables.table1(cells)
    not_run = [c for c in cells if c.status != "ok"]
    cells_cnn = [c for c in cells if c.study == "mnist-cnn"]
    plot_paths = plots.fig1(cells_cnn, out) if rows else []

    buf = io.StringIO()
    keys = [k for k, _ in tables.TABLE1_COLUMNS] + ["batch_size"]
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out / "table1.csv", buf.getvalue())
    write_json(out / "table1.json", {"rows": rows})

    md = ["# cnn-bench report", "", "## mnist-cnn (seed 000)", "",
          f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} from: "
          + ", ".join(f"`{d}`" for d in dirs), "",
          "### Table I (measured)", "",
          "Epoch time is training only (evaluation excluded); throughput = samples / epoch time, padded "
          "samples included; RAM is the process RSS sampled every 10 ms during training; VRAM is the "
          "allocator's peak. Median and min-max are over epochs.", "",
          tables.markdown(rows) if rows else "_no finished cells_", ""]
    if any("not MNIST" in r["dataset"] for r in rows):
        md += ["> Rows marked *(not MNIST)* ran on the embedded default (scikit-learn's 1,797 digits resized "
               "to 28x28): a wiring check, not comparable with the seed. Reproduce Table I on real MNIST "
               "with `KIT_DATA_DIR=... python orchestrate.py all`.", ""]
    md += ["## Fig. 1", ""] + [f"![{p.stem}]({p.name})" for p in plot_paths] + [""]
    notes = [n for n in notes if n.get("status") != "ran"]
    if not_run or notes:
        md += ["## Not run", "", "| what | status | reason |", "|---|---|---|"]
        md += [f"| platform {n['platform']} | {n.get('status', 'skipped')} | {n.get('reason', '')} |" for n in notes]
        for c in not_run:
            reason = next((r.get("reason", "") for r in c.rows if r.get("status") in ("error", "skipped")), "")
            md.append(f"| {c.label} ({c.rows[0].get('cell')}) | {c.status} | {reason.replace('|', '/')[:300]} |")
        md.append("")
    from bench.report import mlp

    md += mlp.section(cells, out)
    md += ["## The seed's Table I, for comparison", "", SEED_TABLE1, "",
           "The seed's PyTorch rows were bound by per-sample transforms (our `seed` pipeline), and its "
           "Numba rows trained only the dense layers; ours train every layer.", ""]
    atomic_write_text(out / "REPORT.md", "\n".join(md))
    return {"rows": rows, "not_run": [c.rows[0].get("cell") for c in not_run], "notes": notes,
            "plots": [str(p) for p in plot_paths], "report": str(out / "REPORT.md")}
