#!/usr/bin/env python3
"""cnn-bench host CLI: data, run, all, report (and, with Docker, doctor/base/build).

    python orchestrate.py all                 # default matrix this host can run, then the report
    python orchestrate.py data fetch mnist    # download MNIST with SHA-256 checks
    python orchestrate.py report DIR...       # merge result dirs from any hosts into results/report/
"""
from __future__ import annotations

import os
import socket
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from bench.errors import KitError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])
data_app = typer.Typer(no_args_is_help=True, help="Datasets: fetch with checksums.")
app.add_typer(data_app, name="data")


class DatasetName(str, Enum):
    mnist = "mnist"


class Runtime(str, Enum):
    auto = "auto"
    native = "native"
    docker = "docker"


def fail(msg: str, code: int = 2):
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


@data_app.command("fetch")
def data_fetch(
    name: Annotated[DatasetName, typer.Argument()],
    data_dir: Annotated[Optional[Path], typer.Option(help="default $KIT_DATA_DIR or ./data")] = None,
    mirror: Annotated[Optional[List[str]], typer.Option(help="base URL to fetch from (repeatable)")] = None,
) -> None:
    """Download the dataset's files, verify SHA-256, and rename them into place."""
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    from bench.data.fetch import MIRRORS, fetch_mnist
    from bench.data.mnist import resolve_data_dir

    root = resolve_data_dir(data_dir)
    try:
        with Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn()) as progress:
            paths = fetch_mnist(root, tuple(mirror) if mirror else MIRRORS, progress=progress)
    except KitError as err:
        fail(str(err))
    typer.echo(f"{len(paths)} files verified in {root / 'mnist'}")


def host_platforms() -> dict[str, str | None]:
    """platform -> None if this host can run it natively, else why not."""
    import platform as pf

    out: dict[str, str | None] = {"cpu": None}
    try:
        import torch

        out["cuda"] = None if torch.cuda.is_available() else "no NVIDIA GPU visible on this host"
        mps_ok = getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
        out["mps"] = None if mps_ok else ("needs macOS on Apple silicon" if sys.platform != "darwin" or pf.machine() != "arm64"
                                          else "torch reports no MPS device")
    except ImportError:
        out["cuda"] = out["mps"] = "torch not installed"
    return out


def default_out() -> Path:
    return Path("results") / f"{socket.gethostname()}-native"


@app.command()
def run(
    platform: Annotated[str, typer.Argument(help="cpu | cuda | mps")] = "cpu",
    runtime: Annotated[Runtime, typer.Option(help="auto: the platform's image when a Docker engine answers, else native")] = Runtime.auto,
    data_dir: Annotated[Optional[str], typer.Option()] = None,
    out: Annotated[Optional[Path], typer.Option()] = None,
    smoke: Annotated[bool, typer.Option(help="2 epochs on 4,096 samples")] = False,
    epochs: Annotated[Optional[int], typer.Option()] = None,
    rerun: Annotated[bool, typer.Option()] = False,
) -> None:
    """Run PLATFORM's default matrices (mnist-cnn, mlp-scratch), in its image or natively."""
    from bench.data.mnist import resolve_data_dir

    if platform not in ("cpu", "cuda", "mps"):
        fail(f"unknown platform {platform!r}: choose cpu, cuda or mps")
    reason = _engine_reason(runtime)
    if runtime == Runtime.docker and reason:
        fail(reason)
    if runtime == Runtime.native or reason or platform == "mps":
        if runtime == Runtime.auto:
            typer.echo(f"runtime: native ({reason or 'mps runs natively'})")
        raise typer.Exit(_run_native(platform, data_dir, out or default_out(), smoke, epochs, rerun))
    from bench.host import docker as dk

    root = resolve_data_dir(data_dir)
    if not root.is_dir():
        fail(f"data dir {root} does not exist: pass --data-dir (a dir holding mnist/) or run `python orchestrate.py data fetch mnist`")
    out = out or Path("results") / f"{socket.gethostname()}-container"
    code = 0
    try:
        for study in ("mnist-cnn", "mlp-scratch"):
            args = ["matrix", study, "--platform", platform, "--out", "/results", "--data-dir", "/data"]
            args += (["--smoke"] if smoke and study == "mnist-cnn" else []) + (["--epochs", str(epochs)] if epochs and study == "mnist-cnn" else [])
            rc, image_id = dk.run(platform, root, out, args + (["--rerun"] if rerun else []))
            typer.echo(f"container {platform} {study}: image {image_id[:19]} exit code {rc}")
            code = max(code, rc)
    except KitError as err:
        fail(str(err))
    raise typer.Exit(code)


def _engine_reason(runtime: Runtime) -> str | None:
    """None when containers can be used, else why not."""
    if runtime == Runtime.native:
        return "--runtime native"
    try:
        from bench.host import docker as dk
    except ImportError as err:
        return f"the docker SDK is not installed ({err})"
    return dk.engine_ok()


def _run_native(platform: str, data_dir, out: Path, smoke: bool, epochs, rerun: bool) -> int:
    import subprocess

    if platform not in ("cpu", "cuda", "mps"):
        fail(f"unknown platform {platform!r}: choose cpu, cuda or mps")
    from bench.data.mnist import load_dataset
    from bench.runner import subprocess_env

    try:
        load_dataset(data_dir, "auto")  # a bad data dir fails here once, before any cell starts
    except KitError as err:
        fail(str(err))
    codes = []
    for study in ("mnist-cnn", "mlp-scratch"):
        argv = [sys.executable, "-m", "bench", "matrix", study, "--platform", platform, "--out", str(out)]
        if data_dir:
            argv += ["--data-dir", str(data_dir)]
        if smoke and study == "mnist-cnn":
            argv.append("--smoke")
        if epochs is not None and study == "mnist-cnn":
            argv += ["--epochs", str(epochs)]
        if rerun:
            argv.append("--rerun")
        codes.append(subprocess.call(argv, env=subprocess_env()))
    return max(codes)


@app.command("all")
def all_cmd(
    runtime: Annotated[Runtime, typer.Option(help="auto: containers when a Docker engine answers, else native")] = Runtime.auto,
    data_dir: Annotated[Optional[str], typer.Option(help="dir holding mnist/; default $KIT_DATA_DIR or ./data")] = None,
    out: Annotated[Optional[Path], typer.Option(help="results dir for this host")] = None,
    smoke: Annotated[bool, typer.Option(help="2 epochs on 4,096 samples")] = False,
    epochs: Annotated[Optional[int], typer.Option()] = None,
    rerun: Annotated[bool, typer.Option()] = False,
    ca_cert: Annotated[Optional[Path], typer.Option(help="CA bundle for pip inside image builds (a BuildKit secret)")] = None,
) -> None:
    """Run every platform this host can run, then merge the report into results/report/."""
    from bench.data.mnist import load_dataset, resolve_data_dir
    from bench.results import write_json

    try:
        ds = load_dataset(data_dir, "auto")
    except KitError as err:
        fail(str(err))
    typer.echo(f"dataset: {ds.name} ({'real MNIST' if ds.real_mnist else 'embedded default, not MNIST'}) from {ds.source}")
    engine_reason = _engine_reason(runtime)
    if runtime == Runtime.docker and engine_reason:
        fail(engine_reason)
    use_docker = runtime != Runtime.native and engine_reason is None
    if runtime == Runtime.auto:
        typer.echo("runtime: containers (a Docker engine answers)" if use_docker
                   else f"runtime: native, no containers ({engine_reason})")
    out = out or Path("results") / f"{socket.gethostname()}-{'container' if use_docker else 'native'}"
    if use_docker:
        root = resolve_data_dir(data_dir)
        if not root.is_dir():  # the embedded default: mount an empty dir, the image has the digits
            root = Path("results") / ".no-data"
            root.mkdir(parents=True, exist_ok=True)
        notes, codes = _all_docker(root, out, smoke, epochs, rerun, ca_cert)
    else:
        notes, codes = {}, []
        for plat, reason in host_platforms().items():
            if reason:
                typer.echo(f"platform {plat}: skipped ({reason})")
                notes[plat] = {"status": "skipped", "reason": reason, "runtime": "native"}
                continue
            typer.echo(f"platform {plat}: running natively into {out}")
            code = _run_native(plat, data_dir, out, smoke, epochs, rerun)
            notes[plat] = {"status": "ran" if code == 0 else "errors", "runtime": "native",
                           "reason": "" if code == 0 else f"matrix exit code {code}: see the cells' log.txt"}
            codes.append(code)
    write_json(out / "platforms.json", notes)
    _report([out], Path("results/report"))
    raise typer.Exit(max(codes, default=0))


def _all_docker(data_root: Path, out: Path, smoke: bool, epochs, rerun: bool, ca_cert) -> tuple[dict, list[int]]:
    """Build and run each platform's image this host can run; skipped platforms get a reason."""
    from bench.host import docker as dk

    if ca_cert is None:  # pip in the build may sit behind a proxy CA: hand it the system bundle (a secret, never a layer)
        sys_ca = Path(os.environ.get("KIT_CA_CERT", "/etc/ssl/certs/ca-certificates.crt"))
        ca_cert = sys_ca if sys_ca.is_file() else None
    gpu_reason = dk.cuda_unavailable()
    plan = {"cpu": None, "cuda": gpu_reason,
            "mps": "Metal is not reachable from containers: on macOS arm64 run natively (docker/mps/run.sh)"}
    notes, codes = {}, []
    for plat, reason in plan.items():
        if reason:
            typer.echo(f"platform {plat}: skipped ({reason})")
            notes[plat] = {"status": "skipped", "reason": reason, "runtime": "container"}
            continue
        try:
            typer.echo(f"platform {plat}: building cnn-bench/{plat}")
            dk.build(plat, ca_cert=ca_cert)
            mnist = dk.default_args(plat, smoke=smoke) + (["--epochs", str(epochs)] if epochs else []) + (["--rerun"] if rerun else [])
            code, image_id = dk.run(plat, data_root, out, mnist)
            typer.echo(f"container {plat} mnist-cnn: image {image_id[:19]} exit code {code}")
            mlp = ["matrix", "mlp-scratch", "--platform", plat, "--out", "/results", "--data-dir", "/data"] + (["--rerun"] if rerun else [])
            code2, _ = dk.run(plat, data_root, out, mlp)
            typer.echo(f"container {plat} mlp-scratch: exit code {code2}")
            code = max(code, code2)
            notes[plat] = {"status": "ran" if code == 0 else "errors", "runtime": "container", "image_id": image_id,
                           "reason": "" if code == 0 else f"container exit code {code}"}
        except KitError as err:
            typer.echo(f"platform {plat}: error: {err}", err=True)
            notes[plat] = {"status": "error", "runtime": "container", "reason": str(err)}
            code = 1
        codes.append(code)
    return notes, codes


def _report(dirs: list[Path], out: Path) -> dict:
    from bench.report.build import build_report

    try:
        info = build_report(dirs, out)
    except KitError as err:
        fail(str(err))
    from bench.report.tables import TABLE1_COLUMNS, fmt

    cols = TABLE1_COLUMNS[:5] + [TABLE1_COLUMNS[5]]
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Table I (seed 000 columns)")
    for _, h in cols:
        t.add_column(h)
    for r in info["rows"]:
        t.add_row(*[fmt(r.get(k)) for k, _ in cols])
    Console().print(t)
    typer.echo(f"report: {info['report']} ({len(info['plots'])} plots, {len(info['not_run'])} cells not run)")
    return info


@app.command()
def report(
    dirs: Annotated[List[Path], typer.Argument(help="result dirs, from any hosts")],
    out: Annotated[Path, typer.Option(help="where REPORT.md and the plots go")] = Path("results/report"),
) -> None:
    """Merge any number of result dirs into REPORT.md, table1.csv and the Fig. 1 plots."""
    _report(list(dirs), out)


try:  # container commands (doctor, base, build, run via images), when that part of the kit is present
    from bench.host.docker_cli import register as _register_docker
except ImportError:
    _register_docker = None
if _register_docker:
    _register_docker(app)


if __name__ == "__main__":
    try:
        app()
    except KitError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
