"""profile (seed 004) report and claim verdicts, on synthetic rows and on the committed H100
reference (results/reference/H100-80GB-HBM3-profile): the CPU side projected and set beside the
GPU, GPU energy kept where the CPU has no RAPL, the profiler's slowdown beside the breakdown,
CPU % as a share of every core with impossible readings flagged, one operator level per table
and chart; and seed 004's claims (claims.py) judged by the answer engine on the reference and on
cells built here: every repeat read, one repeat no verdict, the two-GPU readings on DataParallel
cells at the seed's global batch. No torch needed."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import get_study
from bench.core.resultset import ResultCell, load_cells
from bench.studies.profile import readout, report
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
    """Only work-amount parameters (profile's claims.SPEED_FREE: its marked work and the dataset) may
    differ between the CPU's reduced cell and the GPU's run of the seed's setup, or 'GPU over CPU'
    cannot be formed."""
    from bench.core.claims import ALWAYS_FREE
    from bench.core.registry import get_study
    from bench.studies.profile.claims import SPEED_FREE

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


# ---- 2: GPU energy never dropped for want of RAPL


def test_reference_energy_gpu_kept_and_cpu_marked_apart(ref_cells, ref_report):
    section = ref_report.split("#### Energy per epoch")[1].split("####")[0]
    body = [ln for ln in section.splitlines() if ln.startswith("| GPU ")]
    assert len(body) == 5
    for ln in body:
        cols = [x.strip() for x in ln.strip("|").split("|")]
        assert cols[1].startswith("NVML"), ln  # GPU source: every cell
        if "NVML energy counter" in cols[1]:  # GPU J / image: from the counter's windows only
            assert float(cols[5]) > 0, ln
        else:  # polled power under-counts a burst: the reason, never a figure (issue 55 item 11)
            assert cols[5].startswith("no figure: not from the energy counter"), ln
        assert cols[6] == "not available (no RAPL)"
    for c in ref_cells:
        if readout.rows(c, "epoch") and c.first.get("backend") != "torch-cpu":  # the CPU cells have no GPU to read
            e = readout.energy(c)
            assert (e["gpu"]["jpi"] or 0) > 0 or e["gpu"]["jpi_note"], e["gpu"]
            assert e["cpu"]["note"] == "not available (no RAPL)"


def test_a_gpu_cell_without_a_counter_reading_is_estimated_from_its_power_samples(tmp_path):
    e = readout.energy(_gpu_cell(tmp_path, energy=False, power=300.0))["gpu"]
    assert e["j"] == pytest.approx(900.0) and e["net"] == pytest.approx(900.0 - 70 * 3.0)
    assert e["source"].startswith("NVML mean power x window")
    # its energy, labelled; never a J / image (polled power under-counts a burst: bench.measure.energy)
    assert e["jpi"] is None and e["jpi_note"].startswith("no figure: not from the energy counter (NVML mean power")
    assert e["jpi_note"].endswith("(2 of 2 epoch windows)")


def test_a_cells_j_per_image_comes_from_its_counter_windows_only_and_says_why_not(tmp_path):
    """H100-80GB-HBM3-profile's loader b64 GPU cell printed 0.3312 J / image, the median of three counter
    windows and one polled: now the counter's three alone; and a cell of short windows says their lengths."""
    c = _gpu_cell(tmp_path / "a")
    e0 = {**c.rows[0]}
    polled = {**e0, "gpu0_energy_j": None, "gpu0_power_w_mean": 900.0}  # its estimate would be 2,700 J
    counted = [{**e0, "gpu0_energy_j": j} for j in (600.0, 900.0, 1200.0)]
    mixed = ResultCell(dir=c.dir, rows=[*counted, polled], system=c.system, spec=c.spec)
    e = readout.energy(mixed)["gpu"]
    assert e["jpi"] == pytest.approx((900.0 - 70 * 3.0) / (31 * 64)) and e["jpi_note"] is None
    short = ResultCell(dir=c.dir, rows=[{**e0, "telemetry_window_s": w} for w in (0.6, 0.55)], system=c.system, spec=c.spec)
    e = readout.energy(short)["gpu"]
    assert e["jpi"] is None and "too short to measure: 2 windows of 0.55-0.60 s" in e["jpi_note"], e


# ---- 3: the profiler's slowdown beside the breakdown


def test_breakdown_says_how_much_slower_the_profiled_steps_ran(ref_report):
    section = ref_report.split("#### Step-time breakdown")[1].split("#### Operators")[0]
    assert "The profiled steps ran -6% to +89% against the same cell's unprofiled steps" in section
    assert "| profiler slowdown |" in section and "| +89% |" in section and "| 77.29 |" in section


# ---- 4: CPU % of every core, impossible readings flagged


def test_process_cpu_is_a_share_of_every_core_and_impossible_readings_say_so():
    assert readout.share_of_cores(800.0, 16) == pytest.approx(50.0)
    assert "impossible" in str(readout.share_of_cores(14000.0, 16))
    assert readout.share_of_cores(800.0, None) is None


def test_reference_cpu_axis_is_capped_and_its_impossible_samples_counted(ref_cells, ref_report, tmp_path):
    assert "CPU % of all cores (process)" in ref_report
    assert "impossible and left out of the plots" in ref_report
    loader = [c for c in ref_cells if c.first.get("pipeline") == "loader" and readout.rows(c, "epoch")]
    assert loader
    for c in loader:
        name, bad = report._series_figure(c, tmp_path, "t.png")
        assert name and bad > 0  # the 7,700 % samples of the reference (8 workers found late)


def test_a_telemetry_figure_drawn_on_the_kept_canvas_is_the_one_a_fresh_canvas_draws(ref_cells, tmp_path):
    """draw_series reuses one figure per process; what an earlier drawing left (lines, legend,
    limits, a capped axis, titles) must not show in the next: each drawn again after the others,
    in the other order, is pixel for pixel the one drawn first on a new canvas."""
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    from bench.core import figures

    got: list[tuple[str, object]] = []
    with figures.collecting(lambda out, name, draw, data: got.append((name, data))):
        report.section(ref_cells, tmp_path)
    tel = [(n, d) for n, d in got if n.startswith("profile_telemetry")]
    assert len(tel) >= 3
    first, again = {}, {}
    for n, d in tel:
        report._SERIES_FIGURES.clear()  # a new canvas for each
        figures.render(report.draw_series, d, tmp_path / f"fresh-{n}")
        first[n] = np.asarray(image.open(tmp_path / f"fresh-{n}"))
    for n, d in reversed(tel):  # one canvas, every drawing after another's
        figures.render(report.draw_series, d, tmp_path / f"kept-{n}")
        again[n] = np.asarray(image.open(tmp_path / f"kept-{n}"))
    for n in first:
        assert first[n].shape == again[n].shape and (first[n] == again[n]).all(), n


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
    ops, key = readout.op_level(MIXED, "op")
    assert key == "self_device_ms" and [o["name"] for o in ops] == [
        "aten::convolution_backward",
        "aten::cudnn_batch_norm_backward",
    ]
    kernels, key = readout.op_level(MIXED, "kernel")
    assert key == "self_device_ms" and [o["device_type"] for o in kernels] == ["cuda"]
    cpu, key = readout.op_level(MIXED, "op-cpu")
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


# ---- 6: seed 004's claims, judged by the answer engine (claims.py declares them)

STUDY = get_study("profile")


def _judge(cells: list[ResultCell], cid: str) -> list[A.Answer]:
    return A.judge(STUDY, cells, next(c for c in STUDY.claims if c.id == cid))


def _epoch(e: int, epoch_s: float, samples: int, **kw) -> dict:
    return {"phase": "epoch", "epoch": e, "epoch_s": epoch_s, "first_batch_s": 0.5, "samples": samples,
            "samples_per_s": samples / epoch_s, **kw}  # fmt: skip


def _repeats(tmp: Path, name: str, backend: str, n: int, rows, *, params: dict | None = None, device: str = "dev",
             devices: str = "") -> list[ResultCell]:  # fmt: skip
    """N repeats of one configuration, one cell each, all of one run (TMP): ROWS(i) is repeat i's rows."""
    p = {"image_size": 224, "max_steps": 0, **(params or {})}
    out = []
    for i in range(n):
        d = tmp / "profile" / f"{name}-r{i}"
        d.mkdir(parents=True, exist_ok=True)
        base = {"study": "profile", "backend": backend, "variant": "finetune", "repeat": i, "status": "ok", "device": device,
                "dataset": "catsdogs-synthetic", "dataset_real": False, "weights": "random", "devices": devices,
                "parallel": p.get("parallel", "none")}  # fmt: skip
        spec = {"study": "profile", "backend": backend, "variant": "finetune", "repeat": i, "params": p,
                "devices": [x for x in devices.split(",") if x]}  # fmt: skip
        out.append(ResultCell(d, [{**base, **r} for r in rows(i)], spec=spec))
    return out


def test_every_claim_of_the_reference_is_judged_by_the_engine_and_the_section_prints_no_verdict(ref_cells, ref_report):
    got: dict[str, list[A.Answer]] = {}
    for claim in STUDY.claims:
        for a in A.judge(STUDY, ref_cells, claim):
            assert a.verdict in C.VERDICTS and (a.findings or a.why), claim.id
            got.setdefault(claim.id, []).append(a)
    assert len(got) == len(STUDY.claims) >= 24
    # its CPU side ran the reduced protocol (2 epochs x 3 steps), its GPU side 4 whole epochs: not the same
    # work, so no pair (the old table set the two projections side by side); the answer says what to run
    [g] = got["gpu-over-cpu"]
    assert g.verdict == C.NOT_HERE and not g.findings and "not the same work" in g.why and "epochs" in g.why, g.why
    [b] = got["b128-over-b64"]
    assert b.verdict == C.FEW and b.value is not None and 1.4 < b.value.median < 1.5
    [copy] = got["copy-dominates"]
    assert copy.verdict == C.FEW and copy.value is not None and copy.value.median < 0.01  # memcpy 0.1 % of a step, kernels 32 %
    assert sorted(a.split["backend"] for a in got["cpu-util"]) == ["torch-cpu", "torch-cuda"]
    assert all(a.verdict == C.NOT_COMPARABLE and a.findings for a in got["cpu-util"])  # ours beside the seed's Xeon Gold's
    assert got["accuracy"][0].verdict == C.NEEDS_REAL and got["cpu-loading-insignificant"][0].verdict == C.NEEDS_REAL
    for cid in ("gpu-util-b64", "gpu-mem-b64", "gpu-power-b128", "gpu0-memory", "dp-over-one"):  # the reference has one GPU
        [a] = got[cid]
        assert a.verdict == C.NOT_HERE and ("gpus=2" in a.why or "2 GPUs" in a.why), cid
    assert "parallel=dp --set devices=0,1 --set batch_size=32" in got["gpu-util-b64"][0].why
    assert got["cpu-temp"][0].verdict == C.NOT_HERE and "temperature" in got["cpu-temp"][0].why
    # numbers and intervals stay in the study's tables; verdicts come only from the engine's
    assert "#### The seed's claims" not in ref_report and "| verdict |" not in ref_report
    assert not any(f"| {v} |" in ref_report for v in C.VERDICTS)


def test_gpu_over_cpu_reads_every_repeat_and_decides_only_with_an_interval(tmp_path):
    """Every repeat of both sides is read, paired by repeat within one run; one repeat a side gives
    no verdict, and one slow repeat leaves it undecided."""

    def run(tmp: Path, gpu_s: list[float]) -> list[ResultCell]:
        cpu = _repeats(tmp, "cpu", "torch-cpu", len(gpu_s), lambda i: [_epoch(1, 122.0, 192), _epoch(2, 122.0, 192)],
                       params={"max_steps": 3})  # fmt: skip
        return cpu + _repeats(
            tmp, "gpu", "torch-cuda", len(gpu_s), lambda i: [_epoch(1, gpu_s[i], 1984), _epoch(2, gpu_s[i], 1984)],
            params={"max_steps": 3},
        )  # fmt: skip

    cells = run(tmp_path / "a", [3.0, 3.2, 2.9])
    [a] = _judge(cells, "gpu-over-cpu")
    hours = [readout.projection(c)["hours"] for c in cells]  # type: ignore[index]
    assert a.verdict == C.HOLDS and a.findings[0].pairing.startswith("same run")
    assert a.value is not None and a.value.n == 3 and a.value.kind == "range"
    assert a.value.median == pytest.approx(hours[0] / statistics.median(hours[3:]))  # CPU hours over GPU hours
    [one] = _judge(run(tmp_path / "b", [3.0]), "gpu-over-cpu")
    assert one.verdict == C.FEW and one.value is not None and one.value.median > 100
    slow = run(tmp_path / "c", [3.0, 800.0, 2.9])  # one repeat at 0.4 s an image: 1.6x, below 'a huge advantage'
    [c] = _judge(slow, "gpu-over-cpu")
    assert c.verdict == C.UNDECIDED and c.value is not None and c.value.lo is not None and c.value.lo < 2.0 < c.value.median


def test_b128_over_b64_reads_every_repeat_not_the_last_one_seen(tmp_path):
    """Every repeat counts, not the last one seen: here the last alone would read 1.7x."""
    p = {"pipeline": "synthetic-gpu"}
    b64 = _repeats(tmp_path, "b64", "torch-cuda", 3, lambda i: [_epoch(1, 3.0, 1984)], params={**p, "batch_size": 64})
    t128 = [6.0, 6.0, 2.0]
    b128 = _repeats(tmp_path, "b128", "torch-cuda", 3, lambda i: [_epoch(1, t128[i], 1984)], params={**p, "batch_size": 128})
    [a] = _judge(b64 + b128, "b128-over-b64")
    h64, *h128 = (readout.projection(c)["hours"] for c in (b64[0], *b128))  # type: ignore[index]
    assert a.value is not None and a.value.n == 3 and a.value.median == pytest.approx(h64 / h128[0])  # 0.47x
    assert a.verdict == C.UNDECIDED and a.value.hi == pytest.approx(h64 / h128[2]) and a.value.hi > 1.5
    # the full profile's one-GPU cell as a world of one rank under torchrun is no second cell of the b128 side
    ranks1 = _repeats(
        tmp_path, "b128r1", "torch-cuda", 3, lambda i: [_epoch(1, 1.0, 1984)], params={**p, "batch_size": 128}, devices="0"
    )
    [b] = _judge(b64 + b128 + ranks1, "b128-over-b64")
    assert b.verdict == C.UNDECIDED and b.value is not None and b.value.median == pytest.approx(a.value.median)


def test_gpu_memory_is_the_cells_own_not_every_process_on_the_gpu(tmp_path):
    """An interleaved round keeps its other cells alive on the GPU: NVML's device-wide memory in use
    read the same 41 GB for batch 64 and 128 (H200-profile-rounds6, rounds 2-6). The claim reads each
    cell's own peak (torch's allocator), which doubles with the batch."""
    p = {"pipeline": "synthetic-gpu"}

    def rows(own: float):
        return lambda i: [_epoch(1, 3.0, 1984, gpu0_mem_used_mb_max=41092.7, gpu_alloc_peak_mb=own + i)]

    b64 = _repeats(tmp_path, "b64", "torch-cuda", 6, rows(8557.0), params={**p, "batch_size": 64})
    b128 = _repeats(tmp_path, "b128", "torch-cuda", 6, rows(16969.0), params={**p, "batch_size": 128})
    [a] = _judge(b64 + b128, "gpu-mem-grows-with-batch")
    assert a.verdict == C.HOLDS and a.value is not None and a.value.median == pytest.approx(16969 / 8557, rel=1e-3)
    for c in b64:
        assert readout.gpu_median(c, 0, readout.GPU_MEM) == pytest.approx(8557.0 + c.rows[0]["repeat"])
    # a row without torch's figure has no own memory: the claim says so, it never falls back to NVML's
    bare = _repeats(tmp_path / "n", "b64", "torch-cuda", 3, lambda i: [_epoch(1, 3.0, 1984, gpu0_mem_used_mb_max=1.0)],
                    params={**p, "batch_size": 64})  # fmt: skip
    assert all(readout.gpu_median(c, 0, readout.GPU_MEM) is None for c in bare)


def _dp(
    tmp: Path, batch: int, device: str, util, mem, power=(80.0, 23.0), temp=(59, 38), devices: str = "0,1"
) -> list[ResultCell]:
    ids = devices.split(",")

    def rows(i: int) -> list[dict]:
        per = {}
        for k, g in enumerate(ids):
            # NVML's memory in use (the seed's nvidia-smi readings are judged on it) and torch's own peak,
            # lower by the CUDA context and cache (the ordering claims read it)
            per |= {f"gpu{g}_util_pct_mean": util[k], f"gpu{g}_mem_used_mb_max": mem[k], f"gpu{g}_power_w_mean": power[k],
                    f"gpu{g}_temp_c_max": temp[k], f"gpu{k}_alloc_peak_mb_torch": mem[k] - 600.0}  # fmt: skip
        return [_epoch(1, 3.0, 1984, **per)]

    params = {"parallel": "dp", "batch_size": batch, "pipeline": "loader"}
    return _repeats(tmp, f"dp{batch}", "torch-cuda", 3, rows, params=params, device=device, devices=devices)


def test_the_seeds_two_gpu_readings_are_claims_on_dataparallel_cells_at_its_global_batch(tmp_path):
    """The seed's 'batch size 64' was 64 images a step over two GPUs: a dp cell at batch_size=32 (the
    kit's is per GPU). Its readings hold on DataParallel cells, GPU:0 and GPU:1 each; absolute ones
    only on its A6000s; the orderings on any dp cell, one answer per batch."""
    a6000 = "NVIDIA RTX A6000"
    seed_run = _dp(tmp_path, 32, a6000, util=(3.0, 14.0), mem=(3700.0, 2500.0))
    matrix = _dp(tmp_path, 128, a6000, util=(90.0, 85.0), mem=(20000.0, 15000.0), power=(290.0, 280.0), temp=(80, 78))
    cells = seed_run + matrix
    [util] = _judge(cells, "gpu-util-b64")
    assert util.verdict == C.HOLDS and [f.what for f in util.findings] == ["GPU:0", "GPU:1"]
    assert [f.value.median for f in util.findings] == [3.0, 14.0]  # the seed's run only: 128 per GPU is global 256
    for cid in ("gpu-mem-b64", "gpu-power-b64", "gpu-temp-b64"):  # 3,564 / 2,374 MiB = 3,737 / 2,489 MB; 77 / 23 W; 59 / 38 °C
        [a] = _judge(cells, cid)
        assert a.verdict == C.HOLDS, (cid, a.why)
    order = _judge(cells, "gpu0-memory")
    assert sorted(a.split["batch_size"] for a in order) == [32, 128] and all(a.verdict == C.HOLDS for a in order)
    [missing] = _judge(cells, "gpu-mem-b128")  # the seed's 128: 64 per GPU, not run here
    assert missing.verdict == C.NOT_HERE and "--set batch_size=64" in missing.why
    # an absolute reading is the seed's A6000s'; 'barely used' is the workload's, on any GPU
    h100 = _dp(tmp_path / "h", 32, "NVIDIA H100 80GB HBM3", util=(3.0, 14.0), mem=(3700.0, 2500.0))
    [other] = _judge(h100, "gpu-mem-b64")
    assert other.verdict == C.NOT_COMPARABLE and "H100" in other.why and other.findings
    assert _judge(h100, "gpu-util-b64")[0].verdict == C.HOLDS
    busy = _dp(tmp_path / "b", 32, a6000, util=(30.0, 14.0), mem=(3700.0, 2500.0))
    assert _judge(busy, "gpu-util-b64")[0].verdict == C.FAILS
    # GPU:0 is the first GPU a cell names (DataParallel's output device), not the lowest index
    swapped = _dp(tmp_path / "s", 32, a6000, util=(3.0, 14.0), mem=(3700.0, 2500.0), devices="1,0")
    [s] = _judge(swapped, "gpu-util-b64")
    assert [f.value.median for f in s.findings] == [3.0, 14.0]
    [m] = _judge(swapped, "gpu-mem-b64")  # NVML's reading of each named GPU, in the cell's order
    assert [f.value.median for f in m.findings] == [3700.0, 2500.0]
    [o] = _judge(swapped, "gpu0-memory")  # torch's per-position peaks: position 0 is GPU 1 here
    assert o.value is not None and o.value.median == pytest.approx(3100.0 / 1900.0)


def test_accuracy_needs_the_real_images_trained_from_the_imagenet_weights(tmp_path):
    def run(tmp: Path, real: bool, weights: str, acc=(0.985, 0.984)) -> list[ResultCell]:
        out = []
        for backend, a in zip(("torch-cpu", "torch-cuda"), acc):
            row = {
                "test_acc": a,
                "dataset_real": real,
                "weights": weights,
                "dataset": "catsdogs" if real else "catsdogs-synthetic",
            }
            out += _repeats(tmp, backend, backend, 3, lambda i, row=row: [_epoch(1, 3.0, 1984, **row)])
        return out

    [a] = _judge(run(tmp_path / "a", True, "imagenet"), "accuracy")
    assert a.verdict == C.HOLDS and [f.what for f in a.findings] == ["CPU", "GPU", "CPU / GPU"]
    assert _judge(run(tmp_path / "b", True, "imagenet", acc=(0.985, 0.90)), "accuracy")[0].verdict == C.FAILS
    [synthetic] = _judge(run(tmp_path / "c", False, "random"), "accuracy")
    assert synthetic.verdict == C.NEEDS_REAL and synthetic.findings  # our figure beside the reason
    [scratch] = _judge(run(tmp_path / "d", True, "random"), "accuracy")
    assert scratch.verdict == C.NOT_HERE and "ImageNet weights" in scratch.why and not scratch.findings


def test_copy_dominates_sets_the_profiled_steps_copies_against_its_kernels(tmp_path):
    def run(tmp: Path, memcpy: float) -> list[ResultCell]:
        rows = [_epoch(1, 3.0, 1984), {"phase": "profile", "memcpy_share": memcpy, "kernel_share": 0.3}]
        return _repeats(tmp, "gpu", "torch-cuda", 3, lambda i: rows)

    assert _judge(run(tmp_path / "a", 0.6), "copy-dominates")[0].verdict == C.HOLDS
    assert _judge(run(tmp_path / "b", 0.001), "copy-dominates")[0].verdict == C.FAILS


def test_the_claims_import_no_report_and_nothing_heavy():
    code = (
        "import sys, bench.studies.profile.claims; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'numba', 'matplotlib') or m.endswith('.report')]; "
        "print(bad); raise SystemExit(bool(bad))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


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
