"""The rows the CI container smoke wrote (.ci/docker-smoke.sh): schema, provenance, and an
accuracy band on real MNIST. Skips where no smoke ran (a user's machine without Docker)."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from bench.core.rows import SCHEMA_VERSION, read_rows

ROOT = Path(__file__).resolve().parent.parent
SMOKE = Path(os.environ.get("KIT_CI_RESULTS_DIR", ROOT / "results" / "ci-container"))
# 2 epochs x 4,096 samples = 16 SGD steps from seed 0: 37.1% on torch-cpu and numba-cpu
# natively (torch 2.14.1, 2026-11-21); the band allows another torch build, not a broken one.
SMOKE_ACC_BAND = (0.25, 0.60)


@pytest.fixture(scope="module")
def smoke_cells():
    cells = sorted((SMOKE / "mnist-cnn").glob("*/rows.jsonl"))
    if not cells:
        pytest.skip(f"no container smoke results under {SMOKE} (run .ci/docker-smoke.sh)")
    out = {}
    for p in cells:
        rows = read_rows(p)
        out[f"{rows[0]['backend']} {rows[0]['pipeline']}"] = (rows, json.loads((p.parent / "system.json").read_text()))
    return out


def test_every_cpu_cell_ran_ok_in_the_image(smoke_cells):
    assert set(smoke_cells) == {"torch-cpu seed", "torch-cpu resident", "numba-cpu resident"}
    lock = hashlib.sha256((ROOT / "requirements" / "cpu.txt").read_bytes()).hexdigest()
    for name, (rows, system) in smoke_cells.items():
        assert [r["status"] for r in rows] == ["ok", "ok"], name
        for r in rows:
            assert r["image_id"].startswith("sha256:") and len(r["image_id"]) == 71, r["image_id"]
            assert r["lock_hash"] == lock, "rows must carry the hash of the lock the image was built from"
            assert r["dataset"] == "mnist" and r["dataset_real_mnist"] is True
            assert r["batch_size_used"] == 512 and r["samples"] == 4096 and r["epoch_s"] > 0
            assert r["schema"] == SCHEMA_VERSION and r["command"].startswith("python -m bench cell ") and r["host"]
        assert system["runtime"] == "container" and system["image_id"] == rows[0]["image_id"]
        assert system["libraries"]["torch"] == "2.10.0", "the cpu image pins torch 2.10.0"


def test_accuracy_band_and_backends_agree(smoke_cells):
    finals = {name: rows[-1]["test_acc"] for name, (rows, _) in smoke_cells.items()}
    for name, acc in finals.items():
        assert SMOKE_ACC_BAND[0] <= acc <= SMOKE_ACC_BAND[1], f"{name}: {acc}"
    assert max(finals.values()) - min(finals.values()) <= 0.02, f"same weights and batches, different results: {finals}"


def test_mlp_scratch_ran_in_the_image_too():
    """The container smoke runs every study's cpu matrix (nothing names a study)."""
    cells = sorted((SMOKE / "mlp-scratch").glob("*/rows.jsonl"))
    if not (SMOKE / "mnist-cnn").is_dir():
        pytest.skip(f"no container smoke results under {SMOKE}")
    assert len(cells) == 1
    rows = read_rows(cells[0])
    assert {r["phase"] for r in rows if r["status"] == "ok"} >= {"plain", "op", "memory", "convergence"}
    assert all(r["image_id"].startswith("sha256:") for r in rows)
