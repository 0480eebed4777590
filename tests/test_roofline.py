"""roofline (seed 003): matrix and validation one-liners, bad input (a model torchvision lacks,
a malformed tree, no NVML), the counted FLOP and byte fields and the affine byte fit, the roof
fraction's ceiling, the batch sweep's end at a simulated OOM (and at the first size), the
primed CPU utilisation, and a whole smoke cell with its report."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.errors import KitError
from bench.core.registry import get_study
from bench.core.study import RunContext

ROOT = Path(__file__).resolve().parent.parent
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")


@pytest.fixture(scope="module")
def study():
    return get_study("roofline")


# ---- matrix and validation ----------------------------------------------------------------


@pytest.mark.parametrize("platform", ["cpu", "cuda", "mps"])
@pytest.mark.parametrize("profile", ["smoke", "default", "full"])
def test_every_matrix_cell_validates(study, platform, profile):
    cells = study.matrix(platform, profile)
    assert cells
    for c in cells:
        study.validate(c)
    assert len({c.key for c in cells}) == len(cells), "two cells of one matrix are the same work"
    assert {c.params["scenario"] for c in cells} == {"A", "B"}


def test_default_matrices_hold_the_seeds_setup(study):
    cpu = study.matrix("cpu", "default")
    assert {c.params["model"] for c in cpu} == {"resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1"}
    batch = {c.params["model"]: c.params["batch_size"] for c in cpu if c.params["scenario"] == "A"}
    assert batch == {"resnet18": 128, "mobilenet_v2": 128, "resnet50": 128, "squeezenet1_1": 64}
    assert {c.params["num_workers"] for c in cpu} == {4}
    cuda = {
        (c.params["model"], c.variant, c.params["pipeline"])
        for c in study.matrix("cuda", "default")
        if c.params["scenario"] == "A"
    }
    assert ("resnet50", "bf16-cl", "loader") in cuda and ("resnet50", "tf32", "synthetic-gpu") in cuda
    assert {c.params["max_train_batches"] for c in study.matrix("cuda", "full")} == {0}


def test_auto_profile_is_smoke_on_cpu_only(study):
    assert study.profile_for("cpu", "auto") == "smoke"
    assert study.profile_for("cuda", "auto") == "default"


@pytest.mark.parametrize(
    "backend,variant,params,match",
    [
        ("torch-cpu", "default", {}, "unknown roofline precision"),
        ("torch-cpu", "bf16-cl", {}, "CUDA precision"),
        ("torch-mps", "tf32", {}, "CUDA precision"),
        ("torch-cpu", "fp32", {"model": "vgg11"}, "unknown model"),
        ("torch-cpu", "fp32", {"pipeline": "dali"}, "unknown pipeline"),
        ("torch-cpu", "fp32", {"scenario": "C"}, "unknown scenario"),
        ("torch-cpu", "fp32", {"scenario": "B", "pipeline": "loader"}, "synthetic-gpu"),
        ("torch-cpu", "fp32", {"sweep_min_batch": 64, "sweep_max_batch": 32}, "sweep_max_batch"),
        ("torch-cpu", "fp32", {"lr": float("nan")}, "lr must be"),
        ("torch-cpu", "fp32", {"sweep_mem_fraction": 1.5}, "sweep_mem_fraction"),
        ("torch-cpu", "fp32", {"roof_sizes": "huge"}, "unknown roof_sizes"),
    ],
)
def test_bad_cells_are_one_line(study, backend, variant, params, match):
    with pytest.raises(KitError, match=match) as err:
        study.validate(study.cell(backend, variant, **params))
    assert "\n" not in str(err.value)


def test_a_model_torchvision_lacks_is_one_line():
    from bench.studies.roofline.trainer import build

    with pytest.raises(KitError, match="has no model 'resnet9000'") as err:
        build("resnet9000", 10, 0)
    assert "\n" not in str(err.value)


def test_a_malformed_tree_is_one_line_and_exit_2(study, tmp_path):
    tree = tmp_path / "data" / "tinyimagenet" / "tiny-imagenet-200"
    (tree / "train").mkdir(parents=True)
    (tree / "wnids.txt").write_text("n01443537\n")  # a class without its train/<wnid>/images/
    spec = study.cell("torch-cpu", "fp32", dataset="tinyimagenet").to_json()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cell", spec, "--out", str(tmp_path / "out"), "--data-dir", str(tmp_path / "data")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "tiny-imagenet-200" in proc.stderr, proc.stderr


def test_no_nvml_is_one_note_and_no_numbers():
    from bench.measure.usage import GpuUsage

    g = GpuUsage(enabled=True)
    g.start()
    out = g.stop()
    if g.nvml is None:
        assert out["gpu_util_pct"] is None and "\n" not in out["gpu_util_note"]
        assert "not sampled" in out["gpu_util_note"]


# ---- counts and the roof ---------------------------------------------------------------------


def _settings(study, **kw):
    from bench.studies.roofline.config import settings

    base = {"model": "squeezenet1_1", "threads": 1, "num_workers": 0, "batch_size": 8}
    return settings(study.cell("torch-cpu", "fp32", **{**base, **kw}))


def test_flop_and_byte_counts_are_positive_and_bytes_are_affine_in_the_batch(study):
    from bench.measure.bytecount import count_bytes
    from bench.studies.roofline.trainer import Trainer

    tr = Trainer(_settings(study), n_classes=10)
    counts = tr.count(8)
    fl = counts["flops"]
    assert fl.forward_flops > 0 and fl.train_flops_used > 2 * fl.forward_flops
    assert fl.why  # the count's source is recorded
    b8 = count_bytes(tr.model, (3, 64, 64), 8)
    fits = counts["fits"]
    for kind, want in (("train", b8.train_bytes), ("forward", b8.forward_bytes), ("train_lower", b8.train_bytes_lower)):
        got = fits[kind].per_sample_at(8)
        assert got > 0 and abs(got - want) / want < 1e-9, (kind, got, want)
    assert fits["saved"].total_at(8) == pytest.approx(b8.memory.saved_activation_bytes, rel=1e-9)


def test_roof_fraction_is_at_most_one_under_the_roof():
    from bench.studies.roofline.roofmath import attainable, roof_fields

    compute, bw = 1e12, 1e11  # ridge at 10 FLOP/B
    assert attainable(1.0, compute, bw) == (1e11, "bandwidth")
    assert attainable(100.0, compute, bw) == (1e12, "compute")
    for ai_high in (0.5, 5.0, 10.0, 50.0, 5000.0):
        top, _ = attainable(ai_high, compute, bw)
        for share in (0.01, 0.5, 1.0):
            f = roof_fields(top * share, ai_high / 10, ai_high, compute, bw)
            assert 0 < f["roof_fraction"] <= 1.0 + 1e-12
            assert f["roof_fraction_at_low_ai"] >= f["roof_fraction"]  # fewer counted bytes: a lower roof
    assert roof_fields(0.0, 1, 2, compute, bw)["roof_fraction"] is None
    assert roof_fields(1e9, 1, 2, None, bw)["roof_fraction"] is None


def test_above_roof_and_nan_are_flagged():
    from bench.studies.roofline.protocol import validity_flags

    rows = [
        {"phase": "train", "loss_finite": False, "batch_size": 128, "roof_fraction": 1.3},
        {"phase": "sweep_end", "sweep_stop": "oom", "sweep_stop_batch": 16, "sweep_last_ok_batch": None},
    ]
    flags = validity_flags(rows)
    assert flags[0] == "nan-loss(b128)" and flags[1].startswith("above-roof(train 1.30")
    assert flags[2] == "sweep-no-points(oom at b16)"


# ---- the sweep -----------------------------------------------------------------------------


def _fake_roofs():
    from bench.measure.roofs import Roof, Roofs

    def roof(name, v, unit):
        return Roof(name, v, unit, 1.0, 1.0, [1.0], {})

    return Roofs(
        "test-device",
        {"type": "cpu"},
        torch.__version__,
        "now",
        {},
        {"gemm_fp32": roof("gemm_fp32", 1e11, "FLOP/s"), "copy": roof("copy", 2e10, "B/s")},
        {},
    )


@pytest.fixture
def sweep_run(study, tmp_path, monkeypatch):
    from bench.studies.roofline import protocol

    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(protocol, "load_roofs", lambda device, sizes: _fake_roofs())
    cell = study.cell(
        "torch-cpu",
        "fp32",
        model="squeezenet1_1",
        scenario="B",
        pipeline="synthetic-gpu",
        threads=1,
        sweep_min_batch=4,
        sweep_max_batch=32,
        sweep_batches=1,
        dataset="tinyimagenet-synthetic",
        synthetic_classes=4,
        synthetic_train_per_class=2,
        synthetic_val_per_class=1,
    )
    ctx = RunContext(out=tmp_path, cell_dir=tmp_path / "c", data_dir=str(tmp_path / "nodata"), run_id="t", echo=lambda s: None)

    def run(oom_from: int) -> list[dict]:
        from bench.studies.roofline.trainer import Trainer

        real_step = Trainer.step

        def step(self, x, y):
            if x.shape[0] >= oom_from:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
            return real_step(self, x, y)

        monkeypatch.setattr(Trainer, "step", step)
        r = protocol.open_cell(study, cell, ctx)
        rows = [row for i in range(r.steps) for row in r.step(i)]
        return rows + r.close()

    return run


def test_sweep_stops_at_a_simulated_oom_and_records_it(sweep_run):
    rows = sweep_run(oom_from=16)
    pts = [r for r in rows if r["phase"] == "sweep"]
    assert [r["batch_size"] for r in pts] == [4, 8]
    for r in pts:
        assert r["img_per_s"] > 0 and r["achieved_flop_per_s"] > 0 and r["loss_finite"] is True
        assert r["ai_high_flops_per_byte"] > r["ai_low_flops_per_byte"] > 0
        assert 0 < r["roof_fraction"]
    end = rows[-1]
    assert end["phase"] == "sweep_end" and end["sweep_stop"] == "oom" and end["sweep_stop_batch"] == 16
    assert end["sweep_last_ok_batch"] == 8 and "out of memory at batch 16" in end["sweep_stop_reason"]


def test_sweep_that_ooms_at_the_first_size_is_a_recorded_end_not_a_crash(sweep_run):
    from bench.studies.roofline.protocol import validity_flags

    rows = sweep_run(oom_from=1)
    assert [r["phase"] for r in rows] == ["sweep_end"]
    assert "the first size" in rows[0]["sweep_stop_reason"]
    assert validity_flags(rows) == ["sweep-no-points(oom at b4)"]


def test_oom_detection():
    from bench.studies.roofline.trainer import is_oom

    assert is_oom(torch.OutOfMemoryError("x"))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried"))
    assert not is_oom(RuntimeError("shape mismatch"))


# ---- CPU utilisation -------------------------------------------------------------------------


def test_cpu_utilisation_is_primed_and_reads_a_busy_region():
    from bench.measure.usage import CpuUsage

    u = CpuUsage()
    assert u.primed is not None  # the meaningless first reading, taken at construction
    u.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.4:
        sum(i * i for i in range(1000))
    out = u.stop()
    assert out["cpu_util_process_pct"] > 20, out  # one busy thread: ~100 on psutil's per-core scale
    assert 0 < out["cpu_util_system_pct"] <= 100


# ---- a whole smoke cell ----------------------------------------------------------------------


@pytest.mark.slow
def test_smoke_cell_runs_and_reports(tmp_path):
    env = {**os.environ, "KIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("KIT_DATA_DIR", None)
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "roofline", "--profile", "smoke", "--only", "pipeline=synthetic-gpu",
         "--only", "scenario=A", "--set", "dataset=tinyimagenet-synthetic", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    from bench.core.resultset import load_cells

    cells = load_cells(sorted(p for p in (out / "roofline").iterdir() if p.is_dir()))
    assert [c.status for c in cells] == ["ok"]
    rows = cells[0].rows
    assert [r["phase"] for r in rows] == ["train", "val"]
    for r in rows:
        assert r["dataset"] == "tinyimagenet-synthetic" and r["dataset_real"] is False
        for k in ("img_per_s", "achieved_flop_per_s", "forward_flops_per_sample", "train_flops_per_sample", "bytes_per_sample"):
            assert r[k] > 0, k
        assert r["cpu_util_system_pct"] > 0  # primed: never the unprimed call's 0.0
    rep = subprocess.run(
        [sys.executable, "orchestrate.py", "report", str(out), "--out", str(tmp_path / "rep")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-2000:]
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "## roofline (seed 003)" in text and "NOT Tiny-ImageNet" in text and "seed Table 8" in text
    assert (tmp_path / "rep" / "roofline_device1.png").stat().st_size > 0


def test_an_oom_raised_from_while_handling_another_is_an_oom():
    """A CUDA graph capture that ends on an OOM raises again from its exit: the sweep must still stop there."""
    from bench.studies.roofline.trainer import is_oom

    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        except torch.OutOfMemoryError:
            raise RuntimeError("operation failed due to a previous error during capture") from None
    except RuntimeError as err:
        assert err.__context__ is not None and is_oom(err)
    assert not is_oom(RuntimeError("shape mismatch"))
