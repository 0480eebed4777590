"""Rows are checked, not believed: result dirs come from other machines, so every byte of them
is untrusted. A non-finite or impossible metric, a line or rows file too long to read, and a
result tree thousands of levels deep each make a cell `corrupt` (or are not followed), named
with file, line and key, while `report` and `export` go on with the rest and exit 0."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from bench.core import resultset
from bench.core.resultset import MAX_DEPTH, collect
from bench.core.rows import (
    ROWS_CAPS,
    read_rows,
    read_rows_checked,
    row_value,
    write_rows,
)

MAX_LINE_BYTES, MAX_ROWS_FILE_BYTES = ROWS_CAPS.line_bytes, ROWS_CAPS.file_bytes
ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
CPU = REF / "cpu-2core-epyc" / "mnist-cnn"
SEED_CELL = "torch-cpu_seed_default-adcc67f3f870"
RESIDENT_CELL = "torch-cpu_resident_default-72a6ed0860ce"


def copy_cell(dest_root: Path, name: str = SEED_CELL) -> Path:
    """A committed cell of the cpu-2core-epyc reference, copied to DEST_ROOT/mnist-cnn/NAME."""
    dest = dest_root / "mnist-cnn" / name
    shutil.copytree(CPU / name, dest)
    return dest


def edit_rows(cell: Path, line: int, **values) -> None:
    """Set VALUES in line LINE (1-based) of CELL's rows.jsonl, written as JSON text as given
    (so 'NaN', 'Infinity' and '-Infinity' land in the file as Python's json writes them)."""
    p = cell / "rows.jsonl"
    lines = p.read_text().splitlines()
    row = json.loads(lines[line - 1])
    for k in values:
        row[k] = f"@@{k}@@"
    text = json.dumps(row)
    for k, v in values.items():
        text = text.replace(f'"@@{k}@@"', v)
    lines[line - 1] = text
    p.write_text("\n".join(lines) + "\n")


def orch(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def no_traceback(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr + r.stdout and "Error:" not in r.stderr, r.stderr[-3000:]


def bundle_text(path: Path, suffix: str) -> str:
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(suffix))
        f = tar.extractfile(member)
        assert f is not None
        return f.read().decode()


# ---------------------------------------------------------------------------- values
@pytest.mark.parametrize(
    "key, text, says",
    [
        ("epoch_s", "NaN", "'epoch_s' is nan"),
        ("epoch_s", "Infinity", "'epoch_s' is inf"),
        ("samples_per_s", "-Infinity", "'samples_per_s' is -inf"),
        ("test_acc", "NaN", "'test_acc' is nan"),  # no unit, still a number that must be finite
        ("epoch_s", "1e400", "'epoch_s' is inf"),  # a float literal too large is read as inf
        ("samples", "1" + "0" * 400, "'samples' is an integer of 401 digits"),  # an int no float can hold
        ("epoch_s", "-1.5", "'epoch_s' is -1.5: a time (_s) must be from 0 to 1e+07"),
        ("rss_mean_mb", "-3", "'rss_mean_mb' is -3: a memory size (_mb) must be from 0 to 1e+09"),
        ("vram_bytes", "-1", "'vram_bytes' is -1: a memory size (_bytes) must be from 0 to 1e+15"),
        ("gpu_energy_j", "-0.5", "'gpu_energy_j' is -0.5: an energy (_j) must be from 0 to 1e+12"),
        ("latency_p50_ms", "-0.1", "'latency_p50_ms' is -0.1: a time (_ms) must be from 0 to 1e+10"),
        ("traces", "[[1.0, NaN]]", "'traces[0][1]' holds nan"),  # nested: no non-finite number anywhere
        ("train_loss", "-Infinity", "'train_loss' is -inf"),  # a diverged loss goes up, never to -inf
        # finite but past arithmetic's reach, or a rate of nothing (issue: these crashed report and export)
        ("epoch_s", "1e308", "'epoch_s' is 1e+308: a time (_s) must be from 0 to 1e+07"),
        ("samples_per_s", "0", "'samples_per_s' is 0: a rate (_per_s) must be above 1e-09"),
        ("samples", "1e300", "'samples' is 1e+300: a number must be finite and at most 1e+18"),
        ("traces", "[[1.0, 1e300]]", "'traces[0][1]' holds 1e+300"),
    ],
)
def test_a_non_finite_or_impossible_metric_makes_the_line_corrupt_naming_file_line_and_key(tmp_path, key, text, says):
    cell = copy_cell(tmp_path)
    edit_rows(cell, 3, **{key: text})
    rows, problems = read_rows_checked(cell / "rows.jsonl")
    assert len(problems) == 1 and len(rows) == 9, problems
    assert problems[0].startswith(f"{cell / 'rows.jsonl'}:3: "), problems[0]
    assert says in problems[0], problems[0]
    info = collect([tmp_path])
    assert info[0][0].status == "corrupt" and says in info[0][0].note


def test_keys_that_may_be_negative_and_a_diverged_loss_read_clean(tmp_path):
    """Differences and remainders (a net energy, an overhead, a drop, a cost, memory growth,
    `other`/`idle` remainders) may be negative; a diverged loss is a result (NaN, +inf)."""
    cell = copy_cell(tmp_path)
    edit_rows(
        cell,
        1,
        sampler_cost="-0.07",
        profiler_overhead="-0.06",
        acc_drop_pts="-0.7",
        framework_overhead_bytes="-4096",
        memory_total_bytes="-8192",
        energy_net_j="-1.5",
        gpu_energy_net_j="-1.5",
        vram_delta_mb="-2.0",
        mean_other_ms="-4.4e-16",
        mean_idle_ms="-1e-12",
        speedup="-0.2",
        t_start_mono="-5.0",
    )
    edit_rows(cell, 2, train_loss="NaN", loss_finite="false")
    edit_rows(cell, 3, train_loss="Infinity", loss_finite="false")
    rows, problems = read_rows_checked(cell / "rows.jsonl")
    assert problems == [] and len(rows) == 10
    assert math.isnan(rows[1]["train_loss"]) and rows[2]["train_loss"] == math.inf


def test_the_committed_references_read_with_zero_corrupt_cells():
    cells, _notes, problems = collect([REF])  # every set under it, the sets of runs too
    assert problems == []
    assert len(cells) >= 190 and not [c.dir for c in cells if c.state == "corrupt"]


def test_the_writer_stores_a_non_finite_metric_as_null_and_keeps_a_diverged_loss(tmp_path):
    np = pytest.importorskip("numpy")
    row = {
        "study": "mnist-cnn",
        "status": "ok",
        "epoch_s": float("nan"),
        "samples_per_s": np.float64("inf"),
        "rss_mean_mb": np.float32("-inf"),
        "pairs": [[1.0, float("nan")], (2.0, np.float64("inf"))],
        "nested": {"x": float("-inf"), "y": 1.5},
        "train_loss": float("nan"),
        "val_loss": float("inf"),
        "loss": float("-inf"),  # not what a diverged loss does: stored as null too
        "test_acc": 0.5,
    }
    write_rows(tmp_path, [row])
    text = (tmp_path / "rows.jsonl").read_text()
    back = read_rows(tmp_path / "rows.jsonl")[0]  # readable: no KitError
    assert back["epoch_s"] is None and back["samples_per_s"] is None and back["rss_mean_mb"] is None
    assert back["pairs"] == [[1.0, None], [2.0, None]] and back["nested"] == {"x": None, "y": 1.5}
    assert math.isnan(back["train_loss"]) and back["val_loss"] == math.inf and back["loss"] is None
    assert "-Infinity" not in text and text.count("NaN") == 1 and text.count("Infinity") == 1
    with open(tmp_path / "rows.csv", newline="") as fh:
        table = next(csv.DictReader(fh))
    assert table["epoch_s"] == table["samples_per_s"] == table["loss"] == "" and table["train_loss"] == "nan"
    assert row_value("epoch_s", float("nan")) is None and row_value("epoch_s", 2.0) == 2.0


def test_report_and_export_exit_0_with_a_non_finite_cell_listed_corrupt(tmp_path):
    good, foreign = tmp_path / "mine", tmp_path / "foreign"
    copy_cell(good, SEED_CELL)
    bad = copy_cell(foreign, RESIDENT_CELL)
    edit_rows(bad, 1, epoch_s="Infinity")
    edit_rows(bad, 2, epoch_s="-Infinity")
    r = orch("report", str(good), str(foreign), "--out", str(tmp_path / "report"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report" / "REPORT.md").read_text()
    corrupt = [line for line in md.splitlines() if "corrupt" in line and RESIDENT_CELL in line]
    assert len(corrupt) == 1 and "rows.jsonl:1" in corrupt[0] and "epoch_s" in corrupt[0], md[-3000:]
    r = orch("export", str(good), str(foreign), "--out", str(tmp_path / "b.tar.gz"))
    no_traceback(r)
    assert r.returncode == 0 and (tmp_path / "b.tar.gz").is_file(), r.stderr[-2000:]
    assert "corrupt" in bundle_text(tmp_path / "b.tar.gz", "report/REPORT.md")


# ---------------------------------------------------------------------------- size
def _long_line_file(path: Path, size: int) -> None:
    """A rows file of SIZE bytes with no newline (sparse: NULs after a JSON-looking start)."""
    with open(path, "wb") as fh:
        fh.write(b'{"study": "mnist-cnn", "status": "ok", "pad": "')
        fh.truncate(size)


def test_a_line_over_1mb_is_corrupt_and_never_read_whole(tmp_path):
    cell = copy_cell(tmp_path)
    _long_line_file(cell / "rows.jsonl", MAX_ROWS_FILE_BYTES - 100)  # one line, just under the file cap
    tracemalloc.start()
    try:
        rows, problems = read_rows_checked(cell / "rows.jsonl")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows == [] and len(problems) == 1
    assert problems[0].startswith(f"{cell / 'rows.jsonl'}:1: ") and "longer than" in problems[0], problems[0]
    assert peak < 10 * MAX_LINE_BYTES, f"held {peak / 1e6:.0f} MB to judge one 16 MB line"
    # a long line between good ones: only it is corrupt, and the line numbers after it are right
    good = (CPU / SEED_CELL / "rows.jsonl").read_text().splitlines(True)
    with open(cell / "rows.jsonl", "w") as fh:
        fh.write(good[0] + '{"pad": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n' + good[1])
    rows, problems = read_rows_checked(cell / "rows.jsonl")
    assert len(rows) == 2 and len(problems) == 1 and f"{cell / 'rows.jsonl'}:2: " in problems[0]


def test_a_rows_file_over_the_size_limit_is_corrupt_and_not_read(tmp_path):
    cell = copy_cell(tmp_path)
    with open(cell / "rows.jsonl", "ab") as fh:  # good lines first, then a sparse tail past the limit
        fh.truncate(MAX_ROWS_FILE_BYTES + 1)
    tracemalloc.start()
    try:
        rows, problems = read_rows_checked(cell / "rows.jsonl")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows == [] and len(problems) == 1 and "over the" in problems[0], problems
    assert peak < 1 << 20


# ---------------------------------------------------------------------------- depth
def _deep_chain(top: Path, levels: int) -> None:
    """TOP/d/d/.../d, LEVELS deep, made relative to an open dir (no path of that length exists)."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)


def _remove_chain(top: Path, levels: int) -> None:
    """Undo _deep_chain without recursion (shutil.rmtree recurses: it cannot remove it)."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        for _ in range(levels - 1):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        while fds:
            fd = fds.pop()
            os.rmdir("d", dir_fd=fd)
            os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def deep_tree(tmp_path):
    """A result dir with one good cell and a chain 2,000 levels deep beside it."""
    top = tmp_path / "deep"
    copy_cell(top)
    (top / "x").mkdir()
    _deep_chain(top / "x", 2000)
    yield top
    _remove_chain(top / "x", 2000)


def test_a_2000_level_tree_does_not_crash_report_export_or_verify(tmp_path, deep_tree):
    cells, _notes, problems = collect([deep_tree])
    assert [c.dir.name for c in cells] == [SEED_CELL] and problems == []
    r = orch("report", str(deep_tree), "--out", str(tmp_path / "report"))
    no_traceback(r)
    assert r.returncode == 0 and (tmp_path / "report" / "REPORT.md").is_file(), r.stderr[-2000:]
    r = orch("export", str(deep_tree), "--out", str(tmp_path / "b.tar.gz"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    r = orch("verify", str(deep_tree))
    no_traceback(r)
    assert r.returncode in (0, 1) and SEED_CELL in r.stdout, r.stderr[-2000:]


def test_nothing_below_the_max_depth_is_followed(tmp_path):
    top = tmp_path / "r"
    copy_cell(top)
    at_limit = top / Path(*["n"] * (MAX_DEPTH - 2))  # <limit dirs>/mnist-cnn/<cell>: the cell dir at MAX_DEPTH
    below = top / Path(*["n"] * (MAX_DEPTH - 1))  # one level further: not followed
    copy_cell(at_limit, RESIDENT_CELL)
    copy_cell(below, "torch-cpu_seed_default-89a4ae6b4f42")
    cells, _notes, _problems = collect([top])
    assert sorted(c.dir.name for c in cells) == sorted([SEED_CELL, RESIDENT_CELL])
    seen = [here for here, _subdirs, _files in resultset.walk(top)]
    assert max(len(h.relative_to(top).parts) for h in seen) == MAX_DEPTH
    from host.export import _result_files

    files = _result_files(top, set())
    assert any(RESIDENT_CELL in str(f) for f in files)
    assert not any("89a4ae6b4f42" in str(f) for f in files)


# ---------------------------------------------------------------------------- all at once
def test_report_and_export_exit_0_on_a_set_with_every_corruption(tmp_path, deep_tree):
    """One good dir, one foreign dir holding a NaN cell, a 15 MB one-line rows file and a 2,000
    level tree: both commands exit 0, each bad cell listed as corrupt with its reason."""
    good, foreign = tmp_path / "mine", deep_tree
    copy_cell(good, RESIDENT_CELL)
    nan = copy_cell(foreign, "torch-cpu_seed_default-89a4ae6b4f42")
    edit_rows(nan, 4, samples_per_s="NaN")
    big = copy_cell(foreign, "torch-cpu_resident_default-0d1d4c03a556")
    _long_line_file(big / "rows.jsonl", 15 << 20)
    r = orch("report", str(good), str(foreign), "--out", str(tmp_path / "report"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report" / "REPORT.md").read_text()
    lines = [line for line in md.splitlines() if "| corrupt |" in line]
    assert len(lines) == 2, md[-3000:]
    assert any("89a4ae6b4f42" in x and "rows.jsonl:4" in x and "samples_per_s" in x for x in lines), lines
    assert any("0d1d4c03a556" in x and "longer than" in x for x in lines), lines
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["studies"]["mnist-cnn"]["ok"] == 2  # the good one here and the one beside the chain
    r = orch("export", str(good), str(foreign), "--out", str(tmp_path / "b.tar.gz"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    assert bundle_text(tmp_path / "b.tar.gz", "report/REPORT.md").count("| corrupt |") == 2


# ---------------------------------------------------------------------------- side files and arithmetic
def _edit_json(path: Path, **values) -> None:
    obj = json.loads(path.read_text())
    obj.update(values)
    path.write_text(json.dumps(obj))


def test_a_side_file_of_the_wrong_shape_makes_its_cell_corrupt_and_report_and_export_go_on(tmp_path):
    """The issue's forms crashed `report` and `export` (system.json's `gpu` a string). Each file
    kind is held to its schema: its cell is listed corrupt, named by file and key; the others
    are reported; a platforms.json of the wrong shape is named and left out."""
    good, foreign = tmp_path / "mine", tmp_path / "foreign"
    copy_cell(good, SEED_CELL)
    cases = {
        RESIDENT_CELL: ("system.json", {"gpu": "x"}, "'gpu' is 'x'"),
        "torch-cpu_seed_default-89a4ae6b4f42": ("system.json", {"kit_source": ["dirty"]}, "'kit_source' is a list"),
        "torch-cpu_resident_default-0d1d4c03a556": ("cell.json", {"params": [1, 2]}, "'params' is a list"),
        "numba-cpu_resident_default-5ed163b6185a": ("cell.json", {"seed": "0"}, "'seed' is '0'"),
    }
    for name, (file, values, _says) in cases.items():
        _edit_json(copy_cell(foreign, name) / file, **values)
    (foreign / "platforms.json").write_text(json.dumps({"cpu": "ran", "cuda": {"status": ["x"]}}))
    r = orch("report", str(good), str(foreign), "--out", str(tmp_path / "report"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report" / "REPORT.md").read_text()
    for name, (file, _values, says) in cases.items():
        (line,) = [x for x in md.splitlines() if "| corrupt |" in x and name in x]
        assert file in line and says in line, line
    assert "platforms.json: 'cpu' is 'ran'" in md
    r = orch("export", str(good), str(foreign), "--out", str(tmp_path / "b.tar.gz"))
    no_traceback(r)
    assert r.returncode == 0 and (tmp_path / "b.tar.gz").is_file(), r.stderr[-2000:]


def test_a_zero_time_or_a_huge_rate_that_the_report_divides_by_is_corrupt_and_report_and_export_go_on(tmp_path):
    """The issue's forms: a zero time or rate, a finite number too large for a sum (1e308),
    crashed the report. cifar-opt's epoch of 0 s and mnist-cnn's 1e308 samples/s: corrupt."""
    good, foreign = tmp_path / "mine", tmp_path / "foreign"
    copy_cell(good, SEED_CELL)
    huge = copy_cell(foreign, RESIDENT_CELL)
    edit_rows(huge, 2, samples_per_s="1e308")
    opt = REF / "cpu-2core-epyc-cifar-opt-default" / "cifar-opt"
    zero = foreign / "cifar-opt" / "torch-cpu_resnet18_default-25801c73e457"
    shutil.copytree(opt / zero.name, zero)
    rows = [json.loads(x) for x in (zero / "rows.jsonl").read_text().splitlines()]
    (zero / "rows.jsonl").write_text("".join(json.dumps({**x, "epoch_s": 0.0} if "epoch_s" in x else x) + "\n" for x in rows))
    r = orch("report", str(good), str(foreign), "--out", str(tmp_path / "report"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
    md = (tmp_path / "report" / "REPORT.md").read_text()
    (line,) = [x for x in md.splitlines() if "| corrupt |" in x and zero.name in x]
    assert "'epoch_s' is 0: a measured time is at least 1e-12 s" in line, line
    (line,) = [x for x in md.splitlines() if "| corrupt |" in x and RESIDENT_CELL in x]
    assert "'samples_per_s' is 1e+308" in line, line
    r = orch("export", str(good), str(foreign), "--out", str(tmp_path / "b.tar.gz"))
    no_traceback(r)
    assert r.returncode == 0, r.stderr[-2000:]
