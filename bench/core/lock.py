"""One writer per results dir: an advisory lock (flock) on <out>/.cnn-bench.lock, held for
the whole matrix (or standalone cell). A second run refuses with one line naming the first;
the lock dies with its process, so a killed run never leaves a stale lock behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from bench.core.errors import KitError

LOCK_NAME = ".cnn-bench.lock"


@contextlib.contextmanager
def results_lock(out: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, say nothing
        yield
        return
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as err:
        why = "a symlink" if os.path.islink(path) else err.strerror or str(err)
        raise KitError(f"{path}: cannot be the results dir's lock ({why}): remove it") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise KitError(
                f"results dir {out} is in use by another run ({holder}); wait for it to finish or use another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
