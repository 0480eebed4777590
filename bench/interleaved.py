"""The mnist-cnn benchmark: every available backend x pipeline x variant in ONE session,
epochs interleaved round-robin (epoch e of every cell before epoch e+1 of any, the first
cell rotating), so the machine's noise lands on all of them alike.

Each cell still runs in its own process (two thread pools in one process, torch's and
numba's, slowed torch-cpu 5x in a trial here), stepped epoch by epoch through a pipe:
the child prints `KIT READY` after its warm-up, then waits for `go` before each epoch
and prints `KIT EPOCH {row}` after it. Warm-ups run one at a time. Rows go to the usual
cell dirs, so `orchestrate.py report` reads them; ratios are of medians from this session.

    python -m bench bench mnist-cnn --cells cpu --epochs 1 --out results/bench-cpu
    python -m bench bench mnist-cnn --cells cuda+cpu --epochs 10 --out results/reference/<gpu>
"""
from __future__ import annotations

import json
import select
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench import results
from bench.runner import cell_argv, settle, subprocess_env
from bench.studies.mnist_cnn import STUDY, MnistCnnConfig, default_matrix, error_row

RATIOS = [  # (numerator cell, denominator cell, the target)
    ("numba-cpu resident default", "torch-cpu resident default", ">= 1.0"),
    ("torch-cpu resident default", "torch-cpu seed default", ">= 2.0"),
    ("numba-cuda resident default", "torch-cuda resident tuned", ">= 0.5"),
    ("torch-cuda resident tuned", "torch-cuda resident default", ""),
    ("torch-cuda resident tuned", "torch-cuda seed default", ""),
    ("torch-cuda resident tuned", "torch-cpu resident default", ""),
    ("numba-cuda resident default", "numba-cpu resident default", ""),
]


def cells_for(spec: str, epochs: int, data_dir, dataset: str, extra_variants: list[str]) -> list[MnistCnnConfig]:
    import dataclasses

    cells = []
    for plat in spec.split("+"):
        cells += default_matrix(plat, epochs=epochs)
        if plat == "cuda":
            cells += [MnistCnnConfig(backend="torch-cuda", variant=v, epochs=epochs) for v in extra_variants]
    return [dataclasses.replace(c, data_dir=data_dir, dataset=dataset) for c in cells]


def label(cfg: MnistCnnConfig) -> str:
    return f"{cfg.backend} {cfg.pipeline} {cfg.variant}"


@dataclass
class Child:
    cfg: MnistCnnConfig
    cell_dir: Path
    proc: subprocess.Popen
    log: object
    alive: bool = True


def _read_tagged(child: Child, tag: str, timeout_s: float) -> str | None:
    """Next stdout line starting with `tag`, or None when the child exits or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([child.proc.stdout], [], [], left)[0]:
            child.proc.kill()
            return None
        line = child.proc.stdout.readline()
        if not line:
            return None
        if line.startswith(tag):
            return line[len(tag):].strip()
        child.log.write(line)


def run_interleaved(cells: list[MnistCnnConfig], out: Path, echo=print, epoch_timeout_s: float = 1800) -> dict:
    out = Path(out)
    children: list[Child] = []
    summary: dict = {"cells": {}, "ratios": []}
    for cfg in cells:
        cell_dir = out / STUDY / cfg.cell_id()
        cell_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("rows.jsonl", "rows.csv", "rows.partial.jsonl"):
            (cell_dir / stale).unlink(missing_ok=True)
        log = open(cell_dir / "log.txt", "w", encoding="utf-8")
        env = {**subprocess_env(), "KIT_EPOCH_GATE": "1"}
        proc = subprocess.Popen(cell_argv(cfg, out), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                text=True, env=env, bufsize=1)
        child = Child(cfg, cell_dir, proc, log)
        ready = _read_tagged(child, "KIT READY", epoch_timeout_s)
        if ready is None:  # skipped (no device) or failed during set-up: it has exited
            child.alive = False
            status, reason = settle(cell_dir, proc.wait(), error_row(cfg, ""))
            echo(f"{status:<7} {label(cfg)}: {reason}")
            summary["cells"][label(cfg)] = {"status": status, "reason": reason}
            log.close()
            continue
        echo(f"ready   {label(cfg)} (warm-up {float(ready):.2f} s)")
        children.append(child)

    for epoch in range(1, max((c.cfg.epochs for c in children), default=0) + 1):
        k = (epoch - 1) % max(len(children), 1)
        for child in children[k:] + children[:k]:
            if not child.alive or epoch > child.cfg.epochs:
                continue
            child.proc.stdin.write("go\n")
            child.proc.stdin.flush()
            got = _read_tagged(child, "KIT EPOCH", epoch_timeout_s)
            if got is None:
                child.alive = False
                echo(f"error   {label(child.cfg)} died in epoch {epoch}")
                continue
            row = json.loads(got)
            echo(f"epoch {epoch:>2} {label(child.cfg):<36} {row['epoch_s']:8.3f} s {row['samples_per_s']:>12,.0f} samples/s  acc {row['test_acc']:.4f}")

    for child in children:
        child.proc.stdin.close()
        rc = child.proc.wait()
        child.log.close()
        status, reason = settle(child.cell_dir, rc, error_row(child.cfg, ""))
        ok = [r for r in results.read_rows(child.cell_dir / "rows.jsonl") if r.get("status") == "ok"]
        if status == "ok" and ok:
            tput = [r["samples_per_s"] for r in ok]
            summary["cells"][label(child.cfg)] = {
                "status": "ok", "median_samples_per_s": statistics.median(tput), "min_samples_per_s": min(tput),
                "max_samples_per_s": max(tput), "final_test_acc": ok[-1]["test_acc"], "epochs": len(ok)}
        else:
            summary["cells"][label(child.cfg)] = {"status": status, "reason": reason}
    for num, den, target in RATIOS:
        a, b = summary["cells"].get(num, {}), summary["cells"].get(den, {})
        if a.get("status") == "ok" and b.get("status") == "ok":
            summary["ratios"].append({"numerator": num, "denominator": den, "target": target,
                                      "ratio": a["median_samples_per_s"] / b["median_samples_per_s"]})
    results.write_json(out / "bench_summary.json", summary)
    return summary
