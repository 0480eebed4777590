"""profile (seed 004) report and claim verdicts, on synthetic rows and on the committed H100
reference (results/reference/H100-80GB-HBM3-profile): the CPU side projected and set beside the
GPU, GPU energy kept where the CPU has no RAPL, the profiler's slowdown beside the breakdown,
CPU % as a share of every core with impossible readings flagged, one operator level per table
and chart, and a verdict per seed claim. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.resultset import ResultCell, load_cells
from bench.studies.profile import claims, readout, report
from bench.studies.profile.config import CPU_DEFAULT, SEED_EPOCHS, SEED_TRAIN_IMAGES

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference" / "H100-80GB-HBM3-profile"
NO_RAPL_NOTE = "no RAPL package zones under /sys/class/powercap (not Linux on x86, or a VM or container without powercap)"


def _cell(tmp: Path, name: str, backend: str, variant: str = "finetune", *, epochs: list[dict], system: dict | None = None,
          params: dict | None = None, pipeline: str = "loader", batch: int = 64, device: str = "dev") -> ResultCell:  # fmt: skip
    d = tmp / "profile" / name
    d.mkdir(parents=True, exist_ok=True)
    base = {
        "study": "profile", "backend": backend, "variant": variant, "pipeline": pipeline, "batch_size": batch,
        "global_batch": batch, "world_size": 1, "parallel": "none", "image_size": 224, "device": device,
        "dataset": "catsdogs-synthetic", "dataset_real": False, "weights": "random", "status": "ok", "phase": "epoch",
    }  # fmt: skip
    rows = [{**base, "epoch": i + 1, **e} for i, e in enumerate(epochs)]
    spec = {
        "study": "profile",
        "backend": backend,
        "variant": variant,
        "params": {"image_size": 224, "max_steps": 0, **(params or {})},
    }
    return ResultCell(d, rows, system=system or {}, spec=spec)


def _cpu_cell(tmp: Path, rapl: bool = False) -> ResultCell:
    """A reduced CPU cell: 3 steps of 64 an epoch, 40 s each after a 2 s loader start."""
    e = {"epoch_s": 122.0, "first_batch_s": 2.0, "steps": 3, "samples": 192, "samples_per_s": 192 / 122.0,
         "telemetry_window_s": 122.0, "cpu_energy_j": 122.0 * 150 if rapl else None,
         "cpu_energy_note": None if rapl else NO_RAPL_NOTE}  # fmt: skip
    sysj = {"cpu_logical_cores": 2, "idle_baseline": {"cpu_idle_power_w": 50.0 if rapl else None}, "telemetry": {"gpus": []}}
    return _cell(tmp, "cpu", "torch-cpu", epochs=[e, e], system=sysj, params={"max_steps": 3}, device="EPYC, 2 cores")


def _gpu_cell(tmp: Path, name: str = "gpu", batch: int = 64, pipeline: str = "loader", energy: bool = True, util: float = 55.0,
              power: float = 300.0) -> ResultCell:  # fmt: skip
    """A whole-split GPU cell: 31 steps of 64 in 3 s (0.5 s of it the loader's start)."""
    e = {"epoch_s": 3.0, "first_batch_s": 0.5, "steps": 31, "samples": 31 * batch, "samples_per_s": 31 * batch / 3.0,
         "telemetry_window_s": 3.0, "telemetry_samples": 30, "gpu0_power_w_mean": power, "gpu0_util_pct_mean": util,
         "gpu0_energy_j": 900.0 if energy else None,
         "gpu0_energy_source": "counter (nvmlDeviceGetTotalEnergyConsumption)" if energy
         else "none: no energy counter and no power samples over the window",
         "cpu_energy_j": None, "cpu_energy_note": NO_RAPL_NOTE}  # fmt: skip
    sysj = {"cpu_logical_cores": 16, "idle_baseline": {"gpu0_idle_power_w": 70.0}, "telemetry": {"gpus": [0]}}
    return _cell(tmp, name, "torch-cuda", epochs=[e, e], system=sysj, pipeline=pipeline, batch=batch, device="H100")


@pytest.fixture(scope="module")
def ref_cells():
    if not REF.is_dir():
        pytest.skip("the committed H100 profile reference is not here")
    return [c for c in load_cells(sorted(p for p in (REF / "profile").iterdir() if p.is_dir())) if c.study == "profile"]


@pytest.fixture(scope="module")
def ref_report(ref_cells, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("rep")
    return "\n".join(report.section(ref_cells, out))


# ---- 1: the CPU side, a reduced protocol projected like the GPU's


def test_the_cpus_default_is_a_reduced_protocol_at_the_seeds_size_that_takes_minutes():
    from bench.core.registry import get_study

    st = get_study("profile")
    cells = st.matrix("cpu", "default")
    assert {c.variant for c in cells} == {"finetune", "frozen"}
    for c in cells:
        st.validate(c)
        assert (
            c.params["image_size"] == 224 and c.params["batch_size"] == 64 and c.params["max_steps"] == CPU_DEFAULT["max_steps"]
        )
    est = [st.estimate(c) for c in cells]  # the 2-core EPYC's cost model (config.CPU_IMG_S_224)
    total_s = sum(e.open_s + e.steps * e.step_s for e in est)
    assert total_s < 20 * 60, f"{total_s / 60:.0f} min on the 2-core EPYC"  # minutes, not hours (16 cores: ~8x less)


def test_the_cpus_default_cell_pairs_with_the_gpus_seed_cell_in_the_headline():
    """Only work-amount parameters (bench.core.claims.SPEED_FREE) may differ between the CPU's
    reduced cell and the GPU's run of the seed's setup, or 'GPU over CPU' cannot be formed."""
    from bench.core.claims import ALWAYS_FREE, SPEED_FREE
    from bench.core.registry import get_study

    st = get_study("profile")
    cpu = next(c for c in st.matrix("cpu", "default") if c.variant == "finetune")
    gpu = next(
        c
        for c in st.matrix("cuda", "default")
        if c.variant == "finetune" and c.params["pipeline"] == "loader" and c.params["batch_size"] == 64 and not c.devices
    )
    free = set(ALWAYS_FREE) | set(SPEED_FREE)
    assert {k for k in cpu.params.keys() | gpu.params.keys() if cpu.params.get(k) != gpu.params.get(k)} <= free


def test_projection_adds_each_epochs_loader_start_to_the_seeds_images(tmp_path):
    p = readout.projection(_cpu_cell(tmp_path))
    assert p is not None and p["reduced"] and "reduced: 3 steps x 2 epochs" in p["protocol"]
    per_img = 120.0 / 192
    assert p["t_img_s"] == pytest.approx(per_img) and p["start_s"] == 2.0
    assert p["hours"] == pytest.approx(SEED_EPOCHS * (2.0 + SEED_TRAIN_IMAGES * per_img) / 3600)
    g = readout.projection(_gpu_cell(tmp_path))
    assert g is not None and not g["reduced"] and g["protocol"].startswith("whole split")


def test_cpu_vs_gpu_table_has_the_time_ratio_and_energy_where_both_sides_measured(tmp_path):
    cpu, gpu = _cpu_cell(tmp_path / "a"), _gpu_cell(tmp_path / "a")
    text = "\n".join(report.cpu_vs_gpu([cpu, gpu]))
    ratio = readout.projection(cpu)["hours"] / readout.projection(gpu)["hours"]  # type: ignore[index]
    assert "CPU / GPU time" in text and f"{ratio:,.1f}x" in text and "6.5x" in text
    assert "not available (no RAPL)" in text and "needs energy on both sides" in text
    cpu = _cpu_cell(tmp_path / "b", rapl=True)  # 150 W under load, 50 W idle: 100 W x 122 s / 192 img
    text = "\n".join(report.cpu_vs_gpu([cpu, gpu]))
    cj, gj = 100 * 122.0 / 192, (900.0 - 70 * 3.0) / (31 * 64)
    assert f"{cj / gj:,.1f}x" in text
    assert "Not formed: no CPU cell ran" in "\n".join(report.cpu_vs_gpu([gpu]))


def test_the_gpu_vs_cpu_claim_gets_its_verdict_from_the_projection(tmp_path):
    verdict, ev = claims.gpu_vs_cpu([_cpu_cell(tmp_path), _gpu_cell(tmp_path)])
    assert verdict == "holds" and "projected" in ev and "seed 6.5x" in ev and "reduced" in ev
    verdict, ev = claims.gpu_vs_cpu([_gpu_cell(tmp_path)])
    assert verdict == "not measured here" and "no CPU cell ran" in ev
    frozen = _cpu_cell(tmp_path)
    for r in frozen.rows:
        r["variant"] = "frozen"
    verdict, ev = claims.gpu_vs_cpu([frozen, _gpu_cell(tmp_path)])
    assert verdict == "not measured here" and "the CPU cells: frozen at 224 px, b64" in ev


# ---- 2: GPU energy never dropped for want of RAPL


def test_reference_energy_gpu_kept_and_cpu_marked_apart(ref_cells, ref_report):
    section = ref_report.split("#### Energy per epoch")[1].split("####")[0]
    body = [ln for ln in section.splitlines() if ln.startswith("| GPU ")]
    assert len(body) == 5
    for ln in body:
        cols = [x.strip() for x in ln.strip("|").split("|")]
        assert cols[1].startswith("NVML"), ln  # GPU source: every cell
        assert float(cols[5]) > 0  # GPU J / image
        assert cols[6] == "not available (no RAPL)"
    for c in ref_cells:
        if readout.rows(c, "epoch") and c.first.get("backend") != "torch-cpu":  # the CPU cells have no GPU to read
            e = readout.energy(c)
            assert e["gpu"]["jpi"] and e["gpu"]["jpi"] > 0 and e["cpu"]["note"] == "not available (no RAPL)"


def test_a_gpu_cell_without_a_counter_reading_is_estimated_from_its_power_samples(tmp_path):
    e = readout.energy(_gpu_cell(tmp_path, energy=False, power=300.0))["gpu"]
    assert e["j"] == pytest.approx(900.0) and e["net"] == pytest.approx(900.0 - 70 * 3.0)
    assert e["source"].startswith("NVML mean power x window")


# ---- 3: the profiler's slowdown beside the breakdown


def test_breakdown_says_how_much_slower_the_profiled_steps_ran(ref_report):
    section = ref_report.split("#### Step-time breakdown")[1].split("#### Operators")[0]
    assert "The profiled steps ran -6% to +89% against the same cell's unprofiled steps" in section
    assert "| profiler slowdown |" in section and "| +89% |" in section and "| 77.29 |" in section


# ---- 4: CPU % of every core, impossible readings flagged


def test_process_cpu_is_a_share_of_every_core_and_impossible_readings_say_so():
    assert report._share_of_cores(800.0, 16) == pytest.approx(50.0)
    assert "impossible" in str(report._share_of_cores(14000.0, 16))
    assert report._share_of_cores(800.0, None) is None


def test_reference_cpu_axis_is_capped_and_its_impossible_samples_counted(ref_cells, ref_report, tmp_path):
    assert "CPU % of all cores (process)" in ref_report
    assert "impossible and left out of the plots" in ref_report
    loader = [c for c in ref_cells if c.first.get("pipeline") == "loader" and readout.rows(c, "epoch")]
    assert loader
    for c in loader:
        name, bad = report._series_figure(c, tmp_path, "t.png")
        assert name and bad > 0  # the 7,700 % samples of the reference (8 workers found late)


# ---- 5: one operator level per table and chart


MIXED = {
    "ops_self_device": [
        {"name": "aten::convolution_backward", "device_type": "cpu", "self_device_ms": 60.0, "self_cpu_ms": 7.0},
        {"name": "void cudnn::bn_bw<float, 4>(float const*)", "device_type": "cuda", "self_device_ms": 50.0, "self_cpu_ms": 0},
        {"name": "aten::cudnn_batch_norm_backward", "device_type": "cpu", "self_device_ms": 55.0, "self_cpu_ms": 2.0},
        {"name": "ProfilerStep*", "device_type": "cpu", "self_device_ms": 0.0, "self_cpu_ms": 400.0},
    ],
    "ops_self_cpu": [
        {"name": "ProfilerStep*", "device_type": "cpu", "self_device_ms": 0.0, "self_cpu_ms": 400.0},
        {"name": "cudaLaunchKernel", "device_type": "cpu", "self_device_ms": 0.0, "self_cpu_ms": 80.0},
        {"name": "aten::convolution_backward", "device_type": "cpu", "self_device_ms": 60.0, "self_cpu_ms": 7.0},
    ],
}


def test_operator_levels_are_never_mixed_and_are_sorted():
    ops, key = report.op_level(MIXED, "op")
    assert key == "self_device_ms" and [o["name"] for o in ops] == [
        "aten::convolution_backward",
        "aten::cudnn_batch_norm_backward",
    ]
    kernels, key = report.op_level(MIXED, "kernel")
    assert key == "self_device_ms" and [o["device_type"] for o in kernels] == ["cuda"]
    cpu, key = report.op_level(MIXED, "op-cpu")
    assert key == "self_cpu_ms" and [o["name"] for o in cpu] == ["cudaLaunchKernel", "aten::convolution_backward"]
    assert report.short_kernel("void cudnn::bn_bw<float, 4>(float const*)") == "cudnn::bn_bw<...>"


def test_reference_operator_tables_hold_one_level_each(ref_report):
    section = ref_report.split("#### Operators")[1].split("#### Figures")[0]
    blocks = section.split("##### ")[1:]
    assert blocks
    for block in blocks:
        title, body = block.split("\n", 1)
        lines = [[x.strip() for x in ln.strip().strip("|").split("|")] for ln in body.splitlines() if ln.startswith("| ")]
        head, rows = lines[0], lines[1:]
        names = [r[0] for r in rows]
        if "operators by" in title:
            assert not any(n.startswith(("void ", "ProfilerStep")) or "kernel<" in n for n in names), title
        else:
            assert "GPU kernels" in title and head[0] == "kernel"
        col = head.index("self CPU ms" if "CPU time" in title else "self device ms" if "operators" in title else "device ms")
        ms = [float(r[col].replace(",", "")) for r in rows]
        assert names and ms == sorted(ms, reverse=True), title


# ---- 6: a verdict per claim, computed from the cells


def test_every_claim_of_the_reference_gets_a_verdict_with_its_evidence(ref_cells, ref_report):
    got = {r["key"]: r for r in claims.table(ref_cells)}
    assert set(got) == {k for k, *_ in claims.seed.CLAIMS}
    for r in got.values():
        assert r["verdict"] in claims.VERDICTS and r["evidence"]
    assert got["gpu-vs-cpu"]["verdict"] == "holds" and "60.1x" in got["gpu-vs-cpu"]["evidence"]  # seed 6.5x
    assert got["b128-vs-b64"]["verdict"] == "holds" and "1.46x" in got["b128-vs-b64"]["evidence"]
    assert got["gpu0-memory"]["verdict"] == "needs a 2-GPU host"
    assert got["low-util-b64"]["verdict"] == "does not hold" and "b64 55 %" in got["low-util-b64"]["evidence"]
    assert got["power-b128"]["verdict"] == "not measured here" and "A6000" in got["power-b128"]["evidence"]
    assert got["copy-dominates"]["verdict"] == "does not hold" and "memcpy 0.1%" in got["copy-dominates"]["evidence"]
    assert got["accuracy"]["verdict"] == "needs real data"
    table = ref_report.split("#### The seed's claims")[1]
    assert "| verdict | evidence |" in table and "| does not hold |" in table


def test_verdicts_follow_the_numbers(tmp_path):
    low = [_gpu_cell(tmp_path, "a", util=5.0), _gpu_cell(tmp_path, "b", batch=128, util=60.0)]
    assert claims.low_util_b64(low)[0] == "holds"
    fast = [_gpu_cell(tmp_path, "c", pipeline="synthetic-gpu"), _gpu_cell(tmp_path, "d", batch=128, pipeline="synthetic-gpu")]
    verdict, ev = claims.b128_vs_b64(fast)  # the same time for twice the images: 2x
    assert verdict == "holds" and "seed 1.6x" in ev
    a6000 = _gpu_cell(tmp_path, "e", batch=128, power=150.0)
    for r in a6000.rows:
        r["device"] = "NVIDIA RTX A6000"
    assert claims.power_b128([a6000])[0] == "holds"
    real = _gpu_cell(tmp_path, "f")
    for r in real.rows:
        r.update(dataset="catsdogs", dataset_real=True, weights="imagenet", test_acc=0.985)
    assert claims.accuracy([real])[0] == "holds"


def test_energy_fields_keep_the_gpus_energy_without_rapl_or_an_idle_baseline():
    """Fake sampler summaries: the GPU's energy never depends on the CPU's RAPL, nor its gross
    figure on the idle baseline; each source says why it is missing."""
    from bench.studies.profile.protocol import energy_fields

    summ = {"window_s": 2.0, "gpu0_energy_j": 500.0, "gpu0_energy_source": "counter (nvmlDeviceGetTotalEnergyConsumption)",
            "cpu_energy_j": None, "cpu_energy_note": NO_RAPL_NOTE}  # fmt: skip
    f = energy_fields(summ, {"gpu0_idle_power_w": 70.0, "cpu_idle_power_w": None}, [0], 100)
    assert f["gpu_energy_j"] == 500.0 and f["gpu_energy_net_j"] == pytest.approx(360.0) and f["j_per_img"] == pytest.approx(3.6)
    assert f["energy_source"] == "GPU (NVML energy counter)" and f["gpu_energy_note"] is None
    assert f["cpu_energy_j"] is None and f["cpu_energy_net_j"] is None and "no RAPL" in f["cpu_energy_note"]
    f = energy_fields(summ, {}, [0], 100)  # no idle baseline: gross kept, net not formed
    assert f["gpu_energy_j"] == 500.0 and f["gpu_energy_net_j"] is None and "no idle baseline" in f["gpu_energy_note"]
    two = {**summ, "gpu1_energy_j": None, "gpu1_energy_source": "none: no energy counter and no power samples over the window"}
    f = energy_fields(two, {"gpu0_idle_power_w": 70.0, "gpu1_idle_power_w": 70.0}, [0, 1], 100)
    assert f["gpu_energy_j"] is None and f["gpu0_energy_j"] == 500.0 and "GPU 1: none" in f["gpu_energy_note"]
    cpu = energy_fields({"window_s": 2.0, "cpu_energy_j": 300.0}, {"cpu_idle_power_w": 50.0}, [], 100)
    assert cpu["energy_source"] == "CPU package (RAPL)" and cpu["energy_net_j"] == pytest.approx(200.0)
