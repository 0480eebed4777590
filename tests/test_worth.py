"""Is the GPU worth it: the break-even arithmetic against hand-computed cases, the energy meter on
real counter files (a RAPL tree in a temp dir) and on NVML faked at the pynvml boundary (a missing
counter, a wrapped one, one going backwards, an idle baseline above the load), prices from the
command line and a file (bad ones are one line and leave the rest), and the answers on cells of the
committed H100 reference with energy and fixed costs written into copies of their rows."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bench.core import worth as W
from bench.core.answers import judge_all
from bench.core.registry import studies
from bench.core.resultset import collect
from bench.measure import energy
from host import prices as P
from host import worth as HW

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "results" / "reference" / "H100-80GB-HBM3" / "mnist-cnn"


def later(b: energy.Reading, a: energy.Reading, seconds: float = 2.0) -> energy.Reading:
    """B as if read SECONDS after A: a window long enough to measure (energy.MIN_WINDOW_S)."""
    return dataclasses.replace(b, t=a.t + seconds)


# ---- the arithmetic, by hand ------------------------------------------------------------------
def test_break_even_in_time_is_the_crossing_of_fixed_plus_work_over_rate():
    # GPU: 10 s fixed, 1,000 samples/s; CPU: 1 s, 100 samples/s. 10 + N/1000 = 1 + N/100 -> N = 9 / 0.009 = 1,000
    kind, n = W.crossing(W.time_line(1000, 10), W.time_line(100, 1))
    assert kind == W.ABOVE and n == pytest.approx(1000)
    assert W.time_line(1000, 10).at(1000) == pytest.approx(W.time_line(100, 1).at(1000)) == pytest.approx(11)
    # faster and cheaper to start: first from the first sample
    assert W.crossing(W.time_line(1000, 1), W.time_line(100, 2)) == (W.ALWAYS, 0.0)
    # slower per sample and dearer to start: never
    assert W.crossing(W.time_line(50, 10), W.time_line(100, 1)) == (W.NEVER, math.inf)
    # slower per sample but quicker to start: first only below 1 - (-4) ... 4 s / (1/100 - 1/200) = 800
    kind, n = W.crossing(W.time_line(100, 1), W.time_line(200, 5))
    assert kind == W.BELOW and n == pytest.approx(800)
    # equal lines: the GPU never finishes first
    assert W.crossing(W.time_line(100, 1), W.time_line(100, 1))[0] == W.NEVER


def test_break_even_in_cost_counts_the_hourly_price_over_fixed_and_per_sample_seconds_and_energy():
    # GPU 3.6 USD/h = 0.001 USD/s at 1,000 samples/s: 1e-6 USD a sample, 10 s fixed = 0.01 USD;
    # CPU 0.072 USD/h = 2e-5 USD/s at 10 samples/s: 2e-6 USD a sample, 1 s fixed = 2e-5 USD
    g, c = W.cost_line(1000, 10, 3.6), W.cost_line(10, 1, 0.072)
    assert g.per == pytest.approx(1e-6) and g.fixed == pytest.approx(0.01)
    assert c.per == pytest.approx(2e-6) and c.fixed == pytest.approx(2e-5)
    kind, n = W.crossing(g, c)  # (0.01 - 2e-5) / (2e-6 - 1e-6) = 9,980 samples
    assert kind == W.ABOVE and n == pytest.approx(9980)
    # electricity on top: 3.6e6 J = 1 kWh at 0.5 USD; 7.2 J a sample = 1e-6 USD a sample
    e = W.cost_line(1000, 10, 3.6, j_per_sample=7.2, usd_per_kwh=0.5)
    assert e.per == pytest.approx(2e-6)
    assert W.crossing(e, c)[0] == W.NEVER  # now no cheaper per sample, and dearer to start


def test_the_break_even_interval_is_the_range_over_the_repeat_pairs():
    pairs = [(W.time_line(1000, f), W.time_line(100, 1)) for f in (5.5, 10, 19)]  # N* = 500, 1000, 2000
    e = W.even(pairs, (W.time_line(1000, 10), W.time_line(100, 1)))
    assert (e.kind, e.interval, e.pairs) == (W.ABOVE, "range", 3)
    assert (e.lo, e.n, e.hi) == pytest.approx((500, 1000, 2000))
    assert e.decided
    mixed = W.even([*pairs, (W.time_line(1000, 0.5), W.time_line(100, 1))], (W.time_line(1000, 10), W.time_line(100, 1)))
    assert not mixed.decided and mixed.lo == 0 and "3 of 4" in mixed.split
    assert "above 1k samples (2 epochs) [500–2k, range of 3 pairs]" == HW.even_text(e, "", 500)


# ---- the meter on counter files ---------------------------------------------------------------
def _rapl(root: Path, pkg_uj: int, dram_uj: int, span: int = 262143328850) -> None:
    pkg, dram = root / "intel-rapl:0", root / "intel-rapl:0" / "intel-rapl:0:0"
    dram.mkdir(parents=True, exist_ok=True)
    (pkg / "name").write_text("package-0\n")
    (dram / "name").write_text("dram\n")
    for d, v in ((pkg, pkg_uj), (dram, dram_uj)):
        (d / "energy_uj").write_text(f"{v}\n")
        (d / "max_energy_range_uj").write_text(f"{span}\n")


def test_rapl_package_and_dram_give_joules_per_sample_net_of_the_idle_baseline(tmp_path):
    _rapl(tmp_path, 1_000_000, 500_000)
    meter = energy.Meter(energy.Counters("cpu", rapl_root=tmp_path))
    assert meter.counters.sources["cpu"].startswith("RAPL") and "dram-0" in meter.counters.sources["cpu"]
    meter.idle_w = {"package-0": 0.0, "dram-0": 0.0}  # a quiet machine: no idle draw
    a = meter.read()
    _rapl(tmp_path, 31_000_000, 2_500_000)  # +30 J package, +2 J DRAM
    b = later(meter.read(), a)
    got = meter.window(a, b, 64, "cpu")
    assert got["energy_gross_j"] == pytest.approx(32.0) and got["energy_j_per_sample"] == pytest.approx(0.5)
    assert "machine-wide" in got["energy_note"]
    # the idle baseline is subtracted: 10 W idle over the 2 s window is 20 J of the 32 J
    meter.idle_w = {"package-0": 10.0, "dram-0": 0.0}
    net = meter.window(a, b, 64, "cpu")["energy_net_j"]
    assert net == pytest.approx(32.0 - 10.0 * (b.t - a.t))


def test_a_wrapped_rapl_counter_makes_that_window_not_measured_and_says_why(tmp_path):
    _rapl(tmp_path, 262_000_000_000, 500_000)
    meter = energy.Meter(energy.Counters("cpu", rapl_root=tmp_path))
    meter.idle_w = {"package-0": 0.0, "dram-0": 0.0}
    a = meter.read()
    _rapl(tmp_path, 5_000_000, 900_000)  # the package counter passed max_energy_range_uj
    got = meter.window(a, meter.read(), 64, "cpu")
    assert got["energy_j_per_sample"] is None and got["energy_net_j"] is None
    assert got["energy_note"].startswith("not measured:") and "package-0: the RAPL counter wrapped" in got["energy_note"]


def test_an_idle_baseline_above_the_load_is_not_measured(tmp_path):
    _rapl(tmp_path, 1_000_000, 0)
    meter = energy.Meter(energy.Counters("cpu", rapl_root=tmp_path))
    meter.idle_w = {"package-0": 1e9, "dram-0": 0.0}  # an idle draw no load can beat
    a = meter.read()
    _rapl(tmp_path, 2_000_000, 0)
    got = meter.window(a, later(meter.read(), a), 10, "cpu")
    assert got["energy_j_per_sample"] is None and "idle baseline" in got["energy_note"] and "above the load" in got["energy_note"]


def test_a_missing_counter_is_not_measured_with_the_reason_never_a_guess(tmp_path):
    meter = energy.Meter(energy.Counters("cpu", rapl_root=tmp_path / "none"))
    meter.measure_idle(1.0)  # no counter: no wait, nothing measured
    assert meter.idle_s == 0 and meter.idle_note == "no counter here"
    got = meter.window(meter.read(), meter.read(), 100, "cpu")
    assert got["energy_j_per_sample"] is None and "no RAPL package zones" in got["energy_note"]
    energy.use(None)
    assert energy.fields(None, None, 10, "cpu")["energy_note"] == energy.NO_METER


class _FakeNvml(types.ModuleType):
    """pynvml as far as the meter calls it: one GPU whose energy counter reads from a list."""

    class NVMLError(Exception):
        pass

    def __init__(self, readings_mj):
        super().__init__("pynvml")
        self.readings = list(readings_mj)

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.readings:
            raise self.NVMLError("Not Supported")
        return self.readings.pop(0)


def test_nvml_energy_per_sample_and_a_counter_going_backwards(monkeypatch):
    fake = _FakeNvml([1_000, 1_000, 1_000, 1_000, 61_000, 61_000, 50_000])  # mJ: probe, idle a/b, window a/b, then backwards
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    c = energy.Counters("cuda", gpus=[0], rapl_root=Path("/nonexistent"))
    assert "gpu" in c.sources and "cpu" in c.missing
    meter = energy.Meter(c)
    meter.measure_idle(0.01)  # 1,000 mJ -> 1,000 mJ: 0 W idle
    assert meter.idle_w == {"gpu0": 0.0}
    a = meter.read()
    got = meter.window(a, later(meter.read(), a), 120, "cuda")  # +60 J over 120 samples in 2 s
    assert got["energy_j_per_sample"] == pytest.approx(0.5) and got["energy_domain"].startswith("GPU")
    a = meter.read()
    got = meter.window(a, later(meter.read(), a), 120, "cuda")  # 50 J after 61 J: the driver reloaded
    assert got["energy_j_per_sample"] is None and "went backwards" in got["energy_note"]


def test_no_nvml_is_one_reason_on_the_gpu_side(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    c = energy.Counters("cuda", gpus=[0], rapl_root=Path("/nonexistent"))
    assert c.missing["gpu"] == "nvidia-ml-py not installed: GPU energy not measured"


# ---- prices ----------------------------------------------------------------------------------
def test_prices_from_the_command_line_and_a_file_and_the_bad_ones_each_one_line(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(
        '[[device]]\nmatch = "H100"\nusd_per_hour = 2.0\nsource = "x"\n[[device]]\nmatch = "A100"\nusd_per_hour = -1.0\n'
    )
    p = P.load(["H100=3.5", "EPYC=abc", "Xeon=-2", "nothing", "2-core AMD EPYC=0.1"], f, "0.2")
    assert p is not None and p.kwh_usd == 0.2
    assert p.for_device("NVIDIA H100 80GB HBM3").usd_per_hour == 3.5  # the command line wins over the file
    assert p.for_device("2-core AMD EPYC").usd_per_hour == 0.1
    assert len(p.problems) == 4 and all("\n" not in x for x in p.problems)
    assert any("device entry 2" in x and "greater than or equal to 0" in x for x in p.problems)
    assert any("'abc' is not a number" in x for x in p.problems) and any("cannot be negative" in x for x in p.problems)
    before = dataclasses.replace(p, entries=list(p.entries), problems=list(p.problems))
    h100 = p.for_devices({"NVIDIA H100 80GB HBM3"})
    assert any("'2-core AMD EPYC'" in x and "matches no device" in x for x in h100.problems)
    assert h100.for_device("2-core AMD EPYC") is None and h100.for_device("NVIDIA H100 80GB HBM3") is not None
    assert p == before  # one Prices serves several reports (reference-reports): narrowing one leaves it whole
    assert p.for_devices({"2-core AMD EPYC"}).for_device("2-core AMD EPYC").usd_per_hour == 0.1
    assert P.load(None, None, None) is None  # no price given: no cost, never a default
    (tmp_path / "bad.toml").write_text("this is [not toml")
    bad = P.load(None, tmp_path / "bad.toml")
    assert bad is not None and not bad.entries and "not TOML" in bad.problems[0]


def test_the_example_prices_file_is_valid_dated_and_sourced():
    p = P.load(None, ROOT / "docs" / "prices-example.toml")
    assert p is not None and not p.problems and len(p.entries) >= 4 and p.kwh_usd is None
    assert all(e.source.startswith("https://") and e.date for e in p.entries)
    assert p.for_device("NVIDIA H100 80GB HBM3").match == "H100"


# ---- the answers, on copies of the H100 reference's cells -------------------------------------
def _copy(tmp_path: Path, energy_of: dict[str, float | None], fixed: dict[str, float]) -> Path:
    """torch-cpu and torch-cuda (resident, default) of the H100 reference, one run, 3 repeats; their
    rows given ENERGY_OF[platform] J/sample (None: not measured) and system.json FIXED[platform] s."""
    out = tmp_path / "run" / "mnist-cnn"
    for d in sorted(H100.iterdir()):
        for backend, plat in (("torch-cpu", "cpu"), ("torch-cuda", "cuda")):
            if d.name.startswith(f"{backend}_resident_default-"):
                shutil.copytree(d, out / d.name)
                rows = [json.loads(x) for x in (out / d.name / "rows.jsonl").read_text().splitlines()]
                j = energy_of[plat]
                for r in rows:
                    r["energy_j_per_sample"] = j
                    r["energy_window_s"] = 5.0  # long enough to measure (energy.window_check)
                    r["energy_note"] = None if j else "not measured: NVML energy counter unavailable (NVMLError: Not Supported)"
                (out / d.name / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
                sysf = out / d.name / "system.json"
                s = json.loads(sysf.read_text())
                s["fixed_costs"] = {"total_s": fixed[plat]}
                sysf.write_text(json.dumps(s))
    return tmp_path / "run"


def _worths(run: Path, prices=None) -> list[W.Worth]:
    cells, _, _ = collect([run])
    reg = studies()
    return [w for w in W.worth_all(reg, judge_all(reg, cells), prices) if w.answer.claim.id == "kit-torch-cuda-over-cpu"]


def test_energy_cost_and_break_even_beside_the_time_ratio_by_hand(tmp_path):
    run = _copy(tmp_path, {"cpu": 0.02, "cuda": 0.004}, {"cpu": 2.0, "cuda": 12.0})
    prices = P.load(["H100=3.6", "Xeon=0.36"])
    (w,) = _worths(run, prices)
    assert w.paired and w.gpu.name == "NVIDIA H100 80GB HBM3" and w.cpu.name == "16-core Intel Xeon"
    assert w.time is not None and w.time.median == pytest.approx(w.answer.value.median)  # the headline's ratio
    assert w.energy is not None and w.energy.median == pytest.approx(5.0) and w.energy.lo == pytest.approx(5.0)
    rg, rc = sorted(w.gpu.rate.values())[1], sorted(w.cpu.rate.values())[1]
    assert w.cost.median == pytest.approx((0.36 / rc) / (3.6 / rg))  # CPU USD/sample over GPU's
    n_time = (12.0 - 2.0) / (1 / rc - 1 / rg)
    assert w.even_time.kind == W.ABOVE and w.even_time.n == pytest.approx(n_time)
    n_cost = (3.6 * 12.0 - 0.36 * 2.0) / 3600 / (0.36 / 3600 / rc - 3.6 / 3600 / rg)
    assert w.even_cost.n == pytest.approx(n_cost) if n_cost > 0 else w.even_cost.kind == W.NEVER
    assert w.even_time.lo <= w.even_time.n <= w.even_time.hi and w.even_time.pairs == 3
    g = HW.for_work(w, 1e6)
    assert g["gpu"]["seconds"] == pytest.approx(12.0 + 1e6 / rg) and g["seconds_winner"] == "GPU"
    assert (
        g["gpu"]["joules"] == pytest.approx(4000) and g["cpu"]["joules"] == pytest.approx(20000) and g["joules_winner"] == "GPU"
    )


def test_a_side_without_a_counter_names_itself_and_the_rest_stands(tmp_path):
    run = _copy(tmp_path, {"cpu": 0.02, "cuda": None}, {"cpu": 2.0, "cuda": 12.0})
    (w,) = _worths(run)  # and no price at all
    assert w.energy is None and w.energy_why.startswith("not measured: NVIDIA H100 80GB HBM3 (GPU): NVML energy counter")
    assert "16-core" not in w.energy_why  # the CPU side has its counter
    assert w.cost is None and w.cost_why == "no price given" and w.even_cost is None
    assert w.time is not None and w.even_time is not None  # the time answer and its break-even stand


def test_the_report_and_worth_command_with_bad_prices_are_one_line_each_and_lose_nothing_else(tmp_path):
    run = _copy(tmp_path, {"cpu": 0.02, "cuda": 0.004}, {"cpu": 2.0, "cuda": 12.0})
    cmd = [sys.executable, "orchestrate.py"]
    bad = ["--price", "H100=3.6", "--price", "Xeon=-1", "--price", "TPU=9"]
    r = subprocess.run([*cmd, "report", str(run), "--out", str(tmp_path / "rep"), *bad], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    warns = [x for x in r.stderr.splitlines() if x.startswith("warning: ")]
    assert len(warns) == 2 and any("cannot be negative" in x for x in warns) and any("'TPU'" in x for x in warns)
    md = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "## Is the GPU worth it?" in md and "### Is the GPU worth it?" in md and "(mnist-cnn_worth.png)" in md
    assert "no price matches '16-core Intel Xeon'" in md  # the cost that needed it: not measured, with why
    got = json.loads((tmp_path / "rep" / "report.json").read_text())["worth"]
    row = next(x for x in got if x["claim"] == "kit-torch-cuda-over-cpu")
    assert row["energy_ratio"]["value"] == pytest.approx(5.0) and row["cost_ratio"] is None
    assert row["break_even_time"]["kind"] == W.ABOVE
    r = subprocess.run(
        [*cmd, "worth", str(run), "--samples", "1e6", "--study", "mnist-cnn", *bad], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert "time   GPU NVIDIA H100 80GB HBM3:" in r.stdout and "GPU wins" in r.stdout and "kWh" in r.stdout
    r = subprocess.run([*cmd, "worth", str(run), "--samples", "-5"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_no_price_means_no_cost_column_ever(tmp_path):
    run = _copy(tmp_path, {"cpu": 0.02, "cuda": 0.004}, {"cpu": 2.0, "cuda": 12.0})
    (w,) = _worths(run, None)
    md = "\n".join(HW.section([w], "## x", None, "", None))
    assert "No price given: no cost column" in md and "USD/h" not in md


def test_a_cell_records_its_fixed_costs_phase_by_phase_and_its_energy_or_why_not(tmp_path):
    """A real mnist-cnn cell on this CPU: system.json's fixed_costs holds every phase, adding up to
    total_s; every epoch row carries the energy fields, here 'not measured' with the reason (no RAPL)."""
    out = tmp_path / "r"
    r = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "mnist-cnn", "--profile", "smoke", "--only", "backend=torch-cpu",
         "--only", "pipeline=resident", "--set", "epochs=1", "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    (sysf,) = list(out.rglob("system.json"))
    s = json.loads(sysf.read_text())
    fc = s["fixed_costs"]
    assert {"start_s", "imports_s", "device_init_s", "data_s", "warmup_s", "other_s", "open_s", "total_s"} <= set(fc)
    assert fc["device_init_s"] is None and fc["notes"]["device_init_s"] == "no device to initialise on a CPU"
    assert fc["data_s"] > 0 and fc["warmup_s"] > 0 and fc["other_s"] >= 0
    assert fc["data_s"] + fc["warmup_s"] + fc["other_s"] == pytest.approx(fc["open_s"])
    assert fc["total_s"] == pytest.approx(fc["start_s"] + fc["imports_s"] + fc["open_s"])
    assert "energy" in s and ("cpu" in s["energy"]["sources"] or "cpu" in s["energy"]["missing"])
    rows = [json.loads(x) for x in sysf.with_name("rows.jsonl").read_text().splitlines()]
    epochs = [x for x in rows if x.get("epoch")]
    assert epochs and all("energy_j_per_sample" in x for x in epochs)
    if "cpu" in s["energy"]["missing"]:  # this VM: no RAPL
        assert all(x["energy_j_per_sample"] is None and x["energy_note"].startswith("not measured: ") for x in epochs)


def test_the_worth_table_puts_break_even_beside_time_and_its_figure_is_legible(tmp_path):
    """Issue 57 item 3: at 1400 px the break-even columns were off-screen and the figure was
    294 x 210 px with 6 px text (dpi 70)."""
    from PIL import Image

    from bench.core.text import md as md_text

    ref = Path(__file__).resolve().parent.parent / "results" / "reference" / "H200"
    if not ref.is_dir():
        pytest.skip("the committed references are not in this checkout")
    cells = collect([ref])[0]
    reg = studies()
    worths = [w for w in W.worth_all(reg, judge_all(reg, cells)) if w.answer.study == "mnist-cnn"]
    md = HW.section(worths, "### worth", tmp_path, "mnist-cnn", None)
    header = next(x for x in md if x.startswith("| # |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[2:4] == ["time", "GPU first above"] and cols[-1] == "GPU / CPU"
    width, height = Image.open(tmp_path / "mnist-cnn_worth.png").size
    assert width >= 450 and height >= 320
    # one figure per row, up to MAX_FIGURES, each titled by its row; the rest are counted
    figs = [x for x in md if x.startswith("![")]
    drawn = [w for w in worths if w.lines("time")]
    assert len(figs) == min(len(drawn), HW.MAX_FIGURES) >= 2
    for i, (x, w) in enumerate(zip(figs, drawn)):
        name = "mnist-cnn_worth.png" if i == 0 else f"mnist-cnn_worth_{i + 1}.png"
        assert x.startswith(f"![{md_text(w.answer.label)}: ") and x.endswith(f"({name})")
        assert Image.open(tmp_path / name).size == (width, height)
    if len(drawn) > HW.MAX_FIGURES:
        assert (
            f"_Figures for the first {HW.MAX_FIGURES} rows; the table gives the other {len(drawn) - HW.MAX_FIGURES} "
            in "\n".join(md)
        )


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
def test_each_report_of_several_gets_every_price_of_its_own_devices(order):
    """Prices.for_devices, as `reference-reports` uses one Prices for every report: whatever order
    the reports come in, each keeps the prices matching its devices (the second report on from
    H200 used to find the H100 and H200 prices gone, left out by the first, a 2-core EPYC's)."""
    p = P.load(None, ROOT / "docs" / "prices-example.toml")
    assert p is not None
    hosts = [{"2-core AMD EPYC"}, {"NVIDIA H100 80GB HBM3"}, {"NVIDIA H200", "Intel(R) Xeon(R) Processor"}]
    alone = [p.for_devices(h).entries for h in hosts]
    for i in order:
        assert p.for_devices(hosts[i]).entries == alone[i]


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.sampled_from(["", "its own numpy cell's process", "one process shared with cupy"]), max_size=8))
def test_what_each_repeat_said_of_its_start_up_reads_once_and_never_contradicts(texts):
    """Issue 55's audit: an MLP side said 'one process shared with ... (no numpy cell of its own in this
    run)' and 'its own numpy cell's process' in one breath, two repeats' facts joined. Each now says
    how many repeats it holds for, where they differ."""
    from bench.core.worth import _per_repeats

    got = _per_repeats(texts)
    kinds = list(dict.fromkeys(t for t in texts if t))
    assert all(got.count(k) == 1 for k in kinds)
    if len(kinds) == 1:
        assert got == kinds[0]
    elif kinds:
        counts = [int(x.split(" of ")[0].rsplit("(", 1)[1]) for x in got.split("; ")]
        assert sum(counts) == len([t for t in texts if t]) and f"of {len(texts)} repeats)" in got
    else:
        assert got == ""
