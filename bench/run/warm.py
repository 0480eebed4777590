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

Off with KIT_WARM_START=0 (every cell a new interpreter, as before), and off Linux (macOS
forks badly under Objective-C runtimes; the MPS wrapper starts cells cold).
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing import reduction
from typing import IO, Any

from bench.core.cell import Cell
from bench.core.registry import get_study

ENV = "KIT_WARM_START"
ENTRY = "bench.cli:main"  # what `python -m bench` runs
WARM_FAMILIES = frozenset({"torch"})

_lock = threading.Lock()
_ctx: Any = None


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
    global _ctx
    with _lock:
        if _ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["bench.run.preload"])
            _ctx = ctx
        return _ctx


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
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True, write_through=True)
    os.environ.clear()
    os.environ.update(env)
    os.environ["KIT_PARENT_PID"] = str(os.getppid())  # the warm process: it ends when the scheduler does
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
