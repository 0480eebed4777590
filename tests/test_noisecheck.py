"""The noise check (bench/measure/noisecheck.py): the probe runs in fresh processes and gives a
spread, the state is read from this host, and what a comparison resolves grows with the spread
and shrinks with the repeats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.measure import noisecheck

ROOT = Path(__file__).resolve().parent.parent


def test_the_probe_gives_one_positive_figure_per_fresh_process():
    values, why = noisecheck.probe("cpu", 2)
    assert why == "" and len(values) == 2 and all(v > 0 for v in values)
    assert noisecheck.spread(values) is not None and noisecheck.spread(values[:1]) is None


def test_a_probe_that_cannot_run_says_why_instead_of_a_figure():
    values, why = noisecheck.probe("tpu", 3)
    assert values == [] and "unknown probe" in why


def test_what_a_comparison_resolves_grows_with_the_spread_and_shrinks_with_rounds():
    quiet, noisy = noisecheck.resolves(0.02), noisecheck.resolves(0.08)
    for k in ("n3", "n6", "n10", "cs20"):
        assert quiet[k] is not None and noisy[k] is not None and quiet[k] < noisy[k], k
    assert quiet["cs20"] < quiet["cs10"] if quiet["cs10"] is not None else True
    assert quiet["n10"] < quiet["n6"]  # the 95 % interval narrows with repeats
    assert 0.01 < quiet["n10"] < 0.05  # about 1.96 * sqrt(2) * 0.02 / sqrt(10) ~ 0.018, bootstrap-wide


def test_the_state_names_what_drives_the_noise():
    w = noisecheck.Window().start()
    sum(i * i for i in range(200_000))
    got = w.stop()
    assert got["window_s"] > 0 and "load1" in got
    if Path("/proc/stat").exists():
        assert 0 <= got["steal_pct"] <= 100 and 0 <= got["busy_pct"] <= 100
    c = noisecheck.cpu_state()
    assert c["cores"] >= 1 and set(c) == {"governor", "turbo", "cores"}
    line = noisecheck.matrix_line(False, ["cpu"])
    assert line.startswith("noise: ") and "governor" in line and "spread not probed" in line and "\n" not in line


def test_orchestrate_noise_prints_the_state_and_the_probe_and_json(tmp_path):
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "noise", "--procs", "2", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["probes"]["cpu"]["values"]) == 2 and set(d["probes"]["cpu"]["resolves"]) >= {"n3", "n6", "n10"}
    text = noisecheck.lines(d)
    assert text[0].startswith("state: ") and text[1].startswith("CPU probe spread") and "at 3 repeats" in text[1]
    r = subprocess.run([sys.executable, "orchestrate.py", "noise", "--procs", "1"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "--procs" in r.stderr
