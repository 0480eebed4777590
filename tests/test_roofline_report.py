"""roofline's report section on the committed references (the H100 and the 2-core EPYC): the
seed's epoch (6,400 images, from its own Tables 3 and 4) for the projected epoch times, Table 8
with its precision, pipelines, devices and intervals (one workload a pair: never real data
beside synthetic), no verdict of its own (the answer engine's table follows the section:
tests/test_roofline_claims.py), and a roof for every precision and run among a figure's points.
Host side: no torch."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.core import answers
from bench.core.registry import studies
from bench.core.resultset import collect, group_repeats
from bench.studies.roofline import readout, report, seed
from bench.studies.roofline.readout import cell_rows, params
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


# ---- 4. the roofs drawn ------------------------------------------------------------------------
def test_a_roof_is_drawn_for_every_precision_among_the_points(cells):
    lines = report.roof_lines(cells)
    assert {(x.device, x.precision) for x in lines} == {(H100, "fp32"), (H100, "tf32"), (H100, "bf16-cl"), (CPU, "fp32")}
    bf16 = next(x for x in lines if x.precision == "bf16-cl")
    assert bf16.compute_name == "gemm_bf16" and bf16.compute > 10 * next(x for x in lines if x.device == H100).compute
    # the per-model figure: one model's points on both devices get every roof they ran at
    r18 = [c for c in cells if params(c)["model"] == "resnet18"]
    assert len(report.roof_lines(r18)) == 4
    only_fp32 = [c for c in cells if params(c)["precision"] == "fp32"]
    assert {x.precision for x in report.roof_lines(only_fp32)} == {"fp32"}
    # every point lies under the roof drawn for its device, run and precision
    roof = {(x.device, x.run, x.precision): x for x in lines}
    for c in cells:
        line = roof[(c.device, c.run_label, params(c)["precision"])]
        for r in c.ok_rows:
            if r.get("phase") in ("train", "val", "sweep"):
                assert r["achieved_flop_per_s"] <= attainable(r["ai_high_flops_per_byte"], line.compute, line.bandwidth)[0]


def test_rows_without_roof_fields_take_the_measured_roofs_of_their_precision(cells):
    old = copy.deepcopy([c for c in cells if c.device == H100 and params(c)["precision"] == "bf16-cl"])
    for c in old:
        for r in c.rows:
            for k in ("roof_compute_flop_per_s", "roof_bandwidth_b_per_s", "roof_compute_name"):
                r.pop(k, None)
    (line,) = report.roof_lines(old)
    assert line.precision == "bf16-cl" and line.compute == readout.roof_compute(old[0].system["roofs"], "bf16")


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
    st = studies()["roofline"]
    climb = next(c for c in st.claims if c.id == "batch-toward-roof")
    got = answers.judge(st, [c for g in three for c in g], climb)
    assert {a.verdict for a in got} == {"holds"} and len(got) == 2  # one answer per device
    whats = [f.what for a in got for f in a.findings]
    assert sorted(w for w in whats if w.startswith("resnet18")) == ["resnet18 bf16-cl", "resnet18 fp32", "resnet18 fp32"]
    assert all(f.value.n == 3 for a in got for f in a.findings)  # one value per repeat, not per batch


def test_the_sweep_marks_the_batches_where_the_host_set_the_pace(first, md):
    """On the H100 the steps of the smallest batches are flat (the host's floor): those batches are
    marked host-paced, up to the last one within 1.3x of the floor; the 2-core CPU's step grows with
    the batch from the start, so none of its batches is."""
    rows = [r for r in report.sweep_table(group_repeats(first)) if r.get("n")]
    marked = {(r["model"], r["precision"], r["batch"]) for r in rows if "host-paced" in r["note"]}
    assert ("resnet50", "bf16-cl", 256) in marked and ("resnet50", "bf16-cl", 16) in marked
    assert ("resnet50", "bf16-cl", 512) not in marked  # past the run: the GPU's pace
    assert not any("host-paced" in r["note"] for r in rows if r["device"] == CPU)
    assert "*host-paced*: the step took at most 1.3x" in md


def test_the_host_floor_needs_three_flat_smallest_batches():
    from bench.studies.roofline.roofmath import host_floor

    got = host_floor([(16, 10.0), (32, 11.0), (64, 10.5), (128, 13.0), (256, 20.0), (512, 13.0)])
    assert got is not None and got["floor_ms"] == 10.5 and got["host_paced_up_to"] == 128
    assert got["host_paced"] == [16, 32, 64, 128, 512]  # 512 within the factor too, but past the unbroken run
    assert host_floor([(16, 5.0), (32, 10.0), (64, 20.0), (128, 40.0)]) is None  # the device's pace from the start
    assert host_floor([(16, 5.0), (32, 5.0)]) is None


# ---- 5. what the section says, and what it leaves to the engine ---------------------------------
def test_the_section_prints_numbers_and_no_verdict_of_its_own(md):
    assert "Does the seed's claim hold" not in md and "| verdict |" not in md
    for word in ("holds", "does not hold", "unclear", "figures, not a claim", "1 repeat: no interval", "target met"):
        assert word not in md, word
    assert "#### How much faster" in md and "#### Measured roofs" in md  # the numbers stay


def test_two_runs_of_one_device_keep_their_own_roofs():
    """The H100's roofline run and its Table 8 run measured their roofs apart (51.58 and 51.53
    TFLOP/s fp32): each run's points are drawn under its own roof and the roofs table holds both
    (a roof keyed by the device alone kept the first run's and dropped the other)."""
    both, _, _ = collect([REF / "H100-80GB-HBM3-roofline", REF / "H100-80GB-HBM3-roofline-table8"])
    both = [c for c in both if c.study == "roofline" and c.status == "ok"]
    fp32 = [x for x in report.roof_lines(both) if x.precision == "fp32"]
    assert {x.run for x in fp32} == {"H100-80GB-HBM3-roofline", "H100-80GB-HBM3-roofline-table8"}
    assert len({x.compute for x in fp32}) == 2
    labels = report.roof_labels(fp32)
    assert len(set(labels)) == 2 and any("[H100-80GB-HBM3-roofline-table8]" in x for x in labels)
    roof = {x.run: x for x in fp32}
    for c in both:
        if params(c)["precision"] == "fp32":
            line = roof[c.run_label]
            for r in cell_rows(c, "train"):
                assert r["roof_compute_flop_per_s"] == line.compute  # held against its own run's roof
    table = report.roofs_table(report._roofs_by_run(both))
    h100 = [r for r in table if r["device"].startswith(H100)]
    assert len(h100) == 2 and len({r["device"] for r in h100}) == 2 and len({r["fp32"] for r in h100}) == 2
    # one run's roofs taken twice (from one cache) are one roof, one row
    again = copy.deepcopy([c for c in both if c.run_label == "H100-80GB-HBM3-roofline"])
    for c in again:
        c.system = {**c.system, "run_label": "same-cache"}
    assert len(
        report.roofs_table(report._roofs_by_run([c for c in both if c.run_label == "H100-80GB-HBM3-roofline"] + again))
    ) == 1 + len(seed.PEAKS)


def test_table_8_never_pairs_a_real_data_run_with_a_synthetic_one(first):
    """report.speedups keyed a pair on model, precision, pipeline and batch only: a CPU run on
    the real tree met a GPU run on the synthetic one. Its pairs are one workload now (the
    seed's claims pair such runs through bench.core.answers, which names the data)."""
    real = copy.deepcopy([c for c in first if c.device == CPU])
    for c in real:
        c.spec = {**c.spec, "params": {**c.spec["params"], "dataset": "tinyimagenet"}}
        c.system = {**c.system, "run_label": "cpu-real"}
        for r in c.rows:
            r["dataset"], r["dataset_real"] = "tinyimagenet", True
    gpu = [c for c in first if c.device == H100]
    assert not report.speedups(group_repeats(gpu + real))
    assert report.speedups(group_repeats(gpu + [c for c in first if c.device == CPU]))
    st = studies()["roofline"]
    head = next(c for c in st.claims if c.id == "gpu-over-cpu-resnet50")
    (a,) = answers.judge(st, gpu + real, head)  # the engine never pairs them: not the same data
    assert a.verdict == "not measured here" and not a.findings and "not the same work" in a.why and "data " in a.why, a.why


# ---- step=cuda-graph in the tables (the committed eager / graph sweeps; rows made before `step`)
@pytest.fixture(scope="module")
def graph_sweeps():
    found, _, _ = collect([REF / "H100-80GB-HBM3-roofline-graph"])
    return [c for c in found if c.study == "roofline" and c.status == "ok"]


def test_rows_made_before_step_read_as_eager_and_pair_with_new_eager_cells(first):
    assert {params(c)["step"] for c in first} == {"eager"} and all(c.first.get("step") is None for c in first)
    old = {k: v for k, v in first[0].spec["params"].items() if k != "step"}
    assert "step" not in first[0].spec["params"]
    as_spec = [SimpleNamespace(spec={"params": {**old, **extra}}) for extra in ({}, {"step": "eager"}, {"step": "cuda-graph"})]
    before, eager, graph = (report._workload(c) for c in as_spec)  # type: ignore[arg-type]
    assert before == eager != graph


def test_graph_sweeps_are_told_apart_and_their_floor_is_launch_paced(graph_sweeps):
    assert sorted(params(c)["precision_step"] for c in graph_sweeps) == ["bf16-cl", "bf16-cl", "bf16-cl graph", "bf16-cl graph"]
    rows = report.sweep_table(group_repeats(graph_sweeps))
    points = [r for r in rows if "ips" in r]
    assert len(points) == 4 * 9 and len({(r["device"], r["precision"], r["batch"]) for r in points}) == 36  # every run named
    graph = {r["batch"] for r in points if r["precision"] == "bf16-cl graph" and "launch-paced" in r["note"]}
    assert graph == {16, 32, 64}  # 3.7-4.4 ms steps: the device's floor, never called the host's
    assert not any("host-paced" in r["note"] for r in points if r["precision"] == "bf16-cl graph")
    assert any("host-paced" in r["note"] for r in points if r["precision"] == "bf16-cl")
    ends = [r for r in rows if r.get("end")]
    assert len(ends) == 4 and len({r["device"] + r["precision"] for r in ends}) == 4
    md = "\n".join(report.sweep_section(group_repeats(graph_sweeps)))
    assert "*launch-paced*" in md and "*host-paced*" in md and "step=cuda-graph" in md
