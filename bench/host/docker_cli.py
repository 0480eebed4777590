"""Typer commands for the container runtime, added to orchestrate.py by `register(app)`.

    python orchestrate.py doctor
    python orchestrate.py base                                   # debootstrap cnn-bench/base:bookworm
    python orchestrate.py build cpu --ca-cert /etc/ssl/certs/ca-certificates.crt
    python orchestrate.py build all --wheelhouse ~/wheels        # offline install from pip-downloaded wheels
    python orchestrate.py run cpu --smoke                        # default matrix in the cpu image

Thin layer: every command calls a plain function in bench.host.docker and prints one
`error: ...` line with exit code 2 on a KitError.
"""
from __future__ import annotations

import os
import socket
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bench.errors import KitError


class BuildTarget(str, Enum):
    cpu = "cpu"
    cuda = "cuda"
    all = "all"


class ImagePlatform(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


def _fail(err: KitError) -> None:
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(2)


def default_results_dir() -> Path:
    return Path("results") / f"{socket.gethostname()}-container"


def default_data_dir() -> Path:
    return Path(os.environ.get("KIT_DATA_DIR") or "data")


def doctor_cmd() -> None:
    """What this host has: docker engine, BuildKit, NVIDIA runtime, GPU, macOS arm64, built images."""
    from bench.host import docker as dk

    for row in dk.doctor():
        mark = "ok " if row["ok"] else "-- "
        typer.echo(f"{mark} {row['item']:<18} {row['detail']}")


def base_cmd(
    tag: Annotated[str, typer.Option(help="name for the imported image")] = "cnn-bench/base:bookworm",
    mirror: Annotated[Optional[str], typer.Option(help="Debian mirror URL")] = None,
) -> None:
    """Bootstrap a Debian bookworm base image from Debian packages (debootstrap; docker import)."""
    from bench.host import docker as dk

    try:
        image_id = dk.bootstrap_base(tag=tag, mirror=mirror)
    except KitError as err:
        _fail(err)
    typer.echo(f"base: {tag} {image_id}")


def build_cmd(
    target: Annotated[BuildTarget, typer.Argument(help="cpu | cuda | all")] = BuildTarget.cpu,
    ca_cert: Annotated[Optional[Path], typer.Option(help="CA bundle for pip in the build (BuildKit secret)")] = None,
    wheelhouse: Annotated[Optional[Path], typer.Option(help="install offline from this dir of wheels "
                                                            "(pip download fills it when empty)")] = None,
    base_image: Annotated[Optional[str], typer.Option(help="FROM image; default $KIT_BASE_IMAGE, the local "
                                                            "cnn-bench/base:bookworm, else the pinned python slim")] = None,
) -> None:
    """Build the cpu and/or cuda image from its hash-locked requirements (docker CLI, BuildKit)."""
    from bench.host import docker as dk

    plats = ["cpu", "cuda"] if target == BuildTarget.all else [target.value]
    try:
        for plat in plats:
            image_id = dk.build(plat, base_image=base_image, ca_cert=ca_cert, wheelhouse=wheelhouse)
            typer.echo(f"image {plat}: {dk.image_ref(plat)} {image_id}")
    except KitError as err:
        _fail(err)


def run_cmd(
    platform: Annotated[ImagePlatform, typer.Argument(help="cpu | cuda")],
    data_dir: Annotated[Optional[Path], typer.Option(help="dir holding mnist/; default $KIT_DATA_DIR or ./data")] = None,
    out: Annotated[Optional[Path], typer.Option(help="results dir; default results/<host>-container")] = None,
    smoke: Annotated[bool, typer.Option(help="2 epochs on 4,096 samples")] = False,
    selfcheck: Annotated[bool, typer.Option(help="run the image's selfcheck instead of the matrix")] = False,
) -> None:
    """Run PLATFORM's default matrix in its image: data read-only at /data, results at /results, no network."""
    from bench.host import docker as dk

    args = ["selfcheck"] if selfcheck else dk.default_args(platform.value, smoke)
    try:
        code, image_id = dk.run(platform.value, data_dir or default_data_dir(), out or default_results_dir(), args)
    except KitError as err:
        _fail(err)
    typer.echo(f"container exit code {code} (image {image_id})")
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add doctor, base, build and run to APP. If APP already has a `run`, ours is `run-image`."""
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    app.command("doctor")(doctor_cmd)
    app.command("base")(base_cmd)
    app.command("build")(build_cmd)
    app.command("run-image" if "run" in names else "run")(run_cmd)
