"""Warm starts: a torch cell forked from a process that has imported torch once, instead of a new
interpreter that imports it again.

A cell is its own process (bench/run/schedule.py), and a torch cell's process used to pay the
interpreter and torch's import before its entry point every time: 2-3 s on a 2-core VM, 8-10 s on
a GPU host whose torch loads the CUDA libraries (37 cells of the answer's first round on an H200:
273 s of its 1,318). Here the scheduler starts multiprocessing's forkserver once per run, with
bench.run.preload preloaded (torch, torchvision and the cell entry point imported, nothing run),
and every cell whose backends are all of the torch family is forked from it. Other cells (Numba,
NumPy, CuPy) start as before: preloading torch into them would change their memory readings.

What stays the same in the cell: its argv, its environment (set in the child before anything
reads it: CUDA_VISIBLE_DEVICES, the kit's variables), its stdin/stdout (the gate protocol) and
stderr (log.txt), its exit code, its threads (pinned by API in runtime_setup, not by environment),
and its fixed costs: `start_s` is the warm process's own cold start (process creation to torch
imported, measured once) plus the time from the fork to the entry point, with a note saying so.
A CUDA context is never made before the fork (preload runs nothing), so each child makes its own.

Nothing of a run outlives it, as with cells started cold (whose kernel-side PR_SET_PDEATHSIG ends
them with the scheduler, bench/run/cell.py): the forkserver ends when the scheduler's process does
(multiprocessing's "alive" pipe reaches its end), and every cell forked from it dies with it
(PR_SET_PDEATHSIG, set first thing in the child). For that a forked cell closes its copy of the
alive pipe's write end, which multiprocessing hands every child of a forkserver: held by a cell, it
kept the forkserver alive as long as the cell, while the cell lived as long as the forkserver (a
cell mid-step when its scheduler was killed slept on under it forever). The scheduler's own exit
(a normal end, an exception, or SIGTERM, SIGHUP or Ctrl-C, which end it through KeyboardInterrupt)
also kills every forked cell still running and the forkserver (an atexit handler); a SIGKILL of
the scheduler leaves that to the kernel as above.

Off with KIT_WARM_START=0 (every cell a new interpreter, as before), and off Linux (macOS
forks badly under Objective-C runtimes; the MPS wrapper starts cells cold).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import multiprocessing
import os
import signal
import sys
import threading
import weakref
from multiprocessing import reduction
from typing import IO, Any

from bench.core.cell import Cell
from bench.core.registry import get_study

ENV = "KIT_WARM_START"
ENTRY = "bench.cli:main"  # what `python -m bench` runs
WARM_FAMILIES = frozenset({"torch"})

_lock = threading.Lock()
_ctx: Any = None
_owner: int | None = None  # the process that started the forkserver (the scheduler's): the one that stops it
_forked: weakref.WeakSet = weakref.WeakSet()  # the cells it forked (multiprocessing Process objects)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def enabled() -> bool:
    """Linux, natively (the GPU host's case it was built for), unless KIT_WARM_START=0. In a container
    every cell still starts cold: a signal to a container run settled no cell there with warm starts
    (tests/test_container_signals.py, not yet explained), so they stay off until it is."""
    if os.environ.get("KIT_RUNTIME") == "container":
        return False
    return sys.platform.startswith("linux") and os.environ.get(ENV, "1") != "0"


def eligible(cell: Cell) -> bool:
    """Whether CELL may be forked warm: every backend of it is of the torch family."""
    study = get_study(cell.study)
    fams = {study.backends[p].family for p in cell.backend.split("+") if p in study.backends}
    return bool(fams) and fams <= WARM_FAMILIES


def _context() -> Any:
    global _ctx, _owner
    with _lock:
        if _ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["bench.run.preload"])
            # registered after multiprocessing.util's exit handler (imported by now), so run before it
            # (atexit is last in, first out): the cells are killed before it joins them, and a cell
            # still waiting on this process's pipe never hangs its exit
            from multiprocessing import util as _mp_util  # noqa: F401

            atexit.register(_stop)
            _owner = os.getpid()
            _ctx = ctx
        return _ctx


def _stop() -> None:
    """At the scheduler's exit: kill every forked cell still running, then the forkserver (a cell
    forked but not yet in _child dies with it, by its PR_SET_PDEATHSIG or its parent check). Never raises."""
    if os.getpid() != _owner:  # inherited by a fork of the scheduler: not its forkserver
        return
    for proc in list(_forked):
        with contextlib.suppress(Exception):
            if proc.exitcode is None:
                proc.kill()
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if server is not None and isinstance(pid, int):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            server._stop()  # closes the alive pipe, reaps the forkserver


def _die_with_forkserver() -> int:
    """In a forked cell, first thing: the kernel kills it when its forkserver dies (which the
    forkserver does when the scheduler does), and it leaves at once if that already happened.
    Returns the forkserver's pid (the cell's KIT_PARENT_PID)."""
    preloaded = sys.modules.get("bench.run.preload")
    server = int(preloaded.PID) if preloaded is not None else os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the forkserver died between the fork and the prctl
        os._exit(3)  # as bench/run/cell.py's check: the scheduler died before we got here
    # multiprocessing hands every child of a forkserver a copy of the write end of the pipe whose
    # end tells the forkserver that its scheduler is gone: held here, the forkserver could never
    # see that end while this cell lives, and this cell (dying with the forkserver) would live on
    from multiprocessing import forkserver

    server_state = getattr(forkserver, "_forkserver", None)
    alive = getattr(server_state, "_forkserver_alive_fd", None)
    if isinstance(alive, int):
        with contextlib.suppress(OSError):
            os.close(alive)
        setattr(server_state, "_forkserver_alive_fd", None)  # noqa: B010 - a private attribute of multiprocessing
    return server


class _Fd:
    """A file descriptor handed to the forked child (multiprocessing passes it over the forkserver's
    socket, SCM_RIGHTS); the child gets its own copy."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self) -> tuple:
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(df: Any) -> int:
    return int(df.detach())


def _child(argv: list[str], env: dict[str, str], stdin: int, stdout: int, stderr: int, entry: str) -> None:
    """The forked cell: its fds, environment and argv, then ENTRY ("module:function", the CLI of
    `python -m bench ...`)."""
    server = _die_with_forkserver()
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True, write_through=True)
    os.environ.clear()
    os.environ.update(env)
    os.environ["KIT_PARENT_PID"] = str(server)  # the warm process: it ends when the scheduler does
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # a forkserver's child inherits "forkserver" as its start method: a DataLoader's workers would
    # start through it, a new interpreter each. Back to the platform's default, as in a new process.
    multiprocessing.set_start_method(None, force=True)
    from bench.measure import fixedcost
    from bench.run import preload

    fixedcost.forked_from(preload.COLD_START_S, preload.PID, preload.LOADED)
    sys.argv = ["bench", *argv]
    module, _, func = entry.partition(":")
    getattr(importlib.import_module(module), func)()


class WarmProc:
    """A forked cell, spoken to like subprocess.Popen (stdin, stdout, poll, wait, kill, returncode)."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: IO[str], entry: str = ENTRY):
        """ARGV: the cell's `python -m bench` arguments (after `-m bench`); ENTRY: what runs them."""
        ctx = _context()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            self._p = ctx.Process(
                target=_child, args=(argv, env, _Fd(in_r), _Fd(out_w), _Fd(stderr.fileno()), entry), name="cnn-bench cell"
            )
            self._p.start()
            _forked.add(self._p)
        except BaseException:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise
        os.close(in_r)
        os.close(out_w)
        self.pid = self._p.pid
        self.stdin: IO[str] | None = os.fdopen(in_w, "w", buffering=1, encoding="utf-8")
        self.stdout: IO[str] | None = os.fdopen(out_r, "r", encoding="utf-8")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._p.exitcode is not None:
            self.returncode = self._p.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        self._p.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(f"warm cell {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            self._p.kill()


__all__ = ["ENV", "WarmProc", "eligible", "enabled"]
