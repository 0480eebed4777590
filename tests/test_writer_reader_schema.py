"""The writer enforces the reader's schema (issue 56, H3 and M12): what a cell writes, it reads.

One absurd reading (an energy window of 3.2e12 J from a counter jump) used to be written into
the rows as it was; the cell's own schema then refused its own rows.jsonl, and the cell ended
as "exit code 1" with an empty log and none of its finished epochs kept (rows.partial.jsonl
already deleted). Here every value goes through the real writer (write_rows, append_partial,
write_checked_json) and the real readers (read_rows_checked, the report's loader
resultset.load_cell with the study's own check, the system.json schema): the reader never refuses
what the writer wrote, each value it would refuse is null with a note naming the key and what
the value was, and every row written survives. A killed RSS sampler process leaves a peak that
says what it rests on (M12).
"""

from __future__ import annotations

import glob
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.core import resultset, schema  # noqa: E402
from bench.core import rows as R  # noqa: E402
from bench.core.errors import KitError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
REF = ROOT / "results" / "reference"
STUDIES = ("mnist-cnn", "mlp-scratch", "cifar-opt", "roofline", "profile")
PHASES = ("epoch", "inference", "train", "val", "sweep", "overhead", "profile", "plain", "search")
EXAMPLES = int(os.environ.get("KIT_FUZZ_EXAMPLES", "0")) or 120


@cache
def metric_keys() -> dict[str, list[str]]:
    """Every metric key each study writes, as its committed reference rows hold them."""
    keys: dict[str, set[str]] = {s: set() for s in STUDIES}
    for p in glob.glob(str(REF / "**" / "rows.jsonl"), recursive=True):
        for line in Path(p).read_text().splitlines():
            r = json.loads(line)
            if r.get("study") in keys:
                keys[r["study"]] |= set(r) - schema.row_keys()
    return {s: sorted(k) for s, k in keys.items()}


# ---------------------------------------------------------------------------- what a study may hand the writer
ABSURD = [3.2e12, 1e300, -1e300, 1e19, -1e19, 1e18, 0.0, -0.0, 1e-300, 5e-324, 1e7, 1.0000001e7, -1.0, 2.0**53 + 1]
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ABSURD + [math.nan, math.inf, -math.inf]))
ints = st.one_of(st.integers(-(10**20), 10**20), st.sampled_from([10**400, -(10**400), 10**18, 10**18 + 1, -1, 0]))
texts = st.one_of(st.text(max_size=40), st.sampled_from([70_000, 1_100_000]).map(lambda n: "y" * n))
scalars = st.one_of(st.none(), st.booleans(), floats, ints, texts)
nested = st.recursive(
    st.one_of(st.none(), st.booleans(), floats, ints, st.text(max_size=40)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def deep(n: int) -> list:
    v: list = [1.0, math.nan]
    for _ in range(n):
        v = [v]
    return v


values = st.one_of(
    scalars, nested, st.integers(60, 3000).map(deep), st.just(b"bytes"), st.tuples(floats, floats), st.just(object())
)
common_values = {
    "seed": st.one_of(st.integers(-5, 10**19), texts, floats),
    "repeat": st.one_of(st.integers(-5, 10**19), st.none()),
    "dataset_real": st.one_of(st.booleans(), st.integers(0, 2), st.none()),
    "device": st.one_of(st.text(max_size=20), st.integers(), st.sampled_from([70_000]).map(lambda n: "d" * n)),
    "schema": st.one_of(st.just(R.SCHEMA_VERSION), st.integers(-2, 9), st.none()),
    "status": st.sampled_from(["ok", "ok", "incomplete", "error", "skipped", "finished", None]),
}


# what each study's check_rows needs measured (Study.check_rows), so a row may pass it until a value is drawn
MEASURED = {
    **dict.fromkeys(("epoch_s", "samples_per_s", "rss_mean_mb", "latency_p50_ms", "model_size_mb", "mean_step_ms"), 1.0),
    **dict.fromkeys(("img_per_s", "achieved_flop_per_s", "ai_low_flops_per_byte", "ai_high_flops_per_byte"), 10.0),
    **dict.fromkeys(("sampler_cost", "step_ms_sampler_on", "step_ms_sampler_off"), 2.0),
    "test_acc": 0.9,
    "train_loss": 0.5,
}


@st.composite
def study_rows(draw) -> tuple[str, list[dict]]:
    """Rows of one cell of a study, each with any of that study's metric keys (and a few
    common keys) holding any value, numbered by `step` so each can be found again."""
    study = draw(st.sampled_from(STUDIES))
    keys = metric_keys()[study]
    rows = []
    for i in range(draw(st.integers(1, 4))):
        row: dict = {"study": study, "status": "ok", "cell": "c", "reason": "", **MEASURED}
        row["epoch" if study == "mnist-cnn" else "phase"] = i + 1 if study == "mnist-cnn" else draw(st.sampled_from(PHASES))
        for k in draw(st.lists(st.sampled_from(keys), max_size=8, unique=True)):
            row[k] = draw(values)
        for k in draw(st.lists(st.sampled_from(sorted(common_values)), max_size=2, unique=True)):
            row[k] = draw(common_values[k])
        row["step"] = i
        rows.append(row)
    return study, rows


def refused(key: str, v) -> bool:
    """Whether the rows reader refuses V under KEY (a row of only it and a study and status)."""
    v = list(v) if isinstance(v, tuple) else v
    try:
        json.dumps(v, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return True  # no JSON value at all, or nested past what json can write
    return schema.check_row({"study": "s", "status": "ok", key: v}) is not None


def note_of(row: dict, key: str) -> str | None:
    """The writer's note on KEY: in `<key>_note` (a name another value holds: with '_' added)."""
    name = f"{key}_note"
    while name in row:
        if isinstance(row[name], str) and f"'{key}" in row[name]:  # 'key' or 'key[0].x' (a value inside it)
            return row[name]
        name += "_"
    return None


def assert_reads_back(d: Path, study: str, rows: list[dict]) -> list[dict]:
    """D's rows.jsonl as every reader reads it: clean, whole, in order; returns the rows."""
    back, problems = R.read_rows_checked(d / "rows.jsonl")
    assert problems == [], problems
    assert [r["step"] for r in back] == [r["step"] for r in rows]  # every row survives
    from bench.core.columnar import read_rows_many

    many, problems = read_rows_many([d / "rows.jsonl"])[d / "rows.jsonl"]  # the report's many-file reader
    assert problems == [] and json.dumps(many) == json.dumps(back)  # (as text: a diverged loss's NaN is no equal of itself)
    found: list[str] = []
    cell = resultset.load_cell(d, found)  # the report's loader: the study's own check too
    assert found == [] and cell is not None and cell.state != "corrupt", (found, cell and cell.note)
    assert not (d / "rows.partial.jsonl").exists()  # taken only now that rows.jsonl reads back
    return back


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="KIT_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(study_rows())
def test_the_reader_never_refuses_what_the_writer_wrote_and_every_refused_value_is_null_with_a_note(drawn):
    study, rows = drawn
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / study / "c"
        for r in rows:
            R.append_partial(d, r)
        partial, problems = R.read_rows_checked(d / "rows.partial.jsonl")
        assert problems == [] and [r["step"] for r in partial] == [r["step"] for r in rows], problems
        R.write_rows(d, rows)
        back = assert_reads_back(d, study, rows)
    for row, got in zip(rows, back, strict=True):
        for key, v in row.items():
            if key in ("study", "step"):
                continue
            if key == "status" and v not in schema.STATUSES:
                assert got["status"] == "error" and "'status'" in got["status_note"]
                continue
            if not refused(key, v):
                if isinstance(v, str) and len(v) > R.ROWS_CAPS.line_bytes // 2:  # readable, but past a line's cap
                    assert got[key] is None and "a rows line is at most" in (note_of(got, key) or ""), key
                continue
            note = note_of(got, key)
            assert isinstance(note, str), (key, v, got)
            if isinstance(v, (list, dict, tuple)):  # what is refused inside it is nulled, named by path
                assert ("holds" in note or "nested deeper than" in note) and got[key] is not None
            else:
                assert got[key] is None, (key, v)
                if isinstance(v, (bool, int, float, str)):
                    assert schema.show(v) in note, (note, v)  # what the value was
                else:
                    assert type(v).__name__ in note


def test_a_rows_file_past_its_size_cap_has_its_largest_values_nulled_and_keeps_every_row(tmp_path):
    d = tmp_path / "mnist-cnn" / "c"
    rows = [{"study": "mnist-cnn", "status": "ok", "step": i, "pad": "p" * 900_000} for i in range(20)]  # ~18 MB
    R.write_rows(d, rows)
    back = assert_reads_back(d, "mnist-cnn", rows)
    assert (d / "rows.jsonl").stat().st_size <= R.ROWS_CAPS.file_bytes
    cut = [r for r in back if r["pad"] is None]
    assert cut and all("a rows file is at most 16 MiB" in r["pad_note"] for r in cut)


def test_the_partial_rows_stay_until_rows_jsonl_reads_back(tmp_path, monkeypatch):
    """rows.partial.jsonl goes only after rows.jsonl is written and reads back: a rows.jsonl that
    does not (a disk that corrupts what it is given) is one line, and the finished steps are kept."""
    d = tmp_path / "toy" / "c"
    rows = [{"study": "toy", "status": "ok", "step": i} for i in range(3)]
    for r in rows:
        R.append_partial(d, r)
    real = R.atomic_write_text

    def corrupting(path: Path, text: str) -> None:
        real(path, text[: len(text) // 2] if Path(path).name == "rows.jsonl" else text)

    monkeypatch.setattr(R, "atomic_write_text", corrupting)
    with pytest.raises(KitError, match="rows.partial.jsonl kept"):
        R.write_rows(d, rows)
    kept, problems = R.read_rows_checked(d / "rows.partial.jsonl")
    assert problems == [] and [r["step"] for r in kept] == [0, 1, 2]


def test_system_json_is_written_as_its_schema_reads_it(tmp_path):
    """A load average or a memory size past the schema's bound, a NaN in telemetry, a GPU
    described as text: each is null (or left out where null is not allowed) and named."""
    info = {
        "hostname": "h",
        "memory_total_mb": 1e30,
        "load_avg": {"1m": 3e6, "5m": 0.5, "15m": math.nan},
        "cpu_affinity": -1,
        "gpu": "an H200",
        "telemetry": {"cpu_system_pct_mean": math.inf, "samples": 10, "blob": b"\x00"},
        "config": {"epochs": 3},
    }
    R.write_checked_json(tmp_path / "system.json", info, "system")
    obj, why = resultset.checked_json(tmp_path / "system.json", "system")
    assert why is None, why
    assert obj["memory_total_mb"] is None and obj["gpu"] is None and obj["cpu_affinity"] is None
    assert obj["load_avg"] == {"5m": 0.5} and obj["telemetry"]["samples"] == 10 and obj["config"] == {"epochs": 3}
    notes = obj["values_not_kept"]
    assert {"memory_total_mb", "load_avg.1m", "load_avg.15m", "cpu_affinity", "gpu", "telemetry.cpu_system_pct_mean"} <= set(
        notes
    )
    assert "3e+06" in notes["load_avg.1m"] and "telemetry.blob" in notes and "bytes" in notes["telemetry.blob"]


# ---------------------------------------------------------------------------- a real cell
ABSURD_STUDY = '''
"""A study whose steps emit what a real host can: a counter jump, a clock gone wrong, a killed sampler."""
import math, os, signal, time
from dataclasses import dataclass

import toy_study
from bench.core import register_study


@dataclass(frozen=True)
class AbsurdConfig:
    steps: int = 3
    bad_time_at: int = -1  # step whose epoch_s is 1e9 s (past the schema's bound): the study needs it
    kill_rss_at: int = -1  # step whose RSS sampler process is killed inside its region


class Run:
    warmup_s = 0.0
    dataset = {"name": "none", "real": True}

    def __init__(self, cfg):
        self.cfg, self.steps = cfg, cfg.steps

    def step(self, i):
        from bench.measure.memory import RSSSampler

        with RSSSampler() as rss:
            if i == self.cfg.kill_rss_at and rss._child is not None:
                os.kill(rss._child._proc.pid, signal.SIGKILL)
                time.sleep(0.05)
        return [{
            "epoch": i + 1,
            "epoch_s": 1e9 if i == self.cfg.bad_time_at else 0.01,
            "energy_j": 3.2e12 if i == 1 else 5.0,  # a counter jump in step 1
            "power_w": math.inf if i == 1 else 50.0,
            "rss_peak_mb": rss.peak_mb,
        }]

    def close(self):
        return []

    def system_extra(self):
        return {"load_avg": {"1m": 3e6}, "telemetry": {"cpu_system_pct_mean": math.nan}}


@register_study
class Absurd(toy_study.Toy):
    name, title, seed_doc, Config = "absurd", "absurd readings (a test study)", "998", AbsurdConfig

    def open(self, cell, ctx):
        return Run(AbsurdConfig(**cell.params))

    def check_rows(self, rows):
        from bench.core.schema import measured_problem

        for r in rows:
            why = measured_problem("epoch_s", r.get("epoch_s")) if r.get("status") == "ok" else None
            if why:
                return f"epoch {r.get('epoch')}: {why}"
        return None
'''


def run_absurd_cell(tmp_path: Path, **params) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "mods").mkdir(exist_ok=True)
    (tmp_path / "mods" / "absurd_study.py").write_text(ABSURD_STUDY)
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    env.update(
        KIT_STUDY_MODULES="toy_study,absurd_study", PYTHONPATH=os.pathsep.join([str(tmp_path / "mods"), str(TESTS), str(ROOT)])
    )
    spec = json.dumps(
        {"study": "absurd", "backend": "py", "params": {"steps": 3, "bad_time_at": -1, "kill_rss_at": -1, **params}}
    )
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "bench", "cell", spec, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    (cell,) = [p for p in (out / "absurd").iterdir() if p.is_dir()]
    return r, cell


def _load(cell: Path) -> tuple[resultset.ResultCell, list[str]]:
    sys.path.insert(0, str(cell.parents[2] / "mods"))
    try:
        import absurd_study  # noqa: F401 - registers the study here, for its check_rows
    finally:
        sys.path.pop(0)
    found: list[str] = []
    got = resultset.load_cell(cell, found)
    assert got is not None
    return got, found


def test_a_cell_whose_step_reads_an_absurd_energy_ends_ok_with_every_epoch_kept(tmp_path):
    r, cell = run_absurd_cell(tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:], r.stdout[-500:])
    rows, problems = R.read_rows_checked(cell / "rows.jsonl")
    assert problems == [] and [x["epoch"] for x in rows] == [1, 2, 3] and {x["status"] for x in rows} == {"ok"}
    jump = rows[1]
    assert jump["energy_j"] is None and "'energy_j' is 3.2e+12" in jump["energy_j_note"] and "1e+12" in jump["energy_j_note"]
    assert jump["power_w"] is None and "'power_w' is inf" in jump["power_w_note"]
    assert rows[0]["energy_j"] == 5.0 and "energy_j_note" not in rows[0]
    got, found = _load(cell)
    assert found == [] and got.state != "corrupt", found
    assert "load_avg.1m" in got.system["values_not_kept"] and got.system["telemetry"]["cpu_system_pct_mean"] is None
    assert not (cell / "rows.partial.jsonl").exists()


def test_a_cell_whose_required_time_is_absurd_keeps_its_finished_epochs_and_says_why(tmp_path):
    r, cell = run_absurd_cell(tmp_path, bad_time_at=2)
    rows, problems = R.read_rows_checked(cell / "rows.jsonl")
    assert problems == [] and [x["epoch"] for x in rows] == [1, 2, 3], problems
    assert [x["status"] for x in rows] == ["ok", "ok", "error"]
    assert rows[2]["epoch_s"] is None and "'epoch_s' is 1e+09" in rows[2]["epoch_s_note"]
    assert "'epoch_s' is missing" in rows[2]["reason"] and r.returncode == 1
    assert "epoch 3: 'epoch_s' is missing" in r.stderr  # the log says why
    got, found = _load(cell)
    assert found == [] and got.state != "corrupt", found


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the RSS sampler process reads /proc (Linux)")
def test_a_killed_rss_sampler_process_leaves_a_peak_that_says_what_it_rests_on(tmp_path):
    from bench.measure.memory import RSSSampler, take_regions

    take_regions()
    with RSSSampler(interval_s=0.005) as whole:
        time.sleep(0.1)
    with RSSSampler(interval_s=0.005) as rss:
        assert rss._child is not None and rss._child._proc is not None
        os.kill(rss._child._proc.pid, signal.SIGKILL)
        time.sleep(0.1)
    assert whole.note is None and whole.n_samples >= 5
    assert rss.n_samples == 1 and rss.peak_mb > 0 and rss.note is not None
    assert "died" in rss.note and "1 reading, taken on exit" in rss.note
    fewest, notes = take_regions()
    assert fewest == 1 and notes == [rss.note]
    assert take_regions() == (None, [])
    # in a cell: the row says how many readings its peak rests on, and why so few
    r, cell = run_absurd_cell(tmp_path, kill_rss_at=1)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = R.read_rows(cell / "rows.jsonl")
    assert rows[1]["rss_peak_readings"] == 1 and "RSS sampler process died" in rows[1]["rss_note"]
    assert rows[0]["rss_peak_readings"] >= 2 and "rss_note" not in rows[0] and "rss_note" not in rows[2]
