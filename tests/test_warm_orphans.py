"""Warm starts (bench/run/warm.py) leave nothing behind when their run dies: a signal to the run's
main process (SIGTERM, the way `docker stop`, `timeout` or a CI cancel ends it; SIGHUP, a closed
session; SIGINT, Ctrl-C: all three settle the run's cells) or a kill of it (SIGKILL: no cleanup at
all, as when orchestrate.py kills a matrix that outlived its grace period) ends the forkserver and
every cell forked from it, also a cell busy in a long step (an epoch on a GPU host), which does not
read the scheduler's pipe meanwhile.

The run is real: `python -m bench matrix` on a one-cell study of the torch family (written to a
temp dir and named in KIT_STUDY_MODULES, so no kit file is edited), whose step sleeps. Every
process of the run is found by a marker in its environment (/proc/<pid>/environ), and anything
left is killed by the test itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
MARK = "KIT_TEST_WARM_ORPHAN"  # the run's marker: every process of it inherits this variable
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux only")

STUDY = '''
"""A one-cell study of the torch family whose steps sleep (tests/test_warm_orphans.py)."""
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.core import BackendSpec, Cell, Study, register_study


@dataclass(frozen=True)
class Config:
    steps: int = 3
    sleep_s: float = 600.0  # a step far longer than the test waits: the cell never ends on its own


@dataclass
class Run:
    cfg: Config
    steps: int
    warmup_s: float = 0.0
    dataset: dict = None

    def step(self, i):
        (Path(os.environ["KIT_TEST_WARM_PROBE"]) / f"{os.getpid()}.step").write_text(str(i))
        time.sleep(self.cfg.sleep_s)
        return [{"step": i}]

    def close(self):
        return []

    def system_extra(self):
        return {}


def available():
    return None


def create(cell, data):
    return None


@register_study
class WarmOrphan(Study):
    name, title, seed_doc, Config = "warm-orphan", "warm orphan (a test study)", "999", Config
    backends = {"torch-sleep": BackendSpec("warm_orphan_study", "cpu", family="torch", about="sleeps in its steps")}

    def world_size(self, cell):
        return 0

    def matrix(self, platform, profile):
        return [self.cell(b, name=f"orphan-{b}") for b, s in self.backends.items() if s.platform == platform]

    def open(self, cell, ctx):
        return Run(Config(**cell.params), cell.params["steps"], dataset={"name": "none", "real": True})
'''


def _marked(mark: str) -> list[psutil.Process]:
    """Every live process of the run (its environment carries MARK), zombies left out."""
    got = []
    for p in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(MARK) == mark:
                got.append(p)
        except psutil.Error:  # gone meanwhile, or not readable: not one of ours
            pass
    return got


def _describe(procs: list[psutil.Process]) -> str:
    return "; ".join(
        f"{p.pid} (parent {p.info['ppid']}, {p.info['status']}): {' '.join(p.info['cmdline'] or [])[:90]}" for p in procs
    )


def _wait_for_warm_cell(proc: subprocess.Popen, mark: str, probe: Path, log: Path) -> tuple[psutil.Process, psutil.Process]:
    """Until the run's forkserver has forked the cell and the cell is inside a step: (forkserver, cell)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it was stopped (exit {proc.returncode}): {log.read_text()[-2000:]}")
        procs = _marked(mark)
        servers = [
            p for p in procs if p.info["ppid"] == proc.pid and "multiprocessing.forkserver" in " ".join(p.info["cmdline"] or [])
        ]
        for server in servers:
            cells = [p for p in procs if p.info["ppid"] == server.pid and (probe / f"{p.pid}.step").exists()]
            if cells:
                return server, cells[0]
        time.sleep(0.3)
    pytest.fail(f"no cell was forked warm and in a step within 240 s: {log.read_text()[-2000:]}")


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGKILL", "SIGHUP", "SIGINT"]
)
def test_a_stopped_run_leaves_no_forkserver_and_no_forked_cell(tmp_path: Path, sig: int) -> None:
    mods, probe, nodata, out = tmp_path / "mods", tmp_path / "probe", tmp_path / "no-data", tmp_path / "out"
    for d in (mods, probe, nodata):
        d.mkdir()
    (mods / "warm_orphan_study.py").write_text(STUDY)
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k not in ("KIT_DATA_DIR", "KIT_RUNTIME", "KIT_WARM_START")}
    env.update(
        {
            MARK: mark,
            "KIT_TEST_WARM_PROBE": str(probe),
            "KIT_STUDY_MODULES": "warm_orphan_study",
            "PYTHONPATH": f"{mods}{os.pathsep}{ROOT}",
            "KIT_DATA_DIR": str(nodata),
        }
    )
    log = tmp_path / "run.log"
    argv = [sys.executable, "-m", "bench", "matrix", "warm-orphan", "-p", "cpu", "--repeats", "1", "--out", str(out)]
    with open(log, "w") as f:  # its own session: nothing the test's terminal sends reaches the run
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # as a script's background job starts it: SIGINT ignored (POSIX shells do that, and a CI
            # runner may); the run must still stop on it (it did not: CI failed here twice)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    try:
        server, cell = _wait_for_warm_cell(proc, mark, probe, log)
        assert server.pid != cell.pid and cell.ppid() == server.pid  # forked warm, not a new interpreter
        os.kill(proc.pid, sig)
        deadline = time.monotonic() + 30
        left = _marked(mark)
        while left and time.monotonic() < deadline:
            proc.poll()  # reap the run's main process once it ends (a zombie is no survivor)
            time.sleep(0.5)
            left = _marked(mark)
        assert not left, f"processes of the run outlived it 30 s after {signal.Signals(sig).name}: {_describe(left)}"
        assert proc.wait(timeout=10) == (-signal.SIGKILL if sig == signal.SIGKILL else 130), log.read_text()[-2000:]
    finally:
        for p in _marked(mark):  # never leave one behind, whatever failed above
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_the_host_cli_takes_sigint_even_when_started_with_it_ignored() -> None:
    """orchestrate.py started as a background job inherits SIGINT ignored: its entry point puts
    Ctrl-C's handler back, so `kill -INT` stops a run there as it does in a terminal."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from host.cli import start\n"
        "try:\n    start(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().splitlines()[-1] == "True", r.stdout + r.stderr
