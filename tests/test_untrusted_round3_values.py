"""Untrusted input, third round (issue 56): the values a study divides by and the text every sink shows.

Mechanisms under test (docs/FAULTS.md, "Untrusted input, third round"):

- one typed accessor (`bench.core.tables.num` / `nums` / `quotient`, on `bench.core.study.number`'s
  rule) through which every study's report, readout and plots read a number from a row or a side
  file: a number replaced by text, a huge, tiny, zero, negative or NaN value leaves `report` and
  `export` (the CLI, in a subprocess) with their result or one line, never a traceback, and
  report.json with no NaN or Infinity;
- one escape path per sink (`bench.core.text`: `term`, `md`, `csv_cell`, `plot_text`, all on
  `visible`), zero-width characters, bidi controls and `$` (mathtext) included: a device name,
  host, dataset or flags text built from them reaches no terminal, REPORT.md, REPORT.html, CSV or
  figure raw, and the report is written;
- bounded numeric domains where the worth answer divides (host.prices, bench.core.worth): a price
  of 0 is free hardware (handled: "free", never divided by), a price past its bounds, `--samples`
  past its bound and an energy per sample outside its domain are one line or "not measured" with
  why, never a ZeroDivisionError, inf or Infinity.

Every example copies cells of the committed H200 reference (results/reference/H200) into a temp
dir and edits the copy. The Hypothesis runs are derandomized and small, as the commands run in
subprocesses (KIT_FUZZ_EXAMPLES scales them: `KIT_FUZZ_EXAMPLES=40 pytest tests/test_untrusted_round3_values.py`).
"""

from __future__ import annotations

import csv
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "results" / "reference" / "H200"
# per study: a CPU cell and a GPU cell of one workload (mlp-scratch: one cell running NumPy and CuPy)
CELLS = {
    "mnist-cnn": ["torch-cpu_resident_default-8d3d46191a5e", "torch-cuda_resident_default-0ca83fa0e3ba"],
    "mlp-scratch": ["numpy+cupy+cupy-tuned_float32-ce48651a7986"],
    "cifar-opt": ["torch-cpu_resnet18_optuna-364a73af6d0a", "torch-cuda_resnet18_optuna-232d9251d384"],
    "roofline": ["torch-cpu_resnet18_fp32_loader_b128-7e11b9248550", "torch-cuda_resnet18_fp32_loader_b128-afdf75929443"],
    "profile": ["torch-cpu_finetune_loader_b64-357fe42bfcea", "torch-cuda_finetune_loader_b64-6ea56b689d62"],
}
SCALE = int(os.environ.get("KIT_FUZZ_EXAMPLES", "0")) or None
# what no sink may show raw: C0/C1 controls (ESC, BEL, CSI), bidi controls, zero-width characters
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def budget(n: int):
    """N examples (KIT_FUZZ_EXAMPLES: that many, random, and a failure shrunk to its smallest)."""
    phases = list(Phase) if SCALE else [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(
        max_examples=SCALE or n,
        deadline=None,
        derandomize=SCALE is None,
        database=None,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


def results(top: Path, studies: list[str]) -> Path:
    """A results dir under TOP holding STUDIES' cells (CELLS) and the reference's platforms.json."""
    d = top / "res"
    d.mkdir(parents=True)
    shutil.copy(H200 / "platforms.json", d / "platforms.json")
    for s in studies:
        for c in CELLS[s]:
            shutil.copytree(H200 / s / c, d / s / c)
    return d


def cli(*args: object, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIT_")}
    return subprocess.run(
        [sys.executable, "orchestrate.py", *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )


def whole_or_one_line(r: subprocess.CompletedProcess, what: str, answers: tuple[int, ...] = (0,)) -> None:
    """R answered with its result (an exit code in ANSWERS: verify's 1 is its verdict) or one
    `error:` line as its last: never a traceback."""
    text = r.stdout + r.stderr
    assert "Traceback" not in text and "│" not in text, f"{what}: a traceback\n{text[-3000:]}"
    if r.returncode not in answers:
        errs = [x for x in r.stderr.splitlines() if x.startswith("error:")]
        assert len(errs) == 1 and r.stderr.rstrip().splitlines()[-1] == errs[0], f"{what}: not one line\n{r.stderr[-2000:]}"


def no_nonfinite(text: str, where: str) -> None:
    """TEXT (JSON) parses with no NaN, Infinity or -Infinity in it."""

    def refuse(c: str) -> None:
        raise AssertionError(f"{where} holds {c}")

    json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------------------- M2, M9: numbers
def _numeric_fields(study: str) -> list[str]:
    """'rows:KEY' for every numeric key of STUDY's reference rows, 'system:A.B' for every numeric
    leaf of its system.json (roofs.<roof>.value among them)."""
    keys: set[str] = set()

    def walk(o: object, path: str) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            keys.add(f"system:{path}")

    for c in CELLS[study]:
        for line in (H200 / study / c / "rows.jsonl").read_text().splitlines():
            keys |= {f"rows:{k}" for k, v in json.loads(line).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        walk(json.loads((H200 / study / c / "system.json").read_text()), "")
    return sorted(keys)


FIELDS = {s: _numeric_fields(s) for s in CELLS}
HOSTILE_NUMBERS = st.sampled_from(["12", "abc", "", 1e18, 1e300, 1e-300, 5e-324, 0, 0.0, -1, -1e18, float("nan")])


def set_field(d: Path, study: str, field: str, value: object, one_side: bool = False) -> int:
    """FIELD ('rows:KEY', 'rows:KEY@BACKEND': only that backend's rows, or 'system:A.B') of every
    cell of STUDY under D set to VALUE (ONE_SIDE: of its last cell only, a GPU cell: the two sides
    of a ratio then differ); how many were set."""
    kind, _, key = field.partition(":")
    key, _, only = key.partition("@")
    n = 0
    cells = sorted((d / study).iterdir())
    for cell in cells[-1:] if one_side else cells:
        if kind == "rows":
            p = cell / "rows.jsonl"
            rows = [json.loads(x) for x in p.read_text().splitlines()]
            for r in rows:
                if key in r and only in ("", r.get("backend")):
                    r[key], n = value, n + 1
            p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            p = cell / "system.json"
            obj = json.loads(p.read_text())
            *head, last = key.split(".")
            at = obj
            for k in head:
                at = at.get(k) if isinstance(at, dict) else None
            if isinstance(at, dict) and last in at:
                at[last], n = value, n + 1
            p.write_text(json.dumps(obj))
    return n


@budget(4)
@given(data=st.data())
@example(data=("mnist-cnn", "rows:epoch", "twelve"))  # the issue's four crashes of report and export ...
@example(data=("mlp-scratch", "rows:total_s", "abc"))
@example(data=("cifar-opt", "rows:trial_lr", "0.01"))
@example(data=("roofline", "rows:n_params", "11M"))
@example(data=("roofline", "system:roofs.roofs.gemm_fp32.value", "fast"))  # ... a side file's number ...
@example(data=("mlp-scratch", "rows:total_s@cupy", 5e-324))  # ... one side's time near 0: a speedup past reach ...
@example(data=("mlp-scratch", "rows:iterations@cupy", 5e-324))  # ... and a count near 0: a claim's ratio past reach
def test_a_hostile_number_in_any_field_a_study_reads_leaves_report_and_export_whole(data):
    if isinstance(data, tuple):
        (study, field, value), one_side = data, False
    else:
        study = data.draw(st.sampled_from(sorted(CELLS)), label="study")
        field = data.draw(st.sampled_from(FIELDS[study]), label="field")
        value = data.draw(HOSTILE_NUMBERS, label="value")
        one_side = data.draw(st.booleans(), label="one side only")
    top = Path(tempfile.mkdtemp(prefix="round3-number-"))
    try:
        d = results(top, [study])
        if not set_field(d, study, field, value, one_side):
            assert not isinstance(data, tuple), f"{field} is in none of {study}'s cells"
            return  # the field is in the other side's cell only
        r = cli("report", d, "--out", top / "report")
        whole_or_one_line(r, f"report ({study} {field}={value!r})")
        if r.returncode == 0:
            no_nonfinite((top / "report" / "report.json").read_text(), "report.json")
            md = (top / "report" / "REPORT.md").read_text()
            assert not re.search(r"\binfx|\[inf\b|\binf\]|\binf (s|samples|J|USD)\b", md), "a ratio past reach shown as inf"
        r = cli("export", d, "--out", top / "b.tar.gz")
        whole_or_one_line(r, f"export ({study} {field}={value!r})")
        if r.returncode == 0:
            with tarfile.open(top / "b.tar.gz") as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/report/report.json"))
                no_nonfinite(tar.extractfile(member).read().decode(), "the bundle's report.json")  # type: ignore[union-attr]
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("j", [5e-324, 1e-300, 1e7])
def test_an_energy_per_sample_outside_its_domain_is_not_measured_with_why_never_inf(tmp_path, j):
    from bench.core import worth as W
    from bench.core.answers import judge_all
    from bench.core.registry import studies
    from bench.core.resultset import collect
    from host import prices as P
    from host import worth as HW

    d = results(tmp_path, ["mnist-cnn"])
    for cell in (d / "mnist-cnn").iterdir():
        gpu = "cuda" in cell.name
        rows = [json.loads(x) for x in (cell / "rows.jsonl").read_text().splitlines()]
        for r in rows:
            r["energy_j_per_sample"] = j if gpu else 0.02
            r["energy_window_s"] = 5.0  # a window long enough to measure
        (cell / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cells, _, _ = collect([d])
    reg = studies()
    (w,) = [w for w in W.worth_all(reg, judge_all(reg, cells), P.load(["H200=4", "Xeon=1"], None, "0.2")) if w.answer.primary]
    assert w.energy is None and "J/sample is outside" in w.energy_why and f"{j:g}" in w.energy_why
    assert w.cost is None and "--kwh-price needs energy per sample" in w.cost_why  # the cost that needed it says why
    json.dumps(HW.as_json([w]), allow_nan=False)  # no inf or NaN anywhere in report.json's worth
    assert "inf" not in "\n".join(HW.table([w]))
    r = cli("report", d, "--out", tmp_path / "report", "--price", "H200=4", "--kwh-price", "0.2")
    whole_or_one_line(r, "report")
    assert r.returncode == 0
    no_nonfinite((tmp_path / "report" / "report.json").read_text(), "report.json")
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert "infx" not in md and "[inf" not in md


# ---------------------------------------------------------------------------- M8: prices and samples
@pytest.mark.parametrize(
    "price, answer",
    [
        ("0", "free"),  # owned hardware: a cost of 0 a sample, the cheaper at any work
        ("1e-300", "one line"),
        ("5e-324", "one line"),
        ("1e300", "one line"),
        ("inf", "one line"),
        ("-1", "one line"),
        ("nan", "one line"),
        ("four", "one line"),
    ],
)
def test_a_price_of_0_is_free_and_one_past_its_bounds_is_one_line_never_a_division(tmp_path, price, answer):
    d = results(tmp_path, ["mnist-cnn"])
    r = cli("worth", d, "--study", "mnist-cnn", "--price", f"H200={price}", "--price", "Xeon=0.5")
    whole_or_one_line(r, f"worth --price H200={price}")
    assert r.returncode == 0, r.stderr
    cost = next(x for x in r.stdout.splitlines() if x.lstrip().startswith("cost"))
    warn = [x for x in r.stderr.splitlines() if x.startswith("warning: ") and "H200=" in x]
    if answer == "free":
        assert not warn and "GPU NVIDIA H200: 0 USD (free)" in cost and "-> GPU wins" in cost
    else:
        assert len(warn) == 1 and "not used" in warn[0]  # one line, and the cost that needed it: not measured
        assert "not measured" in cost and "inf" not in cost
    js = cli("worth", d, "--study", "mnist-cnn", "--price", f"H200={price}", "--price", "Xeon=0.5", "--json")
    assert js.returncode == 0, js.stderr
    no_nonfinite(js.stdout, "worth --json")


@pytest.mark.parametrize("prices", [["H200=0", "Xeon=0.5"], ["H200=4", "Xeon=0"], ["H200=0", "Xeon=0"]])
def test_a_free_side_is_said_in_the_report_table_json_and_figure_never_divided_by(tmp_path, prices):
    from bench.core import worth as W
    from bench.core.answers import judge_all
    from bench.core.registry import studies
    from bench.core.resultset import collect
    from host import prices as P
    from host import worth as HW

    d = results(tmp_path, ["mnist-cnn"])
    cells, _, _ = collect([d])
    reg = studies()
    (w,) = [w for w in W.worth_all(reg, judge_all(reg, cells), P.load(prices)) if w.answer.primary]
    free = {("H200=0", "Xeon=0.5"): "GPU", ("H200=4", "Xeon=0"): "CPU", ("H200=0", "Xeon=0"): "both"}[tuple(prices)]
    assert w.free == free and w.cost is None and w.cost_why.startswith("free: ")
    if free == "GPU":
        assert w.even_cost is not None and w.even_cost.kind == W.ALWAYS  # free: cheaper from the first sample
    elif free == "CPU":
        assert w.even_cost is not None and w.even_cost.kind == W.NEVER
    else:
        assert w.even_cost is None and w.even_cost_why.startswith("not formed: both sides cost nothing")
    assert f"| {free} free |" in "\n".join(HW.table([w]))
    json.dumps(HW.as_json([w]), allow_nan=False)
    args = [x for p in prices for x in ("--price", p)]
    r = cli("report", d, "--out", tmp_path / "report", *args)
    whole_or_one_line(r, "report")
    assert r.returncode == 0
    no_nonfinite((tmp_path / "report" / "report.json").read_text(), "report.json")
    md = (tmp_path / "report" / "REPORT.md").read_text()
    assert f"{free} free" in md and "No cost panel" in md and (tmp_path / "report" / "mnist-cnn_worth.png").is_file()


@pytest.mark.parametrize("samples", ["0.5", "1e300", "inf", "nan", "-3"])
def test_samples_past_their_bound_are_one_line_before_any_work(tmp_path, samples):
    r = cli("worth", tmp_path, "--samples", samples)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: --samples"), r.stderr


def test_a_price_file_past_its_bounds_is_one_line_per_entry_and_zero_is_kept(tmp_path):
    from host import prices as P

    f = tmp_path / "p.toml"
    f.write_text(
        "[electricity]\nusd_per_kwh = 1e9\n"
        '[[device]]\nmatch = "H200"\nusd_per_hour = 0.0\n'
        '[[device]]\nmatch = "A100"\nusd_per_hour = 1e300\n'
        '[[device]]\nmatch = "V100"\nusd_per_hour = 1e-300\n'
    )
    p = P.load(None, f, None)
    assert p is not None and [(e.match, e.usd_per_hour) for e in p.entries] == [("H200", 0.0)] and p.kwh_usd is None
    assert len(p.problems) == 3 and all("\n" not in x and x.endswith("not used") for x in p.problems)
    assert P.load(None, None, "1e-300").problems and P.load(None, None, "0").kwh_usd == 0.0  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- M4, M7, mechanism 5: text
HOSTILE_CHARS = "\x1b\x07\x9b\x85\u202e\u202a\u2066\u2069\u200b\u200c\u200d\u2060\u2063\ufeff$"
NAMES = st.text(alphabet=st.sampled_from(list(HOSTILE_CHARS + "ab\\{}[]^_ ")), min_size=2, max_size=16).filter(
    lambda s: HIDDEN.search(s) is not None
)
ISSUE_NAME = "NVIDIA \x1b[2J\x1b]0;pwned\x07H200\x9b31m\u202eXX\u200b\ufeff $\\foo{x}$"


def hostile_results(top: Path, text: str, runs: int = 1) -> list[Path]:
    """RUNS copies of every study's cells under TOP, TEXT in every row's device, host, dataset and
    flags and in system.json's CPU model and GPU name (the second run's environment too: where
    two runs' labels collide, the environment is what tells them apart)."""
    dirs = []
    for i in range(runs):
        d = results(top / f"run{i}", sorted(CELLS))
        for cell in d.glob("*/*"):
            rows = [json.loads(x) for x in (cell / "rows.jsonl").read_text().splitlines()]
            for r in rows:
                for k in ("device", "host", "dataset", "flags") + (("image_id",) if i else ()):
                    if isinstance(r.get(k), str):
                        r[k] = r[k] + text
            (cell / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            s = json.loads((cell / "system.json").read_text())
            if isinstance(s.get("cpu_model"), str):
                s["cpu_model"] += text
            if isinstance(s.get("gpu"), dict) and isinstance(s["gpu"].get("name"), str):
                s["gpu"]["name"] += text
            (cell / "system.json").write_text(json.dumps(s))
        dirs.append(d)
    return dirs


def _mathtext(s: str) -> bool:
    """Whether matplotlib parses S as mathtext (matplotlib.text.Text._preprocess_math's rule); its
    own tick labels (`\\mathdefault`) aside."""
    n = s.count("$") - s.count(r"\$")
    return n > 0 and n % 2 == 0 and "\\mathdefault" not in s


def assert_sinks_clean(out: Path) -> None:
    """REPORT.md, REPORT.html and every CSV of OUT hold no hidden character raw, and REPORT.md no
    unescaped `$` (a renderer with math would read a formula)."""
    for name in ("REPORT.md", "REPORT.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert not HIDDEN.search(text), (name, sorted({repr(c) for c in HIDDEN.findall(text)}))
    md = (out / "REPORT.md").read_text(encoding="utf-8")
    raw = [m.start() for m in re.finditer(r"(?<!\\)\$", md) if not md[max(0, m.start() - 40) : m.start()].count("`")]
    assert not raw, [md[max(0, i - 40) : i + 20] for i in raw[:3]]
    for p in out.glob("*.csv"):
        with open(p, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                assert not any(HIDDEN.search(v) for v in row), (p.name, row)


@budget(2)
@given(name=NAMES)
@example(name=ISSUE_NAME)
def test_hostile_names_reach_no_file_or_figure_raw_and_the_report_is_written(name):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.text as mtext

    from host.report import build_report

    top = Path(tempfile.mkdtemp(prefix="round3-names-"))
    drawn: list[str] = []
    set_text = mtext.Text.set_text

    def record(self, s):  # every string a figure draws: titles, labels, ticks, legends, annotations
        drawn.append("" if s is None else str(s))
        return set_text(self, s)

    mtext.Text.set_text = record
    try:
        dirs = hostile_results(top, name, runs=2)
        build_report(dirs, top / "report", jobs=1, figure_cache=None)  # every figure drawn here, in this process
        assert (top / "report" / "REPORT.md").is_file() and list((top / "report").glob("*.png"))
        assert drawn, "no figure drew any text"
        bad = [s for s in drawn if HIDDEN.search(s) or _mathtext(s)]
        assert not bad, sorted(set(bad))[:5]
        assert_sinks_clean(top / "report")
    finally:
        mtext.Text.set_text = set_text
        shutil.rmtree(top, ignore_errors=True)


def _commands() -> dict[str, object]:
    """Every command of the host CLI (`history add`: its group and name) -> its callback."""
    from host.cli import app

    out: dict[str, object] = {}

    def walk(a, pre: str) -> None:
        for c in a.registered_commands:
            out[pre + (c.name or c.callback.__name__)] = c.callback
        for g in a.registered_groups:
            walk(g.typer_instance, pre + (g.name or "") + " ")

    walk(app, "")
    return out


def test_every_command_that_reads_a_result_dir_prints_hostile_text_escaped(tmp_path):
    clean, hostile = results(tmp_path / "clean", sorted(CELLS)), hostile_results(tmp_path / "h", ISSUE_NAME)[0]
    invocations = {
        "report": ["report", hostile, "--out", tmp_path / "report", "--price", "H200=4", "--price", "Xeon=0.5"],
        "worth": ["worth", hostile, "--price", "H200=4", "--price", "Xeon=0.5"],
        "export": ["export", hostile, "--out", tmp_path / "b.tar.gz"],
        "compare": ["compare", clean, hostile],
        "verify": ["verify", hostile],
    }
    # the history commands read result dirs into the run store: issue 56's history items are tested
    # with the store (tests/test_history*.py)
    elsewhere = {"history add", "history show", "history report"}
    readers = {
        name
        for name, cb in _commands().items()
        if set(inspect.signature(cb).parameters) & {"dirs", "dir", "a"}  # type: ignore[arg-type]
    }
    assert readers - elsewhere == set(invocations), "a command reads result dirs: add it here"
    for name, args in invocations.items():
        r = cli(*args)
        whole_or_one_line(r, name, (0, 1) if name == "verify" else (0,))  # verify: 1 is a cell that fails
        for stream, text in (("stdout", r.stdout), ("stderr", r.stderr)):
            assert not HIDDEN.search(text), (name, stream, sorted({repr(c) for c in HIDDEN.findall(text)}))
    assert_sinks_clean(tmp_path / "report")


def test_each_sink_escapes_zero_width_bidi_control_and_math():
    from bench.core.text import csv_cell, md, md_alt, md_code, plot_text, term, visible

    for ch in "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u202a\u202e\u2066\u2069\x1b\x07\x9b":
        s = f"a{ch}b"
        for sink in (visible, term, md, md_alt, md_code, plot_text, csv_cell):
            got = sink(s)
            shown = f"\\u{ord(ch):04x}" in got or f"\\x{ord(ch):02x}" in got
            assert ch not in got and shown, (sink.__name__, repr(ch), got)
    assert md("$\\foo{x}$") == "\\$\\\\foo{x}\\$" and md_alt("$x$") == "\\$x\\$"
    assert plot_text("$\\foo{x}$") == "\\$\\foo{x}\\$"
    assert not _mathtext(plot_text("$\\foo{x}$"))
    assert math.isclose(float(csv_cell("1.5")), 1.5)  # a number stays a number
