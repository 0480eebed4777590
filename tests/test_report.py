"""The report: Table I arithmetic on known rows, merging dirs from two hosts, plots, not-run cells."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.errors import KitError
from bench.core.rows import write_json, write_rows
from bench.studies.mnist_cnn.plots import PLOTS
from host.report import build_report

ROOT = Path(__file__).resolve().parent.parent


def fake_cell(root: Path, backend: str, pipeline: str, epoch_s: list[float], acc: list[float], host: str, gpu=None, vram=None):
    cell = root / "mnist-cnn" / f"{backend}_{pipeline}"
    rows = [
        {
            "study": "mnist-cnn",
            "backend": backend,
            "pipeline": pipeline,
            "variant": "default",
            "batch_size": 512,
            "seed": 0,
            "epoch": i + 1,
            "status": "ok",
            "epoch_s": t,
            "samples": 60416,
            "samples_per_s": 60416 / t,
            "test_acc": a,
            "rss_mean_mb": 1000.0 + i,
            "rss_peak_mb": 1100.0,
            "vram_peak_mb": vram,
            "compile_s": 0.5,
            "dataset": "mnist",
            "dataset_real_mnist": True,
            "cell": cell.name,
        }
        for i, (t, a) in enumerate(zip(epoch_s, acc))
    ]
    write_rows(cell, rows)
    write_json(
        cell / "system.json",
        {"cpu_model": f"{host} CPU", "gpu": {"name": gpu} if gpu else None, "runtime": "native", "image_id": "native"},
    )
    return cell


def test_table1_values_and_two_hosts_merge(tmp_path):
    a, b = tmp_path / "hostA", tmp_path / "hostB"
    fake_cell(a, "torch-cpu", "resident", [2.0, 4.0], [0.9, 0.95], "Xeon")
    fake_cell(b, "torch-cuda", "resident", [0.1, 0.1, 0.1], [0.97, 0.99, 0.98], "EPYC", gpu="NVIDIA H100", vram=12.5)
    error = b / "mnist-cnn" / "numba-cuda_resident"
    write_rows(
        error,
        [
            {
                "study": "mnist-cnn",
                "backend": "numba-cuda",
                "pipeline": "resident",
                "status": "error",
                "reason": "CUDA_ERROR_LAUNCH_FAILED",
                "cell": "numba-cuda_resident",
            }
        ],
    )
    write_json(b / "platforms.json", {"mps": {"status": "skipped", "reason": "needs macOS on Apple silicon"}})
    build_report([a, b], tmp_path / "report")
    rows = {r["platform"]: r for r in json.loads((tmp_path / "report" / "table1.json").read_text())["rows"]}
    cpu, gpu = rows["torch-cpu resident"], rows["torch-cuda resident"]
    assert cpu["avg_epoch_s"] == pytest.approx(3.0) and cpu["total_train_s"] == pytest.approx(6.0)
    assert cpu["avg_samples_per_s"] == pytest.approx((60416 / 2 + 60416 / 4) / 2)
    assert cpu["final_test_acc_pct"] == pytest.approx(95.0) and cpu["max_test_acc_pct"] == pytest.approx(95.0)
    assert cpu["avg_rss_mb"] == pytest.approx(1000.5) and cpu["max_vram_mb"] == 0.0 and cpu["device"] == "Xeon CPU"
    assert gpu["final_test_acc_pct"] == pytest.approx(98.0) and gpu["max_test_acc_pct"] == pytest.approx(99.0)
    assert gpu["device"] == "NVIDIA H100" and gpu["max_vram_mb"] == 12.5
    # numbers stay numbers: the spread is min and max columns, the "min-max" text only in the markdown
    assert cpu["min_samples_per_s"] == pytest.approx(60416 / 4) and cpu["max_samples_per_s"] == pytest.approx(60416 / 2)
    assert "spread_samples_per_s" not in cpu and cpu["backend"] == "torch-cpu" and cpu["pipeline"] == "resident"
    with open(tmp_path / "report" / "table1.csv", newline="") as fh:
        csv_rows = list(csv.DictReader(fh))
    assert {float(r["min_samples_per_s"]) for r in csv_rows} == {60416 / 4, 60416 / 0.1}
    assert "spread_samples_per_s" not in csv_rows[0] and all(float(r["median_samples_per_s"]) for r in csv_rows)
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert "| 15,104-30,208 |" in md  # the min-max spread, as text, in the markdown only
    assert (tmp_path / "report" / "tidy.csv").is_file() and "## Tidy results (for pandas)" in md
    assert "| Avg Epoch Time (s) |" in md and "CUDA_ERROR_LAUNCH_FAILED" in md and "needs macOS" in md
    for name in PLOTS:
        p = tmp_path / "report" / name
        assert p.stat().st_size > 5000 and p.read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "report" / "table1.json").read_text())["rows"]


def test_missing_or_empty_dir_is_an_error(tmp_path):
    with pytest.raises(KitError, match="does not exist"):
        build_report([tmp_path / "nope"], tmp_path / "r")
    (tmp_path / "empty").mkdir()
    with pytest.raises(KitError, match="no results under"):
        build_report([tmp_path / "empty"], tmp_path / "r")


def test_report_cli_bad_dir_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "report", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "does not exist" in r.stderr


def test_seed_tables_sit_beside_ours_and_every_interval_beside_its_value(tmp_path):
    """seed 001's Tables 3-5 as printed (and that it names no hardware); in seed 000's Table I
    the interval sits beside the median it was computed for, never beside the seed-style mean."""
    build_report([ROOT / "results" / "reference" / "cpu-2core-epyc"], tmp_path)
    md = (tmp_path / "REPORT.md").read_text()
    assert "#### Seed 001's Tables 3-5 as printed" in md and "The seed names no hardware" in md
    assert "| Framework overhead | 12.50 | 158.60 |" in md
    head = next(x for x in md.splitlines() if x.startswith("| Platform | Source |"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert cols[cols.index("its interval") - 1] == "Median Throughput (samples/s)"
    assert "95% CI (median over epochs)" not in md
