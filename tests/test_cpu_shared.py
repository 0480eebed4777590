"""Other processes on the CPUs: a real cell run beside CPU hogs carries `cpu-shared`, its
system.json the shares and the load, and the run warns once with the remedy; the run's own
processes are never counted as others'."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.core import noise
from bench.core.rows import read_rows
from bench.measure.telemetry import CpuShare

pytestmark = pytest.mark.quiet  # timings and the load average: the serial pass of .ci/run

ROOT = Path(__file__).resolve().parents[1]
HOG = "while True: pass"


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


def test_a_cell_beside_a_cpu_hog_is_flagged_cpu_shared_and_the_run_warns_once(tmp_path: Path) -> None:
    n = max(1, (os.cpu_count() or 2) // 2)  # half the machine's logical CPUs, busy: far above the limit
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]
    try:
        c0, t0 = _cpu_s([h.pid for h in hogs]), time.monotonic()
        argv = [sys.executable, "-m", "bench", "matrix", "mnist-cnn", "--profile", "smoke", "--repeats", "1"]
        argv += ["--only", "backend=torch-cpu", "--only", "pipeline=resident", "--set", "epochs=3", "--out", str(tmp_path)]
        run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
        c1, t1 = _cpu_s([h.pid for h in hogs]), time.monotonic()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert run.returncode == 0, run.stderr[-2000:]
    hog_pct = 100 * (c1 - c0) / ((t1 - t0) * (os.cpu_count() or 1))  # the hogs' share of every CPU, over the run
    (cell,) = [d for d in (tmp_path / "mnist-cnn").iterdir() if d.is_dir()]
    system = json.loads((cell / "system.json").read_text())
    tel = system["telemetry"]
    assert tel["cpu_others_pct"] >= 0.7 * hog_pct, (tel, hog_pct)  # the hogs are others', whatever else runs here
    assert tel["cpu_others_pct"] > noise.CPU_SHARED_LIMIT and tel["cpu_run_pct"] > 0, tel
    assert tel["cpu_system_pct"] >= tel["cpu_others_pct"] and tel["load_1m_start"] is not None, tel
    assert set(system["load_avg"]) == {"1m", "5m", "15m"}
    rows = read_rows(cell / "rows.jsonl")
    flag = f"cpu-shared({tel['cpu_others_pct']:.0f}%)"
    assert rows and all(flag in r["flags"].split(";") for r in rows), [r["flags"] for r in rows]
    warnings = [line for line in run.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "1 of 1 cells ran beside other work" in warnings[0], run.stdout[-2000:]
    assert noise.CPU_SHARED_REMEDY in warnings[0]
    assert run.stdout.splitlines()[-1] == warnings[0], "the warning is the run's last line"
    # timm's benchmark.py's lines: the cell's speed when it finishes, then the run's, fastest first
    out = run.stdout + run.stderr
    assert re.search(
        r"^ok +torch-cpu resident default \([\d.]+ s\): [\d,]+\.\d samples/s, [\d.]+ ms/step, 53\.9k params$", out, re.M
    ), out
    assert re.search(r"^  mnist-cnn  torch-cpu resident default ⚑  [\d,]+\.\d samples/s, .* \(n=1\)$", run.stdout, re.M), (
        run.stdout
    )


def test_the_runs_own_processes_are_never_others() -> None:
    """A busy process inside the run's tree counts as the run's; the same process outside the tree
    (a sibling of the run's root) counts as others'."""
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ours, outside = CpuShare(run_root=os.getpid()), CpuShare(run_root=idle.pid)
        h0, t0 = _cpu_s([hog.pid]), psutil.cpu_times()
        time.sleep(1.5)
        ours.stop()
        outside.stop()
        h1, t1 = _cpu_s([hog.pid]), psutil.cpu_times()
    finally:
        for p in (hog, idle):
            p.kill()
            p.wait()
    total = sum(t1) - sum(t0) - (getattr(t1, "guest", 0) - getattr(t0, "guest", 0))
    total -= getattr(t1, "guest_nice", 0) - getattr(t0, "guest_nice", 0)
    hog_pct = 100 * (h1 - h0) / total
    a, b = ours.summary(), outside.summary()
    assert hog_pct > 5, hog_pct
    assert a["cpu_run_pct"] >= 0.8 * hog_pct, (a, hog_pct)  # the hog is this test process's child: the run's
    assert b["cpu_run_pct"] < 0.2 * hog_pct and b["cpu_others_pct"] >= 0.8 * hog_pct, (b, hog_pct)


def test_the_flag_and_its_threshold() -> None:
    assert noise.telemetry_flags({"cpu_others_pct": noise.CPU_SHARED_LIMIT}) == []
    assert noise.telemetry_flags({"cpu_others_pct": 37.6}) == ["cpu-shared(38%)"]
    assert noise.telemetry_flags({"cpu_others_pct": None, "note_cpu_share": "x"}) == []


PINNED = """
import json, os, sys, time
os.sched_setaffinity(0, {0})
from bench.measure.telemetry import CpuShare
s = CpuShare(os.getpid())
t = time.monotonic()
while time.monotonic() - t < 2.0:
    pass
print(json.dumps(s.summary()))
"""


def _share_beside_hog_on(cpu: int) -> dict:
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\n{HOG}"])
    try:
        time.sleep(0.3)
        r = subprocess.run([sys.executable, "-c", PINNED], cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        hog.kill()
        hog.wait()
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_the_share_counts_only_the_cells_own_cpus() -> None:
    """A cell bound to CPU 0 (a Slurm task on its core) is not slowed by a hog bound to CPU 1, and is
    not flagged for it; the same hog on CPU 0 takes about half of the cell's CPU and is flagged."""
    import pytest

    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs logical CPUs 0 and 1")
    if os.getloadavg()[0] > 1.5:  # other work on CPU 0 would be counted, rightly: not this test's case
        pytest.skip(f"the machine is busy (load {os.getloadavg()[0]:.1f}): the apart case needs CPU 0 quiet")
    apart = _share_beside_hog_on(1)
    beside = _share_beside_hog_on(0)
    # whatever else runs on CPU 0 counts in both; the hog counts only where it shares the cell's CPU
    assert apart["cpu_share_cpus"] == 1 and beside["cpu_others_pct"] > 30, (apart, beside)
    assert apart["cpu_others_pct"] < beside["cpu_others_pct"] - 20, (apart, beside)


def test_the_cells_cpus_add_up_to_the_machine() -> None:
    from bench.measure.telemetry import _cpu_seconds

    cpus = sorted(os.sched_getaffinity(0))
    one = [_cpu_seconds([c]) for c in cpus]
    everyone = _cpu_seconds()
    assert sum(t for _, t in one) == pytest_approx(everyone[1]) and all(0 <= b <= t for b, t in one)


def pytest_approx(x: float):
    import pytest

    return pytest.approx(x, rel=0.01)


def test_what_to_trust_names_the_rows_of_a_busy_machine(tmp_path):
    """Issue 57 item 4: every cell of a run beside other work carried the flag, the terminal warned once,
    and the page showed only a mark while its verdicts read 'holds': What to trust now names the rows,
    how many cells and how busy, and what to do."""
    import json
    import shutil
    from pathlib import Path

    from bench.core import answers as A
    from bench.core.registry import studies
    from bench.core.resultset import collect
    from host import answers as H

    ref = Path(__file__).resolve().parent.parent / "results" / "reference" / "cpu-2core-epyc"
    run = Path(shutil.copytree(ref, tmp_path / "busy"))
    for rows in run.glob("*/*/rows.jsonl"):  # every cell of the run, as on the VM shared with other work
        lines = [json.loads(x) for x in rows.read_text().splitlines()]
        for r in lines:
            r["flags"] = ";".join(x for x in [r.get("flags") or "", "cpu-shared(63%)"] if x)
        rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    cells = collect([run])[0]
    answers = A.judge_all(studies(), cells)
    text = "\n".join(H.trust(answers, cells, []))
    assert "ran beside other work" in text and "up to 63% of the CPUs" in text and "--rerun" in text
    decided = [a for a in answers if a.verdict in ("holds", "does not hold") and a.findings]
    assert decided and all(H.verdict_text(a).endswith("; on a busy machine)") for a in decided)
    quiet = "\n".join(H.trust(A.judge_all(studies(), collect([ref])[0]), collect([ref])[0], []))
    assert "ran beside other work" not in quiet
