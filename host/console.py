"""The `cnn-bench` console command (pyproject's [project.scripts]): the host CLI (host/cli.py).

In a checkout (or an editable install) `cnn-bench ARGS` is exactly `python orchestrate.py
ARGS`. Installed from a wheel there is no checkout beside the code: no docker/Dockerfile, no
requirements/*.txt, no git. The commands that build or check from those sources then stop
with one line saying so, and run/all run natively instead of in images (they say so too).
"""

from __future__ import annotations

import sys
from pathlib import Path

# command -> why it needs a checkout of the kit
NEEDS_CHECKOUT = {
    "build": "images are built from the checkout's docker/Dockerfile, requirements/*.txt and bench/",
    "base": "the base image is bootstrapped by the checkout's docker/bootstrap-base.sh",
    "reference": "a reference result set is made from a clean git checkout",
    "export": "the bundle copies the checkout's requirements/",
}
IMAGE_COMMANDS = ("run", "all")  # containers need a checkout; natively they need none


def _option(argv: list[str], name: str) -> str | None:
    """The value of --NAME in ARGV (`--name v` or `--name=v`), else None."""
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def adapt(argv: list[str], repo: Path | None) -> tuple[list[str], str | None, str | None]:
    """(argv to run, a note to print, an error to stop with) for the arguments after the program
    name. In a checkout ARGV runs unchanged."""
    if repo is not None or not argv:
        return argv, None, None
    cmd = argv[0]
    hint = "clone the kit and run it there (python orchestrate.py ... or an editable install: pip install -e .)"
    if cmd in NEEDS_CHECKOUT and not any(a in ("--help", "-h") for a in argv[1:]):
        return argv, None, f"`cnn-bench {cmd}` needs a checkout of the kit ({NEEDS_CHECKOUT[cmd]}): {hint}"
    if cmd in IMAGE_COMMANDS:
        runtime = _option(argv[1:], "--runtime")
        if runtime == "docker":
            return (
                argv,
                None,
                f"`cnn-bench {cmd} --runtime docker` needs a checkout of the kit (images are built from it): {hint}",
            )
        if runtime is None:
            note = "cnn-bench: installed without a checkout of the kit: runs natively (containers need a checkout)"
            return [cmd, "--runtime", "native", *argv[1:]], note, None
    if cmd == "doctor":
        return argv, "cnn-bench: installed without a checkout of the kit: the image rows need one (requirements/*.txt)", None
    return argv, None, None


def main() -> None:
    from host.images import checkout

    argv, note, error = adapt(sys.argv[1:], checkout())
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if note:
        print(note, file=sys.stderr)
    from host.cli import start

    start(argv, "cnn-bench")


if __name__ == "__main__":
    main()
