"""The kit's containers from start to removal: an owner label, a stop on SIGINT, SIGTERM and
SIGHUP, and the reaping of an orphan whose owner died without stopping it.

Every container `orchestrate.py run` starts carries `cnn-bench.owner` = "<host>/<pid>/<start>":
the host name, the pid of the orchestrate.py process and that process's start time (so a
reused pid is not taken for the owner). An orphan is a container of this host whose owner
process no longer runs (`kill -9`, a crash of the host side); `doctor` and the next `run` find
it by the label and remove it. A container whose owner runs on, or that another host's kit
started (one engine can serve several hosts), is left alone and named.

    with stop_signals():                    # SIGTERM / SIGHUP raise Stopped (a KeyboardInterrupt)
        c = start(client, image_id, kwargs)   # created and started with the signals held back
        ...                                   # on Stopped: stop(c) then remove, as on Ctrl-C
    reap(client)                            # -> ["removed orphan container 1a2b3c (owner pid 4242 is gone)"]
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

OWNER_LABEL = "cnn-bench.owner"
GRACE_S = 20  # after SIGINT, the matrix inside settles its running cells as `interrupted`; then docker stop
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled where Ctrl-C is, exit 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(err: BaseException) -> int:
    """The shell's status for a run ended by ERR: 128 + the signal (SIGINT 130, SIGTERM 143, SIGHUP 129)."""
    return 128 + (err.signum if isinstance(err, Stopped) else int(signal.SIGINT))


def signal_name(err: BaseException) -> str:
    return signal.Signals(err.signum).name if isinstance(err, Stopped) else "SIGINT"


def _raise(signum: int, _frame) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise Stopped, as SIGINT raises KeyboardInterrupt, so a
    `timeout`, a CI cancel or a closed SSH session stops the container as Ctrl-C does. Only the
    main thread can take signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back (delivered on leaving): a container is never created
    without the code that removes it having it in hand."""
    sigs = {signal.SIGINT, *STOP_SIGNALS}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _start_time(pid: int) -> str | None:
    import psutil

    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.Error, OSError):
        return None


def owner() -> str:
    """This process as a container's owner: host/pid/start time."""
    return f"{socket.gethostname()}/{os.getpid()}/{_start_time(os.getpid())}"


def start(client, image_id: str, kwargs: dict):
    """Create and start a container labelled with its owner (this process); returns it."""
    kwargs = dict(kwargs, labels={**kwargs.get("labels", {}), OWNER_LABEL: owner()})
    kwargs.pop("detach", None)
    with _held():
        container = client.containers.create(image_id, **kwargs)
        try:
            container.start()
        except BaseException:
            remove(container)
            raise
    return container


def stop(container, grace_s: float = GRACE_S) -> None:
    """Stop CONTAINER as Ctrl-C stops a native matrix: SIGINT to its init (which hands it to the
    matrix: running cells are written as `interrupted`), up to GRACE_S seconds, then docker stop
    (SIGTERM, SIGKILL 10 s later). Never raises."""
    with _held():  # a second signal must not cut the stop short
        try:
            container.kill(signal="SIGINT")
            container.wait(timeout=grace_s)
        except Exception:
            with contextlib.suppress(Exception):
                container.stop(timeout=10)


def remove(container) -> None:
    with contextlib.suppress(Exception):
        container.remove(force=True)


def _owner_gone(label: str) -> tuple[bool, str]:
    """(whether the owner named by LABEL is gone from this host, a few words on it)."""
    host, _, rest = label.partition("/")
    pid_s, _, started = rest.partition("/")
    if host != socket.gethostname():
        return False, f"started by the kit on host {host!r}"
    try:
        pid = int(pid_s)
    except ValueError:
        return True, "its owner label is not the kit's"
    now = _start_time(pid)
    if now is None:
        return True, f"owner pid {pid} is gone"
    if now != started:
        return True, f"owner pid {pid} is another process now"
    return False, f"owner pid {pid} runs"


def kit_containers(client) -> list[tuple[Any, bool, str]]:
    """Every container with the owner label: (container, is an orphan, why)."""
    found = []
    for c in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        orphan, why = _owner_gone(str((c.labels or {}).get(OWNER_LABEL, "")))
        found.append((c, orphan, why))
    return found


def _mounts(c, results_dir: Path) -> bool:
    """Whether container C mounts RESULTS_DIR (as its /results, or a folder holding it)."""
    want = os.path.realpath(results_dir)
    for m in (getattr(c, "attrs", None) or {}).get("Mounts") or []:
        src = os.path.realpath(str(m.get("Source") or ""))
        if src and (want == src or want.startswith(src.rstrip("/") + "/")):
            return True
    return False


def reap(client, echo: Callable[[str], None] | None = None, holding: Path | None = None) -> tuple[list[str], list[str]]:
    """Stop and remove every orphan of this host (HOLDING: only those that mount that results dir);
    ([what was removed], [kit containers left running and why]), one line each, also said through ECHO."""
    removed, left = [], []
    for c, orphan, why in kit_containers(client):
        if holding is not None and not _mounts(c, holding):
            continue
        name = f"{getattr(c, 'short_id', '?')} ({(c.labels or {}).get('cnn-bench.platform', '?')}, {c.status})"
        if orphan:
            if c.status == "running":
                stop(c, grace_s=5)
            remove(c)
            removed.append(f"removed orphan container {name}: {why}")
        else:
            left.append(f"kit container {name} left alone: {why}")
    for line in removed + left:
        if echo:
            echo(line)
    return removed, left
