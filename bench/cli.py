"""`python -m bench`: list, matrix, cell, selfcheck. A thin typer layer over plain functions."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from bench.core.choices import Profile, Schedule
from bench.core.cli_style import fail, style
from bench.core.errors import KitError
from bench.core.request import Paths, RunRequest, default_out

app = typer.Typer(add_completion=False, no_args_is_help=True, help="cnn-bench: run studies on this host.")


def check_writable(out: Path) -> None:
    """Fail in one line, before any work, when results cannot be written under OUT.
    Creates nothing: it checks the nearest existing ancestor of OUT."""
    import tempfile

    p = Path(out).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    why = "not a directory" if not p.is_dir() else "permission denied" if not os.access(p, os.W_OK | os.X_OK) else ""
    if not why:  # root passes os.access everywhere: a read-only mount or /proc only says so when written to
        try:
            fd, probe = tempfile.mkstemp(prefix=".cnn-bench-probe-", dir=p)
            os.close(fd)
            os.unlink(probe)
        except OSError as err:
            why = err.strerror or str(err)
    if why:
        uid = os.getuid() if hasattr(os, "getuid") else "?"
        fail(
            f"cannot write results to {out} as uid {uid} ({p}: {why}); in compose `export UID GID=$(id -g)`, "
            f"or make the results dir writable",
            2,
        )


@app.command("list")
def list_cmd() -> None:
    """Every study, backend and variant, and why a backend cannot run here."""
    from bench.core.registry import studies

    for name, study in studies().items():
        typer.echo(f"{name}: {study.title}  (profiles: {', '.join(study.profiles)})")
        for b, spec in study.backends.items():
            reason = study.why_unavailable(b)
            state = "available" if reason is None else f"unavailable: {reason}"
            extra = [spec.family] + ([f"pipelines {'|'.join(spec.pipelines)}"] if spec.pipelines else [])
            extra += [f"up to {spec.max_devices} devices"] if spec.max_devices > 1 else []
            typer.echo(f"  {b:<12} [{'; '.join(e for e in [spec.platform, *extra] if e)}] {state}")
            typer.echo(f"  {'':<12} variants: {', '.join(spec.variants)}" + (f"; {spec.about}" if spec.about else ""))
        defaults = ", ".join(f"{k}={v}" for k, v in study.config_defaults().items())
        typer.echo(f"  --set: {defaults}")


@app.command()
def matrix(
    study: Annotated[list[str] | None, typer.Argument(help="studies to run (default: all)")] = None,
    platform: Annotated[
        list[str] | None, typer.Option("--platform", "-p", help="cpu | cuda | mps (repeatable; default $KIT_PLATFORM, else cpu)")
    ] = None,
    profile: Annotated[
        Profile,
        typer.Option(
            help="auto (with a GPU platform: answer; else each study's quick choice), smoke, default (the seeds' setups), full, "
            "answer (every study's comparisons, the same work on every platform)"
        ),
    ] = Profile.auto,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="key=value or study.key=value: override a parameter of every cell (repeatable)"),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(help="key=value[|value]: keep only matching cells (backend, variant or a parameter; repeatable)"),
    ] = None,
    schedule: Annotated[
        Schedule, typer.Option(help="sequential | interleaved (steps round-robin) | per-device")
    ] = Schedule.sequential,
    devices: Annotated[str | None, typer.Option(help="per-device: GPU slots, e.g. 0,1 (default: every visible GPU)")] = None,
    data_dir: Annotated[str | None, typer.Option(help="dir holding the datasets (default $KIT_DATA_DIR, else ./data)")] = None,
    out: Annotated[Path | None, typer.Option(help="results dir (default $KIT_RESULTS_DIR, else results/<host>)")] = None,
    rerun: Annotated[bool, typer.Option(help="rerun cells already done")] = False,
    timeout_s: Annotated[float, typer.Option(help="per-cell time limit (s)")] = 3600,
    repeats: Annotated[
        int | None,
        typer.Option(help="fresh-process repeats of every cell, interleaved across cells (default: 1 for smoke, else 3)"),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(help="this run's label in every table and plot (system.json run_label; default: the results dir's name)"),
    ] = None,
    until_decided: Annotated[
        bool,
        typer.Option(
            "--until-decided", help="after the first rounds, add fresh-process rounds for each comparison until it is decided"
        ),
    ] = False,
    max_repeats: Annotated[int | None, typer.Option(help="--until-decided: rounds a comparison may reach (default 20)")] = None,
    budget: Annotated[
        str | None,
        typer.Option(help="--until-decided: time for the rounds added after the first, e.g. 15m, 900s, 1h (default: none)"),
    ] = None,
    target_width: Annotated[
        float | None, typer.Option(help="--until-decided: also stop at (hi - lo) / median <= this, e.g. 0.05")
    ] = None,
    budget_whole: Annotated[
        bool, typer.Option("--budget-whole", help="--until-decided: --budget is the whole run's time, first rounds included")
    ] = False,
    fixed_rounds: Annotated[
        bool,
        typer.Option(
            "--fixed-rounds",
            help="--until-decided: give every comparison --max-repeats rounds, cheapest first within --budget, "
            "never stopping on its verdict (a fixed-n 95% bootstrap from 6 rounds instead of the confidence sequence)",
        ),
    ] = False,
    rounds_first: Annotated[
        bool,
        typer.Option(
            "--rounds-first",
            help="--until-decided: run the compiled cells (one repeat each, after the rounds) only in the budget the "
            "rounds leave, instead of keeping their time out of the rounds' budget",
        ),
    ] = False,
    stop_after: Annotated[
        str | None,
        typer.Option(
            help="start no cell or round that would end past this time (e.g. 9m): a clean stop, resumed by the same command"
        ),
    ] = None,
    after_round: Annotated[
        list[str] | None,
        typer.Option(hidden=True, help="argv (one word per use) run after the first rounds and every added round"),
    ] = None,
) -> None:
    """Resolve the studies' matrices for PLATFORM(s) and run every cell, each in its own process."""
    from bench.core.provenance import RUN_LABEL_ENV
    from bench.run.matrix import run_matrix

    try:
        req = RunRequest(
            studies=tuple(study or ()),
            platforms=tuple(platform or [os.environ.get("KIT_PLATFORM", "cpu")]),
            profile=profile.value,
            sets=tuple(set_ or ()),
            only=tuple(only or ()),
            schedule=schedule.value,
            rerun=rerun,
            timeout_s=timeout_s,
            repeats=repeats,
            label=label,
            until_decided=until_decided,
            max_repeats=max_repeats,
            budget=budget,
            target_width=target_width,
            budget_whole=budget_whole,
            fixed_rounds=fixed_rounds,
            rounds_first=rounds_first,
            stop_after=stop_after,
            after_round=tuple(after_round or ()),
            devices=tuple(d for d in (devices or "").split(",") if d),
            out=out or default_out(),
            data_dir=data_dir,
        )
    except KitError as err:
        fail(str(err), 2)
    if req.label is not None:
        os.environ[RUN_LABEL_ENV] = req.label  # every cell process inherits it
    check_writable(req.paths.out)
    # `docker stop`, `timeout`, a CI cancel, a closed SSH session: as Ctrl-C. SIGINT too: a run started
    # as a background job of a script inherits it ignored (POSIX shells do that), and Python then leaves
    # it ignored, so a `kill -INT` never stopped the run (its forked cells and forkserver lived on)
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.default_int_handler)
    try:
        code = run_matrix(req, echo=typer.echo, bar=sys.stderr.isatty() and os.environ.get("TERM") != "dumb")
    except KitError as err:
        fail(str(err), err.exit_code)
    except OSError as err:  # the results dir vanished or turned read-only under the run: one line, not a traceback
        fail(f"cannot write {err.filename or req.paths.out} ({err.strerror or err}); finished cells are kept", 1)
    raise typer.Exit(code)


@app.command()
def cell(
    spec: Annotated[str, typer.Argument(help="cell.json path, '-' for stdin, or the JSON itself")],
    out: Annotated[Path | None, typer.Option(help="results dir (default $KIT_RESULTS_DIR, else results/<host>)")] = None,
    data_dir: Annotated[str | None, typer.Option(help="dir holding the study's dataset")] = None,
    gate: Annotated[bool, typer.Option(help="speak the scheduler's READY/go protocol on stdin/stdout")] = False,
) -> None:
    """Run one cell: the entry point every scheduler and container uses."""
    from bench.run.cell import load_spec, run_cell

    out = out or default_out()
    check_writable(out)
    from bench.core.lock import results_lock
    from bench.core.registry import get_study

    try:
        c = load_spec(spec)
        get_study(c.study).validate(c)  # bad input: one line before anything (the lock) is written
        if gate:  # the scheduler that started us holds the results dir's lock
            code = run_cell(c, Paths(out, data_dir), gated=True)
        else:
            with results_lock(out):
                if not sys.stderr.isatty():
                    code = run_cell(c, Paths(out, data_dir))
                else:
                    from rich.progress import Progress

                    with Progress(transient=False) as progress:
                        code = run_cell(c, Paths(out, data_dir), progress=progress)
    except KitError as err:
        fail(str(err), 2)
    if not gate:
        _print_cell(c.dir(out))
    raise typer.Exit(code)


def _print_cell(cell_dir: Path) -> None:
    from bench.core.rows import read_rows

    p = cell_dir / "rows.jsonl"
    if p.is_file():
        rows = read_rows(p)
        bad = [r for r in rows if r.get("status") != "ok"]
        typer.echo(f"{cell_dir}: {len(rows)} rows" + (f"; {bad[-1]['status']}: {bad[-1].get('reason', '')}" if bad else ", ok"))


@app.command()
def selfcheck(
    platform: Annotated[str | None, typer.Option(help="cpu | cuda | mps (default: $KIT_PLATFORM, else cpu)")] = None,
    sandbox: Annotated[bool, typer.Option(help="print what confines this process (user, capabilities, ...) as JSON")] = False,
) -> None:
    """Import every backend this image should have; on a GPU, compile one numba-cuda and one CuPy kernel."""
    from bench.core.selfcheck import run_selfcheck, sandbox_facts

    if sandbox:
        import json

        typer.echo("KIT SANDBOX " + json.dumps(sandbox_facts()))
        raise typer.Exit(0)

    plat = platform or os.environ.get("KIT_PLATFORM", "cpu")
    if plat not in ("cpu", "cuda", "mps"):
        fail(f"unknown platform {plat!r}: choose cpu, cuda or mps", 2)
    ok = run_selfcheck(plat, echo=typer.echo)
    raise typer.Exit(0 if ok else 1)


style(app)  # click's help conventions: TEXT, PATH, INTEGER, [a | b] (bench/core/cli_style.py)


def main() -> None:
    try:
        app()
    except KitError as err:  # anything that slipped past a command's own handling
        from bench.core.text import term

        typer.echo(f"error: {term(err)}", err=True)
        sys.exit(2)
