"""bench.measure.sampler on this machine's real CPU path; NVML is absent here (no GPU), so
the GPU path is tested only for failing soft. No NVML mock pretends to be a GPU."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.measure.sampler import CPU_FIELDS, TelemetrySampler, _Rapl, idle_baseline

pytestmark = pytest.mark.quiet  # timings and the load average: the serial pass of .ci/run

HZ = 20.0
HAS_NVML = importlib.util.find_spec("pynvml") is not None


def _busy(seconds: float) -> None:
    """One core busy in C code that lets the GIL go (hashlib over 1 MB), like a torch op."""
    buf = b"x" * (1 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hashlib.sha256(buf).digest()


@pytest.fixture(scope="module")
def run() -> TelemetrySampler:
    """0.3 s idle, 1 s busy between marks, 0.2 s idle: one sampler shared by the tests below."""
    t0 = time.monotonic()
    s = TelemetrySampler(None, hz=HZ).start()
    time.sleep(0.3)
    s.mark("busy-start")
    c0, w0 = time.process_time(), time.monotonic()
    _busy(1.0)
    s.got_pct = 100 * (time.process_time() - c0) / (time.monotonic() - w0)  # type: ignore[attr-defined]  # the core it got
    s.mark("busy-end")
    time.sleep(0.2)
    s.stop()
    s.outer_s = time.monotonic() - t0  # type: ignore[attr-defined]  # the fixture's own clock around it
    return s


def test_rate_and_cpu_fields(run: TelemetrySampler) -> None:
    summ = run.summary()
    assert 1.4 < summ["window_s"] <= run.outer_s  # type: ignore[attr-defined]  # orderings, not wall-clock bounds
    assert summ["achieved_hz"] < 1.1 * HZ and summ["samples"] >= 0.5 * 1.5 * HZ  # a loaded machine may sample late
    assert summ["samples"] == pytest.approx(summ["window_s"] * HZ, rel=0.2)
    first, later = run.samples[0], run.samples[1:]
    assert first["cpu_system_pct"] is None and first["cpu_process_pct"] is None  # the prime: nothing to compare with
    for s in later:
        assert 0 <= s["cpu_system_pct"] <= 100 and s["cpu_process_pct"] >= 0
        assert 0 <= s["cpu_core_min_pct"] <= s["cpu_core_max_pct"] <= 100
        assert s["rss_mb"] > 1 and s["threads"] >= 2 and s["processes_system"] >= 1  # >= 2: the sampler's own thread
    ts = [s["t_s"] for s in run.samples]
    assert ts == sorted(ts) and ts[0] >= 0
    assert summ["sample_ms_mean"] < 50  # what one sample costs, GIL waits included
    assert 0 < summ["sampler_cpu_pct"] < 20  # the thread's own CPU, 100 = one core
    assert summ["psutil_version"] and "gpu_util_meaning" not in summ  # no GPU asked for, none reported


def test_marks_window_the_summary(run: TelemetrySampler) -> None:
    busy = run.summary("busy-start", "busy-end")
    whole = run.summary()
    assert busy["window_s"] == pytest.approx(1.0, abs=0.1)
    assert busy["window_start_mark"] == "busy-start" and busy["window_end_mark"] == "busy-end"
    assert busy["samples"] < whole["samples"]
    # one core busy, psutil's scale (100 = one core), as much of it as this process got (a loaded
    # machine gives it less than a core: the process's own CPU clock says how much); the
    # CPU-seconds counter is read at the marks
    got = run.got_pct  # type: ignore[attr-defined]
    assert got - 25 < busy["cpu_process_pct_mean"] < got + 25 and busy["cpu_process_pct_mean"] < 130
    assert busy["cpu_process_pct_mean"] > whole["cpu_process_pct_mean"]
    assert busy["cpu_core_max_pct_mean"] > 50
    assert busy["rss_mb_max"] > 1 and busy["threads_max"] >= 2 and busy["processes_system_max"] >= 1
    tail = run.summary("busy-end")  # to the last sample
    assert tail["window_s"] == pytest.approx(0.2, abs=0.1) and tail["cpu_process_pct_mean"] < 50
    with pytest.raises(ValueError, match="no mark 'nope'"):
        run.summary("nope")


def test_rapl_is_a_number_or_none_with_a_note(run: TelemetrySampler) -> None:
    summ = run.summary("busy-start", "busy-end")
    if summ["cpu_energy_j"] is None:
        assert summ["cpu_energy_note"] and "\n" not in summ["cpu_energy_note"]
        assert run.notes["rapl"] == summ["note_rapl"]
        assert all(s["rapl_uj"] is None for s in run.samples)
    else:
        assert summ["cpu_energy_j"] > 0 and summ["cpu_energy_note"] is None


def test_rapl_wraparound_and_zones(tmp_path: Path) -> None:
    """A powercap tree written here: package zones summed, psys and subzones left out, a
    counter that wraps at max_energy_range_uj still adds up."""
    for zone, name, energy in (
        ("intel-rapl:0", "package-0", 900),
        ("intel-rapl:1", "package-1", 50),
        ("intel-rapl:1:0", "core", 7),
    ):
        d = tmp_path / zone
        d.mkdir()
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text(f"{energy}\n")
        (d / "max_energy_range_uj").write_text("1000\n")
    psys = tmp_path / "intel-rapl:2"
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    (psys / "energy_uj").write_text("5\n")
    (psys / "max_energy_range_uj").write_text("1000\n")
    r = _Rapl(tmp_path)
    assert r.note is None and len(r.zones) == 2
    assert r.read() == 950
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("100\n")  # 900 -> 1000 wraps -> 100: +200
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("60\n")
    assert r.read() == 950 + 200 + 10
    empty = _Rapl(tmp_path / "absent")
    assert empty.read() is None and empty.note and "\n" not in empty.note


def test_csv_written_whole_with_header_and_marks(run: TelemetrySampler, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "telemetry.csv"
    run.write_csv(path)
    assert [p.name for p in path.parent.iterdir()] == ["telemetry.csv"]  # no temp file left
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["t_s", *CPU_FIELDS, "sample_ms", "marks"]
    assert len(rows) == len(run.samples)
    assert rows[0]["cpu_process_pct"] == ""  # None is an empty cell, not 0
    assert float(rows[-1]["rss_mb"]) > 1
    marks = [m for r in rows for m in r["marks"].split(";") if m]
    assert [m.split("@")[0] for m in marks] == ["busy-start", "busy-end"]
    run.write_csv(path)  # over an existing file: still one file
    assert [p.name for p in path.parent.iterdir()] == ["telemetry.csv"]


def test_children_counted_while_running_and_after_exit() -> None:
    """A child busy for ~1.2 s while this process sleeps: its CPU shows in the tree's share
    (found by the once-a-second listing, then counted from its first instant), and once it
    is reaped its time stays counted (children times): no drop, no double count."""
    import resource

    s = TelemetrySampler(None, hz=HZ).start()
    s.mark("spawn")
    before, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.2: pass"])
    time.sleep(0.6)
    mid = s.samples[-1]
    child.wait()
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - w0
    s.mark("reaped")
    time.sleep(0.2)
    s.stop()
    summ = s.summary("spawn", "reaped")
    # the child's core, as much of it as it got (its own CPU time, from the kernel once reaped); this process slept
    got = 100 * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / wall
    assert got - 25 < summ["cpu_process_pct_mean"] < got + 25 and summ["cpu_process_pct_mean"] < 130
    assert summ["threads_max"] > s.samples[0]["threads"]  # the child was in the tree at some point
    assert mid["cpu_process_s"] <= s.samples[-1]["cpu_process_s"]
    cpu_s = [x["cpu_process_s"] for x in s.samples]
    assert all(b >= a - 0.02 for a, b in zip(cpu_s, cpu_s[1:]))  # cumulative: never drops (ticks of 10 ms)


@pytest.mark.skipif(HAS_NVML, reason="nvidia-ml-py is installed here: the no-NVML path cannot be shown")
def test_no_nvml_gpu_asked_notes_one_line_and_cpu_goes_on() -> None:
    s = TelemetrySampler([0], hz=HZ).start()
    time.sleep(0.2)
    s.mark("m")
    s.stop()
    assert "nvidia-ml-py not installed" in s.notes["gpu"] and "\n" not in s.notes["gpu"]
    assert s.gpus == [] and s.power_fields == {}
    assert len(s.samples) >= 3 and all("rss_mb" in x and not any(k.startswith("gpu") for k in x) for x in s.samples)
    summ = s.summary(None, "m")
    assert summ["note_gpu"] == s.notes["gpu"] and summ["nvml_version"] is None
    assert not any(k.startswith("gpu0") for k in summ)


def test_cpu_off_samples_time_only() -> None:
    s = TelemetrySampler(None, hz=HZ, cpu=False).start()
    time.sleep(0.15)
    s.stop()
    assert s.columns() == ["t_s", "sample_ms", "marks"]
    assert all(set(x) == {"t_s", "sample_ms"} for x in s.samples)
    assert "cpu_energy_j" not in s.summary()


def test_idle_baseline_cpu_only_notes_not_crashes() -> None:
    out = idle_baseline([0], seconds=0.4, hz=HZ)
    assert out["idle_s"] == pytest.approx(0.4, abs=0.15) and out["idle_samples"] >= 5
    if out["cpu_idle_power_w"] is None:
        assert out["cpu_idle_power_note"] and "\n" not in out["cpu_idle_power_note"]
    else:
        assert out["cpu_idle_power_w"] > 0
    if not HAS_NVML:
        assert "nvidia-ml-py not installed" in out["note_gpu"]
        assert not any(k.startswith("gpu0") for k in out)


def test_misuse_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="hz must be > 0"):
        TelemetrySampler(None, hz=0)
    s = TelemetrySampler(None, hz=HZ)
    with pytest.raises(RuntimeError, match="before start"):
        s.mark("early")
    with pytest.raises(ValueError, match="no samples"):
        s.summary()
    s.stop()  # never started: nothing to do
    s.start()
    with pytest.raises(RuntimeError, match="called twice"):
        s.start()
    s.stop()
    s.stop()


def test_a_window_that_just_ended_has_its_counters() -> None:
    """window() right after the work: settle() takes a full reading after the end, so the
    counters read once a second (CPU seconds here, energy on a GPU) bracket the window."""
    s = TelemetrySampler(None, hz=10.0).start()
    time.sleep(1.2)  # let a slow reading pass, so the next one is a second away
    t0 = time.monotonic()
    end = t0 + 0.3
    while time.monotonic() < end:
        hashlib.sha256(b"x" * 100_000).digest()
    t1 = time.monotonic()
    w = s.window(t0, t1, "work")
    s.stop()
    assert w["window_s"] == pytest.approx(t1 - t0, abs=1e-6)
    assert isinstance(w["cpu_process_pct_mean"], float) and w["cpu_process_pct_mean"] > 20


class _FakeProc:
    """A process of the tree whose CPU seconds are scripted, one reading per sample."""

    def __init__(self, cpu_s: list[float]):
        self.cpu_s = iter(cpu_s)

    def read(self) -> tuple[float, int, int]:
        return next(self.cpu_s), 1 << 20, 1

    def close(self) -> None:
        pass


class _FakeCores:
    def read(self) -> list[tuple[float, float]]:
        return [(0.0, 1.0)] * 16

    def close(self) -> None:
        pass


def test_a_worker_found_late_adds_only_what_it_ran_after_it_was_found() -> None:
    """The tree is listed once a second: 8 DataLoader workers found 1 s late once read as 8 s of
    CPU in a 0.1 s sample (8,000 %, on 16 cores). The per-sample share now leaves out what a
    process ran before it was found; the cumulative counter (what windows are cut from) keeps it."""
    from bench.measure.sampler import _Cpu

    cpu = _Cpu({})
    cpu.close()
    cpu.cores = _FakeCores()  # type: ignore[assignment]
    cpu.tree = {cpu.me.pid: _FakeProc([1.0, 1.05, 1.10, 1.15])}  # type: ignore[dict-item]
    got = []
    for k, t in enumerate((0.0, 0.1, 0.2, 0.3)):
        if k == 2:
            cpu.tree[2**22 + 1] = _FakeProc([8.0, 8.1])  # type: ignore[assignment]  # found now, 8 s of CPU behind it
        s: dict = {}
        cpu.read(s, t, slow=False)
        got.append(s)
    assert got[0]["cpu_process_pct"] is None
    assert got[1]["cpu_process_pct"] == pytest.approx(50.0)
    assert got[2]["cpu_process_pct"] == pytest.approx(50.0)  # was 8,050 %
    assert got[3]["cpu_process_pct"] == pytest.approx(150.0)  # the worker's 0.1 s, from now on
    assert got[2]["cpu_process_s"] == pytest.approx(9.10)  # the counter keeps the worker's whole time


def test_gpu_energy_of_a_window_with_no_reading_after_its_end_comes_from_its_power_samples() -> None:
    """Fake NVML readings: power every 0.1 s (300 and 400 W), the energy counter once a second;
    the window ends at 2.39 s, after the last reading (2.3 s), as when window() ran before the
    sampler's next tick. Before: 'none: no energy counter and no power samples'."""
    s = TelemetrySampler(None, hz=10.0, cpu=False)
    s.power_fields = {0: "instant"}
    s.samples = [
        {"t_s": 0.1 * k, "gpu0_power_w": 300.0 + 100 * (k % 2), **({"gpu0_energy_mj": 350_000 * k // 10} if k % 10 == 0 else {})}
        for k in range(24)
    ]
    a, b = 0.05, 2.39
    win = [x for x in s.samples if a <= x["t_s"] <= b]
    out = s._gpu_summary(0, win, a, b)
    mean = sum(x["gpu0_power_w"] for x in win) / len(win)
    assert out["gpu0_energy_j"] == pytest.approx(mean * (b - a))
    assert out["gpu0_energy_source"].startswith(f"mean of the window's {len(win)} instant power samples")
    inside = s._gpu_summary(0, [x for x in s.samples if 0.05 <= x["t_s"] <= 1.95], 0.05, 1.95)
    assert inside["gpu0_energy_source"].startswith("counter")  # bracketed: the counter, as before
