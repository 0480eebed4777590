"""The interleaved benchmark: cells in their own processes, stepped epoch by epoch."""
import json

from bench.interleaved import cells_for, run_interleaved
from bench.results import read_rows


def test_epochs_interleave_round_robin_and_ratios_come_out(tmp_path):
    cells = cells_for("cpu", epochs=2, data_dir=None, dataset="digits", extra_variants=[])
    lines = []
    summary = run_interleaved(cells, tmp_path, echo=lines.append)
    epochs = [line.split()[1] + " " + line.split()[2] for line in lines if line.startswith("epoch")]
    # epoch 1 of all three cells before any epoch 2; epoch 2 starts with the second cell (rotation)
    assert [e.split()[0] for e in epochs] == ["1", "1", "1", "2", "2", "2"]
    assert epochs[3].split()[1] == epochs[1].split()[1]
    assert {r["numerator"] for r in summary["ratios"]} == {"numba-cpu resident default", "torch-cpu resident default"}
    for cfg in cells:
        rows = read_rows(tmp_path / "mnist-cnn" / cfg.cell_id() / "rows.jsonl")
        assert [r["epoch"] for r in rows] == [1, 2] and all(r["status"] == "ok" for r in rows)
    assert json.loads((tmp_path / "bench_summary.json").read_text())["cells"]


def test_gpu_cells_are_skipped_with_a_reason_on_a_cpu_host(tmp_path):
    cells = [c for c in cells_for("cuda", epochs=1, data_dir=None, dataset="digits", extra_variants=["graphs+bf16"])]
    summary = run_interleaved(cells, tmp_path, echo=lambda s: None)
    assert summary["cells"] and all(v["status"] == "skipped" for v in summary["cells"].values()), summary
    assert any("no NVIDIA GPU" in v["reason"] for v in summary["cells"].values())
