"""Every study's finished-cell line prints the parameter count of the model the cell trained
(issue 53 item 4: cifar-opt's said `params ?`). One small smoke cell per study on the CPU, its
data the embedded or synthetic sets; the count the line shows and its rows carry is checked
against the model built again here and counted as torch counts (sum of numel over parameters)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.registry import get_study
from bench.core.resultset import load_cells
from bench.run import speedline

ROOT = Path(__file__).resolve().parent.parent

# study -> (the one cell's --only/--set arguments: as little work as still runs the whole cell)
CELLS: dict[str, list[str]] = {
    "cifar-opt": [
        *("--only", "model=mobilenet_v2", "--only", "variant=default"),
        *("--set", "n_train=80", "--set", "n_test=20", "--set", "latency_calls=3", "--set", "latency_warmup=1"),
        *("--set", "infer_batch=8", "--set", "calib_batches=1"),
    ],
    "roofline": [
        *("--only", "scenario=A", "--only", "pipeline=synthetic-gpu"),
        *("--set", "max_train_batches=1", "--set", "max_val_batches=1", "--set", "batch_size=8", "--set", "warmup_batches=0"),
    ],
    "profile": [
        *("--only", "variant=frozen"),
        *("--set", "epochs=1", "--set", "max_steps=1", "--set", "max_eval_batches=1", "--set", "image_size=32"),
        *("--set", "idle_s=0", "--set", "overhead_blocks=1", "--set", "overhead_steps=1", "--set", "prof_active=1"),
        *("--set", "prof_wait=0", "--set", "prof_warmup=0", "--set", "warmup_steps=0", "--set", "num_workers=0"),
    ],
    "mnist-cnn": [
        *("--only", "backend=torch-cpu", "--only", "pipeline=resident"),
        *("--set", "dataset=digits", "--set", "epochs=1"),
    ],
    "mlp-scratch": ["--set", "dataset=digits", "--set", "iterations=10", "--set", "plain_runs=1"],
}


def _torch_count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _torchvision_count(name: str, num_classes: int) -> int:
    import torchvision

    return _torch_count(torchvision.models.get_model(name, weights=None, num_classes=num_classes))


def _real_count(study: str, row: dict) -> int:
    """The parameters of the model STUDY's cell trained (ROW: one of its timed rows), built again."""
    if study == "cifar-opt":
        return _torchvision_count(row["model"], 10)
    if study == "roofline":
        return _torchvision_count(row["model"], row["num_classes"])
    if study == "profile":  # densenet121, its classifier replaced for the data's two classes (all counted)
        return _torchvision_count(row["model"], 2)
    if study == "mnist-cnn":
        from bench.studies.mnist_cnn.backends.torch_common import build_model
        from bench.studies.mnist_cnn.net import init_params

        return _torch_count(build_model(init_params(0)))
    from bench.studies.mlp_scratch.net import init_params as mlp_params

    return int(sum(a.size for a in mlp_params(0).values()))


def _shown(n: int) -> str:
    """N as the speed line writes it (timm's benchmark.py: M or k, rounded)."""
    return f"{n / 1e6:.2f}M params" if n >= 1e6 else f"{n / 1e3:.1f}k params"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path]:
    """(data dir without any real set: each study falls back to its synthetic or embedded one, cache)."""
    base = tmp_path_factory.mktemp("params")
    (base / "nodata").mkdir()
    return base / "nodata", base / "cache"


@pytest.mark.parametrize("study", list(CELLS))
def test_the_finished_line_shows_the_trained_models_parameter_count(study, dirs, tmp_path):
    data, cache = dirs
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    cmd = [sys.executable, "-m", "bench", "matrix", study, "--profile", "smoke", "--repeats", "1", *CELLS[study]]
    proc = subprocess.run(
        [*cmd, "--data-dir", str(data), "--out", str(tmp_path)],
        cwd=ROOT,
        env={**env, "KIT_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cell,) = load_cells(sorted(p for p in (tmp_path / study).iterdir() if p.is_dir()))
    assert cell.status == "ok"
    got = speedline.speeds(get_study(study), cell.rows)
    assert len(got) == 1, got
    timed = next(r for r in cell.ok_rows if r.get("phase") in ("epoch", "train", "plain") or r.get("epoch"))
    real = _real_count(study, timed)
    assert next(iter(got.values()))["params"] == real
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("ok ")]
    assert line.endswith(f", {_shown(real)}"), line
    if study == "cifar-opt":  # the count is the cell's own, in its rows (the seed's MobileNetV2, 10 classes)
        assert real == 2_236_682
        assert {r.get("n_params") for r in cell.ok_rows} == {real}
        assert cell.system.get("n_params") == real
