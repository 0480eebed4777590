"""One output rule per sink: a string from a result dir reaches a spreadsheet, a terminal, the
markdown and HTML report and the bundle's manifest only in the form that sink cannot act on
(bench.core.text). Each sink is checked in two forms, end to end through the commands."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bench.core.text import csv_cell, manifest_line, md, term, visible

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "results" / "reference" / "cpu-2core-epyc" / "mnist-cnn"
CELLS = ("torch-cpu_seed_default-adcc67f3f870", "torch-cpu_seed_default-89a4ae6b4f42", "torch-cpu_seed_default-65ae36759ec9")
FORMULAS = ('=HYPERLINK("http://x","y")', "+1+2", "-3+cmd|' /C calc'!A0", "@SUM(1,2)", "  =1+1", "\t=2+2")
TERMINAL = ("\x1b[2J", "\x1b]0;pwned\x07", "\x1b[31m", "\u202e", "\u2066", "\x9b")


def orch(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )


def edit_rows(cell: Path, change) -> None:
    p = cell / "rows.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    for r in rows:
        change(r)
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def edit_json(path: Path, change) -> None:
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))


def three_repeats(root: Path) -> list[Path]:
    out = []
    for name in CELLS:
        shutil.copytree(CPU / name, root / "mnist-cnn" / name)
        out.append(root / "mnist-cnn" / name)
    return out


def csv_strings(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [v for row in csv.reader(fh) for v in row]


def assert_no_formula(path: Path) -> None:
    for v in csv_strings(path):
        assert not v.lstrip().startswith(("=", "+", "-", "@")) or _number(v), f"{path.name}: {v!r} would be a formula"
        assert "\x1b" not in v and "\u202e" not in v and "\t" not in v, f"{path.name}: {v!r}"


def _number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------- CSV
def test_csv_cell_neutralises_formulas_and_shows_control_characters():
    for f in FORMULAS:
        got = csv_cell(f)
        assert got.startswith("'") and not got[1:].startswith("\t"), got
    assert csv_cell("a=b") == "a=b" and csv_cell(-3) == -3 and csv_cell(None) is None and csv_cell(True) is True
    assert csv_cell("x\x1b[2J\u202e") == "x\\x1b[2J\\u202e"


def test_formulas_in_rows_never_reach_tidy_table1_or_its_summary_as_formulas(tmp_path):
    """Form 1: the rows' device, flags and reason start with a formula; form 2: system.json's
    host and CPU and a cell parameter (tidy.csv's provenance and param_* columns) do."""
    cells = three_repeats(tmp_path / "res")
    edit_rows(cells[0], lambda r: r.update(device=FORMULAS[0], flags=FORMULAS[2]))
    edit_rows(cells[1], lambda r: r.update(device=FORMULAS[3], flags=FORMULAS[5]))
    edit_json(cells[2] / "system.json", lambda d: d.update(hostname=FORMULAS[1], cpu_model=FORMULAS[4], os=FORMULAS[3]))
    edit_json(cells[2] / "cell.json", lambda d: d["params"].update(pipeline=FORMULAS[0]))
    r = orch("report", str(tmp_path / "res"), "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("tidy.csv", "table1.csv", "table1_summary.csv"):
        assert_no_formula(tmp_path / "report" / name)
    tidy = (tmp_path / "report" / "tidy.csv").read_text()
    assert "'=HYPERLINK" in tidy and "'@SUM(1,2)" in tidy, "shown, as text"


def test_a_cells_own_rows_csv_holds_no_formula(tmp_path):
    from bench.core.rows import write_rows

    write_rows(tmp_path, [{"study": "x", "status": "error", "reason": "=cmd|' /C calc'!A0", "device": "@x", "epoch_s": -0.0}])
    assert_no_formula(tmp_path / "rows.csv")


# ---------------------------------------------------------------------------- the terminal
def test_visible_and_term_show_every_control_and_bidi_character():
    for s in TERMINAL:
        for out in (visible(f"a{s}b"), term(f"a{s}b")):
            assert out.startswith("a") and out.endswith("b") and all(ch.isprintable() for ch in out), repr(out)
    assert term("a\nb\tc\r\n") == "a b c  " and term(None) == ""
    assert md("\x1b[2J\u202e") == "\\\\x1b[2J\\\\u202e", "markdown shows the escape, backslash and all"


def _hostile_reason(tmp_path: Path) -> Path:
    cells = three_repeats(tmp_path / "res")
    payload = "boom " + "".join(TERMINAL) + " end"

    def fail(r: dict) -> None:
        if r.get("epoch") == 10:
            r.update(status="error", reason=payload)

    edit_rows(cells[0], fail)
    return tmp_path / "res"


def test_verify_shows_a_foreign_reason_without_any_control_character(tmp_path):
    r = orch("verify", str(_hostile_reason(tmp_path)), "--allow-unbaselined")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "boom " in out and "\\x1b[2J" in out and "\\u202e" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\u202e\u2066"), repr(out[-500:])


def test_report_shows_a_foreign_study_name_and_reason_without_any_control_character(tmp_path):
    res = _hostile_reason(tmp_path)
    foreign = res / "mnist-cnn" / CELLS[1]
    edit_rows(foreign, lambda r: r.update(study="evil\x1b]0;title\x07\u202eydduts"))
    r = orch("report", str(res), "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    assert "evil\\x1b]0;title\\x07\\u202eydduts" in out, out
    assert not any(ch in out for ch in "\x1b\x07\u202e"), repr(out)
    for name in ("REPORT.md", "REPORT.html", "tidy.csv"):
        text = (tmp_path / "report" / name).read_text(encoding="utf-8")
        assert not any(ch in text for ch in "\x1b\x07\x9b\u202e\u2066"), name


# ---------------------------------------------------------------------------- the bundle manifest
def test_manifest_line_is_what_sha256sum_writes():
    assert manifest_line("ab", "plain") == "ab  plain\n"
    assert manifest_line("ab", "a\nb") == "\\ab  a\\nb\n"
    assert manifest_line("ab", "c\\d") == "\\ab  c\\\\d\n"
    assert manifest_line("ab", "e\rf") == "\\ab  e\\rf\n"


@pytest.mark.parametrize("odd", ["log\nfake.txt", "back\\slash.txt", "cr\rname.txt"])
def test_a_bundle_whose_files_have_odd_names_checks_with_sha256sum(tmp_path, odd):
    """A newline, a backslash or a carriage return in a result file's name: every manifest line
    still names one file, and `sha256sum -c` passes on the unpacked bundle."""
    if shutil.which("sha256sum") is None:
        pytest.skip("needs GNU sha256sum")
    cells = three_repeats(tmp_path / "res")
    (cells[0] / odd).write_text("planted\n")
    bundle = tmp_path / "b.tar.gz"
    r = orch("export", str(tmp_path / "res"), "--out", str(bundle))
    assert r.returncode == 0, r.stderr[-2000:]
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    (top,) = (tmp_path / "x").iterdir()
    manifest = (top / "MANIFEST.sha256").read_text()
    assert odd.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r") in manifest
    check = subprocess.run(["sha256sum", "--strict", "-c", "MANIFEST.sha256"], cwd=top, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-1000:] + check.stderr[-1000:]
    assert check.stdout.count(": OK") == len(list(io.StringIO(manifest)))
