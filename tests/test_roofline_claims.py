"""roofline's seed claims (bench/studies/roofline/claims.py) judged by the answer engine on the
committed references (the H100 and the 2-core EPYC, their Table 8 runs with 3 repeats a side)
and on cells edited from them: every claim of the catalogue declared once, Table 4 not; the
intensity claims read both byte bounds alike on the CPU and the GPU; a 3x3 pair decides without
a "1 repeat" tail; data-bound claims wait for the real tree; absolute figures are judged only on
the seed's device; a claim about the model reads the pipeline that no loader caps, and every label
names its pipeline. Host side: no torch."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import claims as C
from bench.core import stats
from bench.core.registry import studies
from bench.core.resultset import collect
from bench.studies.roofline import claims
from bench.studies.roofline.readout import cell_rows, params
from host import answers as H

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
H100, CPU = "NVIDIA H100 80GB HBM3", "AMD EPYC, 2 cores"
MODELS = ("resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1")
# the catalogue's ids for seed 003 (without its prefix), Table 8's GPU/CPU rows under the headline's ids
CATALOGUE = {
    *(f"cx-{m}" for m in MODELS),
    *(f"t3-{m}-{d}" for m in MODELS for d in ("mps", "cpu", "t4")),
    "t5-util-t4",
    "t5-util-mps",
    "t5-util-cpu",
    "t7-peaks-t4",
    "t7-peaks-m3",
    "t7-peaks-cpu",
    "sweep-b32-b64",
    "squeezenet-nan-b128",
    "sweep-mps-128-256-512",
    "batch-toward-roof",
    *(f"gpu-over-cpu-{m}" for m in MODELS),
    *(f"t8-{m}-{pair}" for m in MODELS for pair in ("gpu-m3", "m3-cpu")),
    "gpu-cpu-10-50x",
    "m3-between",
    "heavy-gains-most",
    "m3-cpu-7-15x",
    "mbv2-lowest-ai",
    "resnet50-highest-ai",
    "cpu-memory-bound",
    "mps-mixed-bound",
    "t4-bound-sides",
    "resnet50-16pct-of-peak",
    "resnet50-only-toward-roof",
    "loader-dominates-light",
}


@pytest.fixture(scope="module")
def study():
    return studies()["roofline"]


def _load(*names: str) -> list:
    found, _, _ = collect([REF / n for n in names])
    return [c for c in found if c.study == "roofline"]


@pytest.fixture(scope="module")
def refs():
    """Every roofline reference: the default runs (1 repeat) and the Table 8 runs (3 repeats)."""
    return _load(
        "H100-80GB-HBM3-roofline", "cpu-2core-epyc-roofline", "H100-80GB-HBM3-roofline-table8", "cpu-2core-epyc-roofline-table8"
    )


def judge(study, cells, cid: str) -> list[A.Answer]:
    return A.judge(study, cells, next(c for c in study.claims if c.id == cid))


def one(study, cells, cid: str) -> A.Answer:
    got = [a for a in judge(study, cells, cid) if a.primary]
    assert len(got) == 1, [(a.label, a.verdict) for a in got]
    return got[0]


def edited(cells, fn) -> list:
    """Deep copies of CELLS with FN(cell, row) applied to every row."""
    out = copy.deepcopy(cells)
    for c in out:
        for r in c.rows:
            fn(c, r)
    return out


# ---- the declarations ----------------------------------------------------------------------
def test_every_claim_of_the_catalogue_is_declared_once_and_table_4_is_not(study):
    ids = [c.id for c in study.claims]
    assert len(ids) == len(set(ids)) == 50 and set(ids) == CATALOGUE
    assert not any(i.startswith("t4-epoch") for i in ids) and "Table 4" in claims.__doc__
    assert {c.id for c in study.claims if c.headline} == {f"gpu-over-cpu-{m}" for m in MODELS}
    assert not any(c.kit for c in study.claims)


def test_claims_import_no_report_and_the_package_stays_cheap():
    tree = ast.parse(Path(claims.__file__).read_text())
    mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert mods and not any("report" in m for m in mods), mods
    code = (
        "import sys, bench.studies.roofline; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numba', 'matplotlib') "
        "or m == 'bench.studies.roofline.report'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# ---- Table 8 and the findings that read it -----------------------------------------------------
def test_a_3x3_pair_decides_by_its_range_with_no_one_repeat_tail(study, refs):
    """The old verdicts appended '(1 repeat: no interval)' to verdicts a 3x3 pair decided."""
    for m in MODELS:
        a = one(study, refs, f"gpu-over-cpu-{m}")
        f = a.findings[0]
        assert a.verdict == C.HOLDS and "repeat" not in a.why
        assert f.n == "3 / 3" and f.value.kind == "range" and f.pairing == "across hosts"
        assert [s.run for s in f.sides] == ["H100-80GB-HBM3-roofline-table8", "cpu-2core-epyc-roofline-table8"]
        assert "1 repeat" not in H.value_text(a)


def test_gpu_over_cpu_is_not_10_to_50x_on_an_h100_over_two_epyc_cores(study, refs):
    a = one(study, refs, "gpu-cpu-10-50x")
    assert a.verdict == C.FAILS
    got = {f.what: f.value for f in a.findings}
    assert set(got) == set(MODELS) and got["resnet50"].lo > 50  # 80-112x: all of it above the band
    assert got["mobilenet_v2"].lo > 10 and got["mobilenet_v2"].hi < 50  # inside


def test_resnet50_gains_most_from_the_gpu(study, refs):
    a = one(study, refs, "heavy-gains-most")
    assert a.verdict == C.HOLDS and len(a.findings) == 5
    r = next(f for f in a.findings if f.what == "resnet50 / resnet18")
    # its value is resnet50's GPU/CPU speedup over resnet18's, each with one batch kept on the device
    # (issue 55 item 12a: it was read through the loader, where decoding synthetic JPEGs caps the light
    # models' GPU rate and so inflates the heavy model's gain: 1.96x there, 1.25x on the devices)
    assert {params(c)["pipeline"] for s in r.sides for c in s.cells} == {"synthetic-gpu"}
    r50 = one(study, refs, "gpu-over-cpu-resnet50").findings[0].value
    r18 = one(study, refs, "gpu-over-cpu-resnet18").findings[0].value
    assert 1 < r.value.median < r50.median / r18.median
    assert r.value.lo > 1 and len(r.sides) == 4 and r.value.n == 3


def test_the_model_gains_are_not_read_through_the_loader_and_say_which_cells_they_lack(study, refs):
    """Issue 55 item 12a: without synthetic-gpu cells on the CPU (every H200 answer run), heavy-gains-most
    was judged on loader ratios; now it is not measured there, and the line names the cells to run."""
    loader_only = [c for c in refs if not (c.device == CPU and params(c)["pipeline"] == "synthetic-gpu")]
    a = one(study, loader_only, "heavy-gains-most")
    assert a.verdict == C.NOT_HERE and not a.findings
    assert "no finished cell with backend=torch-cpu" in a.why and "pipeline=synthetic-gpu" in a.why, a.why
    assert "backend=torch-cuda" not in a.why  # the GPU's synthetic-gpu cells are there: only what is missing
    assert a.why.count("no finished cell") == 4 and all(f"model={m}," in a.why for m in MODELS)  # the CPU's four
    none = one(study, [], "heavy-gains-most")  # eight kinds missing: the first few named, the rest counted
    assert none.why.count("no finished cell") == A.MISSING_SHOWN and "and 4 more such side(s)" in none.why, none.why


def test_a_gain_that_reverses_does_not_hold(study, refs):
    """The seed's own Table 8 ranks ResNet18 above ResNet50: cells where that holds fail the claim."""
    slow = edited(
        refs,
        lambda c, r: (
            r.update(img_per_s=r["img_per_s"] / 4)
            if c.device == H100 and params(c)["model"] == "resnet50" and isinstance(r.get("img_per_s"), float)
            else None
        ),
    )
    a = one(study, slow, "heavy-gains-most")
    assert a.verdict == C.FAILS
    assert next(f for f in a.findings if f.what == "resnet50 / resnet18").value.hi < 1


def test_m3_claims_say_what_they_need(study, refs):
    for cid in ("m3-between", "m3-cpu-7-15x", "mps-mixed-bound", "t8-resnet18-gpu-m3", "t8-squeezenet1_1-m3-cpu", "t5-util-mps"):
        a = one(study, refs, cid)
        assert a.verdict == C.NOT_HERE and "torch-mps" in a.why, (cid, a.why)


def test_claims_without_the_cells_they_need_are_not_measured(study, refs):
    cpu_only = [c for c in refs if c.device == CPU]
    for cid in ("gpu-cpu-10-50x", "heavy-gains-most", "t4-bound-sides", "resnet50-only-toward-roof", "gpu-over-cpu-resnet18"):
        assert one(study, cpu_only, cid).verdict == C.NOT_HERE, cid
    assert one(study, cpu_only, "cpu-memory-bound").verdict == C.FAILS


# ---- the roofline: intensities against ridges, both bounds read alike -----------------------------
def test_mobilenet_has_the_lowest_intensity_at_both_bounds(study, refs):
    a = one(study, refs, "mbv2-lowest-ai")
    assert a.verdict == C.HOLDS and len(a.findings) == 3
    for f in a.findings:
        assert f.value.kind == "bounds" and f.value.hi < 1 and f.sides[0].run == f.sides[1].run
    # the counts are one device's as much as another's: the H100's alone give the same answer
    assert one(study, [c for c in refs if c.device == H100], "mbv2-lowest-ai").verdict == C.HOLDS
    # ResNet50 is highest only at the compulsory bytes (ResNet18's unfused traffic is lighter): undecided
    a = one(study, refs, "resnet50-highest-ai")
    r18 = next(f for f in a.findings if f.what == "resnet50 / resnet18")
    assert a.verdict == C.UNDECIDED and r18.value.lo < 1 < r18.value.hi and "its bounds reach across" in a.why


def test_the_cpu_is_not_always_memory_bound(study, refs):
    a = one(study, refs, "cpu-memory-bound")
    assert a.verdict == C.FAILS and a.split == {"device": CPU}
    got = {f.what: f.value for f in a.findings}
    assert got["resnet18"].lo > 1 and got["resnet50"].lo > 1  # right of the ridge even at the unfused bytes
    assert got["mobilenet_v2"].lo < 1 < got["mobilenet_v2"].hi  # straddles it
    assert "[" in H.value_text(a) and ", bounds]" in H.value_text(a)


def test_the_gpu_rule_reads_both_bounds_as_the_cpu_rule_does(study, refs):
    """'On the GPU the light models lie on the bandwidth slope' held on the unfused bound alone
    while the CPU rule read both: both read both now. On the H100 the light models straddle the
    fp32 ridge (left at the unfused bytes, right at the compulsory): undecided, not holds."""
    a = one(study, refs, "t4-bound-sides")
    assert a.verdict == C.UNDECIDED and "mobilenet_v2: its bounds reach across left of the ridge" in a.why
    got = {f.what: f.value for f in a.findings}
    assert got["resnet18"].lo > 1 and got["resnet50"].lo > 1
    # the same cells with every bar left of its ridge: the light models hold, the ResNets fail, on both devices
    left = edited(
        refs,
        lambda c, r: (
            r.update(ai_high_flops_per_byte=r["ridge_flops_per_byte"] / 2, ai_low_flops_per_byte=r["ridge_flops_per_byte"] / 4)
            if "ridge_flops_per_byte" in r
            else None
        ),
    )
    assert one(study, left, "cpu-memory-bound").verdict == C.HOLDS
    gpu = one(study, left, "t4-bound-sides")
    verdicts = {f.what: C.decide(f.value, f.expect)[0] for f in gpu.findings}
    assert verdicts == {"mobilenet_v2": C.HOLDS, "squeezenet1_1": C.HOLDS, "resnet18": C.FAILS, "resnet50": C.FAILS}
    assert gpu.verdict == C.FAILS


def test_bounds_decide_by_the_one_policy_and_say_so():
    straddle = stats.Summary(4.0, 0.5, 4.0, 0.5, 4.0, 0.5, 4.0, 1, "bounds")
    assert C.decide(straddle, claims.LEFT) == (C.UNDECIDED, "its bounds reach across left of the ridge (below 1x)")
    assert C.decide(stats.Summary(0.8, 0.2, 0.8, 0.2, 0.8, 0.2, 0.8, 1, "bounds"), claims.LEFT)[0] == C.HOLDS
    assert C.decide(stats.Summary(9.0, 2.0, 9.0, 2.0, 9.0, 2.0, 9.0, 1, "bounds"), claims.LEFT)[0] == C.FAILS


def test_how_near_its_roof_a_model_trains_is_read_on_the_device_not_through_the_loader(study, refs):
    """Through the loader of synthetic JPEGs the H100 reference's ResNet-18 trained at 7,780 img/s
    against 16,924 on the device: the loader, not the model, kept it below ResNet-50's % of roof, and
    the claim "held". On synthetic-gpu ResNet-18 reaches 28.6 % and ResNet-50 27.2 % (per repeat
    0.94, 0.82, 1.20): undecided, and the label says which pipeline it read."""
    a = one(study, refs, "resnet50-only-toward-roof")
    assert "synthetic-gpu" in a.claim.text and "synthetic-gpu" in a.claim.note
    assert {c.first.get("pipeline") for f in a.findings for s in f.sides for c in s.cells} == {"synthetic-gpu"}
    assert all(f.sides[0].run == f.sides[1].run for f in a.findings)  # one run: paired by repeat
    by = {f.what: f.value for f in a.findings}
    assert by["resnet50 / resnet18"].lo < 1 < by["resnet50 / resnet18"].hi and a.verdict == C.UNDECIDED
    assert by["resnet50 / mobilenet_v2"].lo > 1 and by["resnet50 / squeezenet1_1"].lo > 1
    b = one(study, refs, "resnet50-16pct-of-peak")
    assert b.verdict == C.NOT_COMPARABLE and "224-px MAC" in b.why and b.findings


# ---- the batch sweep ---------------------------------------------------------------------------
def test_one_sweep_a_configuration_gives_no_verdict(study, refs):
    got = judge(study, refs, "batch-toward-roof")
    assert {a.split["device"] for a in got} == {H100, CPU} and {a.verdict for a in got} == {C.FEW}
    h100 = next(a for a in got if a.split["device"] == H100)
    assert {f.what for f in h100.findings} == {f"{m} {p}" for m in MODELS for p in ("fp32", "bf16-cl")}
    assert all(f.value.median > 1 for f in h100.findings)
    a = one(study, refs, "sweep-b32-b64")
    assert a.split == {"device": H100} and a.verdict == C.FEW and a.findings[0].value.median > 1


def test_squeezenet_nans_need_a_batch_128_pass_on_the_real_tree(study, refs):
    a = one(study, refs, "squeezenet-nan-b128")
    assert a.verdict == C.NOT_HERE and "--set batch_size=128" in a.why

    def b128(finite: bool, real: bool):
        def fn(c, r):
            c.spec["params"]["batch_size"] = 128
            r.update(batch_size=128, dataset_real=real)
            if r.get("phase") == "train":
                r["loss_finite"] = finite

        sq = [c for c in refs if params(c)["model"] == "squeezenet1_1" and params(c)["scenario"] == "A" and c.device == H100]
        return edited(sq, fn)

    nan = one(study, b128(False, True), "squeezenet-nan-b128")
    assert nan.verdict == C.HOLDS and nan.findings[0].exact and nan.findings[0].value.median >= 1
    assert one(study, b128(True, True), "squeezenet-nan-b128").verdict == C.FAILS
    assert one(study, b128(False, False), "squeezenet-nan-b128").verdict == C.NEEDS_REAL


def test_the_loader_gap_needs_the_real_tree(study, refs):
    got = judge(study, refs, "loader-dominates-light")
    assert {a.verdict for a in got} == {C.NEEDS_REAL} and all("synthetic" in a.why for a in got)
    real = edited(refs, lambda c, r: r.update(dataset_real=True))
    got = judge(study, real, "loader-dominates-light")
    assert {a.split["device"] for a in got} == {H100, CPU} and all(a.verdict in C.DECIDED + (C.UNDECIDED,) for a in got)
    assert all(len(a.findings) == 4 and all(f.sides[0].run == f.sides[1].run for f in a.findings) for a in got)


# ---- the seed's tables: absolute figures on the seed's device only --------------------------------
def test_table_3_is_judged_only_on_the_seeds_device_with_ours_beside(study, refs):
    # an H100 on synthetic JPEGs: real data alone would not judge the T4's img/s (claims.gate's word for it)
    synthetic = one(study, refs, "t3-resnet18-t4")
    assert synthetic.verdict == C.NEEDS_HW and "Tesla T4" in synthetic.why and H100 in synthetic.why
    real = edited(refs, lambda c, r: r.update(dataset_real=True))
    a = one(study, real, "t3-resnet18-t4")
    assert (
        a.verdict == C.NOT_COMPARABLE
        and "T4" in a.why
        and H100 in a.why
        and {f.what for f in a.findings} == {"train img/s", "val img/s"}
    )
    # on a device that is the seed's: judged against its figure within TIME_TOL (an H100 is 20x a T4)
    t4 = edited(real, lambda c, r: r.update(device="Tesla T4") if c.device == H100 else None)
    a = one(study, t4, "t3-resnet18-t4")
    assert a.verdict == C.FAILS and a.split == {"device": "Tesla T4"}
    assert one(study, t4, "t7-peaks-t4").verdict == C.FAILS  # 51 TFLOP/s measured is no T4's 8.1


def test_parameter_counts_match_the_seeds_at_its_1000_classes(study, refs):
    for m, count in (
        ("resnet18", 11_689_512),
        ("mobilenet_v2", 3_504_872),
        ("resnet50", 25_557_032),
        ("squeezenet1_1", 1_235_496),
    ):
        a = one(study, refs, f"cx-{m}")
        assert a.verdict == C.HOLDS and a.findings[0].exact and a.findings[0].value.median == count
        assert next(cell_rows(c, "train") for c in refs if params(c)["model"] == m)[0]["num_classes"] == 200


def test_utilisation_is_shown_but_not_comparable(study, refs):
    a = one(study, refs, "t5-util-t4")
    assert a.verdict == C.NOT_COMPARABLE and "unprimed" in a.why and len(a.findings) == 8
    assert one(study, refs, "t5-util-cpu").verdict == C.NOT_COMPARABLE


# ---- the report: the engine's table after the section ---------------------------------------------
def test_the_merged_roofline_report_renders_every_claim_once(tmp_path):
    dirs = [REF / n for n in ("H100-80GB-HBM3-roofline-table8", "cpu-2core-epyc-roofline-table8")]
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "report", *map(str, dirs), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "REPORT.md").read_text()
    section = md.split("## roofline (seed 003)")[1]
    assert "### The seed's claims" in section and "Does the seed's claim hold" not in section
    table = section.split("### The seed's claims")[1]
    assert "50 claims: " in table
    got = [c for c in json.loads((tmp_path / "report.json").read_text())["claims"] if c["study"] == "roofline"]
    assert {c["id"] for c in got} == CATALOGUE and all(c["verdict"] in C.VERDICTS for c in got)
    assert next(c for c in got if c["id"] == "gpu-cpu-10-50x")["verdict"] == C.FAILS


def test_every_label_names_the_pipeline_its_sides_read(study):
    """A loader's ratio on synthetic JPEGs holds the loader's cost; the row must say it read the loader
    (the headline's GPU over CPU), as a row read on the device says synthetic-gpu."""
    for c in study.claims:
        if isinstance(c.rule, C.Ratio):
            pipes = {c.rule.a.get("pipeline"), c.rule.b.get("pipeline")} - {None}
            assert all(p in c.text for p in pipes), (c.id, c.text)
    for c in study.claims:
        if c.headline:
            assert "loader" in c.text and "decode cost" in c.note, c.id


def test_a_claim_of_conditions_whose_sides_ran_other_work_says_which_and_what_to_run(study):
    """answers.conditions carries its Ratios: where every side ran but no pair formed, "not measured
    here" names the work that differs and the command that makes a pair (the default runs: 100
    training batches a pass on the H100, 10 on the 2-core EPYC)."""
    a = one(study, _load("H100-80GB-HBM3-roofline", "cpu-2core-epyc-roofline"), "gpu-cpu-10-50x")
    assert a.verdict == C.NOT_HERE and not a.findings
    assert "not the same work: max_train_batches 100 / 10" in a.why and "--set max_train_batches=10" in a.why, a.why
