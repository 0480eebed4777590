"""Progress for the host's long commands (report, export, base): what is under way, never silence.

    with stages("report") as say:
        say("reading the results")
        say("mnist-cnn: tables and plots", 2, 5)     # stage 2 of 5: a bar
        ...

On a terminal (stderr is one): a rich line that changes as the work goes on (spinner, the stage,
a bar where the stage is counted, the time since the command began) and disappears at the end,
so the command's own output stays as it was. Elsewhere (a log, CI, a pipe): one plain line on
stderr per stage (a counted stage: at its start and each tenth of it), with the seconds so
far. KIT_PROGRESS=0 turns both off; =1 forces the plain lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class Say(Protocol):
    def __call__(self, what: str, done: int | None = None, total: int | None = None) -> None: ...


def _mode() -> str:
    forced = os.environ.get("KIT_PROGRESS", "").strip()
    if forced == "0":
        return "off"
    if forced == "1":
        return "plain"
    return "rich" if sys.stderr.isatty() and os.environ.get("TERM") != "dumb" else "plain"


@contextlib.contextmanager
def stages(title: str, mode: str | None = None) -> Iterator[Say]:
    """A `say(what, done=None, total=None)` for TITLE's stages (see the module docstring)."""
    mode = mode or _mode()
    t0 = time.monotonic()
    if mode == "off":
        yield lambda what, done=None, total=None: None
        return
    if mode == "plain":
        seen: list[object] = [None]

        def plain(what: str, done: int | None = None, total: int | None = None) -> None:
            key = (what, (10 * (done or 0)) // total if total else None)  # a counted stage: each tenth
            if key == seen[0]:
                return
            seen[0] = key
            text = f"{what} {done or 0:,}/{total:,}" if total else what
            print(f"{title}: {text} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)

        yield plain
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(title, total=None)

        def live(what: str, done: int | None = None, total: int | None = None) -> None:
            progress.update(task, description=f"{title}: {what}", completed=done or 0, total=total)

        yield live


def follow_log(path: str, say: Say, stop: Callable[[], bool], interval_s: float = 0.5) -> None:
    """Until STOP() is true: name the last line of the log at PATH as the stage (debootstrap's
    `I: Unpacking libc6...`), so a tool that logs to a file shows where it is."""
    while not stop():
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
                tail = fh.read().decode(errors="replace").splitlines()
        except OSError:
            tail = []
        line = next((x.strip() for x in reversed(tail) if x.strip()), "")
        if line:
            say(line[:100])
        time.sleep(interval_s)
