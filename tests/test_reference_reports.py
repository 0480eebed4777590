"""The committed references hold measurements; their reports are made (issue 58 item 3). Every
report of results/reference/reports.toml renders with today's code and answers each seed claim as
tallies.json recorded; a verdict that moves with the same measurements fails, and so does a
reference changed without its tally rewritten. Recipes are checked like any input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.errors import KitError
from host import reference_reports as rr

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
SMALL = "cpu-2core-epyc-roofline"


def test_every_committed_reference_renders_with_the_verdicts_its_tally_recorded(tmp_path):
    """The CI gate: `reference-reports` into a scratch root, exit 0 and no problem."""
    if not (REF / rr.RECIPES).is_file():
        pytest.skip("the committed references are not in this checkout")
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "reference-reports", "--out-root", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    recipes, _ = rr.recipes()
    recorded = rr.read_tallies()
    assert {x.out for x in recipes} == set(recorded)
    for x in recipes:
        assert (tmp_path / x.out / "REPORT.md").is_file() and rr.tally(tmp_path / x.out) == recorded[x.out]["claims"]
    # nothing is written into the checkout's references by a render elsewhere
    assert not any((REF / x.out).is_relative_to(tmp_path) for x in recipes)


@pytest.fixture
def small(tmp_path) -> Path:
    """A references root of one small folder, its recipe and its tally."""
    if not (REF / SMALL).is_dir():
        pytest.skip("the committed references are not in this checkout")
    root = tmp_path / "ref"
    shutil.copytree(REF / SMALL, root / SMALL, ignore=shutil.ignore_patterns("report", ".*"))
    (root / rr.RECIPES).write_text(f'[[report]]\nout = "{SMALL}/report"\ninputs = ["{SMALL}"]\n')
    got = rr.render(root, say=lambda *_: None)
    rr.write_tallies(got, root)
    assert rr.check(got, rr.read_tallies(root)) == []
    return root


def test_a_verdict_that_moves_with_the_same_measurements_fails(small):
    tallies = json.loads((small / rr.TALLIES).read_text())
    claims = tallies["reports"][f"{SMALL}/report"]["claims"]
    key = next(k for k, v in claims.items() if v == "holds")
    claims[key] = "does not hold"
    (small / rr.TALLIES).write_text(json.dumps(tallies))
    [line] = rr.check(rr.render(small, say=lambda *_: None), rr.read_tallies(small))
    assert "1 verdict(s) moved with the same measurements" in line and f"{key}: does not hold -> holds" in line


def test_a_changed_reference_needs_its_tally_rewritten(small):
    rows = next((small / SMALL).rglob("rows.jsonl"))
    rows.write_text(rows.read_text() + "\n")
    [line] = rr.check(rr.render(small, say=lambda *_: None), rr.read_tallies(small))
    assert "its reference changed since tallies.json was written" in line and "--write" in line
    # a report's own files and dot-files (locks, figure caches) are not the reference
    rr.write_tallies(rr.render(small, say=lambda *_: None), small)
    (small / SMALL / "report" / "note.md").write_text("x")
    (small / SMALL / ".cnn-bench.lock").write_text("1")
    assert rr.check(rr.render(small, say=lambda *_: None), rr.read_tallies(small)) == []


def test_a_removed_reference_leaves_no_tally_behind(small):
    """A folder replaced by another (H200-quant-dynamic-mbv2 by its 3-repeat remake) left its old
    tally in tallies.json after `--write`: the check names such a tally, and `--write` drops it."""
    tallies = json.loads((small / rr.TALLIES).read_text())
    tallies["reports"]["gone/report"] = tallies["reports"][f"{SMALL}/report"]
    (small / rr.TALLIES).write_text(json.dumps(tallies))
    got = rr.render(small, say=lambda *_: None)
    [line] = rr.check(got, rr.read_tallies(small), named=rr.named_outs(small))
    assert line.startswith("gone/report: in tallies.json, but reports.toml names no such report") and "--write" in line
    assert rr.check(got, rr.read_tallies(small)) == []  # a partial render (--only) judges only what it rendered
    rr.write_tallies(got, small)
    assert set(rr.read_tallies(small)) == {f"{SMALL}/report"}
    assert rr.check(got, rr.read_tallies(small), named=rr.named_outs(small)) == []


def test_a_report_that_no_longer_renders_fails_in_one_line(small):
    (small / SMALL / "report" / "REPORT.md").write_text("a report the kit did not write\n")
    [line] = rr.check(rr.render(small, say=lambda *_: None), rr.read_tallies(small))
    assert line.startswith(f"{SMALL}/report: does not render: ") and "\n" not in line


@pytest.mark.parametrize(
    "recipe, says",
    [
        ('[[report]]\nout = "../x"\ninputs = ["F"]\n', "not a plain relative path"),
        ('[[report]]\nout = "/tmp/x"\ninputs = ["F"]\n', "not a plain relative path"),
        ('[[report]]\nout = "x"\ninputs = ["absent"]\n', "is not a folder of"),
        ('[[report]]\nout = "x"\ninputs = ["F"]\n[[report]]\nout = "x"\ninputs = ["F"]\n', "given twice"),
        ('[[report]]\nout = "x"\ninputs = ["F"]\nextra = 1\n', "give exactly `out` and `inputs`"),
        ("[[report]\n", "not TOML"),
        ("", "no [[report]] entries"),
    ],
)
def test_a_bad_recipe_is_one_line(small, recipe, says):
    (small / rr.RECIPES).write_text(recipe.replace('"F"', f'"{SMALL}"'))
    with pytest.raises(KitError) as err:
        rr.recipes(small)
    assert says in str(err.value) and "\n" not in str(err.value)


@given(st.text(max_size=30))
def test_a_recipe_path_never_leaves_the_references_root(text):
    try:
        got = rr._relative(text, "where")
    except KitError:
        return
    p = PurePosixPath(got)
    assert not p.is_absolute() and ".." not in p.parts and got == str(p) and "\\" not in got


def test_a_dropped_trace_leaves_its_digest_and_still_counts_as_the_cells_trace(tmp_path):
    import gzip
    import hashlib

    from bench.measure.profiling import DROPPED, dropped
    from bench.studies.profile import _unreadable

    root = tmp_path / "ref"
    cell = root / "host1" / "profile" / "cell-a"
    (cell / "trace").mkdir(parents=True)
    raw = gzip.compress(b'{"traceEvents": []}')
    (cell / "trace" / "trace_0.json.gz").write_bytes(raw)
    (root / rr.RECIPES).write_text('[[report]]\nout = "host1/report"\ninputs = ["host1"]\n')
    assert _unreadable(cell, ["trace_0.json.gz"]) is None
    assert rr.drop_traces(root) == (1, len(raw))
    assert not (cell / "trace" / "trace_0.json.gz").exists()
    record = dropped(cell / "trace" / "trace_0.json.gz")
    assert record and record["sha256"] == hashlib.sha256(raw).hexdigest() and record["bytes"] == len(raw)
    assert _unreadable(cell, ["trace_0.json.gz"]) is None
    assert rr.drop_traces(root) == (0, 0)  # nothing left to drop
    # a record that is not one does not stand for the trace
    (cell / "trace" / ("trace_0.json.gz" + DROPPED)).write_text('{"sha256": "x", "bytes": 1}')
    assert _unreadable(cell, ["trace_0.json.gz"]) is not None


@given(st.binary(max_size=300))
def test_a_dropped_record_of_any_bytes_is_read_or_refused_never_raised(tmp_path_factory, blob):
    from bench.measure.profiling import DROPPED, dropped

    d = tmp_path_factory.mktemp("stub")
    (d / ("t.json.gz" + DROPPED)).write_bytes(blob)
    got = dropped(d / "t.json.gz")
    assert got is None or (len(got["sha256"]) == 64 and got["bytes"] > 0)
