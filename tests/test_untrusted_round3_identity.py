"""Untrusted input, third round (issue 56): one mechanism per class, each held by generated forms.

- One identity per measurement: a cell is its rows' own cell id and run ids (`ResultCell.identity`),
  never its dir's name, its run's label or where it lies; `report`, `collect_set` and `history add`
  count a copy under any other names once (M1).
- One read budget per set (`bench.core.resultset.Budget`): bytes per cell and per set, and the
  report's long table (rows x keys); what is past it is left out, named in one line, never a
  MemoryError (M3).
- A name that is not UTF-8 is never read, and said in one line (M6).
- The figure cache serves only what the kit's own index names, from a folder no one else can
  write (M11).
- The history store is read back as untrusted (M13).
- The low ones: reading N dirs is linear; a link under a Slurm task dir; one GPU by index and UUID;
  a 32-bit image; a byte copy of a training image in val/; an in-place edit with its mtime set
  back; `history add` onto a full disk; what `export` needs of host/outdir.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import resource
import shutil
import sqlite3
import string
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image

from bench.core import resultset
from bench.core.errors import KitError
from bench.core.resultset import collect_set, group_repeats

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "results" / "reference" / "cpu-2core-epyc"
SEED = ("torch-cpu_seed_default-adcc67f3f870", "torch-cpu_seed_default-89a4ae6b4f42", "torch-cpu_seed_default-65ae36759ec9")
PROGRESS = re.compile(r"(report|export): .* \(\d+ s\)")  # host/progress.py's plain line per stage, off a terminal


def slow(n: int) -> settings:
    """N generated examples (fixed: derandomized), each a few commands: no deadline."""
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


GiB = 1 << 30


def orch(
    *args: str, limit_as: int | None = None, limit_fsize: int | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KIT_DATA_DIR", "COLUMNS")}

    def limits() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        preexec_fn=limits,
        errors="backslashreplace",
    )


def said(r: subprocess.CompletedProcess) -> list[str]:
    """STDERR's lines less the progress lines: what the command said."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not PROGRESS.fullmatch(ln)]


def ok_or_one_line(r: subprocess.CompletedProcess) -> None:
    """A result (exit 0) or one `error:` line (exit 1 or 2), never a traceback."""
    lines = said(r)
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr.replace("error:", ""), r.stderr[-3000:]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if r.returncode == 0:
        assert not errors, r.stderr[-2000:]
    else:
        assert r.returncode in (1, 2) and len(errors) == 1, r.stderr[-3000:]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """One run: the three repeats of one mnist-cnn configuration."""
    d = tmp_path_factory.mktemp("one") / "run"
    for name in SEED:
        shutil.copytree(CPU / "mnist-cnn" / name, d / "mnist-cnn" / name)
    return d


def set_label(d: Path, label: str) -> None:
    for p in d.glob("mnist-cnn/*/system.json"):
        obj = json.loads(p.read_text())
        obj["run_label"] = label
        p.write_text(json.dumps(obj))


# ---------------------------------------------------------------------------- M1: one identity per measurement
NAME = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=16)
LABEL = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=1, max_size=12)


@slow(12)
@given(
    copies=st.lists(st.tuples(NAME, st.one_of(st.none(), LABEL), st.integers(0, 3)), min_size=1, max_size=3),
    shared=st.one_of(st.none(), LABEL),
    one_parent=st.booleans(),
)
@example(copies=[("renamed", None, 0)], shared="shared", one_parent=False)  # the form: n 6 from 3
def test_copies_of_a_run_under_any_dirs_labels_and_parents_count_once(run, copies, shared, one_parent):
    with tempfile.TemporaryDirectory() as t:
        top = Path(t) / "top"
        original = shutil.copytree(run, top / "original")
        dirs = [original]
        for k, (prefix, label, depth) in enumerate(copies):
            dest = top.joinpath(*[f"p{k}-{j}" for j in range(depth)], f"copy{k}")
            shutil.copytree(run, dest)
            for i, cell in enumerate(sorted((dest / "mnist-cnn").iterdir())):
                cell.rename(cell.with_name(f"{prefix}{i}"))
            if label or shared:
                set_label(dest, label or str(shared))
            dirs.append(dest)
        if shared:
            set_label(original, shared)
        rs = collect_set([top] if one_parent else dirs)
        assert sum(c.status == "ok" for c in rs.cells) == 3, [c.dir for c in rs.cells]
        assert [len(g) for g in group_repeats(rs.cells)] == [3], "n stays 3: one run's repeats"
        assert any("the same runs were already read" in s for s in rs.skipped), rs.skipped


def test_report_and_history_add_count_a_renamed_copy_with_a_shared_label_once(run, tmp_path):
    """The issue's M1 through the commands: the copy's cell dirs renamed, both runs labelled alike."""
    original = shutil.copytree(run, tmp_path / "run")
    copy = shutil.copytree(run, tmp_path / "copy")
    for i, cell in enumerate(sorted((copy / "mnist-cnn").iterdir())):
        cell.rename(cell.with_name(f"renamed-{i}"))
    set_label(original, "shared")
    set_label(copy, "shared")
    r = orch("report", str(original), str(copy), "--out", str(tmp_path / "report"))
    assert r.returncode == 0 and f"skipped: 3 cell(s) under {copy}" in r.stderr, r.stderr[-2000:]
    summary = json.loads((tmp_path / "report" / "report.json").read_text())
    assert summary["studies"]["mnist-cnn"]["cells"] == 3
    table = (tmp_path / "report" / "table1_summary.csv").read_text().splitlines()
    assert len(table) == 2 and ",3," in table[1], table  # one configuration, 3 repeats
    r = orch("history", "add", str(original), str(copy), "--store", str(tmp_path / "hist"))
    assert r.returncode == 0 and "3 cell(s) added, 3 already there" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------------- M3: one read budget
def _rows_file(path: Path, base: list[dict], mb: float, shape: str, run_id: str) -> None:
    """About MB megabytes of rows of SHAPE: the kit's own rows, rows of 40 new keys each, rows
    holding a list of 3,000 empty lists."""
    target, size, j = int(mb * 1e6), 0, 0
    with open(path, "w") as fh:
        while size < target:
            r = {**base[j % len(base)], "run_id": run_id, "epoch": j % 10 + 1}
            if shape == "keys":
                r.update({f"x{j}_{q}_s": 1.0 for q in range(40)})
            elif shape == "nest":
                r["extra"] = [[] for _ in range(3000)]
            line = json.dumps(r, separators=(",", ":")) + "\n"
            fh.write(line)
            size += len(line)
            j += 1


CELLS = st.lists(st.tuples(st.sampled_from(["plain", "keys", "nest"]), st.floats(0.05, 9.0)), min_size=1, max_size=9)


@slow(3)
@given(cells=CELLS)
@example(cells=[("keys", 8.0)] * 4)  # the form: 34 MB of rows took 2.8 GB (here: 32 MB of new keys took 21 GB)
@example(cells=[("plain", 7.9)] * 9)  # past the set's 64 MB
@example(cells=[("nest", 7.9)] * 8)  # 30x their bytes in Python: the most a byte of rows costs
@example(cells=[("keys", 9.0), ("nest", 2.0), ("plain", 17.0), ("plain", 0.1)])  # past a cell's 16 MB
def test_rows_of_any_size_over_many_cells_stay_under_a_memory_bound_and_say_what_was_left_out(run, cells):
    src = run / "mnist-cnn" / SEED[0]
    base = [json.loads(x) for x in (src / "rows.jsonl").read_text().splitlines()]
    with tempfile.TemporaryDirectory() as t:
        d = Path(t) / "big"
        sizes = []
        for i, (shape, mb) in enumerate(cells):
            c = d / "mnist-cnn" / f"cell{i}"
            c.mkdir(parents=True)
            for f in ("cell.json", "system.json"):
                shutil.copy(src / f, c / f)
            _rows_file(c / "rows.jsonl", base, mb, shape, f"run{i}")
            sizes.append(sum(p.stat().st_size for p in c.iterdir()))
        r = orch("report", str(d), "--out", str(Path(t) / "report"), limit_as=3 * GiB)
        ok_or_one_line(r)
        assert r.returncode == 0 and (Path(t) / "report" / "REPORT.md").is_file(), r.stderr[-2000:]
        left = [ln for ln in said(r) if ln.startswith("skipped:") and "left out" in ln]
        if max(sizes) > resultset.MAX_CELL_BYTES or sum(sizes) > resultset.MAX_READ_BYTES:
            assert len(left) == 1 and re.search(r"skipped: \d+ cell\(s\) left out", left[0]), r.stderr[-2000:]
        for line in left:  # it names cells that are there, and why
            assert str(d / "mnist-cnn" / "cell") in line and "budget" in line, line


# ---------------------------------------------------------------------------- M6: names that are not UTF-8
NOT_UTF8 = st.builds(
    lambda a, b, c: a + bytes([b]) + c,
    st.binary(max_size=6).filter(lambda x: b"/" not in x and b"\0" not in x),
    st.integers(0x80, 0xFF),
    st.binary(max_size=6).filter(lambda x: b"/" not in x and b"\0" not in x),
).filter(lambda n: n not in (b".", b".."))


def _fs(p: Path | bytes) -> Path:
    return Path(os.fsdecode(p))


@slow(4)
@given(name=NOT_UTF8, where=st.sampled_from(["named", "run", "study", "cell", "file"]))
@example(name=b"ru\xffn", where="named")
@example(name=b"x\xfe", where="file")
def test_names_of_arbitrary_bytes_never_crash_report_export_or_history_add(run, name, where):
    with tempfile.TemporaryDirectory() as t:
        top = Path(t)
        bad = os.fsdecode(name)
        if where == "named":
            d = shutil.copytree(run, top / bad)
        else:
            d = top / "results"
            inner = d / (bad if where == "run" else "run")
            shutil.copytree(run, inner)
            if where == "study":
                (inner / "mnist-cnn").rename(inner / bad)
            elif where == "cell":
                first = sorted((inner / "mnist-cnn").iterdir())[0]
                first.rename(first.with_name(bad))
            elif where == "file":
                (sorted((inner / "mnist-cnn").iterdir())[0] / bad).write_text("stray\n")
        for args in (
            ("report", str(d), "--out", str(top / "report")),
            ("export", str(d), "--out", str(top / "bundle.tar.gz")),
            ("history", "add", str(d), "--store", str(top / "hist")),
        ):
            r = orch(*args)
            ok_or_one_line(r)
            if args[0] == "report":  # a result with a line naming what was not read, or that line alone
                assert any("not UTF-8" in ln for ln in said(r)), r.stderr[-2000:]
            if where == "named":
                assert r.returncode == 2 and "not UTF-8" in said(r)[-1], r.stderr[-2000:]
            if r.returncode == 0 and args[0] == "export":
                with tarfile.open(top / "bundle.tar.gz") as tar:
                    names = tar.getnames()
                    readme = tar.extractfile(next(n for n in names if n.endswith("/README.md"))).read().decode()  # type: ignore[union-attr]
                assert all(n.encode("utf-8") for n in names) and any(n.endswith("MANIFEST.sha256") for n in names)
                assert "not UTF-8" in readme, readme


# ---------------------------------------------------------------------------- M11: the figure cache
OPS = {
    "names": ["aten::convolution_backward", "aten::add_"],
    "values": [3.0, 1.0],
    "xlabel": "self cpu, ms",
    "title": "one configuration: operators",
}


def _png(w: int, h: int, rgb: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), rgb).save(buf, "PNG")
    return buf.getvalue()


@slow(8)
@given(
    w=st.integers(1, 64),
    h=st.integers(1, 64),
    rgb=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
    who=st.sampled_from(["plant only, 0700", "plant only, 0755", "index too, o+w", "index too, g+w", "index too, another owner"]),
)
@example(w=8, h=8, rgb=(255, 0, 0), who="plant only, 0755")  # the form: a PNG named by its own hash
def test_a_planted_png_named_by_its_own_hash_beside_out_is_never_served(w, h, rgb, who):
    from bench.studies.profile.report import draw_ops
    from host.figures import batch_for, cache_dir_for

    if "another owner" in who and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    planted = _png(w, h, rgb)
    digest = hashlib.sha256(planted).hexdigest()
    with tempfile.TemporaryDirectory() as t:
        out = Path(t) / "report"
        out.mkdir()
        first = batch_for(out, jobs=1)
        first(out, "a.png", draw_ops, OPS)
        first.finish()
        cache = cache_dir_for(out)
        entries = {}
        for p in sorted(cache.glob("*.png")):  # every entry swapped for the planted PNG, named by its own hash
            key, kind = p.name.split("-")[0], ".small" if p.name.endswith(".small.png") else ""
            p.unlink()
            name = f"{key}-{digest[:32]}{kind}.png"
            (cache / name).write_bytes(planted)
            entries[name] = digest
        assert entries, "the first report cached its figure"
        if "index too" in who:  # whoever can write the folder can write its index too
            (cache / "index.json").write_text(json.dumps({"kit": "cnn-bench", "format": 1, "entries": entries}))
            if "o+w" in who:
                cache.chmod(0o777)
            elif "g+w" in who:
                cache.chmod(0o775)
            else:
                os.chown(cache, 4242, 4242)
        else:
            cache.chmod(0o700 if "0700" in who else 0o755)
        again = batch_for(out, jobs=1)
        again(out, "a.png", draw_ops, OPS)
        small = again.finish()
        assert (out / "a.png").read_bytes() != planted and small["a.png"] != planted, who
        assert (out / "a.png").read_bytes().startswith(b"\x89PNG") and again.counts["cached"] == 0


# ---------------------------------------------------------------------------- M13: the history store
@pytest.fixture(scope="module")
def store_rows(run, tmp_path_factory) -> tuple[list[tuple], list[tuple]]:
    """The rows `history add` writes for one run: (cells, figures)."""
    store = tmp_path_factory.mktemp("hist")
    r = orch("history", "add", str(run), "--store", str(store))
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(store / "history.sqlite")
    try:
        return con.execute("SELECT * FROM cells").fetchall(), con.execute("SELECT * FROM figures").fetchall()
    finally:
        con.close()


FIGURE = st.one_of(
    st.text(max_size=20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=8),
    st.none(),
    st.sampled_from([float("nan"), float("inf"), 1e308, -1.0, 0.0, "12.5", "abc"]),
)
CELL_COLUMNS = (
    "uid", "cell", "run_id", "batch", "repeat", "study", "config_key", "config_label", "class_key", "class_label",
    "env_key", "env_label", "commit_sha", "created_utc", "host", "label", "source", "added_utc", "rows_json", "system_json",
)  # fmt: skip  # host/history.py's cells table
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(["$\\x$", "$x^{", "<b>", "\x1b[31m", "a" * 10_000]))


@slow(5)
@given(
    value=FIGURE, commit=TEXT, label=TEXT, metric=TEXT, hib=st.one_of(st.integers(-3, 3), st.text(max_size=3)), raw=st.booleans()
)
@example(value="abc", commit="abcdef0", label="x", metric="throughput", hib=1, raw=False)  # a text figure
@example(value=100.0, commit="$\\x$", label="x", metric="throughput", hib=1, raw=False)  # mathtext in a commit
def test_a_store_with_text_huge_or_nan_figures_shows_and_reports_or_says_one_line(
    store_rows, value, commit, label, metric, hib, raw
):
    cells, figs = store_rows
    with tempfile.TemporaryDirectory() as t:
        store = Path(t) / "store"
        store.mkdir()
        con = sqlite3.connect(store / "history.sqlite")  # another user's store: the kit's tables, none of its constraints
        con.execute("CREATE TABLE meta(key, value)")
        con.execute(f"CREATE TABLE cells({', '.join(CELL_COLUMNS)})")
        con.execute("CREATE TABLE figures(uid, part, metric, unit, higher_is_better, value)")
        con.execute("INSERT INTO meta VALUES ('format', '1')")
        con.executemany(f"INSERT INTO cells VALUES ({','.join('?' * 20)})", cells)
        con.executemany("INSERT INTO figures VALUES (?, ?, ?, ?, ?, ?)", figs)
        forged = list(cells[0])
        forged[0], forged[3], forged[12], forged[15] = "forged|run", "forged-batch", commit, label
        con.execute(f"INSERT INTO cells VALUES ({','.join('?' * 20)})", forged)
        uid, part, _metric, unit, _hib, _value = figs[0]
        con.execute("INSERT INTO figures VALUES (?, ?, ?, ?, ?, ?)", ("forged|run", part, metric, unit, hib, value))
        if raw:  # text that is not UTF-8, as SQLite can hold it
            con.execute("UPDATE cells SET commit_sha = CAST(x'ff24fe' AS TEXT) WHERE uid = 'forged|run'")
        con.commit()
        con.close()
        for args in (("show",), ("show", "--json"), ("report", "--out", str(Path(t) / "page"))):
            r = orch("history", *args, "--store", str(store))
            ok_or_one_line(r)
            if r.returncode == 0 and args[0] == "report":
                assert (Path(t) / "page" / "index.html").is_file()


# ---------------------------------------------------------------------------- the low ones
def _calls_while_collecting(dirs: list[Path]) -> int:
    """How many calls of functions of bench/core/resultset.py collect_set(DIRS) makes (a count of
    work that does not depend on how busy the machine is)."""
    import bench.core.resultset as rsmod

    here = rsmod.__file__
    n = 0

    def count(frame, event, arg):  # noqa: ANN001, ARG001
        nonlocal n
        if event == "call" and frame.f_code.co_filename == here:
            n += 1

    sys.setprofile(count)
    try:
        collect_set(dirs)
    finally:
        sys.setprofile(None)
    return n


def _many_runs(top: Path, n: int) -> list[Path]:
    dirs = []
    for i in range(n):
        d = top / f"run{i:05d}"
        c = d / "mnist-cnn" / f"torch-cpu_default-{i:012x}"
        c.mkdir(parents=True)
        row = {"schema": 2, "study": "mnist-cnn", "cell": c.name, "backend": "torch-cpu", "variant": "default",
               "seed": 0, "repeat": 0, "run_id": f"r{i}", "status": "skipped", "reason": "no GPU"}  # fmt: skip
        (c / "rows.jsonl").write_text(json.dumps(row) + "\n")
        dirs.append(d)
    return dirs


def test_reading_n_result_dirs_is_linear_in_n(tmp_path):
    """6,000 dirs took 228 s: each named dir was compared with every one named before it."""
    dirs = _many_runs(tmp_path, 400)
    small, large = _calls_while_collecting(dirs[:100]), _calls_while_collecting(dirs)
    assert large < 6 * small, (small, large)  # 4x the dirs: about 4x the work, not 16x


def test_a_link_one_level_below_a_slurm_task_dir_is_refused_and_nothing_written_through_it(tmp_path):
    top = tmp_path / "plan"
    top.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR" and not k.startswith(("KIT_SLURM_", "SLURM_"))}
    plan = [sys.executable, str(ROOT / "orchestrate.py"), "plan", str(top / "job"), "cpu", "--study", "mnist-cnn"]
    r = subprocess.run([*plan, "--profile", "smoke"], capture_output=True, text=True, cwd=top, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    job = top / "job"
    cell = json.loads((job / "manifest.json").read_text())["cells"][0]
    victim = tmp_path / "victim"
    (victim / cell["id"]).mkdir(parents=True)
    (victim / cell["id"] / "rows.jsonl").write_text("keep me\n")
    (job / "task-0000").mkdir(exist_ok=True)
    (job / "task-0000" / cell["study"]).symlink_to(victim, target_is_directory=True)
    r = orch("slurm", str(job))  # the script is not written over a link
    assert r.returncode != 0 and len(said(r)) == 1 and "symlink" in said(r)[0], r.stderr[-2000:]
    (job / "task-0000" / cell["study"]).unlink()
    assert orch("slurm", str(job)).returncode == 0
    (job / "task-0000" / cell["study"]).symlink_to(victim, target_is_directory=True)  # planted after the script is written
    script = next((job / "slurm").glob("*.sbatch"))
    task = {**env, "SLURM_ARRAY_TASK_ID": "0"}
    run_ = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=task, timeout=600)
    assert run_.returncode == 1 and "is a symlink" in run_.stderr, run_.stderr[-2000:]
    assert sorted(p.name for p in (victim / cell["id"]).iterdir()) == ["rows.jsonl"]
    assert (victim / cell["id"] / "rows.jsonl").read_text() == "keep me\n"


UUID_HEX = st.text(alphabet="0123456789abcdef", min_size=8, max_size=32)


@given(index=st.integers(0, 15), uuid=UUID_HEX, upper=st.booleans(), cut=st.integers(4, 32), order=st.booleans())
def test_one_gpu_named_by_index_and_by_uuid_or_a_uuid_and_its_prefix_is_one_line(index, uuid, upper, cut, order):
    from bench.core.cell import check_devices

    full = "GPU-" + (uuid.upper() if upper else uuid)
    for devices in ((str(index), full), (full, "GPU-" + uuid[:cut])):
        given_ = devices if order else devices[::-1]
        with pytest.raises(KitError) as err:
            check_devices(",".join(given_))
        assert "\n" not in str(err.value) and ("index and by UUID" in str(err.value) or "twice" in str(err.value))
    assert check_devices(f"GPU-{uuid}0,GPU-{uuid}1") == (f"GPU-{uuid}0", f"GPU-{uuid}1")  # two GPUs, neither starts the other


@given(v1=st.integers(65_536, 2**29), k=st.integers(2, 3))
@settings(deadline=None)
def test_a_32_bit_integer_image_is_scaled_by_its_range_not_clipped_at_65535(tmp_path_factory, v1, k):
    from bench.data.images import load_image

    path = tmp_path_factory.mktemp("i32") / "wide.tif"
    Image.fromarray(np.array([[0, v1, v1 * k]], dtype=np.int32), mode="I").save(path)
    with Image.open(path) as im:
        assert im.mode == "I"
    px = load_image(path)[0, 0]  # (3,H,W) uint8: red channel of the row
    assert px[0] == 0 and px[1] < px[2] == 255, px


@given(which=st.integers(0, 3), into=st.sampled_from(["cat", "dog"]), name=NAME)
@settings(max_examples=10, deadline=None)
def test_a_byte_copy_of_a_training_image_in_val_is_one_line_when_indexed(tmp_path_factory, which, into, name):
    from bench.data import imagefolder

    root = tmp_path_factory.mktemp("tree") / "cd"
    files = []
    for s, split in enumerate(("train", "val")):
        for c, cls in enumerate(("cat", "dog")):
            for k in range(2):
                p = root / split / cls / f"{cls}{k}.jpg"
                p.parent.mkdir(parents=True, exist_ok=True)
                rng = np.random.default_rng([s, c, k])
                Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(p, quality=90)
                if split == "train":
                    files.append(p)
    imagefolder.read_folder(root)  # distinct images: read
    src = files[which]
    copy = root / "val" / into / f"{name}.jpg"
    copy.write_bytes(src.read_bytes())  # a copy (another inode), not a link
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(root)
    msg = str(err.value)
    assert "\n" not in msg and copy.name in msg and src.name in msg and "same bytes" in msg, msg


def test_an_in_place_edit_of_a_cached_tree_with_its_mtime_set_back_is_one_line(tmp_path, monkeypatch):
    from bench.data import imagefolder, images

    monkeypatch.chdir(tmp_path)
    for env in ("KIT_DATA_DIR", "KIT_DEFAULT_DATA_DIR", "KIT_RUNTIME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "_MEMO", {})
    monkeypatch.setattr(images, "HEADER_STAMP_MIN_FILES", 1)  # every tree counts as large: its passed check is remembered
    kw = {"n_train_per_class": 3, "n_val_per_class": 2}
    ix = images.synthetic_cached(imagefolder.FAMILY, kw)
    assert list((tmp_path / "cache").rglob("*.ok")), "a passed check was remembered"
    victim = ix.root / ix.train_files[0]
    st_ = victim.stat()
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(victim, "r+b") as fh:  # in place: same inode, same size
        fh.write(bytes(data))
    os.utime(victim, ns=(st_.st_atime_ns, st_.st_mtime_ns))  # and its mtime set back
    assert victim.stat().st_mtime_ns == st_.st_mtime_ns and victim.stat().st_ino == st_.st_ino
    with pytest.raises(KitError) as err:
        images.synthetic_cached(imagefolder.FAMILY, kw)
    assert victim.name in str(err.value) and "changed since the kit wrote" in str(err.value)


def test_history_add_onto_a_full_disk_is_one_line_naming_the_cause_and_adds_nothing(run, tmp_path):
    """The issue: 'cannot rollback - no transaction is active' hid the cause. A file-size limit
    at the store's size makes every write of the second add fail, as a full disk does."""
    store = tmp_path / "hist"
    assert orch("history", "add", str(run), "--store", str(store)).returncode == 0
    again = shutil.copytree(run, tmp_path / "rerun")  # the same cells run again: other run ids, other rows
    for rows in again.glob("mnist-cnn/*/rows.jsonl"):
        lines = [json.loads(x) for x in rows.read_text().splitlines()]
        rows.write_text("".join(json.dumps({**x, "run_id": x["run_id"] + "-again"}) + "\n" for x in lines))
    db = store / "history.sqlite"
    before = db.read_bytes()
    r = orch("history", "add", str(again), "--store", str(store), limit_fsize=db.stat().st_size)
    lines = said(r)
    assert r.returncode == 1 and len(lines) == 1 and str(db) in lines[0] and "nothing was added" in lines[0], r.stderr
    assert "cannot rollback" not in lines[0] and "no transaction" not in lines[0], lines[0]
    assert db.read_bytes() == before


def test_export_ships_the_report_manifest_and_replaces_only_a_bundle_outside_its_inputs(run, tmp_path):
    """What export needs of host/outdir.py: the report's manifest in the bundle; an --out in an
    input is one line; an existing --out that is not a bundle is one line and kept; a bundle is
    replaced; a write that fails names the bundle and the cause."""
    out = tmp_path / "b.tar.gz"
    r = orch("export", str(run), "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    with tarfile.open(out) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("run/report/.cnn-bench-report.json").read())  # type: ignore[union-attr]
    assert "run/report/.cnn-bench-report.json" in names and manifest["command"] == "report"
    assert all(f"run/report/{f}" in names for f in manifest["files"]), "it names the bundled report's files"
    r = orch("export", str(run), "--out", str(out))  # a bundle: replaced
    assert r.returncode == 0, r.stderr[-2000:]
    inside = run / "mnist-cnn" / "b.tar.gz"
    r = orch("export", str(run), "--out", str(inside))
    assert r.returncode == 2 and len(said(r)) == 1 and "inside" in said(r)[0] and not inside.exists(), r.stderr
    notes = tmp_path / "notes.tar.gz"
    for body in (b"my notes\n", b""):
        notes.write_bytes(body)
        r = orch("export", str(run), "--out", str(notes))
        assert r.returncode == 2 and len(said(r)) == 1 and "not a bundle the kit wrote" in said(r)[0], r.stderr
        assert notes.read_bytes() == body
    with contextlib.suppress(FileNotFoundError):
        out.unlink()
    r = orch("export", str(run), "--out", str(out), limit_fsize=200 << 10)  # the report's files fit, the bundle does not
    lines = said(r)
    assert r.returncode == 1 and len(lines) == 1 and f"cannot write {out} (File too large)" in lines[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == [] and not out.exists()
