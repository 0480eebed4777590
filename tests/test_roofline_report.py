"""roofline's report on the committed references (the H100 and the 2-core EPYC): the seed's
epoch (6,400 images, from its own Tables 3 and 4) for the projected epoch times, Table 8 with
its precision, pipelines, devices and intervals, a verdict for every seed claim, and a roof
for every precision among a figure's points. Host side: no torch."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.core.resultset import collect, group_repeats
from bench.studies.roofline import claims, report, seed
from bench.studies.roofline.roofmath import attainable

REF = Path(__file__).resolve().parent.parent / "results" / "reference"
H100, CPU = "NVIDIA H100 80GB HBM3", "AMD EPYC, 2 cores"


@pytest.fixture(scope="module")
def cells():
    found, _, _ = collect([REF / "H100-80GB-HBM3-roofline", REF / "cpu-2core-epyc-roofline"])
    return [c for c in found if c.study == "roofline" and c.status == "ok"]


@pytest.fixture(scope="module")
def first(cells):
    """One repeat of each configuration (the references may hold more)."""
    return [c for c in cells if c.repeat == 0]


@pytest.fixture(scope="module")
def md(cells, tmp_path_factory):
    return "\n".join(report.section(cells, tmp_path_factory.mktemp("rl")))


def _repeats(cells, n: int, scale: dict[str, float]):
    """N repeats of every cell: repeat r's img/s x (1 + 0.02 r) x scale[device]."""
    out = []
    for c in cells:
        for r in range(n):
            d = copy.deepcopy(c)
            for row in d.rows:
                row["repeat"] = r
                if isinstance(row.get("img_per_s"), float):
                    row["img_per_s"] *= (1 + 0.02 * r) * scale.get(c.device, 1.0)
            d.spec["repeat"] = r
            out.append(d)
    return out


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


# ---- 2. Table 8 ------------------------------------------------------------------------------
def test_table_8_names_precision_pipelines_devices_and_says_n1(first, tmp_path):
    table8 = "\n".join(report.section(first, tmp_path)).split("#### How much faster")[1].split("#### ")[0]
    assert "Precision: fp32" in table8
    assert "loader: ours" in table8 and "synthetic-gpu: ours" in table8
    assert f"**{CPU}** (torch-cpu, 2 torch threads)" in table8
    assert "Intel(R) Xeon(R) Processor, 16 cores" in table8  # the GPU host's CPU, which decodes the loader
    assert "`H100-80GB-HBM3-roofline`, 1 repeat" in table8 and "`cpu-2core-epyc-roofline`, 1 repeat" in table8
    rows = [x for x in table8.splitlines() if x.startswith("| resnet50")]
    assert len(rows) == 1 and rows[0].count("n=1, no interval") == 2 and "29.2x" in rows[0]


def test_table_8_gives_each_ratio_its_interval_with_repeats(first, tmp_path):
    three = _repeats(first, 3, {CPU: 0.5})
    sp = report.speedups(group_repeats(three))
    r50 = [x for x in sp if x.model == "resnet50"]
    assert {x.pipeline for x in r50} == {"loader", "synthetic-gpu"}
    for x in r50:
        assert (x.a.device, x.b.device) == (H100, CPU) and x.precision == "fp32"
        assert not x.paired  # two result dirs: resampled independently
        assert x.ratio.n == 3 and x.ratio.lo is not None and x.ratio.lo <= x.ratio.median <= x.ratio.hi
    one = next(x for x in report.speedups(group_repeats(first)) if x.model == "resnet50" and x.pipeline == "loader")
    assert next(x for x in r50 if x.pipeline == "loader").ratio.median == pytest.approx(2 * one.ratio.median)
    text = "\n".join(report.section(three, tmp_path))
    row = next(x for x in text.splitlines() if x.startswith("| resnet50 | fp32 | 128 |"))
    assert "n=1" not in row and len(re.findall(r"\d+(\.\d+)?x–\d+(\.\d+)?x", row)) == 2 and "3 / 3" in row
    assert "`H100-80GB-HBM3-roofline`, 3 repeats" in text


def test_table_8_pairs_repeats_only_within_one_run(first):
    three = _repeats(first, 3, {})
    for c in three:
        c.system = {**c.system, "run_label": "one-run"}
    assert all(x.paired for x in report.speedups(group_repeats(three)))


# ---- 3. the claims ---------------------------------------------------------------------------
def test_every_claim_gets_a_verdict_from_the_cells(cells, md):
    groups = group_repeats(cells)
    vs = claims.verdicts(groups, report.speedups(groups))
    assert len(vs) >= 10
    for v in vs:
        assert any(v.verdict.startswith(x) for x in claims.VERDICTS), v
        assert v.evidence and v.rule
    get = lambda word: next(v.verdict for v in vs if word in v.claim)  # noqa: E731
    assert get("GPUs outperform CPUs").startswith("does not hold")  # 36-101x: an H100 over 2 EPYC cores
    assert get("ResNet50 (compute-heavy) gains most").startswith("holds")
    assert get("lowest arithmetic intensity") == "holds"
    assert get("always memory-bound") == "does not hold"  # the EPYC's own points lie right of its ridge
    assert get("Apple M3 Pro") == "not measured here"
    if not all(c.first.get("dataset_real") for c in cells):  # the references' synthetic tree
        assert get("NaNs") == "needs real data"
        assert get("Epoch times") == "needs real data"
    claims_md = md.split("#### Does the seed's claim hold?")[1].split("#### ")[0]
    assert "| verdict |" in claims_md and claims_md.count("| does not hold") >= 2


def test_the_cpu_claim_names_its_ridge_and_its_points(cells):
    v = claims.cpu_memory_bound(cells)
    assert v.verdict == "does not hold"
    m = re.search(r"fp32 ridge 6\.0\d? FLOP/B\): (\d+) of (\d+) points right of the ridge even at their unfused AI", v.evidence)
    assert m and 0 < int(m[1]) < int(m[2]), v.evidence
    assert "resnet18" in v.evidence and "straddle" in v.evidence


def test_a_nan_at_batch_128_makes_the_squeezenet_claim_hold(cells):
    bad = copy.deepcopy(cells)
    row = next(
        r for c in bad if report._p(c)["model"] == "squeezenet1_1" for r in report._ok(c, "sweep") if r["batch_size"] == 128
    )
    row["loss_finite"] = False
    assert claims.squeezenet_nans(bad).verdict == "holds"


def test_claims_without_the_cells_they_need_are_not_measured(cells):
    cpu_only = [c for c in cells if c.device == CPU]
    groups = group_repeats(cpu_only)
    vs = claims.verdicts(groups, report.speedups(groups))
    for word in ("GPUs outperform CPUs", "gains most from the GPU", "On the GPU", "climbs significantly", "Apple M3"):
        assert next(v.verdict for v in vs if word in v.claim) == "not measured here", word
    assert next(v.verdict for v in vs if "always memory-bound" in v.claim) == "does not hold"


# ---- 4. the roofs drawn ------------------------------------------------------------------------
def test_a_roof_is_drawn_for_every_precision_among_the_points(cells):
    lines = report.roof_lines(cells)
    assert {(x.device, x.precision) for x in lines} == {(H100, "fp32"), (H100, "tf32"), (H100, "bf16-cl"), (CPU, "fp32")}
    bf16 = next(x for x in lines if x.precision == "bf16-cl")
    assert bf16.compute_name == "gemm_bf16" and bf16.compute > 10 * next(x for x in lines if x.device == H100).compute
    # the per-model figure: one model's points on both devices get every roof they ran at
    r18 = [c for c in cells if report._p(c)["model"] == "resnet18"]
    assert len(report.roof_lines(r18)) == 4
    only_fp32 = [c for c in cells if report._p(c)["precision"] == "fp32"]
    assert {x.precision for x in report.roof_lines(only_fp32)} == {"fp32"}
    # every point lies under the roof drawn for its device and precision
    roof = {(x.device, x.precision): x for x in lines}
    for c in cells:
        line = roof[(c.device, report._p(c)["precision"])]
        for r in c.ok_rows:
            if r.get("phase") in ("train", "val", "sweep"):
                assert r["achieved_flop_per_s"] <= attainable(r["ai_high_flops_per_byte"], line.compute, line.bandwidth)[0]


def test_rows_without_roof_fields_take_the_measured_roofs_of_their_precision(cells):
    old = copy.deepcopy([c for c in cells if c.device == H100 and report._p(c)["precision"] == "bf16-cl"])
    for c in old:
        for r in c.rows:
            for k in ("roof_compute_flop_per_s", "roof_bandwidth_b_per_s", "roof_compute_name"):
                r.pop(k, None)
    (line,) = report.roof_lines(old)
    assert line.precision == "bf16-cl" and line.compute == report._compute(old[0].system["roofs"], "bf16")


def test_the_legends_stay_short(cells):
    lines = report.roof_lines(cells)
    roofs = [(x.label(with_device=True), "-", "k") for x in lines]
    handles = report.legend_handles(dict(report.COLORS), roofs, ["fp32", "tf32", "bf16-cl"])
    assert len(handles) <= 20  # was one entry per point and sweep: 70 on the H100


def test_sweeps_with_repeats_show_one_median_row_per_batch(first):
    three = group_repeats(_repeats(first, 3, {}))
    rows = [r for r in report.sweep_table(three) if r.get("n")]
    keys = [(r["model"], r["device"], r["precision"], r["batch"]) for r in rows]
    assert len(keys) == len(set(keys)) and {r["n"] for r in rows} == {3}
    v = claims.batches_toward_roof(three)
    assert v.verdict == "holds" and v.evidence.count("resnet18 x") == 3  # one per device and precision, not per repeat
