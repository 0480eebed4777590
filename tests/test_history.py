"""The run history (host/history.py): `history add` appends and never rewrites, `show` and
`report` give each configuration's trend and change points (E-Divisive, host/changepoints.py),
`compare --against-history` holds a run to its past runs; bad input is one line and adds
nothing. The runs are copies of a committed reference with their speed scaled."""

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host import changepoints
from host import history as hist

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
CPU = REF / "cpu-2core-epyc"
needs_detector = pytest.mark.skipif(bool(changepoints.available()), reason=str(changepoints.available()))


def orch(*args):
    return subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), *map(str, args)], capture_output=True, text=True)


def run_copy(dst: Path, k: int, factor: float) -> Path:
    """Run K: mlp-scratch of the CPU reference (3 repeats) as if run again on day K, every
    timing FACTOR times the original (a rate divided by it)."""
    d = dst / f"run{k:02d}"
    shutil.copytree(CPU / "mlp-scratch", d / "mlp-scratch")
    for cell in d.glob("mlp-scratch/*"):
        rows = [json.loads(x) for x in (cell / "rows.jsonl").read_text().splitlines() if x.strip()]
        for r in rows:
            r["run_id"] = f"2026010{k % 10}T00000{k // 10}Z-{k:08x}"
            for key, v in list(r.items()):
                if isinstance(v, float) and key.endswith("_s"):
                    r[key] = v * factor
                elif isinstance(v, float) and key.endswith("_per_s"):
                    r[key] = v / factor
        (cell / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        s = json.loads((cell / "system.json").read_text())
        s["created_utc"] = f"2026-01-{k + 1:02d}T12:00:00+00:00"
        s["kit_git_sha"] = f"{k:040x}"
        (cell / "system.json").write_text(json.dumps(s))
    return d


NOISE = [1.0, 1.012, 0.991, 1.006, 0.995, 1.009, 0.988, 1.004, 0.997, 1.011, 0.993, 1.002]


@pytest.fixture
def stepped(tmp_path) -> tuple[Path, list[Path]]:
    """12 runs with 1 % noise; from run 6 on, 10 % slower (every time x 1/0.9)."""
    runs = [run_copy(tmp_path / "runs", k, NOISE[k] * (1 / 0.9 if k >= 6 else 1.0)) for k in range(12)]
    return tmp_path / "history", runs


@needs_detector
def test_a_planted_10pct_step_is_flagged_where_it_happened(stepped):
    store, runs = stepped
    r = orch("history", "add", *runs, "--store", store)
    assert r.returncode == 0 and "72 cell(s) added" in r.stdout, r.stdout + r.stderr
    r = orch("history", "show", "--store", store, "--json")
    assert r.returncode == 0, r.stderr
    series = {(s["configuration"], s["metric"]): s for s in json.loads(r.stdout)}
    f32 = series[("mlp-scratch numpy float32 (dataset=mnist)", "throughput")]
    assert len(f32["runs"]) == 12 and all(len(p["values"]) == 3 for p in f32["runs"])
    assert [c["index"] for c in f32["change_points"]] == [6], f32["change_points"]
    assert abs(f32["change_points"][0]["ratio"] - 0.9) < 0.03 and f32["change_points"][0]["commit"] == f"{6:040x}"
    text = orch("history", "show", "--store", store).stdout
    assert "machine class: AMD EPYC, 2 cores" in text and "0.9" in text and "at 00000000" in text, text


@needs_detector
def test_no_change_point_in_a_history_without_one(tmp_path):
    runs = [run_copy(tmp_path / "runs", k, NOISE[k]) for k in range(12)]
    assert orch("history", "add", *runs, "--store", tmp_path / "h").returncode == 0
    series = json.loads(orch("history", "show", "--store", tmp_path / "h", "--json").stdout)
    assert series and all(s["change_points"] == [] for s in series), [s["change_points"] for s in series]


def test_add_is_append_only_and_idempotent(stepped):
    store, runs = stepped
    assert orch("history", "add", *runs[:3], "--store", store).returncode == 0
    r = orch("history", "add", *runs[:3], "--store", store)
    assert r.returncode == 0 and "0 cell(s) added, 18 already there" in r.stdout, r.stdout
    con = sqlite3.connect(store / "history.sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("UPDATE figures SET value = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("DELETE FROM cells")


def test_two_adds_at_once_lose_nothing(stepped):
    store, runs = stepped
    out: list = []
    threads = [
        threading.Thread(target=lambda rs=rs: out.append(orch("history", "add", *rs, "--store", store)))
        for rs in (runs[:6], runs[6:])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in out] == [0, 0], [r.stderr for r in out]
    n = sqlite3.connect(store / "history.sqlite").execute("SELECT count(*) FROM cells").fetchone()[0]
    assert n == 72


def test_bad_input_is_one_line_and_adds_nothing(stepped):
    store, runs = stepped
    assert orch("history", "add", runs[0], "--store", store).returncode == 0
    db = store / "history.sqlite"
    before = db.read_bytes()
    # a run whose machine class is unknown: nothing of the whole add is written
    s = json.loads(next(runs[2].glob("*/*/system.json")).read_text())
    s.pop("cpu_model")
    next(runs[2].glob("*/*/system.json")).write_text(json.dumps(s))
    r = orch("history", "add", runs[1], runs[2], "--store", store)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1 and "machine class unknown" in err[0], r.stderr
    assert db.read_bytes() == before
    # a store written by another version of the format
    sqlite3.connect(db).execute("CREATE TABLE IF NOT EXISTS x(a)")  # (writes nothing the kit reads)
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER IF EXISTS cells_append_only_u")
    con.execute("UPDATE meta SET value = '99' WHERE key = 'format'")
    con.commit()
    for args in (("add", runs[1]), ("show",), ("report",)):
        r = orch("history", *args, "--store", store)
        err = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(err) == 1 and "is format '99'; this kit reads format 1" in err[0], (args, r.stderr)
    # not a database at all
    bad = store.parent / "bad"
    bad.mkdir()
    (bad / "history.sqlite").write_text("not sqlite\n")
    r = orch("history", "show", "--store", bad)
    assert r.returncode == 1 and "is not a history store" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_compare_against_history_flags_a_slower_run(stepped, tmp_path):
    store, runs = stepped
    assert orch("history", "add", *runs[:6], "--store", store).returncode == 0
    new = run_copy(tmp_path / "new", 20, 1.25)  # 0.8x the throughput
    r = orch("compare", "--against-history", new, "--history", store, "--fail-on-regression", "5%")
    assert r.returncode == 1, r.stdout + r.stderr
    # float64's repeats are quiet: slower; float32's are not (the reference's own spread is 64 %)
    assert r.stdout.startswith("2 configurations: 0 faster, 1 slower"), r.stdout
    assert "SLOWER (regression): mlp-scratch numpy float64" in r.stdout and "0.802x" in r.stdout
    same = run_copy(tmp_path / "same", 21, 1.0)
    r = orch("compare", "--against-history", same, "--history", store, "--fail-on-regression", "5%")
    assert r.returncode == 0 and "0 slower" in r.stdout.splitlines()[0], r.stdout
    r = orch("compare", CPU, "--against-history", same, "--history", store)
    assert r.returncode == 2 and "not both" in r.stderr


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(chromium() is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_history_of_the_references_renders_a_page_a_headless_browser_opens(tmp_path):
    """The README's commands: `history add results/reference/*`, then `history report`."""
    store = tmp_path / "history"
    refs = sorted(REF.glob("*"))
    r = orch("history", "add", *refs, "--store", store)
    assert r.returncode == 0 and " cell(s) added" in r.stdout, r.stderr
    r = orch("history", "report", "--store", store, "--out", tmp_path / "page")
    assert r.returncode == 0, r.stderr
    page = tmp_path / "page" / "index.html"
    dom = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "<h1>Run history</h1>" in dom and "Machine class: AMD EPYC, 2 cores" in dom
    assert "NVIDIA H100 80GB HBM3" in dom and dom.count("<svg") >= 100, dom[:500]
    assert "<script" not in page.read_text()


def test_the_report_links_the_trend_page_where_a_history_exists(stepped, tmp_path):
    from host import history

    store, runs = stepped
    out = tmp_path / "report"
    assert history.report_lines(out, store) == []  # no history: nothing said
    assert orch("history", "add", *runs[:2], "--store", store).returncode == 0
    lines = history.report_lines(out, store)
    assert lines[0] == "## Run history" and "2 run(s), 12 cell(s)" in lines[2] and "history report" in lines[3]
    assert orch("history", "report", "--store", store).returncode == 0
    lines = history.report_lines(out, store)
    assert "Trend page" in lines[3] and "../history/report/index.html" in lines[3], lines


def test_show_and_report_keep_only_the_study_machine_and_host_asked_for(stepped, tmp_path):
    """Issue 57: `history show` printed every series of the store, with no filter."""
    store, runs = stepped
    assert orch("history", "add", *runs[:3], "--store", store).returncode == 0
    every = hist.series(store, changes=False)
    host = json.loads((next(runs[0].glob("mlp-scratch/*")) / "system.json").read_text())["hostname"]
    for only in (hist.Only(study="MLP"), hist.Only(machine="epyc"), hist.Only(host=host.upper()[:4])):
        assert [s.name for s in hist.series(store, changes=False, only=only)] == [s.name for s in every]
    r = orch("history", "show", "--store", store, "--study", "mlp", "--machine", "EPYC")
    assert r.returncode == 0 and "machine class: AMD EPYC, 2 cores" in r.stdout, r.stderr
    for args in (("--study", "mnist"), ("--machine", "H100"), ("--host", "%")):
        r = orch("history", "show", "--store", store, *args)
        assert r.returncode == 1 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "no series in" in r.stderr and args[1] in r.stderr
    r = orch("history", "report", "--store", store, "--study", "mnist", "--out", tmp_path / "page")
    assert r.returncode == 1 and not (tmp_path / "page").exists()


@given(st.text(max_size=12))
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_filter_keeps_a_part_of_the_store_whatever_its_text(history_store, part):
    every = {s.name: s for s in hist.series(history_store, changes=False)}
    got = hist.series(history_store, changes=False, only=hist.Only(study=part))
    assert {s.name for s in got} <= set(every)
    assert all(part.casefold() in s.study.casefold() for s in got)
    assert bool(got) == (part.casefold() in "mlp-scratch")


@pytest.fixture(scope="module")
def history_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist")
    run = run_copy(root / "runs", 0, 1.0)
    assert orch("history", "add", run, "--store", root / "h").returncode == 0
    return root / "h"
