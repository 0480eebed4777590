"""`python -m bench run` on the embedded default: rows, provenance, bad input, crash rows, reruns."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.results import cell_status, read_rows

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--dataset", "digits", "--epochs", "1", "--limit-train", "1024"]


def bench(*args, cwd=ROOT, env=None):
    e = {**os.environ, **(env or {})}
    e.pop("KIT_DATA_DIR", None) if env is None else None
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, env=e)


@pytest.mark.parametrize("backend,pipeline", [("torch-cpu", "seed"), ("torch-cpu", "resident"), ("numba-cpu", "resident")])
def test_run_writes_rows_and_provenance(tmp_path, backend, pipeline):
    r = bench("run", "mnist-cnn", "--backend", backend, "--pipeline", pipeline, "--epochs", "2", "--batch-size", "256",
              "--dataset", "digits", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    cell = next((tmp_path / "mnist-cnn").iterdir())
    rows = read_rows(cell / "rows.jsonl")
    assert [row["epoch"] for row in rows] == [1, 2]
    for row in rows:
        assert row["status"] == "ok" and row["backend"] == backend and row["pipeline"] == pipeline
        assert row["batch_size_used"] == 256 and row["dataset"] == "digits-embedded" and row["dataset_real_mnist"] is False
        assert row["epoch_s"] > 0 and row["samples_per_s"] == pytest.approx(row["samples"] / row["epoch_s"])
        assert row["samples"] == 1536  # 1,497 padded up to whole batches of 256
        assert 0 <= row["test_acc"] <= 1 and row["rss_peak_mb"] >= row["rss_mean_mb"] > 0
        assert row["compile_s"] >= 0 and row["eval_s"] > 0
        for phase in ("data_s", "forward_s", "backward_s", "step_s"):
            assert 0 <= row[phase] <= row["epoch_s"], phase
        assert row["image_id"] == "native" and row["lock_hash"] == "native"
    assert (cell / "rows.csv").read_text().startswith("study,backend,pipeline")
    assert not (cell / "rows.partial.jsonl").exists()
    system = json.loads((cell / "system.json").read_text())
    assert system["runtime"] == "native" and system["dataset"]["sha256"] and system["config"]["backend"] == backend
    assert system["libraries"]["numpy"] and system["cpu_model"] and system["threads"]["torch_threads"] >= 1
    assert system["threads"]["numba_threads"] >= 1
    assert system["kit_git_sha"] is None or len(system["kit_git_sha"]) >= 40


@pytest.mark.parametrize("args,message", [
    (["--backend", "tensorflow"], "unknown backend 'tensorflow'"),
    (["--pipeline", "magic"], "has no pipeline 'magic'"),
    (["--backend", "numba-cpu", "--pipeline", "seed"], "numba-cpu has no pipeline 'seed'"),
    (["--epochs", "0"], "--epochs must be > 0"),
    (["--epochs", "-3"], "--epochs must be > 0"),
    (["--batch-size", "5000"], "larger than the training set"),
    (["--data-dir", "/nonexistent/kit-data"], "does not exist"),
    (["--dataset", "cifar"], "unknown dataset 'cifar'"),
])
def test_bad_input_is_one_line_nonzero_and_leaves_no_result(tmp_path, args, message):
    base = ["run", "mnist-cnn", "--dataset", "digits", "--out", str(tmp_path / "out")]
    base = [a for a in base if not (args.count("--dataset") and a in ("--dataset", "digits"))] if "--dataset" in args else base
    r = bench(*base, *args)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    assert not list(tmp_path.rglob("rows.jsonl")) and not list(tmp_path.rglob("system.json"))


@pytest.mark.parametrize("cmd", [["run", "mnist-cnn"], ["matrix", "mnist-cnn"], ["run", "mlp-scratch"]])
def test_unwritable_results_dir_is_one_line(cmd):
    r = bench(*cmd, "--out", "/dev/null/results")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot write results to /dev/null/results" in r.stderr, r.stderr


def test_corrupt_mnist_is_one_line(tmp_path):
    d = tmp_path / "data" / "mnist"
    d.mkdir(parents=True)
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (d / stem).write_bytes(b"\x00\x00\x08\x03garbage")
    r = bench("run", "mnist-cnn", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "truncated or corrupt" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_matrix_records_a_failed_cell_and_goes_on_then_reruns_only_it(tmp_path):
    from bench.runner import run_matrix
    from bench.studies.mnist_cnn import MnistCnnConfig

    bad_data = tmp_path / "bad"
    (bad_data / "mnist").mkdir(parents=True)  # exists but holds no files: the cell process fails
    cells = [MnistCnnConfig(backend="torch-cpu", epochs=1, limit_train=1024, data_dir=str(bad_data)),
             MnistCnnConfig(backend="numba-cpu", epochs=1, limit_train=1024, dataset="digits")]
    out = run_matrix(cells, tmp_path / "res")
    assert [o.status for o in out] == ["error", "ok"]
    bad_dir = tmp_path / "res" / "mnist-cnn" / cells[0].cell_id()
    row = read_rows(bad_dir / "rows.jsonl")[-1]
    assert row["status"] == "error" and "missing train-images" in row["reason"]
    assert cell_status(bad_dir) == "error"
    again = run_matrix(cells, tmp_path / "res")
    assert [o.status for o in again] == ["error", "reused"]


def test_a_timed_out_cell_keeps_its_finished_epochs_marked_incomplete(tmp_path):
    from bench.runner import run_matrix
    from bench.studies.mnist_cnn import MnistCnnConfig

    cfg = MnistCnnConfig(backend="torch-cpu", pipeline="seed", epochs=400, dataset="digits")
    out = run_matrix([cfg], tmp_path, timeout_s=20)
    assert out[0].status == "error" and "timed out" in out[0].reason
    rows = read_rows(tmp_path / "mnist-cnn" / cfg.cell_id() / "rows.jsonl")
    assert rows[-1]["status"] == "error"
    assert all(r["status"] == "incomplete" for r in rows[:-1])


def test_same_seed_same_loss_curve_on_cpu(tmp_path):
    curves = []
    for i in range(2):
        r = bench("run", "mnist-cnn", "--backend", "torch-cpu", "--threads", "1", *FAST[:2], "--epochs", "2",
                  "--out", str(tmp_path / str(i)))
        assert r.returncode == 0, r.stderr
        rows = read_rows(next((tmp_path / str(i) / "mnist-cnn").iterdir()) / "rows.jsonl")
        curves.append([(row["train_loss"], row["test_acc"]) for row in rows])
    assert curves[0] == curves[1]


def test_list_and_unknown_study():
    r = bench("list")
    assert r.returncode == 0 and "torch-cpu" in r.stdout and "available" in r.stdout
    r = bench("run", "imagenet")
    assert r.returncode != 0
