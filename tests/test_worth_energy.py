"""Is the GPU worth it, issue 55 items 5 and 11: energy per sample only from counter windows that can
measure it, and fixed costs that hold every one-off cost.

- the one rule (bench.measure.energy.window_check) at the writer (Meter.window, NVML faked at the pynvml
  boundary with a power limit) and at the reader of old rows (row_energy), on generated windows, energies,
  power limits and garbage fields: a figure within the rule or a reason, never both, never a figure from a
  window under 1 s or above the boards' power limit x its length;
- the reader knows every field name rows have used: the committed H100 profile rows (j_per_img,
  telemetry_window_s, gpu0_energy_source) give their J/image, the H200 profile's 0.6 s windows give none;
- fixed costs on copies of committed references: the Tuned (Optuna) rows count their search, and
  mlp-scratch's NumPy part, which shares its cell's process with CuPy, takes the start-up of its own
  NumPy cell where the run has one, and says which.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.core import worth as W
from bench.core.answers import Side, judge_all
from bench.core.registry import studies
from bench.core.resultset import collect, load_cell
from bench.core.text import short
from bench.measure import energy
from host import worth as HW

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
H100_PROFILE = REF / "H100-80GB-HBM3-profile" / "profile"
H200 = REF / "H200"


# ---- the rule at the writer -------------------------------------------------------------------
class _Nvml(types.ModuleType):
    """pynvml as far as the meter calls it: one GPU, its energy counter and its enforced power limit."""

    class NVMLError(Exception):
        pass

    def __init__(self, limit_mw: int | None):
        super().__init__("pynvml")
        self.limit_mw = limit_mw

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return 0

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        if self.limit_mw is None:
            raise self.NVMLError("Not Supported")
        return self.limit_mw


def _gpu_meter(limit_mw: int | None, idle_w: float) -> energy.Meter:
    saved = sys.modules.get("pynvml")
    sys.modules["pynvml"] = _Nvml(limit_mw)
    try:
        meter = energy.Meter(energy.Counters("cuda", gpus=[0], rapl_root=Path("/nonexistent")))
    finally:
        if saved is None:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = saved
    meter.idle_w = {"gpu0": idle_w}
    return meter


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window=st.floats(0.0, 30.0),
    watts=st.floats(0.0, 2000.0),
    idle=st.floats(0.0, 150.0),
    limit_mw=st.one_of(st.none(), st.integers(50_000, 1_000_000)),
    samples=st.integers(1, 100_000),
)
def test_the_writer_gives_a_figure_within_the_rule_or_a_reason_never_both(window, watts, idle, limit_mw, samples):
    meter = _gpu_meter(limit_mw, idle)
    limit = None if limit_mw is None else limit_mw / 1e3
    assert meter.counters.limits_w == ({} if limit is None else {"gpu0": limit})
    gross = watts * window
    a = energy.Reading(100.0, {"gpu0": 5_000.0})
    b = energy.Reading(100.0 + window, {"gpu0": 5_000.0 + gross})
    got = meter.window(a, b, samples, "cuda")
    figure, note = got["energy_j_per_sample"], got["energy_note"]
    assert (figure is None) != (note is None), got  # a figure or a reason, never both
    assert got["energy_limit_w"] == limit
    w = b.t - a.t
    if w < energy.MIN_WINDOW_S:
        assert figure is None and note.startswith("too short to measure") and f"{w:.2f} s" in note
    elif limit is not None and gross > limit * w:
        assert figure is None and note.startswith("above the power limit")
    if figure is not None:
        assert w >= energy.MIN_WINDOW_S and (limit is None or gross <= limit * w)
        assert figure == pytest.approx((gross - idle * w) / samples)


def test_the_787_w_window_of_an_h200_is_too_short_and_a_long_one_above_the_limit_is_no_figure_either():
    meter = _gpu_meter(700_000, 80.0)
    a = energy.Reading(10.0, {"gpu0": 1_000.0})
    short = meter.window(a, energy.Reading(10.3, {"gpu0": 1_000.0 + 787 * 0.3}), 64, "cuda")  # 0.3 s at 787 W
    assert short["energy_j_per_sample"] is None and short["energy_window_s"] == pytest.approx(0.3)
    assert short["energy_note"].startswith("too short to measure: a 0.30 s window")
    over = meter.window(a, energy.Reading(12.0, {"gpu0": 1_000.0 + 787 * 2}), 64, "cuda")  # 2 s at 787 W > 700 W
    assert over["energy_j_per_sample"] is None and "787 W" in over["energy_note"] and "700 W" in over["energy_note"]
    ok = meter.window(a, energy.Reading(12.0, {"gpu0": 1_000.0 + 400 * 2}), 64, "cuda")  # 2 s at 400 W
    assert ok["energy_j_per_sample"] == pytest.approx((800 - 160) / 64) and ok["energy_note"] is None
    assert meter.describe()["limits_w"] == {"gpu0": 700.0}


def test_the_profile_studys_own_writer_asks_the_same_rule():
    from bench.studies.profile.protocol import energy_fields

    summ = {"window_s": 0.6, "gpu0_energy_j": 94.0, "gpu0_energy_source": "counter (nvmlDeviceGetTotalEnergyConsumption)"}
    f = energy_fields(summ, {"gpu0_idle_power_w": 80.0}, [0], 128)
    assert f["energy_j_per_sample"] is None and f["energy_note"].startswith("too short to measure: a 0.60 s window")
    assert f["energy_window_s"] == 0.6 and f["j_per_img"] == pytest.approx((94.0 - 48.0) / 128)  # its own table's
    f = energy_fields({**summ, "window_s": 2.5, "gpu0_energy_j": 700.0}, {"gpu0_idle_power_w": 80.0}, [0], 128)
    assert f["energy_j_per_sample"] == pytest.approx((700.0 - 200.0) / 128) and f["energy_note"] is None


# ---- the rule at the reader, on any row -------------------------------------------------------
garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
KEYS = [  # every field name a row has kept a window's energy under, the profile study's older ones too
    "energy_j_per_sample",
    "j_per_img",
    "energy_window_s",
    "telemetry_window_s",
    "energy_gross_j",
    "gpu_energy_j",
    "cpu_energy_j",
    "energy_net_j",
    "energy_limit_w",
    "energy_note",
    "gpu_energy_note",
    "energy_domain",
    "energy_source",
    "gpu0_energy_source",
    "gpu0_energy_j",
]


@settings(max_examples=400, deadline=None)
@given(
    row=st.dictionaries(st.sampled_from(KEYS), garbage, max_size=len(KEYS)),
    figure=st.floats(1e-9, 10.0),
    window=st.one_of(st.none(), st.floats(0.0, 20.0)),
    watts=st.floats(0.0, 3000.0),
    board=st.one_of(st.none(), st.floats(100.0, 1000.0), st.sampled_from(["700.00 W", "[N/A]", "W", "1e9"])),
    gpus=st.integers(-1, 8),
)
def test_the_reader_never_crashes_and_never_shows_a_figure_the_rule_refuses(row, figure, window, watts, board, gpus):
    """Garbage in any field is a reason, never a crash; a well-formed GPU row gives its figure only from
    a counter window of 1 s or more within the board's limit (the row's, else system.json's)."""
    system = {"gpu": {"power_limit": board}}
    got = energy.row_energy(row, system, gpus)
    assert isinstance(got, energy.RowEnergy)
    assert not (got.j_per_sample is not None and got.why), got  # never both
    if got.carried:
        assert (got.j_per_sample is None) == bool(got.why), got  # a row with energy fields: one or the other
    w = energy._finite(row.get("energy_window_s", row.get("telemetry_window_s")))
    if got.j_per_sample is not None:
        assert w is not None and w >= energy.MIN_WINDOW_S
    # a well-formed row of today's writer, at the generated window and power
    good = {
        "energy_j_per_sample": figure,
        "energy_window_s": window,
        "energy_gross_j": None if window is None else watts * window,
        "energy_domain": energy.KIND_TEXT["gpu"],
    }
    got = energy.row_energy(good, system, gpus)
    assert (got.j_per_sample is None) != (got.why == "")
    board_w = energy.power_limit_w(system)
    limit = None if board_w is None else board_w * (gpus if gpus > 0 else 1)  # the boards of the window's GPUs
    if window is None:
        assert got.j_per_sample is None and "not recorded" in got.why
    elif window < energy.MIN_WINDOW_S:
        assert got.j_per_sample is None and got.why.startswith("too short to measure") and f"{window:.2f} s" in got.why
    elif limit is not None and watts > limit * (1 + 1e-9):
        assert got.j_per_sample is None and got.why.startswith("above the power limit")
    elif limit is None or watts < limit * (1 - 1e-9):  # (on the bound itself, rounding decides)
        assert got.j_per_sample == figure


def test_system_json_power_limits_as_nvidia_smi_and_nvml_write_them():
    assert energy.power_limit_w({"gpu": {"power_limit": "700.00 W"}}) == 700.0
    assert energy.power_limit_w({"gpu": {"power_limit_w": 350.0, "power_limit": "700.00 W"}}) == 350.0
    for bad in ({"gpu": {"power_limit": "[N/A]"}}, {"gpu": {"power_limit": True}}, {"gpu": "H200"}, {}, None, []):
        assert energy.power_limit_w(bad) is None


# ---- every field name rows have used: the committed profile references -------------------------
def _side(study_name: str, cells: list, part: str, platform: str) -> Side:
    return Side(run="r", part=part, workload={}, facets={"platform": platform, "gpus": 1}, cells=cells)


def test_the_h100_profiles_older_rows_give_their_j_per_image_from_the_counter_windows_alone():
    """Its rows predate energy_j_per_sample: j_per_img over telemetry_window_s of 2.5-3.2 s. Three windows
    read the NVML counter, one integrated polled power: the figure is the three's median (0.33 J/image)."""
    (gpu,) = [load_cell(d) for d in H100_PROFILE.glob("torch-cuda_finetune_loader_b64-*")]
    assert gpu is not None and not any("energy_j_per_sample" in r for r in gpu.rows)
    f = W.facts(studies()["profile"], _side("profile", [gpu], "torch-cuda", "cuda"))
    counter = sorted(r["j_per_img"] for r in gpu.rows if str(r.get("gpu0_energy_source", "")).startswith("counter"))
    assert len(counter) == 3 and f.energy == {gpu.repeat: pytest.approx(counter[1])}
    assert 0.32 < f.energy[gpu.repeat] < 0.34 and f.energy_domain == energy.KIND_TEXT["gpu"] and not f.energy_why


def test_the_h200_profiles_0_6_s_windows_give_no_figure_and_say_how_long_they_were():
    (gpu,) = [load_cell(d) for d in (H200 / "profile").glob("torch-cuda_finetune_loader_b64-*")]
    assert gpu is not None
    f = W.facts(studies()["profile"], _side("profile", [gpu], "torch-cuda", "cuda"))
    assert f.energy == {} and f.energy_why.startswith("too short to measure: 2 windows of 0.57-0.60 s")


# ---- fixed costs: every one-off cost -----------------------------------------------------------
def _copy_cells(tmp_path: Path, src: Path, names: list[str]) -> Path:
    out = tmp_path / "run" / src.name
    for d in sorted(src.iterdir()):
        if any(d.name.startswith(n) for n in names):
            shutil.copytree(d, out / d.name)
    return tmp_path / "run"


def _worths(run: Path, study: str, claim: str) -> list[W.Worth]:
    cells, _, _ = collect([run])
    reg = studies()
    return [w for w in W.worth_all(reg, judge_all(reg, cells)) if w.answer.study == study and w.answer.claim.id == claim]


def _rows(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines()]


def _total(d: Path) -> float:
    return json.loads((d / "system.json").read_text())["fixed_costs"]["total_s"]


def test_the_tuned_rows_fixed_costs_count_their_search(tmp_path):
    run = _copy_cells(tmp_path, H200 / "cifar-opt", ["torch-cpu_resnet18_optuna", "torch-cuda_resnet18_optuna"])
    (w,) = _worths(run, "cifar-opt", "optuna-gpu-over-cpu")
    for x, backend in ((w.gpu, "torch-cuda"), (w.cpu, "torch-cpu")):
        (d,) = (run / "cifar-opt").glob(f"{backend}_resnet18_optuna-*")
        (search,) = [r["search_s"] for r in _rows(d) if r.get("phase") == "search"]
        assert search > 3 and x.fixed == {0: pytest.approx(_total(d) + search)}
        assert x.fixed_parts == {W.STARTUP: {0: pytest.approx(_total(d))}, "search": {0: pytest.approx(search)}}
        assert f"+ the hyperparameter search {short(search)} s" in HW.fixed_text(x)
    md = "\n".join(HW.section([w], "## x", None, "", None))
    assert "the hyperparameter search (search_s in the side's search row), done once before training (rows 1)" in md
    # a search row that predates search_s: that repeat has no fixed costs, and says why
    (d,) = (run / "cifar-opt").glob("torch-cpu_resnet18_optuna-*")
    rows = [{k: v for k, v in r.items() if k != "search_s"} for r in _rows(d)]
    (d / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (w,) = _worths(run, "cifar-opt", "optuna-gpu-over-cpu")
    assert w.cpu.fixed == {} and "search's time is not recorded" in w.cpu.fixed_why
    assert w.even_time is None and "search's time is not recorded" in w.even_time_why


def test_a_part_sharing_its_cells_process_takes_its_own_cells_start_up_and_says_so(tmp_path):
    run = _copy_cells(tmp_path, H200 / "mlp-scratch", ["numpy+cupy+cupy-tuned_float32", "numpy_float32"])
    (w,) = _worths(run, "mlp-scratch", "cupy-over-numpy")
    (shared,) = (run / "mlp-scratch").glob("numpy+cupy+cupy-tuned_float32-*")
    (alone,) = (run / "mlp-scratch").glob("numpy_float32-*")
    assert _total(alone) != pytest.approx(_total(shared))
    assert w.cpu.fixed == {0: pytest.approx(_total(alone))} and "its own numpy cell's process" in w.cpu.fixed_shared
    assert w.gpu.fixed == {0: pytest.approx(_total(shared))}
    assert "shared with numpy, cupy-tuned" in w.gpu.fixed_shared and "no cupy cell of its own" in w.gpu.fixed_shared
    assert "start-up: its own numpy cell's process" in HW.detail(w)
    # without the NumPy cell the shared process is both sides' start-up, said on each
    shutil.rmtree(alone)
    (w,) = _worths(run, "mlp-scratch", "cupy-over-numpy")
    assert w.cpu.fixed == w.gpu.fixed == {0: pytest.approx(_total(shared))}
    assert "no numpy cell of its own in this run" in w.cpu.fixed_shared


def test_report_json_worth_carries_each_sides_energy_and_fixed_parts(tmp_path):
    run = _copy_cells(tmp_path, H200 / "cifar-opt", ["torch-cpu_resnet18_optuna", "torch-cuda_resnet18_optuna"])
    (w,) = _worths(run, "cifar-opt", "optuna-gpu-over-cpu")
    (got,) = HW.as_json([w])
    gpu = got["sides"]["gpu"]
    assert set(gpu["fixed_parts_s"]) == {W.STARTUP, "search"}
    assert gpu["fixed_s"] == pytest.approx(sum(gpu["fixed_parts_s"].values()))
    assert gpu["energy_j_per_sample"] is None and gpu["energy_why"].startswith("too short to measure")
    assert all(math.isfinite(v) for v in gpu["fixed_parts_s"].values())


def test_the_profile_studys_own_energy_table_holds_the_same_window_rule():
    from bench.core.resultset import collect
    from bench.studies.profile import readout

    ref = Path(__file__).resolve().parent.parent / "results" / "reference"
    if not (ref / "H200").is_dir() or not (ref / "H100-80GB-HBM3-profile").is_dir():
        pytest.skip("the committed references are not in this checkout")
    short = [c for c in collect([ref / "H200"])[0] if c.study == "profile" and "torch-cuda" in c.dir.name]
    assert short and all(readout.energy(c)["gpu"]["jpi"] is None for c in short)  # windows of 0.12-0.60 s
    assert all("too short to measure" in str(readout.energy(c)["gpu"]["note"]) for c in short)
    long = [c for c in collect([ref / "H100-80GB-HBM3-profile"])[0] if c.dir.name.startswith("torch-cuda_finetune_loader_b64")]
    assert long and 0.3 < readout.energy(long[0])["gpu"]["jpi"] < 0.36  # 2.5-3.2 s windows: 0.331 J/image
