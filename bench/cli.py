"""`python -m bench`: run, matrix, list, selfcheck. A thin typer layer over plain functions."""
from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bench.errors import KitError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="cnn-bench: run studies on this host.")


class Study(str, Enum):
    mnist_cnn = "mnist-cnn"
    mlp_scratch = "mlp-scratch"


class Platform(str, Enum):
    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"


def fail(msg: str, code: int = 2) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def check_writable(out: Path) -> None:
    """Fail in one line, before any work, when results cannot be written under OUT.
    Creates nothing: it checks the nearest existing ancestor of OUT."""
    p = Path(out).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir() or not os.access(p, os.W_OK | os.X_OK):
        uid = os.getuid() if hasattr(os, "getuid") else "?"
        why = "not a directory" if not p.is_dir() else "permission denied"
        fail(f"cannot write results to {out} as uid {uid} ({p}: {why}); in compose `export UID GID=$(id -g)`, "
             f"or make the results dir writable")


@app.command()
def run(
    study: Annotated[Study, typer.Argument(help="study to run")],
    backend: Annotated[str, typer.Option(help="e.g. torch-cpu, numba-cpu")] = "torch-cpu",
    pipeline: Annotated[str, typer.Option(help="seed | resident")] = "resident",
    variant: Annotated[str, typer.Option(help="backend tuning label")] = "default",
    epochs: Annotated[int, typer.Option(help="passes over the training set")] = 10,
    batch_size: Annotated[int, typer.Option(help="samples per step")] = 512,
    lr: Annotated[Optional[float], typer.Option(help="learning rate (default: the study's, 0.01 / 0.1)")] = None,
    momentum: Annotated[float, typer.Option(help="SGD momentum")] = 0.9,
    seed: Annotated[int, typer.Option(help="weights and batch order")] = 0,
    threads: Annotated[int, typer.Option(help="CPU threads; 0 = all available")] = 0,
    last_batch: Annotated[str, typer.Option(help="pad (repeat samples, as the seed) | drop")] = "pad",
    dataset: Annotated[str, typer.Option(help="auto | mnist | digits")] = "auto",
    data_dir: Annotated[Optional[str], typer.Option(help="dir holding mnist/; default $KIT_DATA_DIR or ./data")] = None,
    limit_train: Annotated[int, typer.Option(help="use the first N training samples; 0 = all")] = 0,
    out: Annotated[Path, typer.Option(help="results directory")] = Path("results/native"),
    quiet: Annotated[bool, typer.Option(help="no progress bar (used by the matrix runner)")] = False,
    variants: Annotated[str, typer.Option(help="mlp-scratch: numpy,cupy,cupy-tuned (those available run)")] = "numpy,cupy,cupy-tuned",
    iterations: Annotated[int, typer.Option(help="mlp-scratch: gradient-descent steps")] = 500,
    dtype: Annotated[str, typer.Option(help="mlp-scratch: float32 | float64")] = "float32",
    repeats: Annotated[int, typer.Option(help="mlp-scratch: interleaved plain runs per variant")] = 3,
) -> None:
    """Run one cell of a study's matrix and write its rows and system.json under OUT."""
    from bench.studies.mnist_cnn import MnistCnnConfig, run_cell

    check_writable(out)
    if study == Study.mlp_scratch:
        from bench.studies import mlp_scratch

        mcfg = mlp_scratch.MlpConfig(variants=tuple(v for v in variants.split(",") if v), iterations=iterations,
                                     lr=0.1 if lr is None else lr, dtype=dtype, seed=seed, repeats=repeats,
                                     dataset=dataset, data_dir=data_dir)
        try:
            cell_dir = mlp_scratch.run_cell(mcfg, out, echo=typer.echo if not quiet else lambda s: None)
        except KitError as err:
            fail(str(err))
        typer.echo(f"{cell_dir}: done")
        return

    cfg = MnistCnnConfig(backend=backend, pipeline=pipeline, variant=variant, epochs=epochs, batch_size=batch_size,
                         lr=0.01 if lr is None else lr, momentum=momentum, seed=seed, threads=threads, last_batch=last_batch,
                         dataset=dataset, data_dir=data_dir, limit_train=limit_train)
    try:
        if quiet or not sys.stderr.isatty():
            cell_dir = run_cell(cfg, out)
        else:
            from rich.progress import Progress

            with Progress(transient=False) as progress:
                cell_dir = run_cell(cfg, out, progress=progress)
    except KitError as err:
        fail(str(err))
    _print_cell(cell_dir)


def _print_cell(cell_dir: Path) -> None:
    from bench.results import read_rows

    rows = read_rows(cell_dir / "rows.jsonl")
    last = rows[-1]
    if last["status"] != "ok":
        typer.echo(f"{last['status']}: {last.get('reason', '')}")
        return
    typer.echo(f"{cell_dir}: {len(rows)} epochs on {last['dataset']}; "
               f"median {sorted(r['samples_per_s'] for r in rows)[len(rows) // 2]:,.0f} samples/s; "
               f"final test acc {last['test_acc']:.4f}")


@app.command()
def matrix(
    study: Annotated[Study, typer.Argument()],
    platform: Annotated[Platform, typer.Option(help="which platform's default matrix")] = Platform.cpu,
    smoke: Annotated[bool, typer.Option(help="2 epochs on the first 4,096 samples")] = False,
    epochs: Annotated[Optional[int], typer.Option(help="override the matrix's epochs")] = None,
    data_dir: Annotated[Optional[str], typer.Option()] = None,
    dataset: Annotated[str, typer.Option(help="auto | mnist | digits")] = "auto",
    out: Annotated[Path, typer.Option()] = Path("results/native"),
    rerun: Annotated[bool, typer.Option(help="rerun cells already done")] = False,
    timeout_s: Annotated[float, typer.Option(help="per-cell time limit")] = 3600,
) -> None:
    """Run every cell of PLATFORM's default matrix, each in its own process."""
    import dataclasses

    check_writable(out)
    if study == Study.mlp_scratch:
        raise typer.Exit(_mlp_matrix(platform.value, data_dir, dataset, out, rerun))

    from bench.data.mnist import load_dataset
    from bench.runner import run_matrix
    from bench.studies.mnist_cnn import default_matrix

    try:
        if epochs is not None and epochs <= 0:
            raise KitError(f"--epochs must be > 0 (got {epochs})")
        load_dataset(data_dir, dataset)  # fail fast on a bad data dir, before any cell starts
        cells = [dataclasses.replace(c, data_dir=data_dir, dataset=dataset)
                 for c in default_matrix(platform.value, smoke=smoke, epochs=epochs)]
    except KitError as err:
        fail(str(err))
    outcomes = run_matrix(cells, out, timeout_s=timeout_s, rerun=rerun)
    bad = [o for o in outcomes if o.status == "error"]
    typer.echo(f"{len(outcomes)} cells: " + ", ".join(f"{s} {sum(o.status == s for o in outcomes)}"
                                                     for s in ("ok", "reused", "skipped", "error")))
    raise typer.Exit(1 if bad else 0)


def _mlp_matrix(platform: str, data_dir, dataset: str, out: Path, rerun: bool) -> int:
    """mlp-scratch has one cell per platform (its variants run side by side inside it)."""
    import subprocess

    from bench.results import cell_status
    from bench.results import new_run_id
    from bench.runner import settle, subprocess_env
    from bench.studies.mlp_scratch import PLATFORM_VARIANTS, MlpConfig

    if platform not in PLATFORM_VARIANTS:
        typer.echo(f"mlp-scratch: no cell for platform {platform}")
        return 0
    from bench.data.mnist import load_dataset

    try:
        load_dataset(data_dir, dataset)  # fail fast on a bad data dir, before any cell starts
    except KitError as err:
        fail(str(err))
    cfg = MlpConfig(variants=PLATFORM_VARIANTS[platform], dataset=dataset, data_dir=data_dir)
    cell_dir = out / "mlp-scratch" / cfg.cell_id()
    if not rerun and cell_status(cell_dir) == "ok":
        typer.echo(f"reused mlp-scratch {cfg.cell_id()}")
        return 0
    argv = [sys.executable, "-m", "bench", "run", "mlp-scratch", "--variants", ",".join(cfg.variants),
            "--dataset", dataset, "--out", str(out)] + (["--data-dir", data_dir] if data_dir else [])
    cell_dir.mkdir(parents=True, exist_ok=True)
    with open(cell_dir / "log.txt", "w", encoding="utf-8") as log:
        rc = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT, env=subprocess_env())
    status, reason = settle(cell_dir, rc, {"study": "mlp-scratch", "cell": cfg.cell_id(), "backend": "+".join(cfg.variants),
                                           "run_id": new_run_id()})
    typer.echo(f"{status} mlp-scratch {cfg.cell_id()}{' - ' + reason if reason else ''}")
    return 0 if status == "ok" else 1


@app.command("bench")
def bench_cmd(
    study: Annotated[Study, typer.Argument()],
    cells: Annotated[str, typer.Option(help="platform matrices to interleave, joined by '+': cpu, cuda, cuda+cpu")] = "cpu",
    epochs: Annotated[int, typer.Option(help="epochs per cell")] = 10,
    variants: Annotated[str, typer.Option(help="extra torch-cuda variants, comma-separated (e.g. graphs+bf16,compile)")] = "",
    data_dir: Annotated[Optional[str], typer.Option()] = None,
    dataset: Annotated[str, typer.Option(help="auto | mnist | digits")] = "auto",
    out: Annotated[Path, typer.Option()] = Path("results/bench"),
) -> None:
    """Benchmark: every available cell in one session, epochs interleaved; prints Table I and the ratios."""
    check_writable(out)
    from bench.data.mnist import load_dataset
    from bench.interleaved import cells_for, run_interleaved
    from bench.report.build import build_report
    from bench.report.tables import fmt

    try:
        if epochs <= 0:
            raise KitError(f"--epochs must be > 0 (got {epochs})")
        load_dataset(data_dir, dataset)
        todo = cells_for(cells, epochs, data_dir, dataset, [v for v in variants.split(",") if v])
    except KitError as err:
        fail(str(err))
    summary = run_interleaved(todo, out, echo=typer.echo)
    info = build_report([out], out / "report")
    cols = ["platform", "device", "avg_epoch_s", "total_train_s", "avg_samples_per_s", "median_samples_per_s",
            "final_test_acc_pct", "max_test_acc_pct", "avg_rss_mb", "max_vram_mb", "compile_s"]
    typer.echo("\nTable I (this session)\n" + " | ".join(cols))
    for r in info["rows"]:
        typer.echo(" | ".join(fmt(r.get(c)) for c in cols))
    typer.echo("\nratios of median throughput (same session)")
    for r in summary["ratios"]:
        typer.echo(f"  {r['numerator']} / {r['denominator']}: {r['ratio']:.2f}x {('(target ' + r['target'] + ')') if r['target'] else ''}")
    typer.echo(f"\nrows and report under {out}")


@app.command("list")
def list_cmd() -> None:
    """Studies and backends, and whether each can run here."""
    from bench.backends import REGISTRY, why_unavailable

    for study, backs in REGISTRY.items():
        typer.echo(study)
        for name in backs:
            reason = why_unavailable(study, name)
            typer.echo(f"  {name:<12} {'available' if reason is None else 'unavailable: ' + reason}")


@app.command()
def selfcheck(
    platform: Annotated[Optional[Platform], typer.Option(help="default: $KIT_PLATFORM, else cpu")] = None,
) -> None:
    """Import every backend this image should have; on a GPU, compile one numba-cuda and one CuPy kernel."""
    from bench.selfcheck import run_selfcheck

    plat = platform.value if platform else os.environ.get("KIT_PLATFORM", "cpu")
    ok = run_selfcheck(plat, echo=typer.echo)
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    try:
        app()
    except KitError as err:  # anything that slipped past a command's own handling
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
