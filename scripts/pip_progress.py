"""Run a `pip install` and show how far it is (scripts/setup.sh runs the lock's install through it).

    python scripts/pip_progress.py SITE_DIR -- python -m pip install --require-hashes -r requirements/dev.txt

pip 23 (what a fresh venv brings) prints a line per package while it collects and then nothing
through the install itself, which for the dev lock is about four silent minutes of unpacking 6.5 GB.
This reads pip's lines (`Collecting NAME`, `Installing collected packages: A, B, ...`, `Successfully
installed ...`) and, while pip installs, counts the packages it has finished: each one's
`*.dist-info` folder appears in SITE_DIR (the venv's site-packages) when it is done. On a terminal a
rich bar per phase (stderr); elsewhere one plain line per tenth of each phase. Of pip's stdout only
`Successfully installed ...` is printed (as setup.sh did before); its errors are on stderr, untouched.
Exit status: pip's. Needs rich (setup.sh installs it from the lock first).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def finished(site: Path, since: float) -> int:
    """Packages installed into SITE since SINCE: their dist-info folders made after it."""
    try:
        return sum(1 for p in site.glob("*.dist-info") if p.stat().st_mtime >= since)
    except OSError:
        return 0


class Shown:
    """The two phases, as rich bars on a terminal or plain lines elsewhere."""

    def __init__(self, expected: int | None) -> None:
        self.t0 = time.monotonic()
        self.rich = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self.last: dict[str, int] = {}
        self.progress = None
        if self.rich:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            cols = (TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            self.progress = Progress(*cols, console=Console(stderr=True))
            self.progress.start()
        self.tasks: dict[str, object] = {}
        self.expected = expected

    def update(self, phase: str, done: int, total: int | None) -> None:
        if self.progress is not None:
            if phase not in self.tasks:
                self.tasks[phase] = self.progress.add_task(phase, total=total)
            self.progress.update(self.tasks[phase], completed=done, total=total)  # type: ignore[arg-type]
            return
        step = (10 * done) // total if total else done // 25
        if self.last.get(phase) == step:
            return
        self.last[phase] = step
        of = f"/{total}" if total else ""
        print(f"{phase}: {done}{of} packages ({time.monotonic() - self.t0:.0f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def run(site: Path, argv: list[str], expected: int | None = None) -> int:
    shown = Shown(expected)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)
    collected, installing, stop = 0, None, threading.Event()

    def watch(total: int, since: float) -> None:
        while not stop.is_set():
            shown.update("installing", min(finished(site, since), total), total)
            stop.wait(0.5)

    watcher: threading.Thread | None = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.rstrip("\n")
            if text.startswith(("Collecting ", "Processing ", "Requirement already satisfied")):
                collected += 1
                shown.update("collecting (hash-checked)", collected, expected)
            elif text.startswith("Installing collected packages:"):
                names = [n for n in text.split(":", 1)[1].split(",") if n.strip()]
                installing = len(names)
                since = time.time() - 1  # a dist-info made from now on (mtime has 1 s steps on some filesystems)
                watcher = threading.Thread(target=watch, args=(installing, since), daemon=True)
                watcher.start()
            elif text.startswith("Successfully installed"):
                if installing:
                    stop.set()
                    shown.update("installing", installing, installing)
                print(text, flush=True)
        return proc.wait()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join(timeout=2)
        if proc.poll() is None:
            proc.kill()
        shown.close()


def main(args: list[str]) -> int:
    if "--" not in args or args.index("--") < 1:
        print("usage: pip_progress.py SITE_DIR [--expect N] -- PIP COMMAND...", file=sys.stderr)
        return 2
    cut = args.index("--")
    head, argv = args[:cut], args[cut + 1 :]
    expected = int(head[head.index("--expect") + 1]) if "--expect" in head else None
    return run(Path(head[0]), argv, expected)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
