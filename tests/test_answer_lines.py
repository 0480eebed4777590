"""`all` states the answer where it ends (issue 57 item 2): this machine's headline rows, a line
each, read back from the report it just wrote, or why there are none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.answer_lines import MAX_LINES, lines

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"


def test_the_answer_lines_are_this_machines_headline_rows(tmp_path):
    if not (REF / "cpu-2core-epyc").is_dir() or not (REF / "H100-80GB-HBM3").is_dir():
        pytest.skip("the committed references are not in this checkout")
    out = tmp_path / "report"
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "report", str(REF / "cpu-2core-epyc"), "--context", str(REF / "H100-80GB-HBM3"),
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    got = lines(out)
    assert got[0].startswith("the answer (this machine") and str(out / "REPORT.md") in got[0]
    body = [x for x in got[1:] if not x.startswith("  ...")]
    assert 1 <= len([x for x in body if not x.startswith("    worth it:")]) <= MAX_LINES
    assert all(x.startswith("  mnist-cnn: ") or x.startswith("  mlp-scratch: ") or ": " in x for x in body)
    assert any("x [" in x and ("holds" in x or "does not hold" in x) for x in body)
    # this machine's side is named so (a 2-core EPYC laptop read its side as the committed EPYC's)
    rows = [x for x in body if not x.startswith("    worth it:")]
    assert all(" this machine (" in x or ", on this machine (" in x for x in rows), rows
    # the worth line under a row: when the GPU finishes first, energy, cost
    assert any(x.startswith("    worth it: the GPU ") and "energy: " in x and "cost: " in x for x in body)
    # `report --context` prints the same lines where it ends
    assert r.stdout.splitlines()[-len(got) :] == got


def test_no_comparison_of_its_own_says_so_and_no_report_says_nothing(tmp_path):
    (tmp_path / "report.json").write_text('{"claims": [{"headline": true, "primary": true, "this_machine": false}]}')
    [only] = lines(tmp_path)
    assert only.startswith("the answer: no comparison formed on this machine's own cells")
    assert lines(tmp_path / "absent") == []
    (tmp_path / "report.json").write_text("not json{")
    assert lines(tmp_path) == []


def test_a_run_with_no_references_beside_answers_from_its_own_rows(tmp_path):
    """`all --no-references` on an H200 (H200-roofline-r50-mbv2) formed both GPU-over-CPU rows, 95 % CIs,
    and ended saying 'no comparison formed on this machine's own cells': with no reference beside, the
    page names no side 'this machine', and every row is the run's own."""
    row = {"headline": True, "primary": True, "this_machine": False, "value": 18.1, "lo": 17.3, "hi": 18.5,
           "study": "roofline", "text": "GPU over CPU, resnet50", "verdict": "holds", "interval": "ci",
           "scope": "H200 host (16-core Intel Xeon)", "findings": []}  # fmt: skip
    (tmp_path / "report.json").write_text(json.dumps({"claims": [row]}))
    assert lines(tmp_path)[0].startswith("the answer: no comparison formed")  # a report beside references
    got = lines(tmp_path, all_mine=True)
    assert got[0].startswith("the answer (this machine") and "roofline" in got[1] and "18.1x" in got[1], got


def test_rows_over_different_work_are_not_given_as_the_answer(tmp_path):
    row = {"headline": True, "primary": True, "this_machine": True, "value": 3.0, "study": "cifar-opt",
           "text": "GPU Default over CPU Default", "scope": "this machine", "verdict": "not comparable", "why": "the sides trained 320 and 5,000 images"}  # fmt: skip
    (tmp_path / "report.json").write_text(json.dumps({"claims": [row, {**row, "study": "roofline"}]}))
    [only] = lines(tmp_path)
    assert only.startswith("the answer: no comparison on this machine's cells answers a seed claim; 2 rows are not ")
    assert "e.g. cifar-opt: GPU Default over CPU Default: the sides trained 320 and 5,000 images." in only
    assert "x [" not in only
    # beside a comparable row it is left to the page
    good = {**row, "study": "mnist-cnn", "verdict": "holds", "lo": 2.5, "hi": 3.5}
    (tmp_path / "report.json").write_text(json.dumps({"claims": [row, good]}))
    got = lines(tmp_path)
    assert len(got) == 2 and got[1].startswith("  mnist-cnn: ") and "3x [2.5-3.5], holds" in got[1]


@settings(max_examples=200, deadline=None)
@given(
    sides=st.lists(
        st.tuples(st.sampled_from(["2-core AMD EPYC", "H200 host (16-core Intel Xeon)", "M2 Max", "a/b (c)"]), st.booleans()),
        min_size=1,
        max_size=4,
    )
)
def test_a_row_names_each_host_once_and_this_machines_as_this_machine(sides):
    """The terminal's answer row names the hosts its sides ran on in order, each once, this machine's
    as "this machine (<host>)"; a row whose findings name no sides keeps its scope."""
    from host.answer_lines import scope

    c = {"scope": "kept", "findings": [{"sides": [{"host": h, "this_machine": m} for h, m in sides]}]}
    want = list(dict.fromkeys(f"this machine ({h})" if m else h for h, m in sides))
    assert scope(c) == " / ".join(want)
    assert scope({"scope": "kept", "findings": []}) == "kept"
    assert scope({"scope": "kept", "findings": [{"sides": "not a list"}, 3]}) == "kept"
