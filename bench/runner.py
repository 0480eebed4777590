"""Run a study's matrix: each cell in its own process, with a timeout; never stop the matrix.

A cell whose rows.jsonl says ok/skipped is skipped on rerun. A crash, a non-zero exit or a
timeout becomes a rows.jsonl with one status=error row carrying the reason (the tail of
the cell's log), and the next cell starts. Progress: a bar over cells, and one over the
current cell's epochs, fed by the rows.partial.jsonl the cell appends to.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import results
from bench.studies.mnist_cnn import STUDY, MnistCnnConfig, error_row

console = Console(stderr=True)


@dataclass
class CellOutcome:
    cell: str
    status: str  # ok | skipped | error | reused
    seconds: float
    reason: str = ""


def subprocess_env() -> dict:
    """The environment for a child `python -m bench`: unbuffered, and able to import this
    very package whatever the working directory."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": root + (os.pathsep + path if path else "")}


def cell_argv(cfg: MnistCnnConfig, out_dir: Path) -> list[str]:
    argv = [sys.executable, "-m", "bench", "run", STUDY, "--backend", cfg.backend, "--pipeline", cfg.pipeline,
            "--variant", cfg.variant, "--epochs", str(cfg.epochs), "--batch-size", str(cfg.batch_size),
            "--seed", str(cfg.seed), "--threads", str(cfg.threads), "--last-batch", cfg.last_batch,
            "--dataset", cfg.dataset, "--limit-train", str(cfg.limit_train), "--out", str(out_dir), "--quiet"]
    if cfg.data_dir:
        argv += ["--data-dir", cfg.data_dir]
    return argv


def _partial_epochs(cell_dir: Path) -> int:
    p = cell_dir / "rows.partial.jsonl"
    try:
        return sum(1 for line in open(p, encoding="utf-8") if line.strip())
    except OSError:
        return 0


def settle(cell_dir: Path, rc: int, error_fields: dict, reason: str = "") -> tuple[str, str]:
    """After a cell process ended: its status and reason. A crash, a non-zero exit or a
    missing rows.jsonl becomes an error row (`error_fields` name the cell, the reason is
    the given one or the log's tail); epochs finished before it are kept, marked
    incomplete (they are not counted in the report)."""
    status = results.cell_status(cell_dir)
    if rc == 0 and status is not None:
        return status, results.read_rows(cell_dir / "rows.jsonl")[0].get("reason", "")
    log = cell_dir / "log.txt"
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if log.exists() else []
    reason = reason or f"exit code {rc}: " + " | ".join(tail)
    partial = cell_dir / "rows.partial.jsonl"
    done_rows = results.read_rows(partial) if partial.exists() else []
    for r in done_rows:
        r["status"] = "incomplete"
    results.write_rows(cell_dir, done_rows + [{**error_fields, "status": "error", "reason": reason}])
    return "error", reason


def run_matrix(cells: list[MnistCnnConfig], out_dir: Path, timeout_s: float = 3600, rerun: bool = False) -> list[CellOutcome]:
    out_dir = Path(out_dir)
    outcomes: list[CellOutcome] = []
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*cols, console=console, transient=False) as progress:
        all_task = progress.add_task(f"{STUDY}: cells", total=len(cells))
        for cfg in cells:
            cell_dir = out_dir / STUDY / cfg.cell_id()
            status = results.cell_status(cell_dir)
            if status in ("ok", "skipped") and not rerun:
                outcomes.append(CellOutcome(cfg.cell_id(), "reused", 0.0, f"already {status}"))
                progress.advance(all_task)
                continue
            ep_task = progress.add_task(f"  {cfg.cell_id()}", total=cfg.epochs)
            cell_dir.mkdir(parents=True, exist_ok=True)
            for stale in ("rows.jsonl", "rows.csv", "rows.partial.jsonl"):
                (cell_dir / stale).unlink(missing_ok=True)
            t0 = time.monotonic()
            env = subprocess_env()
            with open(cell_dir / "log.txt", "w", encoding="utf-8") as log:
                proc = subprocess.Popen(cell_argv(cfg, out_dir), stdout=log, stderr=subprocess.STDOUT, env=env)
                reason = ""
                while True:
                    try:
                        rc = proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        progress.update(ep_task, completed=_partial_epochs(cell_dir))
                        if time.monotonic() - t0 > timeout_s:
                            proc.kill()
                            proc.wait()
                            rc, reason = -9, f"timed out after {timeout_s:.0f} s"
                            break
            elapsed = time.monotonic() - t0
            status, reason = settle(cell_dir, rc, error_row(cfg, ""), reason)
            progress.update(ep_task, completed=cfg.epochs if status == "ok" else _partial_epochs(cell_dir), visible=False)
            progress.advance(all_task)
            outcomes.append(CellOutcome(cfg.cell_id(), status, elapsed, reason or ""))
            mark = {"ok": "[green]ok[/]", "skipped": "[yellow]skipped[/]", "error": "[red]error[/]"}[status]
            console.print(f"{mark} {cfg.cell_id()} ({elapsed:.1f} s){' - ' + reason if reason else ''}")
    return outcomes
