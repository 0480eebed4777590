"""The run's speed lines as timm's benchmark.py prints them: samples/s, ms per optimizer step and
the parameter count per cell, and one line per configuration sorted by throughput, checked by hand
against the committed CPU reference's rows."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from bench.core.registry import get_study
from bench.core.resultset import load_cells
from bench.run import speedline

REF = Path(__file__).resolve().parents[1] / "results" / "reference" / "cpu-2core-epyc"


def _cells(study: str) -> list:
    return load_cells(sorted(d for d in (REF / study).iterdir() if d.is_dir()))


def test_one_cells_speed_is_its_median_epoch_rate_its_batch_and_its_nets_parameters() -> None:
    cell = next(c for c in _cells("mnist-cnn") if c.first.get("backend") == "torch-cpu")
    epochs = [r for r in cell.ok_rows if r.get("epoch") is not None]
    sps = statistics.median(r["samples_per_s"] for r in epochs)
    batch = epochs[0]["batch_size_used"] if "batch_size_used" in epochs[0] else epochs[0]["batch_size"]
    got = speedline.speeds(get_study("mnist-cnn"), cell.rows)["torch-cpu"]
    assert got["samples_per_s"] == sps and abs(got["ms_per_step"] - 1000 * batch / sps) < 1e-9
    assert got["params"] == 8 * 9 + 8 + 16 * 8 * 9 + 16 + 400 * 128 + 128 + 128 * 10 + 10  # 8c3-16c3-400-128-10
    text = speedline.finished_text(get_study("mnist-cnn"), cell.rows)
    assert text == f"{sps:,.1f} samples/s, {1000 * batch / sps:.2f} ms/step, 53.9k params"


def test_an_mlp_step_is_one_full_batch_iteration() -> None:
    cell = _cells("mlp-scratch")[0]
    plain = [r for r in cell.ok_rows if r.get("phase") == "plain"]
    it_s = statistics.median(r["iterations"] / r["total_s"] for r in plain)
    got = speedline.speeds(get_study("mlp-scratch"), cell.rows)["numpy"]
    assert abs(got["ms_per_step"] - 1000 / it_s) < 1e-9 and got["samples_per_s"] == it_s * plain[0]["n_train"]
    assert got["params"] == 784 * 10 + 10 + 10 * 10 + 10


def test_the_summary_has_one_line_per_configuration_fastest_first() -> None:
    cells = _cells("mnist-cnn") + _cells("mlp-scratch")
    lines = speedline.sorted_lines(cells)
    assert lines[0].startswith("speed, fastest first")
    body = lines[1:]
    configs = {c.config_key for c in cells if c.status == "ok"}
    assert len(body) == len(configs)
    rates = [float(re.search(r"  ([\d,]+\.\d) samples/s", line).group(1).replace(",", "")) for line in body]  # type: ignore[union-attr]
    assert rates == sorted(rates, reverse=True), body
    # each configuration's repeats: mlp-scratch 3 each, mnist-cnn 10 each (rounds added until decided)
    ns = sorted(int(re.search(r"\(n=(\d+)\)$", line).group(1)) for line in body)  # type: ignore[union-attr]
    assert ns == [3, 3, 10, 10, 10], body


def test_the_cpu_shared_warning_is_one_line_or_none() -> None:
    cells = _cells("mnist-cnn")
    assert speedline.cpu_shared_lines(cells) == []
    cells[0].rows = [{**r, "flags": "noisy(cv=12%);cpu-shared(64%)"} for r in cells[0].rows]
    cells[1].rows = [{**r, "flags": "cpu-shared(12%)"} for r in cells[1].rows]
    (line,) = speedline.cpu_shared_lines(cells)
    assert line.startswith(f"warning: 2 of {len(cells)} cells ran beside other work (cpu-shared: others used up to 64% ")
