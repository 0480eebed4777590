"""The samplers' child process (bench.measure.outproc): it reads the parent's RSS from outside,
the parent runs no sampler thread meanwhile, and a child that cannot read says why in one line."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from bench.measure import memory
from bench.measure.outproc import ChildSampler, ChildSamplerError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/statm is Linux's")


def test_rss_child_sees_the_parents_allocation_and_no_thread_runs_here() -> None:
    threads_before = threading.active_count()
    with memory.RSSSampler(interval_s=0.005) as s:
        assert threading.active_count() == threads_before  # read from outside: no sampler thread here
        time.sleep(0.05)
        big = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
        time.sleep(0.05)
        del big
        time.sleep(0.05)
    assert s.how.startswith("a child process"), s.how
    assert s.n_samples >= 10
    assert s.peak_mb - min(s._samples) / memory.MB >= 150  # the child saw the 200 MiB come and go
    assert s.peak_mb > s.mean_mb > 0


def test_thread_fallback_reads_the_same_counter() -> None:
    with memory.RSSSampler(interval_s=0.005, process=False) as s:
        time.sleep(0.05)
    assert s.how.startswith("a thread") and s.n_samples >= 3
    with memory.RSSSampler(interval_s=0.005) as c:
        time.sleep(0.05)
    assert abs(c.peak_mb - s.peak_mb) < 64  # one process, a moment apart


def test_a_child_that_cannot_read_says_why_and_rss_falls_back() -> None:
    with pytest.raises(ChildSamplerError, match=r"rss sampler process did not start: .*(FileNotFoundError|No such file)"):
        ChildSampler("rss", 2**22 + 12345, 0.01).start()  # no such PID: /proc/PID/statm is missing
    with pytest.raises(ValueError, match="kind must be"):
        ChildSampler("disk", os.getpid(), 0.01)


def test_a_child_killed_mid_region_loses_its_readings_not_the_result() -> None:
    with memory.RSSSampler(interval_s=0.005) as s:
        s._child._proc.kill()  # type: ignore[union-attr]
        time.sleep(0.02)
    assert "readings were lost" in s.how and s.n_samples == 1 and s.peak_mb > 0


def test_telemetry_samples_from_a_child_on_the_parents_clock() -> None:
    from bench.measure.telemetry import Telemetry

    threads_before = threading.active_count()
    t = Telemetry(gpu=False, interval_s=0.02).start()
    assert threading.active_count() == threads_before and t.how == "a child process"
    time.sleep(0.2)
    t.stop()
    ts = [s["t"] for s in t.samples]
    assert len(ts) >= 4 and ts == sorted(ts) and 0 <= ts[0] < 0.2 + 5  # seconds since the parent's start()
    s = t.summary()
    assert s["samples"] == len(ts) and "cpu_run_pct" in s or "note_cpu_share" in s
    assert "note_sampler" not in s


def test_telemetry_judges_ours_for_the_cell_process_not_the_child() -> None:
    from bench.measure.telemetry import _ours

    me = os.getpid()
    assert me in _ours([], me) and os.getppid() in _ours([], me)
