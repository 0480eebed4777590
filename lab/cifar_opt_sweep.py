"""cifar-opt GPU benchmark: the issue's speed targets, measured side by side in one run.

    python3 -m lab.cifar_opt_sweep --data-dir /tmp/data --out results/sweep [--n-train 25000] [--epochs 3] [--repeats 1]

Cells (ResNet-18, one process each, the study's own cell code, epochs interleaved across
cells so the machine's drift lands on all alike):
    batch 128: default fp32 eager on the resident pipeline (the "eager fp32" baseline),
               default on the seed's DataLoader pipeline, bf16+cl+graphs, tuned
               (bf16+cl+compile+graphs) resident, tuned on synthetic-gpu (the upper bound)
    batch 512: default resident, tuned resident, tuned synthetic-gpu
Prints a table (median img/s over the timed epochs, the ratios the issue asks for, batch-1
latency p50 of each cell's inference form) and writes sweep.json beside the cells.
Data: the synthetic CIFAR-10 set in the data dir (`cifar10-synthetic/`), generated with
`python -c "from bench.data import cifar10; cifar10.write_synthetic('/tmp/data', n_train=30000)"`.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.core.registry import get_study
from bench.core.request import Paths
from bench.core.resultset import load_cells
from bench.run.schedule import Scheduler

CELLS = [
    (128, "default", "resident"),
    (128, "default", "loader"),
    (128, "bf16+cl+graphs", "resident"),
    (128, "tuned", "resident"),
    (128, "tuned", "synthetic-gpu"),
    (512, "default", "resident"),
    (512, "tuned", "resident"),
    (512, "tuned", "synthetic-gpu"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n-train", type=int, default=25000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--cells", default="", help="BATCH:VARIANT:PIPELINE,... (default: all of CELLS)")
    a = ap.parse_args()
    chosen = [(int(b), v, p) for b, v, p in (c.split(":") for c in a.cells.split(",") if c)] or CELLS
    study = get_study("cifar-opt")
    cells = []
    for r in range(a.repeats):
        for bs, v, pipe in chosen:
            c = study.cell(
                "torch-cuda",
                v,
                repeat=r,
                name=f"sweep_{a.model}_{v}_{pipe}_b{bs}",
                model=a.model,
                batch_size=bs,
                pipeline=pipe,
                epochs=a.epochs,
                n_train=a.n_train,
                n_test=1000,
                dataset="cifar10-synthetic",
            )
            study.validate(c)
            cells.append(study.resolve(c, a.data_dir))
    outcomes = Scheduler(Paths(Path(a.out), a.data_dir), timeout_s=900).run(cells, "interleaved")
    done = load_cells([o.cell.dir(a.out) for o in outcomes])
    table = []
    for c in done:
        ep = [r for r in c.ok_rows if r.get("phase") == "epoch"]
        inf = [r for r in c.ok_rows if r.get("phase") == "inference"]
        p = c.spec.get("params") or {}
        table.append(
            {
                "batch": p.get("batch_size"),
                "variant": c.first.get("variant"),
                "pipeline": p.get("pipeline"),
                "repeat": c.repeat,
                "status": c.status,
                "img_s": statistics.median(r["samples_per_s"] for r in ep) if ep else None,
                "acc": ep[-1].get("test_acc") if ep else None,
                "compile_s": ep[0].get("compile_s") if ep else None,
                "latency_p50_ms": inf[0]["latency_p50_ms"] if inf else None,
                "form": inf[0]["form"] if inf else None,
                "flags": c.flags,
            }
        )
    (a.out / "sweep.json").write_text(json.dumps(table, indent=1))
    print(f"{'batch':>5} {'variant':<16} {'pipeline':<14} {'img/s':>10} {'acc':>6} {'compile s':>9} {'b1 p50 ms':>9}  form")
    for t in table:
        print(
            f"{t['batch']:>5} {t['variant']:<16} {t['pipeline']:<14} {t['img_s'] or 0:>10,.0f} {t['acc'] or 0:>6.3f} "
            f"{t['compile_s'] or 0:>9.1f} {t['latency_p50_ms'] or 0:>9.3f}  {t['form']} {t['status']} {t['flags']}"
        )

    def med(bs, v, pipe):
        vals = [t["img_s"] for t in table if (t["batch"], t["variant"], t["pipeline"]) == (bs, v, pipe) and t["img_s"]]
        return statistics.median(vals) if vals else None

    for what, x, y in (
        ("tuned / eager fp32 at batch 128 (target >= 3)", med(128, "tuned", "resident"), med(128, "default", "resident")),
        ("tuned / eager fp32 at batch 512", med(512, "tuned", "resident"), med(512, "default", "resident")),
        (
            "tuned resident / synthetic-gpu at 128 (target >= 0.9)",
            med(128, "tuned", "resident"),
            med(128, "tuned", "synthetic-gpu"),
        ),
        (
            "tuned resident / synthetic-gpu at 512 (target >= 0.9)",
            med(512, "tuned", "resident"),
            med(512, "tuned", "synthetic-gpu"),
        ),
        ("tuned at batch 512, img/s (target >= 100,000)", med(512, "tuned", "resident"), 1.0),
        ("seed DataLoader / resident, default at 128", med(128, "default", "loader"), med(128, "default", "resident")),
    ):
        print(f"{what}: {x / y:,.2f}" if x and y else f"{what}: n/a")


if __name__ == "__main__":
    main()
