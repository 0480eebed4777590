"""Outputs replace only what the kit wrote (host/outdir.py), one safe-write path, and a run the
results lock refuses writes nothing.

- `report --out X` (and `history report --out X`) keeps every file of X it did not write, byte for
  byte (generated trees: any names, bytes that are no UTF-8, nested dirs, a REPORT.md of the
  user's); its own files are fresh, and the ones the new report no longer has are gone. A file
  the report would write over that the kit did not write is one line, nothing written.
- An --out that is an input, holds one, or lies inside a cell dir of one is one line, exit 2,
  nothing written (issue 56 H2: `report X/hostA --out X` deleted the results it read).
- A write that fails (a file-size limit, a read-only dir) is one line naming the path and the
  cause, no traceback, --out as it was; a killed report's stage is removed by the next one.
- `all` refused by another run's lock writes nothing into the locked dir (M10), and `all` with
  $KIT_RESULTS_DIR writes its report inside that dir, not into one report dir every run shares.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from bench.core.errors import KitError, UsageError

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
REF = ROOT / "results" / "reference" / "cpu-2core-epyc"
MNIST = ("mnist-cnn", "torch-cpu_seed_default-adcc67f3f870")
MLP = ("mlp-scratch", "numpy_float32-02dac3a3e589")
MANIFEST = ".cnn-bench-report.json"
TOY = {"KIT_STUDY_MODULES": "toy_study", "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
PROGRESS = ("report: ", "export: ", "ready ", "step ", "ok ", "skipped ", "reused ", "error  ", "interrupted ")


def fuzz(n: int) -> settings:
    """N examples, the same ones each run (KIT_FUZZ_EXAMPLES: that many)."""
    return settings(
        max_examples=int(os.environ.get("KIT_FUZZ_EXAMPLES", n)),
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


def orch(*args: str, cwd: Path = ROOT, env: dict | None = None, limit_fsize: int | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("KIT_DATA_DIR", "KIT_RESULTS_DIR")}

    def limit() -> None:
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**e, **(env or {})},
        timeout=600,
        preexec_fn=limit,
    )


def lines(stderr: str) -> list[str]:
    """The message lines of stderr (progress lines are not messages)."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(PROGRESS)]


def one_line(r: subprocess.CompletedProcess) -> str:
    got = lines(r.stderr)
    assert r.returncode != 0 and len(got) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    return got[0]


def snapshot(top: Path) -> dict[bytes, tuple]:
    """Every entry under TOP (names as bytes): a dir, a file's bytes, a link's target."""
    out: dict[bytes, tuple] = {}
    base = os.fsencode(top)
    for here, dirs, files in os.walk(base):
        for n in dirs + files:
            p = os.path.join(here, n)
            rel = os.path.relpath(p, base)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                with open(p, "rb") as fh:
                    out[rel] = ("file", fh.read())
    return out


def kit_files(out: Path) -> dict[str, str]:
    """The report's own files in OUT as its manifest names them: name -> sha256."""
    m = json.loads((out / MANIFEST).read_text())
    return {k: v[0] for k, v in m["files"].items()}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict:
    """Two result sets (A: an mnist-cnn and an mlp-scratch cell; B: the mlp-scratch cell alone, so
    its report lacks A's mnist files), what a report of B writes, and one figure cache."""
    top = tmp_path_factory.mktemp("sets")
    for name, cells in (("A", (MNIST, MLP)), ("B", (MLP,))):
        for study, cell in cells:
            shutil.copytree(REF / study / cell, top / name / study / cell)
    from host.report import build_report

    build_report([top / "B"], top / "clean-B", jobs=1, figure_cache=top / "cache")
    build_report([top / "A"], top / "clean-A", jobs=1, figure_cache=top / "cache")
    return {
        "A": top / "A",
        "B": top / "B",
        "cache": top / "cache",
        "names_A": written(top / "clean-A"),
        "names_B": written(top / "clean-B"),
    }


def written(out: Path) -> set[str]:
    """The files a report wrote into the fresh dir OUT (the manifest aside)."""
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MANIFEST}


def report(dirs: list[Path], out: Path, cache: Path) -> dict:
    from host.report import build_report

    return build_report(dirs, out, jobs=1, figure_cache=cache)


# ---------------------------------------------------------------------------- user files stay
KIT_LIKE = [b"REPORT.md", b"report.json", b"REPORT.html", b"tidy.csv", b"table1.csv", b"epoch_time.png", b"notes.md", b"sub"]
NAME = st.one_of(
    st.sampled_from(KIT_LIKE),
    st.binary(min_size=1, max_size=12).filter(
        lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..") and not b.startswith(b".cnn-bench")
    ),
)
TREE = st.dictionaries(st.lists(NAME, min_size=1, max_size=3).map(tuple), st.binary(max_size=48), max_size=6)


def plant(out: Path, tree: dict[tuple[bytes, ...], bytes]) -> None:
    """TREE's files under OUT; an entry whose place is taken (a file where a dir goes) is left out."""
    base = os.fsencode(out)
    for parts, data in sorted(tree.items()):
        path = os.path.join(base, *parts)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError:  # a file where a dir goes, a dir where a file goes, a name this filesystem refuses
            continue


def users(out: Path) -> dict[bytes, tuple]:
    """OUT's entries that are not the kit's: the manifest, and a file it names with that file's sha256."""
    kit = kit_files(out) if (out / MANIFEST).is_file() else {}
    snap = snapshot(out)
    return {
        rel: v
        for rel, v in snap.items()
        if rel != MANIFEST.encode() and not (v[0] == "file" and kit.get(os.fsdecode(rel)) == sha(v[1]))
    }


@fuzz(30)
@given(tree=TREE, earlier=st.booleans())
@example(tree={(b"notes.md",): b"mine"}, earlier=True)  # the issue: an earlier report and the user's notes
@example(tree={(b"REPORT.md",): b"my own report"}, earlier=False)
@example(tree={(b"d\xff\xfe", b"x.txt"): b"\x00\x01", (b"sub", b"REPORT.md"): b"nested"}, earlier=False)
def test_report_keeps_every_file_it_did_not_write_and_replaces_its_own(sets, tree, earlier):
    top = Path(tempfile.mkdtemp(prefix="own-"))
    try:
        out = top / "out"
        if earlier:
            report([sets["A"]], out, sets["cache"])
        else:
            out.mkdir()
        plant(out, tree)
        before, theirs = snapshot(out), users(out)
        tops = {os.fsdecode(rel.split(b"/")[0]) for rel in theirs}
        if tops & sets["names_B"] | ({MANIFEST} & tops):  # a name the report writes is the user's: refused, nothing written
            with pytest.raises(UsageError, match="which the kit did not write"):
                report([sets["B"]], out, sets["cache"])
            assert snapshot(out) == before
            event("refused: a name the report writes is the user's")
            return
        event(f"written beside {len(theirs)} entries of the user's" if theirs else "written into an empty dir")
        info = report([sets["B"]], out, sets["cache"])
        after = snapshot(out)
        for rel, v in theirs.items():
            assert after.get(rel) == v, f"{rel!r} of the user's was changed or removed"
        kit = kit_files(out)
        assert set(kit) == sets["names_B"], "the kit's files are exactly the new report's: A's own are gone"
        for name, digest in kit.items():
            assert sha((out / name).read_bytes()) == digest
        assert str(sets["B"]) in (out / "REPORT.md").read_text() and info["report"] == str(out / "REPORT.md")
        assert not [p for p in os.listdir(out) if p.startswith(".cnn-bench-report.stage-")], "a stage left in --out"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_kit_file_the_user_changed_is_theirs_and_a_forged_manifest_is_refused(sets, tmp_path):
    out = tmp_path / "out"
    report([sets["A"]], out, sets["cache"])
    (out / "REPORT.md").write_text("my edits\n")
    with pytest.raises(UsageError, match=r"holds REPORT\.md, which the kit did not write \(or which changed since"):
        report([sets["B"]], out, sets["cache"])
    assert (out / "REPORT.md").read_text() == "my edits\n"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    m = json.loads((out / MANIFEST).read_text())
    m["files"]["../victim.txt"] = [sha(b"keep")]
    (out / MANIFEST).write_text(json.dumps(m))
    (out / "REPORT.md").unlink()
    with pytest.raises(UsageError, match="not a manifest the kit wrote"):
        report([sets["B"]], out, sets["cache"])
    assert victim.read_text() == "keep"


# ---------------------------------------------------------------------------- inputs and --out
PLACES = st.sampled_from(["at", "holds", "holds-deep", "in-cell", "over-study", "beside-results"])


def place_inputs(sets: dict, x: Path, place: str) -> tuple[Path, Path]:
    """(the result dir a report reads, its --out) for PLACE, under X."""
    if place == "at":
        shutil.copytree(sets["B"], x, dirs_exist_ok=True)
        return x, x
    if place in ("holds", "holds-deep"):
        run = x / "hostA" if place == "holds" else x / "a" / "b" / "hostA"
        shutil.copytree(sets["B"], run)
        return run, x
    run = x / "run"
    shutil.copytree(sets["B"], run)
    if place == "beside-results":  # `all --out X` writes X/report from X: inside the input, apart from its results
        return run, run / "report"
    return run, (run / MLP[0] / MLP[1] / "rep" if place == "in-cell" else run / MLP[0])


@fuzz(40)
@given(place=PLACES, earlier=st.booleans(), notes=st.booleans(), context=st.booleans())
@example(place="holds", earlier=True, notes=True, context=False)  # the issue: `report X/hostA --out X` with a report in X
def test_an_out_that_overlaps_the_inputs_is_refused_writing_nothing(sets, place, earlier, notes, context):
    top = Path(tempfile.mkdtemp(prefix="overlap-"))
    try:
        x = top / "x"
        if earlier:  # an earlier report where --out will be, made by the kit
            report([sets["B"]], x, sets["cache"])
        x.mkdir(exist_ok=True)
        if notes:
            (x / "notes.md").write_text("mine\n")
        run, out = place_inputs(sets, x, place)
        before = snapshot(top)
        event(place)
        from host.report import build_report

        # CONTEXT: the overlapping dir is named as --context, beside a result dir apart from it
        dirs, ctx = ([sets["A"]], [run]) if context else ([run], [])
        if place == "beside-results":
            build_report(dirs, out, ctx, jobs=1, figure_cache=sets["cache"])
            after = snapshot(top)
            assert {k: v for k, v in after.items() if k in before} == before, "the results and the user's files as they were"
            assert (out / "REPORT.md").is_file()
            return
        with pytest.raises(UsageError, match="name a dir apart from the inputs") as got:
            build_report(dirs, out, ctx, jobs=1, figure_cache=sets["cache"])
        assert "\n" not in str(got.value)
        assert snapshot(top) == before, "nothing written, nothing removed"
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("place", ["holds", "in-cell"])
def test_report_refuses_an_out_over_or_in_its_inputs_in_one_line(sets, tmp_path, place):
    """The issue's command line: `report X/hostA --out X`, X holding an earlier report and notes."""
    x = tmp_path / "x"
    report([sets["B"]], x, sets["cache"])
    (x / "notes.md").write_text("mine\n")
    run, out = place_inputs(sets, x, place)
    before = snapshot(tmp_path)
    r = orch("report", str(run), "--out", str(out))
    line = one_line(r)
    assert r.returncode == 2 and "name a dir apart from the inputs" in line, line
    assert snapshot(tmp_path) == before, "nothing written, nothing removed"


# ---------------------------------------------------------------------------- a write that fails
def test_a_write_past_the_file_size_limit_is_one_line_naming_the_path_and_leaves_out_as_it_was(sets, tmp_path):
    out = tmp_path / "out"
    report([sets["A"]], out, sets["cache"])
    (out / "notes.md").write_text("mine\n")
    before = snapshot(out)
    r = orch("report", str(sets["B"]), "--out", str(out), limit_fsize=20_000)
    line = one_line(r)
    assert r.returncode == 1 and "File too large" in line and "ulimit -f" in line, line
    named = line.split("cannot write ", 1)[1].split(" (", 1)[0]
    assert named.startswith(str(out) + os.sep) and Path(named).name in sets["names_B"], f"names the file: {line}"
    assert snapshot(out) == before, "the earlier report and the user's notes as they were; nothing half-written"
    r = orch("report", str(sets["B"]), "--out", str(tmp_path / "new"), limit_fsize=20_000)
    assert "File too large" in one_line(r) and not (tmp_path / "new").exists(), "an --out the report made is removed again"


@pytest.fixture
def read_only_dir(tmp_path):
    """A dir no write goes into: chmod for a user; a read-only tmpfs for root (skipped where it cannot be mounted)."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        yield d, lambda: d.chmod(0o555)
        d.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)], capture_output=True).returncode != 0:
        pytest.skip("root without mount(8): no read-only dir to write into")
    try:
        yield d, lambda: subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_a_read_only_out_is_one_line_and_nothing_in_it_moves(sets, read_only_dir):
    out, make_read_only = read_only_dir
    report([sets["A"]], out, sets["cache"])  # an earlier report of the kit's, to be replaced
    (out / "notes.md").write_text("mine\n")
    make_read_only()
    before = snapshot(out.parent)
    r = orch("report", str(sets["B"]), "--out", str(out))
    line = one_line(r)
    assert r.returncode == 1 and str(out) in line and ("Read-only file system" in line or "Permission denied" in line), line
    assert snapshot(out.parent) == before, "nothing moved beside --out or in it"


def test_a_killed_report_leaves_no_stage_for_good(sets, tmp_path):
    out = tmp_path / "out"
    e = {k: v for k, v in os.environ.items() if k not in ("KIT_DATA_DIR", "KIT_RESULTS_DIR")}
    p = subprocess.Popen(
        [sys.executable, str(ROOT / "orchestrate.py"), "report", str(sets["A"]), "--out", str(out)],
        cwd=ROOT,
        env=e,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stages() -> list[Path]:
        inside = [q for q in out.glob(".cnn-bench-report.stage-*")]
        beside = [q for q in tmp_path.iterdir() if q.name.startswith(".out.") and q.name.endswith((".tmp", ".old"))]
        return inside + beside

    deadline = time.time() + 60
    while time.time() < deadline and not stages() and p.poll() is None:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert stages(), "the report was killed while it wrote its stage"
    r = orch("report", str(sets["A"]), "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert not stages(), "the stage of the killed report is gone"
    assert (out / "REPORT.md").is_file()


def test_a_second_writer_of_one_out_is_one_line(sets, tmp_path):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a report writing into OUT holds
        with pytest.raises(KitError, match="is being written by another report now"):
            report([sets["B"]], out, sets["cache"])
    finally:
        os.close(fd)
    assert os.listdir(out) == []


# ---------------------------------------------------------------------------- history report --out
def test_history_report_keeps_the_users_files_and_refuses_the_store_dir(tmp_path):
    from host import history as hist

    store = tmp_path / "store"
    hist.open_store(store, create=True).close()  # an empty store: the page never goes into the dir that holds it
    out = tmp_path / "page"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    (out / "index.html").write_text("my page\n")
    before = snapshot(tmp_path)
    r = orch("history", "report", "--store", str(store), "--out", str(out))
    assert r.returncode == 2 and "holds index.html, which the kit did not write" in one_line(r)
    assert snapshot(tmp_path) == before
    (out / "index.html").unlink()
    for _ in range(2):  # the kit's own page: written, then replaced
        r = orch("history", "report", "--store", str(store), "--out", str(out))
        assert r.returncode == 0 and (out / "index.html").is_file(), r.stderr[-2000:]
        assert (out / "notes.md").read_text() == "mine\n"
    before = snapshot(tmp_path)
    r = orch("history", "report", "--store", str(store), "--out", str(store))
    assert r.returncode == 2 and "history.sqlite, which this command reads" in one_line(r)
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- all and the results lock
@pytest.fixture
def holder(tmp_path):
    """A process holding the results lock of tmp_path/x (as a running matrix does), with results in x."""
    x = tmp_path / "x"
    shutil.copytree(REF / MLP[0] / MLP[1], x / MLP[0] / MLP[1])
    (x / "notes.md").write_text("mine\n")
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom bench.core.lock import results_lock\n"
        "with results_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(300)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(x)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    try:
        yield x, p.pid
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("named", ["--out", "KIT_RESULTS_DIR"])
def test_an_all_the_lock_refuses_writes_nothing_into_the_locked_dir(holder, tmp_path, named):
    x, pid = holder
    before = snapshot(tmp_path)
    args, env = (["--out", str(x)], TOY) if named == "--out" else ([], {**TOY, "KIT_RESULTS_DIR": str(x)})
    r = orch("all", "--runtime", "native", "--study", "toy", "--no-references", *args, cwd=tmp_path, env=env)
    line = one_line(r)
    assert f"is in use by another run (pid {pid})" in line, line
    assert snapshot(tmp_path) == before, "no platforms.json, no report, nothing beside it"
    r = orch("run", "cpu", "--runtime", "native", "--study", "toy", "--out", str(x), cwd=tmp_path, env=TOY)
    assert f"is in use by another run (pid {pid})" in one_line(r)
    assert snapshot(tmp_path) == before


def test_all_with_kit_results_dir_writes_its_report_inside_it(tmp_path):
    env = {**TOY, "KIT_RESULTS_DIR": str(tmp_path / "r1")}
    r = orch("all", "--runtime", "native", "--study", "toy", "--no-references", "--set", "steps=1", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "r1" / "report" / "REPORT.md").is_file() and not (tmp_path / "results").exists()
