"""Typer commands for images, added to the host CLI (host/cli.py) by `register(app)`.

    python orchestrate.py doctor
    python orchestrate.py base                                   # debootstrap cnn-bench/base:bookworm
    python orchestrate.py build cpu --ca-cert /etc/ssl/certs/ca-certificates.crt
    python orchestrate.py build all --wheelhouse ~/wheels        # offline install from pip-downloaded wheels
    python orchestrate.py build cpu --torch-cpu-only             # torch's CPU wheel: cnn-bench/cpu-torchcpu

Thin layer: every command calls a plain function in host.engine or host.images and prints one
`error: ...` line on a KitError: exit 2 for a usage error, 1 when the work failed (a build).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bench.core.cli_style import fail
from bench.core.errors import KitError, UsageError


class BuildTarget(StrEnum):
    cpu = "cpu"
    cuda = "cuda"
    all = "all"


def doctor_cmd() -> None:
    """What this host has: docker engine, BuildKit, NVIDIA runtime, GPU, macOS arm64, built images."""
    from host import engine

    for row in engine.doctor():
        mark = "ok " if row["ok"] else "-- "
        typer.echo(f"{mark} {row['item']:<18} {row['detail']}")


def base_cmd(
    tag: Annotated[str, typer.Option(help="name for the imported image")] = "cnn-bench/base:bookworm",
    mirror: Annotated[str | None, typer.Option(help="Debian mirror URL")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="bootstrap again even if TAG was made by this recipe")] = False,
) -> None:
    """Bootstrap a Debian bookworm base image from Debian packages (debootstrap; docker import);
    an image of that tag made by the same bootstrap script is kept."""
    from host import images

    try:
        image_id = images.bootstrap_base(tag=tag, mirror=mirror, rebuild=rebuild)
    except KitError as err:
        fail(err)
    typer.echo(f"base: {tag} {image_id}")


def build_cmd(
    target: Annotated[BuildTarget, typer.Argument(help="cpu | cuda | all")] = BuildTarget.cpu,
    ca_cert: Annotated[Path | None, typer.Option(help="CA bundle for pip in the build (BuildKit secret)")] = None,
    wheelhouse: Annotated[
        Path | None, typer.Option(help="install offline from this dir of wheels (pip download fills it when empty)")
    ] = None,
    base_image: Annotated[
        str | None,
        typer.Option(help="FROM image; default $KIT_BASE_IMAGE, the local cnn-bench/base:bookworm, else the pinned python slim"),
    ] = None,
    torch_cpu_only: Annotated[
        bool,
        typer.Option(
            "--torch-cpu-only",
            help="cpu only: torch's CPU wheel (requirements/cpu-torchcpu.txt, made by "
            ".github/workflows/lock-cpu-only.yml) -> cnn-bench/cpu-torchcpu, ~6 GB smaller",
        ),
    ] = False,
    keep_old: Annotated[bool, typer.Option("--keep-old", help="keep superseded cnn-bench images (default: removed)")] = False,
) -> None:
    """Build the cpu and/or cuda image from its hash-locked requirements (docker CLI, BuildKit),
    unless an image for the same lock, sources and base exists already."""
    from host import images

    if torch_cpu_only and target != BuildTarget.cpu:
        fail(UsageError(f"--torch-cpu-only is a variant of the cpu image: use `build cpu --torch-cpu-only`, not {target.value}"))
    variant = "torchcpu" if torch_cpu_only else None
    plats = ["cpu", "cuda"] if target == BuildTarget.all else [target.value]
    try:
        for plat in plats:
            image_id = images.build(
                plat, base_image=base_image, ca_cert=ca_cert, wheelhouse=wheelhouse, variant=variant, prune=not keep_old
            )
            typer.echo(f"image {plat}: {images.image_ref(plat, variant)} {image_id}")
    except KitError as err:
        fail(err)


def register(app: typer.Typer, panel: str | None = None) -> None:
    """Add doctor, base and build to APP (orchestrate.py's run and all use containers themselves),
    under the help panel PANEL."""
    app.command("doctor", rich_help_panel=panel, epilog="Example: python orchestrate.py doctor")(doctor_cmd)
    app.command(
        "base", rich_help_panel=panel, epilog="Example: python orchestrate.py base --mirror http://deb.debian.org/debian"
    )(base_cmd)
    app.command(
        "build",
        rich_help_panel=panel,
        epilog="Example: python orchestrate.py build cpu --ca-cert /etc/ssl/certs/ca-certificates.crt",
    )(build_cmd)
