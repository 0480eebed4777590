"""cnn-bench host CLI: run the studies on this host, and report, compare, verify and export what every host measured.

    python orchestrate.py all                        # every platform this host can run, then the report
    python orchestrate.py run cpu --study STUDY --profile smoke --set key=value
    python orchestrate.py data fetch NAME            # download a dataset with checksums
    python orchestrate.py report DIR...              # merge result dirs from any hosts

The typer app that `python orchestrate.py` and the `cnn-bench` console command run (`start`).
Host side only: imports no torch, numba or scikit-learn (requirements/host.txt is enough).
Results go to $KIT_RESULTS_DIR, else results/<host>/, unless --out says otherwise. Exit status: 0 done; 1 the work
failed (a download, a build, a cell, a check, a regression); 2 a usage error (an unknown
command, option, choice or name, a bad value, a path that does not exist).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, get_type_hints

import typer

from bench.core.choices import Profile, Schedule
from bench.core.cli_style import fail, style
from bench.core.errors import KitError, UsageError, host_exit_code
from bench.core.request import default_out, parse_budget

if TYPE_CHECKING:
    from bench.core.request import RunRequest

EXIT_CODES = "Exit status: 0 done, 1 the work failed (download, build, cell, check, regression), 2 a usage error."
app = typer.Typer(
    no_args_is_help=True,
    help=__doc__.splitlines()[0] + "\n\n" + EXIT_CODES,
    epilog="Example: python orchestrate.py all   (every study on every platform this host can run, then the report)",
)
data_app = typer.Typer(
    no_args_is_help=True,
    help="Datasets: fetch with checksums, write synthetic ones, list what is here.",
    epilog="Example: python orchestrate.py data fetch mnist --data-dir data",
)
app.add_typer(data_app, name="data", rich_help_panel="Data")
RUN, RESULTS, IMAGES, CLUSTER = "Run", "Results (from any hosts)", "Images", "Clusters (Slurm, Kubernetes)"
history_app = typer.Typer(
    no_args_is_help=True,
    help="Run history: keep every run, a trend per configuration, change points (results/history/).",
    epilog="Example: python orchestrate.py history add results/reference/* && python orchestrate.py history show",
)
app.add_typer(history_app, name="history", rich_help_panel=RESULTS)


class Runtime(StrEnum):
    auto = "auto"
    native = "native"
    docker = "docker"


def usage(msg: str) -> NoReturn:
    """One `error:` line for a command line that cannot work as typed; exit 2 (click's usage status)."""
    fail(msg, 2)


def _version(value: bool) -> None:
    if value:
        import bench
        from bench.core.provenance import source_state

        st = source_state()
        sha = f"git {st['sha'][:12]}" + (" with uncommitted changes" if st.get("dirty") else "") if st.get("sha") else st["from"]
        typer.echo(f"cnn-bench {bench.__version__} ({sha})")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the kit's version and git sha, then exit")
    ] = False,
) -> None:
    """cnn-bench host CLI."""


@data_app.command("fetch", epilog="Example: python orchestrate.py data fetch cifar10 --data-dir data")
def data_fetch(
    name: Annotated[str, typer.Argument(help="dataset to fetch (see `data list`)")],
    data_dir: Annotated[Path | None, typer.Option(help="default $KIT_DATA_DIR or ./data")] = None,
    mirror: Annotated[list[str] | None, typer.Option(help="base URL to fetch from (repeatable)")] = None,
    allow_http: Annotated[bool, typer.Option(help="accept plain http:// mirrors (files are SHA-256 checked either way)")] = False,
) -> None:
    """Download a dataset's files, verify SHA-256, and rename them into place."""
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    from bench.data import fetch_dataset, resolve_data_dir

    root = resolve_data_dir(data_dir)
    try:
        with Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn()) as progress:
            paths = fetch_dataset(name, data_dir, tuple(mirror) if mirror else None, progress=progress, allow_http=allow_http)
    except KitError as err:
        fail(err)
    typer.echo(f"{len(paths)} file{'' if len(paths) == 1 else 's'} verified in {root / name}")


@data_app.command("synth", epilog="Example: python orchestrate.py data synth cifar10 --n-train 600 --n-test 120")
def data_synth(
    name: Annotated[str, typer.Argument(help="dataset whose synthetic set to write (see `data list`)")],
    data_dir: Annotated[Path | None, typer.Option(help="default $KIT_DATA_DIR or ./data")] = None,
    n_train: Annotated[int | None, typer.Option(help="training images (at least 10; default: the dataset's)")] = None,
    n_test: Annotated[int | None, typer.Option(help="test images (at least 10; default: the dataset's)")] = None,
    seed: Annotated[int, typer.Option(help="the same seed and sizes give the same bytes")] = 0,
) -> None:
    """Write a synthetic, learnable set in the dataset's official format to <data dir>/<name>-synthetic/."""
    import inspect

    from bench.data import SYNTHESIZERS, synthesize_dataset

    sizes = {k: v for k, v in (("n_train", n_train), ("n_test", n_test)) if v is not None}
    if name in SYNTHESIZERS:  # a generator sized in other terms (classes, images per class) takes its defaults
        mod, fn = SYNTHESIZERS[name]
        takes = inspect.signature(getattr(__import__(mod, fromlist=[fn]), fn)).parameters
        if [k for k in sizes if k not in takes]:
            usage(
                f"{name}'s synthetic set is not sized by --n-train/--n-test (its generator takes: {', '.join(list(takes)[1:])})"
            )
    try:
        path = synthesize_dataset(name, data_dir, seed=seed, **sizes)
    except KitError as err:
        fail(err)
    size = path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    typer.echo(f"wrote {path} ({size / 1e6:.1f} MB; synthetic, seed {seed}: not the real {name})")


@data_app.command("list", epilog="Example: python orchestrate.py data list --data-dir /path/to/datasets")
def data_list(
    data_dir: Annotated[Path | None, typer.Option(help="default $KIT_DATA_DIR or ./data")] = None,
) -> None:
    """The datasets the kit can fetch or synthesize: which the data dir holds, which a run left in the cache."""
    from bench.core.cache import existing_cache_dir
    from bench.data import FETCHERS, SYNTHESIZERS, cached, present, resolve_data_dir, synthetic_name

    root, cache = resolve_data_dir(data_dir), existing_cache_dir()
    have = present(root)
    rows = [(n, f"not present (`data fetch {n}`)") for n in FETCHERS]
    for n in SYNTHESIZERS:
        sets = cached(n)
        more = f" and {len(sets) - 1} other size(s)" if len(sets) > 1 else ""
        where = f"in the cache dir: {sets[0].relative_to(cache) if cache else sets[0]}{more}" if sets else ""
        rows.append((synthetic_name(n), where or f"not present (`data synth {n}`)"))
    width = max(len(name) for name, _ in rows)
    for name, absent in rows:
        typer.echo(f"{name:<{width}}  {'present in ' + str(root / name) if name in have else absent}")
    typer.echo(f"data dir: {root}")
    typer.echo(f"cache dir: {cache or 'none yet'} (KIT_CACHE_DIR): a run makes a synthetic set there when the data dir has none")


# ---------------------------------------------------------------------------- the run request's options
# `run`, `all` and `plan` take the fields of RunOptions as options, declared once here:
# `@request_options` adds them to a command and hands it one RunOptions. Adding an option is one
# field (and a RunRequest field where it reaches the bench side); `plan` takes those PLAN_TAKES names.
SEQ = "Until decided (a 95% confidence sequence per comparison)"
DataOpt = Annotated[str | None, typer.Option(help="dir holding the datasets (one subdir each); default $KIT_DATA_DIR or ./data")]
RepeatsOpt = Annotated[
    int | None,
    typer.Option(help="fresh-process repeats of every cell, interleaved across cells (default: 1 for smoke, else 3)"),
]
_PROFILE = (
    "auto (with a GPU here: answer; on a CPU alone each study's quick choice), smoke (a wiring check), "
    "default (the seeds' setups), full, answer (every study's comparisons, the same work on every platform)"
)
_SCHEDULE = "sequential: one cell after another; interleaved: every cell's steps in turn; per-device: a cell per GPU"
_LABEL = "this run's label in every table and plot (recorded in system.json; default: the results dir's name)"
_UNTIL = "after the first rounds, add rounds until each comparison is decided"


@dataclass(frozen=True)
class RunOptions:
    """The shared options as one command line gave them (a command that takes fewer: the defaults)."""

    study: Annotated[list[str] | None, typer.Option("--study", "-s", help="study to run (repeatable; default: all)")] = None
    profile: Annotated[Profile, typer.Option(help=_PROFILE)] = Profile.auto
    set_: Annotated[list[str] | None, typer.Option("--set", help="key=value or study.key=value (repeatable)")] = None
    only: Annotated[list[str] | None, typer.Option(help="key=value: keep only matching cells (repeatable)")] = None
    schedule: Annotated[Schedule, typer.Option(help=_SCHEDULE)] = Schedule.sequential
    runtime: Annotated[Runtime, typer.Option(help="auto: containers when a Docker engine answers, else native")] = Runtime.auto
    data_dir: DataOpt = None
    out: Annotated[Path | None, typer.Option(help="results dir for this host (default results/<host>)")] = None
    rerun: Annotated[bool, typer.Option(help="rerun cells already done")] = False
    timeout_s: Annotated[float | None, typer.Option(help="per-cell time limit (s)")] = None
    repeats: RepeatsOpt = None
    label: Annotated[str | None, typer.Option(help=_LABEL)] = None
    ca_cert: Annotated[Path | None, typer.Option(help="CA bundle for pip inside image builds (a BuildKit secret)")] = None
    until_decided: Annotated[bool, typer.Option("--until-decided", rich_help_panel=SEQ, help=_UNTIL)] = False
    max_repeats: Annotated[int | None, typer.Option(rich_help_panel=SEQ, help="rounds a comparison may reach (default 20)")] = (
        None
    )
    budget: Annotated[str | None, typer.Option(rich_help_panel=SEQ, help="time for the added rounds: 15m, 900s, 1h")] = None
    target_width: Annotated[
        float | None, typer.Option(rich_help_panel=SEQ, help="also stop at (hi - lo) / median <= this (0.05)")
    ] = None


# a job dir holds what to run and where the data is, not how or where it runs
PLAN_TAKES = ("study", "profile", "set_", "only", "data_dir", "repeats")


def request_options(plan: bool = False, after: dict[str, str] | None = None) -> Callable[[Callable], Callable]:
    """Give a command the shared options (RunOptions' fields; with PLAN: PLAN_TAKES): the command declares its
    own parameters and one `opts: RunOptions`, which it receives built from the shared ones. Its
    own arguments come first, its own options after the shared ones, or after the one AFTER names."""
    kinds = get_type_hints(RunOptions, include_extras=True)
    shared = [f for f in fields(RunOptions) if f.name in PLAN_TAKES or not plan]
    names, place = {f.name for f in shared}, after or {}

    def wrap(fn: Callable) -> Callable:
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"]
        key = inspect.Parameter.KEYWORD_ONLY
        params = [inspect.Parameter(f.name, key, default=f.default, annotation=kinds[f.name]) for f in shared]
        free = [p for p in own if p.name not in place]
        params = [p for p in free if _is_argument(p)] + params + [p for p in free if not _is_argument(p)]
        for p in [p for p in own if p.name in place]:
            params.insert(next(i for i, q in enumerate(params) if q.name == place[p.name]) + 1, p)

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            opts = RunOptions(**{k: v for k, v in kw.items() if k in names})
            return fn(opts=opts, **{k: v for k, v in kw.items() if k not in names})

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


def _is_argument(p: inspect.Parameter) -> bool:
    return any(isinstance(m, typer.models.ArgumentInfo) for m in getattr(p.annotation, "__metadata__", ()))


def _request(opts: RunOptions, platforms: list[str] | None = None, out: Path | None = None) -> RunRequest:
    """OPTS as one RunRequest on PLATFORMS, its results in OUT (default: --out, else default_out());
    a bad value is one usage line (exit 2) before any work."""
    from bench.core.registry import select
    from bench.core.request import RunRequest

    try:
        req = RunRequest(
            studies=tuple(opts.study or ()),
            platforms=tuple(platforms or ()),
            profile=opts.profile.value,
            sets=tuple(opts.set_ or ()),
            only=tuple(opts.only or ()),
            schedule=opts.schedule.value,
            rerun=opts.rerun,
            timeout_s=opts.timeout_s,
            repeats=opts.repeats,
            label=opts.label,
            until_decided=opts.until_decided,
            max_repeats=opts.max_repeats,
            budget=opts.budget,
            target_width=opts.target_width,
            out=out or opts.out or default_out(),
            data_dir=opts.data_dir,
        )
        select(list(req.studies))  # an unknown study is one line here, before any work
    except KitError as err:
        usage(str(err))
    return req


def _interrupted(err: KeyboardInterrupt, what: str) -> NoReturn:
    """One line for a run stopped by Ctrl-C, SIGTERM or SIGHUP; exit 128 + the signal."""
    from host.containers import exit_code, signal_name

    typer.echo(f"interrupted by {signal_name(err)}: {what}; the same command again resumes", err=True)
    raise typer.Exit(exit_code(err))


def _execute(
    req: RunRequest,
    runtime: Runtime,
    ca_cert: Path | None,
    image: str | None = None,
    adapt: Callable[[RunRequest, list[str], bool], RunRequest] | None = None,
) -> tuple[dict, int]:
    """Run REQ on each of its platforms (none named: every one) this host can run, natively or in
    its image (IMAGE: that one, unbuilt). ADAPT(req, platforms to run, in containers) may change the
    request once those are known (`all`: the answer's plan). Returns (platform notes for
    platforms.json, exit code)."""
    from bench.core.request import PLATFORMS
    from host import plan

    platforms, data_dir, out = list(req.platforms), req.data_dir, req.paths.out
    try:
        root = plan.check_data_dir(data_dir)
        # every option, once, on the host, before any image is built or any cell runs
        plan.validate(req.replace(platforms=tuple(platforms or PLATFORMS)), root)
    except KitError as err:  # the options, the data dir, a dataset asked for by name: the command line
        usage(str(err))
    reason = plan.engine_reason() if runtime != Runtime.native else "--runtime native"
    if runtime == Runtime.docker and reason:
        fail(reason)
    use_docker = reason is None
    if runtime == Runtime.auto:
        typer.echo("runtime: containers (a Docker engine answers)" if use_docker else f"runtime: native ({reason})")
    if root:
        from bench.data import present

        have = present(root)
        typer.echo(f"data: {root} (holds {', '.join(n + '/' for n in have) if have else 'no dataset: the embedded defaults'})")
    else:
        typer.echo("data: none here; the studies use their embedded defaults")
    can = plan.container_platforms() if use_docker else plan.native_platforms()
    wanted = platforms or list(PLATFORMS)
    notes: dict = {}
    for p in wanted:
        if can[p]:
            typer.echo(f"platform {p}: skipped ({can[p]})")
            notes[p] = {"status": "skipped", "reason": can[p], "runtime": "container" if use_docker else "native"}
    todo = [p for p in wanted if not can[p]]
    if platforms and not todo:
        fail(f"this host cannot run {', '.join(platforms)}: " + "; ".join(f"{p}: {can[p]}" for p in platforms))
    if adapt is not None:
        try:
            req = adapt(req, todo, use_docker)
        except KitError as err:
            usage(str(err))
    code = 0
    if not use_docker:
        try:
            code = plan.run_native(req.replace(platforms=tuple(todo), out=out))
        except KitError as err:
            fail(err)
        except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP: the matrix settled its cells
            _interrupted(err, "the matrix stopped")
        from bench.run.matrix import PAUSED

        for p in todo:
            notes[p] = {
                "status": "ran" if code == 0 else "paused" if code == PAUSED else "errors",
                "runtime": "native",
                "reason": ""
                if code == 0
                else "stopped at --stop-after; the same command resumes"
                if code == PAUSED
                else f"matrix exit code {code}: see the cells' log.txt",
            }
        return notes, code
    from host import engine, images

    if ca_cert is None:  # pip in the build may sit behind a proxy CA: hand it the system bundle (a secret, never a layer)
        sys_ca = Path(os.environ.get("KIT_CA_CERT", "/etc/ssl/certs/ca-certificates.crt"))
        ca_cert = sys_ca if sys_ca.is_file() else None
    import tempfile

    from bench.data import data_dir_named

    named = data_dir_named(data_dir)  # only a named dir must hold the data; else the image may fall back
    if root is None:  # nothing to mount: an empty dir (the image carries the embedded defaults)
        root = Path(tempfile.mkdtemp(prefix="cnn-bench-no-data-"))
        root.chmod(0o755)  # readable by the container's user
    from host.containers import stop_signals

    for p in todo:
        try:
            if image is None:
                with stop_signals():  # SIGTERM, SIGHUP: as Ctrl-C (a build's own process ends with it)
                    images.build(p, ca_cert=ca_cert)  # a no-op when the lock and bench/ are unchanged
            inside = req.replace(platforms=(p,), out=Path("/results"), data_dir="/data" if named else None)
            rc, image_id = engine.run(p, root, out, inside.matrix_argv(), image=image)
            typer.echo(f"container {p}: image {image_id[:19]} exit code {rc}")
            notes[p] = {
                "status": "ran" if rc == 0 else "errors",
                "runtime": "container",
                "image_id": image_id,
                "reason": "" if rc == 0 else f"container exit code {rc}",
            }
        except KitError as err:
            typer.echo(f"platform {p}: error: {err}", err=True)
            notes[p] = {"status": "error", "runtime": "container", "reason": str(err)}
            rc = 1
        except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP: engine.run stopped and removed the container
            _interrupted(err, f"the {p} container was stopped and removed")
        code = max(code, rc)
    return notes, code


@app.command(
    rich_help_panel=RUN, epilog="Example: python orchestrate.py run cpu --study mnist-cnn --profile smoke --runtime native"
)
@request_options()
def run(
    opts: RunOptions,
    platforms: Annotated[list[str] | None, typer.Argument(help="cpu | cuda | mps (default: every one this host can run)")] = None,
    image: Annotated[
        str | None,
        typer.Option(help="run in this image (a tag or id, e.g. one pulled from a registry) instead of building the kit's"),
    ] = None,
) -> None:
    """Run the studies' matrices on PLATFORMS, in their images or natively."""
    req = _request(opts, platforms)
    if image is not None and (opts.runtime == Runtime.native or len(platforms or []) != 1):
        usage("--image runs one platform in a container: name it (run cpu --image TAG) and leave --runtime native out")
    _check_free(req.paths.out)
    notes, code = _execute(req, opts.runtime, opts.ca_cert, image)
    _settle(req.paths.out, notes)
    raise typer.Exit(code)


PriceOpt = Annotated[
    list[str] | None,
    typer.Option("--price", help="DEVICE=USD_PER_HOUR, matched to a device name by substring (repeatable; wins over --prices)"),
]
PricesOpt = Annotated[Path | None, typer.Option(help="a TOML file of prices (docs/prices-example.toml shows the shape)")]
KwhOpt = Annotated[str | None, typer.Option(help="USD per kWh: the energy measured per sample at that price, added to the cost")]


def _prices(price: list[str] | None, prices: Path | None, kwh: str | None):  # -> host.prices.Prices | None
    from host.prices import load

    return load(price, prices, kwh)


def _report(dirs: list[Path], out: Path, context: list[Path] | None = None, prices=None) -> dict:
    from bench.core.resultset import holding_results
    from bench.core.text import term
    from host.progress import stages
    from host.report import build_report

    try:
        dirs, skipped = holding_results(dirs)
        for line in skipped:
            typer.echo(term(line), err=True)
        with stages("report") as say:
            info = build_report(dirs, out, context, prices, say)
    except KitError as err:
        fail(err)
    for line in info["skipped"]:
        typer.echo(term(line), err=True)
    for line in (info.get("prices") or {}).get("problems", []):
        typer.echo(f"warning: {term(line)}", err=True)
    for name, s in info["studies"].items():
        typer.echo(
            f"{term(name)}: {s['cells']} cells, {s.get('ok', 0)} ok"
            + (f", not run: {len(s['not_run'])}" if s.get("not_run") else "")
        )
    typer.echo(
        f"report: {info['report']}"
        + (
            " (the kit's earlier report there replaced, every other file kept; another --out keeps both reports)"
            if info.get("replaced")
            else ""
        )
    )
    return info


def _reap_orphans(out: Path) -> bool:
    """Stop and remove this host's orphan kit containers that mount OUT (host/containers.py), saying
    so; False where none was removed or no Docker engine answers (a native run's lock is held by a
    live process)."""
    try:
        from host import containers, images

        client = images.docker_client(timeout=10)
        removed, _ = containers.reap(client, holding=out)
    except Exception:  # noqa: BLE001 - no engine, no docker package: nothing of ours to reap
        return False
    for line in removed:  # only what was done: a refusal stays one line
        print(line, file=sys.stderr)
    return bool(removed)


def _wait_free(out: Path, within_s: float = 30.0) -> None:
    """Until OUT's lock is free (a reaped container's process lets go of it as the kernel tears it
    down), at most WITHIN_S; then check_free's one line if it is still held."""
    from bench.core.lock import check_free, holder

    until = time.monotonic() + within_s
    while holder(out) is not None and time.monotonic() < until:
        time.sleep(0.2)
    check_free(out)


def _check_free(
    out: Path, report_dir: Path | None = None, context: list[Path] | None = None, label: str = "--report-dir"
) -> None:
    """Before any work or write of `run`, `all` or `reference`: one line when OUT cannot be written,
    when another run holds OUT's lock (bench/core/lock.py: this run would write nothing, so it starts
    nothing), or when REPORT_DIR cannot take the report of OUT (host/outdir.py; LABEL names it);
    creates and writes nothing."""
    from bench.cli import check_writable
    from bench.core.lock import check_free
    from host.report import check_out

    check_writable(out)  # an unwritable results dir: one line here, not one from the matrix and one from here
    try:
        try:
            check_free(out)
        except KitError:
            # an orphan container (its owner killed) holds the lock: reaped, it lets go, and this run starts
            if not _reap_orphans(out):
                raise
            _wait_free(out)
        if report_dir is not None:
            check_out(report_dir, [out, *(context or [])], label)
    except KitError as err:
        fail(err)


def _settle(out: Path, notes: dict, report_dir: Path | None = None, context: list[Path] | None = None) -> None:
    """A run's platforms.json (and the report of OUT into REPORT_DIR), written while this process
    holds OUT's lock: a run that another run holds the lock of writes nothing. A write that fails
    is one line naming the path and the cause."""
    from bench.core.lock import results_lock
    from bench.core.rows import write_json

    path = out / "platforms.json"
    try:
        with results_lock(out):
            write_json(path, notes)
            if report_dir is not None:
                _report([out], report_dir, context)
    except KitError as err:
        fail(err)
    except OSError as err:
        fail(f"cannot write {err.filename or path} ({err.strerror or err}): free space or choose another --out")


@app.command(rich_help_panel=RESULTS, epilog="Example: python orchestrate.py report results/myhost results/reference/*")
def report(
    dirs: Annotated[list[Path], typer.Argument(help="result dirs, from any hosts")],
    out: Annotated[Path, typer.Option(help="where REPORT.md, the tables and the plots go")] = Path("results/report"),
    context: Annotated[
        list[Path] | None,
        typer.Option(help="result dirs that answer the seeds' claims only against DIRS' own cells (repeatable)"),
    ] = None,
    price: PriceOpt = None,
    prices: PricesOpt = None,
    kwh_price: KwhOpt = None,
) -> None:
    """Merge any number of result dirs into REPORT.md: one section per study, with tables and plots."""
    _report(list(dirs), out, list(context or []), _prices(price, prices, kwh_price))
    if context:  # DIRS are this machine's: its answer where the command ends, as `all` prints it
        from host.answer_lines import lines as answer_lines

        for text in answer_lines(out):
            typer.echo(text)


@app.command(
    rich_help_panel=RESULTS,
    epilog="Example: python orchestrate.py worth results/vm results/reference/* --samples 1e6 --prices docs/prices-example.toml",
)
def worth(
    dirs: Annotated[list[Path], typer.Argument(help="result dirs, from any hosts")],
    samples: Annotated[float, typer.Option(help="the amount of work: training samples (1e6 = a million)")] = 1e6,
    study: Annotated[str | None, typer.Option(help="only this study's comparisons")] = None,
    this: Annotated[
        list[Path] | None,
        typer.Option(
            "--this",
            help="this machine's results (repeatable; default: the one DIR outside results/reference/, where exactly "
            "one is): its answers first, the other dirs paired only with it there",
        ),
    ] = None,
    price: PriceOpt = None,
    prices: PricesOpt = None,
    kwh_price: KwhOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print every number as JSON")] = False,
) -> None:
    """For N samples of each GPU-over-CPU comparison: time, energy and cost on both devices, and which wins;
    this machine's comparisons first."""
    import json
    import math

    from bench.core.answers import judge_all
    from bench.core.registry import studies
    from bench.core.resultset import collect, holding_results
    from bench.core.text import term
    from bench.core.worth import SAMPLES_MAX, cell_device_name, worth_all
    from host import worth as hw
    from host.report import REFERENCES, _platform, context_cells

    if not math.isfinite(samples) or not 1 <= samples <= SAMPLES_MAX:
        usage(f"--samples {samples:g}: give a number of training samples from 1 to {SAMPLES_MAX:g}")
    registry = studies()
    if study is not None and study not in registry:
        usage(f"unknown study {study!r}: choose {', '.join(registry)}")
    named = list(dirs) + [t for t in this or [] if t.resolve() not in {d.resolve() for d in dirs}]
    try:
        kept, skipped = holding_results(named)
        for line in skipped:
            typer.echo(term(line), err=True)
        mine_dirs, other_dirs = hw.this_dirs(kept, this, REFERENCES)
        if not mine_dirs or not other_dirs:  # one machine's dirs only, or none named: every dir is equal
            cells, _, _ = collect(kept)
            beside: list = []
        else:
            cells, _, _ = collect(mine_dirs)
            beside = context_cells(other_dirs, cells)  # marked: paired only with this machine's cells
    except KitError as err:
        fail(err)
    here = bool(mine_dirs and beside)
    p = _prices(price, prices, kwh_price)
    if p is not None:
        p = p.for_devices({cell_device_name(c, _platform(registry, c)) for c in cells + beside})
        for line in p.problems:
            typer.echo(f"warning: {term(line)}", err=True)

    def primary(answers: list) -> list:
        got = [w for w in worth_all(registry, answers, p) if w.answer.primary]
        return [w for w in got if study is None or w.answer.study == study]

    # this machine's answers (each holds a side of its cells), then the others' among themselves
    found = primary(judge_all(registry, cells + beside))
    got = [hw.for_work(w, samples, here) for w in found]
    if here:
        if not found:  # one line: why none of this machine's cells form a GPU-over-CPU answer
            typer.echo(term(hw.no_answer_line(registry, cells, beside, study)), err=json_out)
        for c in beside:
            c.context = False  # read as equals now: the answers between the other dirs
        found = primary(judge_all(registry, beside))
        got += [hw.for_work(w, samples) for w in found]
    if not got:
        fail("no GPU-over-CPU comparison can be formed from these results (a study's CPU and GPU sides must both have run)")
    if json_out:
        typer.echo(json.dumps(got, indent=1, default=str))
        return
    for g in got:
        typer.echo(hw.work_text(g))


StopAfterOpt = Annotated[
    str | None,
    typer.Option(
        help="end this call cleanly before this time (e.g. 8m): no cell or round that would end later starts; "
        "the same command resumes (exit code 75 while work is left)"
    ),
]


@app.command("all", rich_help_panel=RUN, epilog="Example: python orchestrate.py all --profile smoke --schedule interleaved")
@request_options(after={"report_dir": "out", "references": "ca_cert"})
def all_cmd(
    opts: RunOptions,
    report_dir: Annotated[
        Path | None,
        typer.Option(help="where the report goes (default <out>/report with --out or $KIT_RESULTS_DIR, else results/report)"),
    ] = None,
    references: Annotated[
        bool,
        typer.Option(help="answer the seeds' claims also against the committed references (this CPU against their GPUs)"),
    ] = True,
    stop_after: StopAfterOpt = None,
) -> None:
    """Run every platform this host can run, then write the report. With a GPU here and no --profile:
    the answer first (every study's GPU-vs-CPU comparisons, the same work on both sides), then rounds
    until decided within --budget, the report rewritten after each (host/answer_plan.py)."""
    from host import answer_plan
    from host.report import REFERENCES

    budget = None if opts.until_decided else opts.budget  # the answer's: the whole run (host/answer_plan.py)
    try:
        if budget is not None:
            parse_budget(budget)
        if stop_after is not None:
            parse_budget(stop_after, "--stop-after")
    except KitError as err:
        usage(str(err))
    req = _request(replace(opts, budget=None) if budget is not None else opts).replace(stop_after=stop_after)
    out = req.paths.out
    context = sorted(p for p in REFERENCES.iterdir() if p.is_dir()) if references and REFERENCES.is_dir() else []
    # the report of a results dir someone named (--out, $KIT_RESULTS_DIR) goes inside it: one report dir per run
    named = opts.out is not None or bool(os.environ.get("KIT_RESULTS_DIR"))
    where = report_dir or (out / "report" if named else Path("results/report"))
    _check_free(out, where, context)  # a run another holds the lock of writes nothing, not even platforms.json

    def answer_first(r: RunRequest, todo: list[str], containers: bool) -> RunRequest:
        got = answer_plan.plan(r, todo, containers, answer_plan.report_argv(out, where, context), budget)
        if got is None and budget is not None:
            raise UsageError(
                f"--budget {budget}: the answer adds rounds where a GPU runs beside the CPU and no --profile is named "
                f"(here: {', '.join(todo)}, profile {r.profile}); add --until-decided to add rounds to this run"
            )
        if got is None:
            if r.profile == "auto" and "cpu" in todo and not any(p != "cpu" for p in todo):
                typer.echo(
                    "answer: only cpu runs here, so this host forms no GPU-vs-CPU comparison of its own; the report "
                    "pairs this CPU with the committed references where they ran the same work and data, and says "
                    "what to run where they did not"
                )
            return r
        for line in answer_plan.lines(got):
            typer.echo(line)
        return got.request

    try:
        notes, code = _execute(req, opts.runtime, opts.ca_cert, adapt=answer_first)
    except typer.Exit as stop:  # Ctrl-C, SIGTERM: the report of what finished, then the same exit
        if stop.exit_code and stop.exit_code >= 128 and any(out.glob("*/*/rows.jsonl")):
            from bench.core.lock import results_lock
            from bench.core.text import term

            try:
                with results_lock(out):  # another run took the dir meanwhile: no report into it
                    _report([out], where, context)
            except KitError as err:
                typer.echo(f"error: {term(err)}", err=True)
        raise
    _settle(out, notes, where, context)
    from host.answer_lines import lines as answer_lines

    # the answer where the run ends, not only on the page; with no references beside, every row is this run's
    for text in answer_lines(where, all_mine=not context):
        typer.echo(text)
    raise typer.Exit(code)


@app.command(rich_help_panel=RUN, epilog="Example: python orchestrate.py noise --procs 10")
def noise(
    procs: Annotated[int, typer.Option(min=2, max=100, help="fresh probe processes per device")] = 10,
    gpu: Annotated[bool, typer.Option(help="also probe the GPU where NVML lists one")] = True,
    json_: Annotated[bool, typer.Option("--json", help="print every figure as JSON")] = False,
) -> None:
    """How noisy this host is for a comparison: a fixed probe's process-to-process spread, what drives it
    (governor, turbo, steal, other processes; GPU clocks, persistence, throttling) and the smallest
    difference it resolves at 3, 6 and 10 repeats."""
    from bench.measure import noisecheck

    d = noisecheck.check(procs, gpu)
    if json_:
        import json

        typer.echo(json.dumps(d, indent=2, default=str))
        return
    for line in noisecheck.lines(d):
        typer.echo(line)


@app.command(rich_help_panel=RESULTS, epilog="Example: python orchestrate.py export results/myhost --out results/myhost.tar.gz")
def export(
    dirs: Annotated[list[Path], typer.Argument(help="result dirs to bundle, from any hosts")],
    out: Annotated[Path, typer.Option(help="the bundle to write (a .tar.gz)")] = Path("results/cnn-bench-results.tar.gz"),
) -> None:
    """Bundle result dirs to share: rows, system.json, the report, the environment, the commands, a MANIFEST."""
    from bench.core.resultset import holding_results
    from bench.core.text import term
    from host.export import export as export_bundle
    from host.progress import stages

    if out == Path("results/cnn-bench-results.tar.gz"):  # the default: results/ is made by a run, else here
        out.parent.mkdir(exist_ok=True)
    try:
        kept, skipped = holding_results(list(dirs))
        for line in skipped:
            typer.echo(term(line), err=True)
        with stages("export") as say:
            info = export_bundle(kept, out, say=say)
    except KitError as err:
        fail(err)
    except OSError as err:
        fail(f"cannot write {out}: {err.strerror or err}")
    typer.echo(f"bundle: {info['path']} ({info['cells']} cells, {info['files']} files, {info['bytes'] / 1e6:.1f} MB)")


class RefPreset(StrEnum):
    cpu = "cpu"
    gpu = "gpu"
    gpu_full = "gpu-full"
    gpu_cuda = "gpu-cuda"


@app.command(
    "reference-reports",
    rich_help_panel=RESULTS,
    epilog="Example: python orchestrate.py reference-reports --only H200",
)
def reference_reports(
    write: Annotated[bool, typer.Option("--write", help="record the verdicts in results/reference/tallies.json")] = False,
    only: Annotated[str | None, typer.Option(help="only the reports whose out starts with this")] = None,
    out_root: Annotated[
        Path | None, typer.Option(help="render under this folder instead of results/reference/ (the same relative outs)")
    ] = None,
    drop_traces: Annotated[
        bool, typer.Option("--drop-traces", help="first replace the references' profiler traces by their sha256 and size")
    ] = False,
) -> None:
    """Render the committed references' reports (results/reference/reports.toml) with today's code and hold
    each claim's verdict to results/reference/tallies.json: exit 1 where a report no longer renders or a verdict
    moved (--write records them)."""
    import time

    from host import reference_reports as rr

    t0 = time.monotonic()
    try:
        if drop_traces:
            n, freed = rr.drop_traces()
            typer.echo(f"dropped {n} trace(s), {freed / 2**20:.1f} MiB: each one's sha256 and size kept beside it")
        got = rr.render(out_root=out_root, only=only, say=typer.echo)
        if write:
            path = rr.write_tallies({k: v for k, v in got.items() if "error" not in v})
            typer.echo(f"wrote {path}")
        problems = rr.check(got, rr.read_tallies(), named=rr.named_outs() if only is None else None)
    except KitError as err:
        fail(err)
    for out, entry in got.items():
        counts = ", ".join(f"{n} {v}" for v, n in entry.get("counts", {}).items())
        typer.echo(f"  {out}: {counts or 'no claims'}" if "error" not in entry else f"  {out}: ERROR")
    for line in problems:
        typer.echo(f"error: {line}", err=True)
    typer.echo(f"{len(got)} report(s) in {time.monotonic() - t0:.0f} s; {len(problems)} problem(s)")
    raise typer.Exit(1 if problems else 0)


@app.command(rich_help_panel=RUN, epilog="Example: python orchestrate.py reference cpu --data-dir /path/to/datasets")
def reference(
    preset: Annotated[RefPreset, typer.Argument(help="cpu | gpu | gpu-full | gpu-cuda (host/reference.py says what each runs)")],
    data_dir: DataOpt = None,
    out: Annotated[Path | None, typer.Option(help="default results/reference/<GPU name or cpu-<cores>core-<family>>")] = None,
    repeats: RepeatsOpt = None,
    allow_dirty: Annotated[bool, typer.Option(help="run from an unclean tree (the reports mark it; not for committing)")] = False,
    stop_after: StopAfterOpt = None,
    study: Annotated[
        list[str] | None,
        typer.Option(
            "--study", "-s", help="only this study's part of the preset (repeatable), into <out>-<study>: a reference of its own"
        ),
    ] = None,
) -> None:
    """Remake a reference result set the one way it is made: fixed preset, real data, native; the gpu
    preset is the GPU host's answer (host/reference.py)."""
    from bench.core.request import parse_budget
    from host import answer_plan, plan
    from host.reference import PRESETS, check_clean, check_resume, out_dir, part

    try:
        p = part(PRESETS[preset.value], study)
        if stop_after is not None:
            parse_budget(stop_after, "--stop-after")
        sha = None if allow_dirty else check_clean()
        dest = out_dir(preset.value, out, study)
        check_resume(dest)
    except KitError as err:
        fail(err)
    if plan.check_data_dir(data_dir) is None:
        usage("a reference runs on real data: pass --data-dir (the dir holding mnist/) or set KIT_DATA_DIR")
    n = repeats if repeats is not None else p.repeats
    seq = ""
    if p.until_decided:
        how = f"rounds to {answer_plan.ROUNDS} for each comparison" if p.profile == "auto" else "until decided"
        seq = f" then {how} (at most {p.max_repeats} rounds, budget {p.budget})"
    smaller = f"; smaller than the seeds' (both sides): {', '.join(p.smaller_sets)}" if p.smaller_sets else ""
    typer.echo(
        f"reference {preset.value}{''.join(f' --study {x}' for x in p.studies or ()) if study else ''}: {p.about}; {n} repeat{'s' if n != 1 else ''}{seq}, {p.schedule}, native{smaller} -> {dest}"
        + (f" (commit {sha[:12]})" if sha else "")
    )
    opts = RunOptions(
        study=list(p.studies) if p.studies is not None else None,
        profile=Profile(p.profile),
        set_=list(p.all_sets),
        schedule=Schedule(p.schedule),
        data_dir=data_dir,
        repeats=n,
    )
    answer = p.profile == "auto"
    if p.until_decided and not answer:
        opts = replace(opts, until_decided=True, max_repeats=p.max_repeats, budget=p.budget)
    req = _request(opts, list(p.platforms), dest).replace(stop_after=stop_after)
    where = dest / "report"

    def answer_first(r: RunRequest, todo: list[str], containers: bool) -> RunRequest:
        got = answer_plan.plan(r, todo, containers, answer_plan.report_argv(dest, where, []), p.budget, p.rounds_first)
        if got is None:
            raise KitError(f"reference {preset.value} pairs a GPU with this host's CPU: here only {', '.join(todo)} runs")
        for line in answer_plan.lines(got):
            typer.echo(line)
        return got.request.replace(max_repeats=p.max_repeats)

    _check_free(dest, where, label="the reference's report dir")
    notes, code = _execute(req, Runtime.native, None, adapt=answer_first if answer else None)
    _settle(dest, notes, where)
    raise typer.Exit(code)


@app.command(
    rich_help_panel=RESULTS, epilog="Example: python orchestrate.py compare results/hostA results/hostB --fail-on-regression 5%"
)
def compare(
    a: Annotated[Path | None, typer.Argument(help="result dir A (the baseline side: another host, commit or image)")] = None,
    b: Annotated[Path | None, typer.Argument(help="result dir B (judged against A)")] = None,
    fail_on_regression: Annotated[
        str | None, typer.Option(help="exit 1 when a configuration got slower by more than this (e.g. 5% or 0.05)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="write compare.json and compare.md into this dir")] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="print the comparison as JSON (every number) instead of the table")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="list what only one side holds, and every flag")] = False,
    against_history: Annotated[
        Path | None,
        typer.Option(help="instead of A and B: hold this result dir to its configurations' past runs in the history"),
    ] = None,
    history: Annotated[Path | None, typer.Option(help="--against-history: the history store (default results/history)")] = None,
) -> None:
    """Two result sets side by side per configuration (or a run against its history): a summary line, then B/A with its 95% CI."""
    from host import compare as cmp

    try:
        threshold = cmp.parse_threshold(fail_on_regression) if fail_on_regression else cmp.DEFAULT_THRESHOLD
        if against_history is not None:
            if a is not None or b is not None:
                raise UsageError("compare takes A and B, or --against-history DIR, not both")
            from host.history import DEFAULT_STORE
            from host.history_compare import compare_history

            res = compare_history(against_history, history or DEFAULT_STORE, threshold)
        elif a is None or b is None:
            raise UsageError("compare needs two result dirs, A and B (or --against-history DIR)")
        else:
            res = cmp.compare(a, b, threshold)
        from bench.core.text import term

        for line in res.get("skipped", []):
            typer.echo(term(line), err=True)
        if json_:
            import json

            typer.echo(json.dumps(res, indent=2, default=str))
        else:
            import shutil

            width = min(cmp.WIDTH, shutil.get_terminal_size((cmp.WIDTH, 24)).columns) if sys.stdout.isatty() else cmp.WIDTH
            typer.echo(cmp.text(res, verbose, width), nl=False)
        if out is not None:
            paths = cmp.write(res, out)
            typer.echo("wrote " + ", ".join(map(str, paths)), err=json_)
    except KitError as err:
        fail(err)
    except OSError as err:
        fail(f"cannot write {out}: {err.strerror or err}")
    if fail_on_regression and res["flagged_slower"]:
        typer.echo(
            f"note: not failing on {len(res['flagged_slower'])} flagged configuration(s) that look slower: "
            "rerun them on a quiet machine",
            err=True,
        )
    if fail_on_regression and res["regressions"]:
        names = res["regressions"]
        line = f"error: regression beyond {threshold:.0%}: " + "; ".join(names)
        if len(line) > 120:  # the SLOWER line above lists every one
            line = (
                f"error: regression beyond {threshold:.0%} in {len(names)} configurations: {names[0]} and {len(names) - 1} more"
            )
        from bench.core.text import term

        typer.echo(term(line), err=True)
        raise typer.Exit(1)


class SpeedCheck(StrEnum):
    on = "on"
    median = "median"
    off = "off"


@app.command(rich_help_panel=RESULTS, epilog="Example: python orchestrate.py verify results/myhost --baseline cpu-2core-epyc")
def verify(
    dir: Annotated[list[Path], typer.Argument(help="result dir to check (with --make-baseline: the dirs to make a baseline of)")],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="baseline set to check against, by name or as its reference dir (results/reference/<name>); "
            "every configuration it holds must be present"
        ),
    ] = None,
    allow_unbaselined: Annotated[
        bool, typer.Option(help="list a cell with no baseline entry as `no baseline` instead of failing it")
    ] = False,
    make_baseline: Annotated[
        bool, typer.Option(help="write the DIRs' accuracies, loss curves and speeds as baseline set --name")
    ] = False,
    name: Annotated[str | None, typer.Option(help="--make-baseline: the set's name (default: DIR's name)")] = None,
    acc_margin: Annotated[float, typer.Option(help="--make-baseline: accuracy band = reference min-max +- this")] = 0.005,
    loss_rtol: Annotated[float, typer.Option(help="--make-baseline: relative tolerance per loss-curve point")] = 0.01,
    acc_band: Annotated[
        list[str] | None, typer.Option(help="--make-baseline: [STUDY=]LO-HI, a fixed accuracy band (repeatable)")
    ] = None,
    speed_floor: Annotated[
        float,
        typer.Option(help="--make-baseline: the smallest speed tolerance factor of the set (host/speed.py's rule)"),
    ] = 1.3,
    keep_other_classes: Annotated[
        bool,
        typer.Option(
            help="--make-baseline: replace only the set's entries of the machine classes (CPU, cores) the DIRs ran "
            "on and keep the rest: one set for every CPU that CI runs on"
        ),
    ] = False,
    baselines_dir: Annotated[Path | None, typer.Option(help="where the baseline files are")] = None,
    claims: Annotated[
        bool,
        typer.Option(
            "--claims",
            help="re-judge every seed claim on DIR beside the committed references' verdict; "
            "exit 1 where a verdict flips with both intervals clear of the threshold",
        ),
    ] = False,
    speed_peers: Annotated[
        list[Path] | None,
        typer.Option(
            help="with --speed median: another run of DIR's cells (repeatable); its figures join each "
            "configuration's median (verify it on its own for everything else)"
        ),
    ] = None,
    speed: Annotated[
        SpeedCheck,
        typer.Option(
            metavar="MODE",
            help="on: hold each cell's speed to the baseline of its machine class; median: hold each "
            "configuration's median over its repeats in DIR instead (a recheck with fresh repeats); off: skip",
        ),
    ] = SpeedCheck.on,
) -> None:
    """The reproducibility check: schema, provenance, completeness, equivalence, accuracy, loss and speed baselines."""
    from host import verify as ver

    if claims:
        _verify_claims(list(dir))
        return

    bdir = baselines_dir or ver.BASELINES_DIR
    try:
        if make_baseline:
            info = ver.make_baseline(dir, name, acc_margin, loss_rtol, acc_band, bdir, speed_floor, keep_other_classes)
            for w in info["written"]:
                nospeed = f" ({w['without_speed']} without a speed record)" if w["without_speed"] else ""
                typer.echo(f"baseline set {w['set']}: {w['entries']} entries{nospeed} in {w['path']}")
            return
        if len(dir) != 1:
            raise UsageError("verify checks one result dir at a time (several only with --make-baseline)")
        res = ver.verify(
            dir[0],
            baseline,
            not allow_unbaselined,
            bdir,
            with_speed=speed is not SpeedCheck.off,
            speed_median=speed is SpeedCheck.median,
            speed_peers=speed_peers,
        )
    except KitError as err:
        fail(err)
    except OSError as err:  # --make-baseline: each <study>.json is replaced whole or left as it was
        fail(
            f"verify: cannot write {err.filename or bdir} ({err.strerror or err}): that file is as it was; free space or choose another --baselines-dir"
        )
    from bench.core.text import term

    for line in res["skipped"]:
        typer.echo(term(line), err=True)
    for v in res["verdicts"]:
        typer.echo(term(v.line()))  # reasons from a foreign result dir: nothing the terminal acts on
    typer.echo(term(res["summary"]))
    if res["failed"]:
        raise typer.Exit(1)


def _verify_claims(dirs: list[Path]) -> None:
    from host.claimcheck import check
    from host.report import REFERENCES

    try:
        lines, flips = check(dirs, sorted(REFERENCES.iterdir()))
    except KitError as err:
        fail(err)
    for line in lines:
        typer.echo(line.text())
    same = sum(1 for x in lines if x.ours and x.ref and x.ours.verdict == x.ref.verdict)
    where = ", ".join(str(d) for d in dirs)
    typer.echo(f"{len(lines)} claims judged on {where}: {same} as the references judge them, {flips} flipped")
    if flips:
        raise typer.Exit(1)


# ---------------------------------------------------------------------------- history (host/history.py)
StoreOpt = Annotated[Path | None, typer.Option("--store", help="the history store (default results/history)")]
StudyOnly = Annotated[str | None, typer.Option("--study", help="only studies whose name contains this (any case)")]
MachineOnly = Annotated[str | None, typer.Option("--machine", help="only machine classes whose name contains this, e.g. H100")]
HostOnly = Annotated[str | None, typer.Option("--host", help="only cells measured on hosts whose name contains this")]


def _history_series(store: Path, study: str | None, machine: str | None, host: str | None) -> list:
    """The store's series of the cells the filters keep; with filters that keep nothing, one line and exit 1."""
    from host import history as hist

    only = hist.Only(study, machine, host)
    try:
        got = hist.series(store, only=only)
    except KitError as err:
        fail(err)
    if not got and only.text():
        fail(f"history: no series in {hist.db_path(store)} of cells with {only.text()}")
    return got


@history_app.command("add", epilog="Example: python orchestrate.py history add results/myhost --label nightly")
def history_add(
    dirs: Annotated[list[Path], typer.Argument(help="result dirs whose finished cells to append")],
    label: Annotated[str | None, typer.Option(help="name these runs (default: each run's own label)")] = None,
    store: StoreOpt = None,
) -> None:
    """Append every finished cell of DIRS (rows, environment, commit, host, label) to the history; never rewrites it."""
    from host import history as hist

    try:
        res = hist.add(dirs, store or hist.DEFAULT_STORE, label)
    except KitError as err:
        fail(err)
    except OSError as err:
        fail(
            f"history store: cannot write {err.filename or store or hist.DEFAULT_STORE} ({err.strerror or err}): nothing was added"
        )
    typer.echo(
        f"history {res['store']}: {res['added']} cell(s) added, {res['already']} already there, "
        f"{res['not_added']} not added (not finished, or no speed figure)"
    )


@history_app.command("show", epilog="Example: python orchestrate.py history show --machine H100 --study mnist")
def history_show(
    store: StoreOpt = None,
    study: StudyOnly = None,
    machine: MachineOnly = None,
    host: HostOnly = None,
    json_: Annotated[bool, typer.Option("--json", help="print every series as JSON")] = False,
) -> None:
    """Each configuration per machine class: runs, last value, trend and change points."""
    from host import history as hist

    all_series = _history_series(store or hist.DEFAULT_STORE, study, machine, host)
    if json_:
        import json

        typer.echo(json.dumps(hist.as_json(all_series), indent=2, default=str))
    else:
        typer.echo(hist.show_text(all_series), nl=False)


@history_app.command("report", epilog="Example: python orchestrate.py history report --out results/history/report")
def history_report(
    out: Annotated[Path | None, typer.Option(help="where to write index.html (default <store>/report)")] = None,
    store: StoreOpt = None,
    study: StudyOnly = None,
    machine: MachineOnly = None,
    host: HostOnly = None,
) -> None:
    """A static trend page readable offline: one plot per configuration over commits and dates, change points marked."""
    from host import history as hist

    st = store or hist.DEFAULT_STORE
    all_series = _history_series(st, study, machine, host)
    try:
        path = hist.write_page(all_series, st, out or hist.db_path(st).parent / "report")
    except KitError as err:
        fail(err)
    except OSError as err:
        fail(f"cannot write {out}: {err.strerror or err}")
    typer.echo(f"wrote {path} ({len(all_series)} series)")


# ---------------------------------------------------------------------------- clusters (host/cluster/)
JobDirArg = Annotated[Path, typer.Argument(help="a job dir made by `orchestrate.py plan`")]


def _job(job_dir: Path):
    from host.cluster.jobdir import load

    try:
        return load(job_dir)
    except KitError as err:
        fail(str(err))


@app.command("plan", rich_help_panel=CLUSTER, epilog="Example: python orchestrate.py plan /shared/jobs/run1 cpu --profile smoke")
@request_options(plan=True)
def plan_cmd(
    opts: RunOptions,
    job_dir: Annotated[Path, typer.Argument(help="the job dir to write (on a filesystem the cluster's nodes share)")],
    platforms: Annotated[list[str] | None, typer.Argument(help="cpu | cuda (default: both)")] = None,
    image: Annotated[
        str | None,
        typer.Option(
            help="resolve the cells for this Docker image (what a SIF or a Kubernetes Job runs); default: this Python's venv"
        ),
    ] = None,
    nodes: Annotated[int, typer.Option(help="nodes each cell of ranks (--set devices=...) spans (srun + torchrun)")] = 1,
) -> None:
    """Resolve a matrix (the options of `run`) into a job dir for a cluster: specs/NNNN.json (one cell each)
    and manifest.json (the cells by resource shape, the data checksums resolved)."""
    import shlex

    from host import plan as hplan
    from host.cluster.jobdir import CLUSTER_PLATFORMS, plan

    req = _request(opts)
    try:
        root = hplan.check_data_dir(opts.data_dir)
        req = req.replace(platforms=tuple(platforms or CLUSTER_PLATFORMS), data_dir=str(root) if root else None)
        hplan.validate(req, root)
        info = plan(job_dir, req, image, nodes, shlex.join(["orchestrate.py", *sys.argv[1:]]))
    except KitError as err:
        fail(str(err))
    shapes = ", ".join(f"{n} {k}" for k, n in info["shapes"].items())
    state = "planned" if info["fresh"] else "up to date: it holds this plan already"
    typer.echo(f"{job_dir}: {info['cells']} cells ({shapes}); {state}")


@app.command(
    "slurm", rich_help_panel=CLUSTER, epilog="Example: python orchestrate.py slurm /shared/jobs/run1 --submit --partition gpu"
)
def slurm_cmd(
    job_dir: JobDirArg,
    submit: Annotated[
        bool, typer.Option(help="submit every cell without a finished result, follow the jobs, then report")
    ] = False,
    follow: Annotated[bool, typer.Option(help="follow the latest submission (after Ctrl-C), then report")] = False,
    partition: Annotated[str | None, typer.Option(envvar="KIT_SLURM_PARTITION", help="sbatch --partition")] = None,
    account: Annotated[str | None, typer.Option(envvar="KIT_SLURM_ACCOUNT", help="sbatch --account")] = None,
    time_limit: Annotated[str | None, typer.Option("--time", envvar="KIT_SLURM_TIME", help="sbatch --time per task")] = None,
    cpus_per_task: Annotated[int, typer.Option(envvar="KIT_SLURM_CPUS", help="cores per task (per node)", min=1)] = 4,
    mem: Annotated[str | None, typer.Option(envvar="KIT_SLURM_MEM", help="sbatch --mem per node, e.g. 16G")] = None,
    exclusive: Annotated[bool, typer.Option(envvar="KIT_SLURM_EXCLUSIVE", help="whole nodes per task (timings)")] = False,
    max_running: Annotated[int | None, typer.Option(envvar="KIT_SLURM_MAX_RUNNING", help="array throttle %K", min=1)] = None,
    sif: Annotated[
        Path | None, typer.Option(envvar="KIT_SLURM_SIF", help="Apptainer image for a plan made with --image (README)")
    ] = None,
    sbatch_arg: Annotated[list[str] | None, typer.Option(help="one more #SBATCH option, e.g. --qos=high (repeatable)")] = None,
    poll_s: Annotated[float, typer.Option(help="seconds between squeue polls", min=0.2)] = 3.0,
) -> None:
    """Write one sbatch array script per resource shape of JOB_DIR (each task: one cell, its own results
    dir); --submit submits them, follows the jobs, and reports."""
    from bench.core.lock import results_lock
    from bench.core.text import term
    from host.cluster import slurm as S

    job = _job(job_dir)
    opts = S.Options(partition, account, time_limit, cpus_per_task, mem, exclusive, max_running, sif, list(sbatch_arg or []))
    if opts.sif is not None and not opts.sif.is_file():
        fail(f"--sif {opts.sif}: no such file (build it: docker save + apptainer build, README)")
    try:
        if not (submit or follow):
            for shape, path in S.write_scripts(job, opts).items():
                typer.echo(f"{shape}: {path} ({len(job.shapes[shape].tasks)} tasks): sbatch {path}")
            return
        with results_lock(job.dir):  # one submitter and follower per job dir
            echo = lambda s: typer.echo(term(s))  # noqa: E731 - labels from the job dir's specs: shown, never acted on
            subs = S.submit(job, opts, echo) if submit else S.latest(job)
            if follow and not subs:
                fail(f"{job.dir} has no submission to follow: --submit")
            S.follow(job, subs, echo, poll_s)
    except KitError as err:
        fail(str(err))
    except KeyboardInterrupt:
        typer.echo(f"stopped following; Slurm runs on: `orchestrate.py slurm {job.dir} --follow` follows again", err=True)
        raise typer.Exit(130) from None
    _report([job.dir], job.dir / "report")
    left = [i for i in range(len(job.cells)) if not job.finished(i)]
    if left:
        typer.echo(f"slurm: {len(left)} of {len(job.cells)} cells without a finished result: `--submit` again runs them")
    raise typer.Exit(1 if left else 0)


@app.command("k8s", rich_help_panel=CLUSTER, epilog="Example: python orchestrate.py k8s /shared/jobs/run1 --image cnn-bench:cpu")
def k8s_cmd(
    job_dir: JobDirArg,
    image: Annotated[str, typer.Option(help="the image the pods run: the one the job dir was planned with (--image)")],
    cpus: Annotated[str, typer.Option(help="cores per pod (requests = limits: Guaranteed QoS)")] = "4",
    memory: Annotated[str, typer.Option(help="memory per pod (requests = limits)")] = "16Gi",
    results_pvc: Annotated[str, typer.Option(help="PersistentVolumeClaim for the results (subPath: the job's name)")] = (
        "cnn-bench-results"
    ),
    data_pvc: Annotated[str, typer.Option(help="PersistentVolumeClaim holding the datasets (mounted read-only at /data)")] = (
        "cnn-bench-data"
    ),
    shm: Annotated[str, typer.Option(help="size of /dev/shm (a memory emptyDir)")] = "1Gi",
    parallelism: Annotated[int | None, typer.Option(help="pods of one shape at once (default: all)", min=1)] = None,
    namespace: Annotated[str | None, typer.Option(help="metadata.namespace of every object")] = None,
) -> None:
    """Write Kubernetes manifests for JOB_DIR: a ConfigMap of the specs and one Indexed Job per resource shape."""
    from host.cluster import k8s

    job = _job(job_dir)
    try:
        docs = k8s.manifests(job, image, cpus, memory, results_pvc, data_pvc, shm, parallelism, namespace)
        path = k8s.write(job, docs)
    except KitError as err:
        fail(str(err))
    jobs = [d["metadata"]["name"] for d in docs if d["kind"] == "Job"]
    typer.echo(f"{path}: ConfigMap {docs[0]['metadata']['name']}, Indexed Jobs {', '.join(jobs)}: kubectl apply -f {path}")


try:  # image commands (doctor, base, build), when that part of the kit is present
    from host.docker_cli import register as _register_docker
except ImportError:
    pass
else:
    _register_docker(app, IMAGES)


style(app)  # click's help conventions: TEXT, PATH, INTEGER, [a|b] (bench/core/cli_style.py)


def start(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """Run the app (ARGS: sys.argv's); a KitError that slipped past a command is one `error:` line
    and host_exit_code's status, as a command's own would be."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # a script's background job inherits it ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # `kill -INT` stops the run as Ctrl-C does
    try:
        app(args=args, prog_name=prog_name)
    except KitError as err:
        from bench.core.text import term

        typer.echo(f"error: {term(err)}", err=True)
        sys.exit(host_exit_code(err))
