"""One writer per results dir: an advisory lock (flock) on <out>/.cnn-bench.lock, held for
the whole matrix (or standalone cell). A second run refuses with one line naming the first;
the lock dies with its process, so a killed run never leaves a stale lock behind.

`check_free` asks before any write (the host's `run` and `all` ask before they start the matrix,
so a run the lock refuses writes nothing at all: no platforms.json, no report); it creates and
writes nothing itself."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from bench.core.errors import KitError

LOCK_NAME = ".cnn-bench.lock"


def _busy(out: Path, holder: str) -> KitError:
    return KitError(f"results dir {out} is in use by another run ({holder}); wait for it to finish or use another --out")


def _holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"


def holder(out: Path) -> str | None:
    """Who holds OUT's lock now ('pid N', or 'another process'), or None when no run does. Nothing
    is created or written (a dir without a lock file is held by no run)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return None
    try:
        fd = os.open(Path(out) / LOCK_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # none there (or a symlink: results_lock names it when a run takes the lock)
        return None
    try:
        try:  # a shared lock: granted beside other askers, refused while a run holds it
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_free(out: Path) -> None:
    """KitError (one line, naming the holder) when another run holds OUT's lock; writes nothing."""
    who = holder(out)
    if who is not None:
        raise _busy(Path(out), who)


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
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | nofollow, 0o644)
        mine = True
    except PermissionError:  # another user's lock file (a container's): lock it all the same, leave its text
        try:
            fd = os.open(path, os.O_RDONLY | nofollow)
            mine = False
        except OSError as err:
            raise KitError(f"{path}: cannot be the results dir's lock ({err.strerror or err}): remove it") from None
    except OSError as err:
        why = "a symlink" if os.path.islink(path) else err.strerror or str(err)
        raise KitError(f"{path}: cannot be the results dir's lock ({why}): remove it") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(out, _holder(fd)) from None
        if mine:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock
