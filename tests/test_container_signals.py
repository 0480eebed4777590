"""`orchestrate.py run --runtime docker` stopped by a signal leaves no container behind, and an
orphan (its orchestrate.py killed with -9) is found by its owner label and removed by `doctor`
and by the next run. Real containers of a kit cpu image (this checkout's, else cnn-bench/cpu:latest),
run through `run --image`, so nothing is built."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.errors import KitError
from host import containers, engine, images

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def image() -> str:
    import docker

    reason = engine.engine_ok()
    if reason:
        pytest.skip(f"no Docker engine: {reason}")
    try:
        return engine.find_image("cpu")[1].id
    except KitError:
        try:
            return images.docker_client().images.get("cnn-bench/cpu:latest").id
        except docker.errors.DockerException as err:  # type: ignore[attr-defined]
            pytest.skip(f"no cpu image of the kit: {str(err)[:200]}")


def _start(image: str, tmp: Path, out: Path) -> subprocess.Popen:
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    argv = [sys.executable, "orchestrate.py", "run", "cpu", "--runtime", "docker", "--image", image]
    argv += ["--study", "mnist-cnn", "--profile", "smoke", "--set", "epochs=50", "--data-dir", str(data), "--out", str(out)]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _owned_by(pid: int) -> list:
    """The kit's containers whose owner label names PID on this host."""
    return [
        c
        for c, _, _ in containers.kit_containers(images.docker_client())
        if c.labels[containers.OWNER_LABEL].split("/")[1] == str(pid)
    ]


def _wait_training(proc: subprocess.Popen, out: Path) -> None:
    """Until PROC's container runs and its matrix has started a cell (a rows file under OUT)."""
    for _ in range(600):
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it was stopped: {proc.stdout.read() if proc.stdout else ''}")
        if _owned_by(proc.pid) and any(out.glob("mnist-cnn/*/log.txt")):
            return
        time.sleep(0.5)
    proc.kill()
    pytest.fail("no container of the run started a cell")


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_a_container_run_stops_and_removes_its_container(image: str, tmp_path: Path, sig: int) -> None:
    out = tmp_path / "out"
    proc = _start(image, tmp_path, out)
    _wait_training(proc, out)
    proc.send_signal(sig)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, text
    assert f"interrupted by {signal.Signals(sig).name}: the cpu container was stopped and removed" in text, text
    assert _owned_by(proc.pid) == [], "a container outlived its run"
    from bench.core.rows import cell_status

    states = {cell_status(d) for d in out.glob("mnist-cnn/*") if d.is_dir()}
    assert "interrupted" in states and states <= {"ok", "interrupted"}, states  # the running cell was settled as on Ctrl-C


@pytest.mark.docker
def test_an_orphan_is_reaped_by_doctor_and_by_the_next_run(image: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _start(image, tmp_path, out)
    _wait_training(first, out)
    first.kill()  # kill -9: nothing in it can stop its container
    first.communicate(timeout=60)
    orphan = _owned_by(first.pid)
    assert [c.status for c in orphan] == ["running"], "the orphan this test needs did not stay"

    doctor = subprocess.run([sys.executable, "orchestrate.py", "doctor"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    line = next(x for x in doctor.stdout.splitlines() if orphan[0].short_id in x)
    assert "kit containers" in line and "removed orphan container" in line and f"owner pid {first.pid} is gone" in line, line
    assert _owned_by(first.pid) == []

    second = _start(image, tmp_path, out)
    _wait_training(second, out)
    second.kill()
    second.communicate(timeout=60)
    assert _owned_by(second.pid), "the second orphan this test needs did not stay"
    third = _start(image, tmp_path, out)  # the orphan held the results dir's lock: the next run must reap it to start
    _wait_training(third, out)
    assert _owned_by(second.pid) == []
    third.send_signal(signal.SIGTERM)
    text, _ = third.communicate(timeout=120)
    assert "removed orphan container" in text and f"owner pid {second.pid} is gone" in text, text
    assert _owned_by(third.pid) == []


def test_the_owner_label_tells_an_orphan_from_a_live_run_and_another_hosts() -> None:
    """The label's rule on labels alone: this process runs; a pid that is gone; a pid now another
    process (another start time); another host's container is never this host's to reap."""
    me = containers.owner()
    host, pid, started = me.split("/")
    assert containers._owner_gone(me) == (False, f"owner pid {pid} runs")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert containers._owner_gone(f"{host}/{gone.pid}/1.00")[0] is True
    assert containers._owner_gone(f"{host}/{os.getpid()}/{float(started) - 100:.2f}") == (
        True,
        f"owner pid {os.getpid()} is another process now",
    )
    assert containers._owner_gone(f"other-host/{pid}/{started}") == (False, "started by the kit on host 'other-host'")
