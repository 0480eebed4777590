"""roofline's report on the committed references (the H100 and the 2-core EPYC): the seed's
epoch (6,400 images, from its own Tables 3 and 4) for the projected epoch times. Host side: no torch."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.core.resultset import collect, group_repeats
from bench.studies.roofline import report, seed

REF = Path(__file__).resolve().parent.parent / "results" / "reference"
H100, CPU = "NVIDIA H100 80GB HBM3", "AMD EPYC, 2 cores"


@pytest.fixture(scope="module")
def cells():
    found, _, _ = collect([REF / "H100-80GB-HBM3-roofline", REF / "cpu-2core-epyc-roofline"])
    return [c for c in found if c.study == "roofline" and c.status == "ok"]


@pytest.fixture(scope="module")
def md(cells, tmp_path_factory):
    return "\n".join(report.section(cells, tmp_path_factory.mktemp("rl")))


# ---- 1. the seed's epoch ---------------------------------------------------------------------
def test_the_seeds_epoch_is_6400_images_by_its_own_tables_3_and_4():
    sizes = {}
    for (model, dev), (train_s, val_s) in seed.EPOCH.items():
        train_ips, val_ips = seed.PERF[(model, dev)][:2]
        for images in (train_s * train_ips, val_s * val_ips):
            assert abs(images - seed.epoch_images(model, dev)) <= 2, (model, dev, images)
        sizes[(model, dev)] = seed.epoch_images(model, dev)
    assert len(sizes) * 2 == 24
    assert sum(v == 6400 for v in sizes.values()) == 11 and sizes[("squeezenet1_1", "T4")] == 3200


def test_the_projected_epoch_is_the_seeds_epoch_over_our_throughput(cells, md):
    rows = report.perf_table(group_repeats(cells))
    r18 = next(r for r in rows if r["model"] == "resnet18" and r["device"] == H100 and r["config"] == "fp32, loader")
    assert r18["seed_images"] == "6,400"
    assert r18["proj_s"].split(" / ")[0] == report.fmt(6400 / r18["train_ips"])
    sq = next(r for r in rows if r["model"] == "squeezenet1_1" and r["device"] == H100)
    assert sq["seed_images"] == "3,200"  # the seed's T4 ran SqueezeNet at batch 64
    sq_cpu = next(r for r in rows if r["model"] == "squeezenet1_1" and r["device"] == CPU)
    assert sq_cpu["seed_images"] == "6,400"
    assert "100,000 / img/s" not in md and "100k" not in md
    assert "6,400 images" in md and "seed epoch, images" in md


def test_a_cells_row_projects_to_the_seeds_epoch():
    from bench.studies.roofline.protocol import CellRun

    run = SimpleNamespace(cfg=SimpleNamespace(model="resnet50", device="cpu"))
    assert CellRun.seed_epoch(run, 64.0) == {"seed_epoch_images": 6400, "seed_epoch_projected_s": 100.0}  # type: ignore[arg-type]
    run = SimpleNamespace(cfg=SimpleNamespace(model="squeezenet1_1", device="cuda"))
    assert CellRun.seed_epoch(run, 3200.0)["seed_epoch_projected_s"] == 1.0  # type: ignore[arg-type]
