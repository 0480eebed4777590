"""What keeps the samplers cheap: the RSS sampler's one-pread reading, the telemetry thread's PID judgement."""

from __future__ import annotations

import time

import psutil
import pytest


@pytest.mark.quiet
def test_rss_reading_is_psutils() -> None:
    from bench.measure import memory

    got, want = memory._read_rss(), psutil.Process().memory_info().rss
    assert abs(got - want) <= 8 * 2**20  # the same counter read a moment apart (allocations in between)
    with memory.RSSSampler(interval_s=0.005) as s:
        time.sleep(0.05)
    assert s.n_samples >= 3 and s.peak_mb >= s.mean_mb > 0


def test_telemetry_judges_each_gpu_pid_once(monkeypatch) -> None:
    from bench.measure import telemetry as T

    scans: list[list[int]] = []

    def ours(pids: list[int], pid: int | None = None) -> set[int]:
        scans.append(sorted(pids))
        return {100, 101}

    class FakeNvml:  # what NVML lists: our cell (100) all along, a sibling (101) and a stranger (900) later
        n = 0

        def sample(self) -> dict:
            self.n += 1
            return {"sm_mhz": 1980, "reasons": 0, "pids": [100] if self.n < 4 else [100, 101, 900]}

    monkeypatch.setattr(T, "_ours", ours)
    t = T.Telemetry(gpu=False, interval_s=0.01, process=False)  # the fake NVML lives in this process
    t._nvml = FakeNvml()  # type: ignore[assignment]
    t.start()
    while len(t.samples) < 8:
        time.sleep(0.01)
    t.stop()
    assert scans == [[100], [101, 900]]  # one scan per new PID set, not one a sample
    assert t.samples[0]["ours"] == [100] and t.samples[-1]["ours"] == [100, 101]


def test_a_forked_child_reads_its_own_rss_not_its_parents() -> None:
    import os

    from bench.measure import memory

    memory._read_rss()  # the parent's file is open before the fork, as in a cell with DataLoader workers
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child grows by ~80 MB; a reader of the parent's file would not see it
        grow = b"\x01" * (80 * 2**20)  # touched pages: resident
        ok = abs(memory._read_rss() - psutil.Process().memory_info().rss) <= 8 * 2**20 and len(grow) > 0
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == b"1"
