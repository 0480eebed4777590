"""The tidy results table (host/tidy.py) and the export bundle (host/export.py).

Fast: built from the committed CPU reference (results/reference/cpu-2core-epyc) and from a
toy-study matrix of a few steps; nothing trains."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import toy_study  # noqa: F401 - registers the toy study in this process (the report reads it)

from bench.core.errors import KitError
from bench.core.resultset import collect
from bench.core.rows import COMMON_KEYS, write_json, write_rows
from bench.studies.mnist_cnn.tidy import TABLE1_AGG, TABLE1_KEYS, table1
from host import export as export_mod
from host.report import build_report
from host.tidy import IDENTITY, tidy_frame

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
REF = ROOT / "results" / "reference" / "cpu-2core-epyc"
TOY_ENV = {
    "KIT_STUDY_MODULES": "toy_study",
    "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")) if p),
}
RANGE = re.compile(r"\d,\d{3}-\d")  # a formatted "34,785-45,293" range


def has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def ref_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "report"
    build_report([REF], out)
    return out


def test_reference_tidy_is_flat_numeric_and_carries_provenance():
    cells, _, problems = collect([REF])
    assert not problems
    df = tidy_frame(cells)
    rows = sum(len(c.rows) for c in cells)
    assert len(df) == rows and list(df.columns[: len(IDENTITY)]) == list(IDENTITY)
    assert df.columns.is_unique and set(COMMON_KEYS) <= set(df.columns)  # every common row key has its column
    # flat: no list or dict anywhere, every column a number, a boolean or a string
    for col in df.columns:
        kind = df[col].dtype.kind
        assert kind in "fiub" or pd.api.types.is_string_dtype(df[col]), (col, df[col].dtype)
        assert not df[col].map(lambda v: isinstance(v, (list, dict, tuple))).any(), col
    for col in ("epoch_s", "samples_per_s", "test_acc_pct", "rss_mean_mb", "total_s", "per_iter_median_ms", "val_acc_pct"):
        assert pd.api.types.is_float_dtype(df[col]), col
    for col in ("epoch", "repeat", "seed", "param_batch_size", "samples", "iteration"):
        assert pd.api.types.is_integer_dtype(df[col]), col
    assert not any(df[c].astype(str).str.contains(RANGE).any() for c in df.columns if pd.api.types.is_string_dtype(df[c]))
    cnn = df[df.study == "mnist-cnn"]
    # the reference: 3 configurations x 10 repeats (rounds added until decided) x 10 epochs
    assert len(cnn) == 300 and set(cnn.epoch) == set(range(1, 11))
    assert (cnn.epochs if "epochs" in cnn else cnn.param_epochs).eq(10).all()
    system = json.loads(next(REF.glob("mnist-cnn/torch-cpu_resident*/system.json")).read_text())
    row = cnn[cnn.backend == "torch-cpu"].iloc[0]
    assert row.host == system["hostname"] and row.device == "AMD EPYC, 2 cores" and row.runtime == "native"
    assert row.torch_version == system["libraries"]["torch"] and row.numba_version == system["libraries"]["numba"]
    assert row.numpy_version == system["libraries"]["numpy"] and pd.isna(row.cupy_version)
    assert row.kit_git_sha == system["kit_git_sha"] and not row.kit_source_dirty and row.image_id == "native"
    assert row.dataset == "mnist" and bool(row.dataset_real) and row.dataset_sha256 == system["dataset"]["sha256"]
    assert row.param_batch_size == 512 and row.param_pipeline in ("seed", "resident") and row.param_lr == 0.01
    assert row.command.startswith("python -m bench cell ")
    # accuracies are percent: the rows' fraction x 100
    first = json.loads((next(REF.glob("mnist-cnn/torch-cpu_resident*/rows.jsonl"))).read_text().splitlines()[0])
    assert cnn[(cnn.backend == "torch-cpu") & (cnn.pipeline == "resident")].test_acc_pct.iloc[0] == 100 * first["test_acc"]
    mlp = df[df.study == "mlp-scratch"]
    assert set(mlp.phase) == {"plain", "op", "memory", "convergence"} and all(
        sorted(g.dropna().tolist()) == [0, 1, 2] for _, g in mlp.groupby("cell").plain_run
    )


def test_report_writes_tidy_and_one_groupby_gives_table1(ref_report):
    table = json.loads((ref_report / "table1.json").read_text())["rows"]
    frames = {"csv": pd.read_csv(ref_report / "tidy.csv")}
    if has_pyarrow():
        frames["parquet"] = pd.read_parquet(ref_report / "tidy.parquet")
    else:
        assert not (ref_report / "tidy.parquet").exists()
        assert "pyarrow is not installed" in (ref_report / "REPORT.md").read_text()
    md = (ref_report / "REPORT.md").read_text()
    assert "## Tidy results (for pandas)" in md and "groupby" in md
    for how, df in frames.items():
        ep = df[(df.study == "mnist-cnn") & (df.status == "ok") & df.epoch.notna()]
        medians = ep.groupby(["host", "device", "backend", "pipeline", "variant", "repeat"]).samples_per_s.median()
        assert len(medians) == len(table) == 30, how  # one per cell: 3 configurations x 10 repeats
        for r in table:  # the report's own Table I numbers, exactly
            assert (
                medians[(r["host"], r["device"], r["backend"], r["pipeline"], r["variant"], r["repeat"])]
                == (r["median_samples_per_s"])
            ), how
        # and every numeric column of Table I from one groupby (bench.studies.mnist_cnn.tidy.table1)
        t1 = table1(df).set_index(TABLE1_KEYS)
        for r in table:
            got = t1.loc[tuple(r[k] for k in TABLE1_KEYS)]
            for col in [*TABLE1_AGG, "max_vram_mb"]:
                assert got[col] == pytest.approx(r[col], rel=1e-12, abs=1e-12), (how, col)


def test_table1_csv_is_numeric(ref_report):
    text = (ref_report / "table1.csv").read_text()
    assert not RANGE.search(text)
    df = pd.read_csv(ref_report / "table1.csv")
    for col in ("avg_epoch_s", "median_samples_per_s", "min_samples_per_s", "max_samples_per_s", "max_vram_mb", "epochs"):
        assert pd.api.types.is_numeric_dtype(df[col]), col
    assert (df.min_samples_per_s <= df.median_samples_per_s).all() and (df.median_samples_per_s <= df.max_samples_per_s).all()
    md = (ref_report / "REPORT.md").read_text()
    assert re.search(r"\| \d{1,3}(,\d{3})*-\d{1,3}(,\d{3})* \|", md)  # the markdown still shows min-max


@pytest.mark.skipif(not has_pyarrow(), reason="pyarrow not installed (it is not in the requirements locks yet)")
def test_parquet_round_trip_keeps_types(ref_report):
    df = pd.read_parquet(ref_report / "tidy.parquet")
    csv_df = pd.read_csv(ref_report / "tidy.csv")
    assert df.shape == csv_df.shape and list(df.columns) == list(csv_df.columns)
    assert pd.api.types.is_integer_dtype(df.epoch) and pd.api.types.is_bool_dtype(df.dataset_real)
    assert pd.api.types.is_string_dtype(df.image_ref)  # all missing, still a string column


def toy_results(out: Path, steps: int = 2) -> Path:
    r = subprocess.run(
        [sys.executable, "-m", "bench", "matrix", "toy", "--set", f"steps={steps}", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **TOY_ENV},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return out


def test_toy_study_and_a_failed_cell_in_the_tidy_table(tmp_path):
    toy_results(tmp_path / "host-a")
    bad = tmp_path / "host-a" / "toy" / "py-broken"
    write_rows(bad, [{"study": "toy", "backend": "py", "status": "error", "reason": "toy failure in step 1", "cell": bad.name}])
    write_json(bad / "system.json", {"hostname": "host-a", "libraries": {"cupy-cuda12x": "13.0.0"}})
    cells, _, _ = collect([tmp_path / "host-a"])
    df = tidy_frame(cells)
    ok = df[df.status == "ok"]
    repeats = sorted(set(ok.repeat))  # one cell per repeat: one tidy row per cell x repeat x step
    assert repeats and len(ok) == 2 * len(repeats) and pd.api.types.is_integer_dtype(df.square)
    assert all(g.step.tolist() == [0, 1] and g.square.tolist() == [0, 1] for _, g in ok.groupby("repeat"))
    assert (ok.param_steps == 2).all() and ok.host.notna().all() and ok.python_version.notna().all()
    err = df[df.status == "error"].iloc[0]
    assert err.reason == "toy failure in step 1" and err.cupy_version == "13.0.0" and pd.isna(err.step)


def verify_bundle(path: Path) -> dict[str, bytes]:
    """Every member of the bundle by its path under the top folder; the MANIFEST checked."""
    with tarfile.open(path, "r:gz") as tar:
        names = tar.getnames()
        top = {n.split("/", 1)[0] for n in names}
        assert len(top) == 1, top
        files = {}
        for m in tar.getmembers():
            assert m.isfile() and m.uid == 0 and not m.uname
            fh = tar.extractfile(m)
            assert fh is not None
            files[m.name.split("/", 1)[1]] = fh.read()
    manifest = dict(reversed(line.split("  ", 1)) for line in files["MANIFEST.sha256"].decode().splitlines())
    assert set(manifest) == set(files) - {"MANIFEST.sha256"}
    for name, digest in manifest.items():
        assert hashlib.sha256(files[name]).hexdigest() == digest, name
    return files


@pytest.mark.slow
def test_export_bundle_holds_everything_with_a_true_manifest(tmp_path):
    toy = toy_results(tmp_path / "toy-host")
    out = tmp_path / "share" / "bundle.tar.gz"
    out.parent.mkdir()
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "export", str(REF), str(toy), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **TOY_ENV},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "bundle:" in r.stdout and os.listdir(out.parent) == ["bundle.tar.gz"]  # no temp file left
    with tarfile.open(out) as tar:
        assert {n.split("/", 1)[0] for n in tar.getnames()} == {"bundle"}
    files = verify_bundle(out)
    for src in sorted(REF.rglob("*")):  # every result file of the reference, byte for byte
        rel = src.relative_to(REF)
        if src.is_file() and rel.parts[0] != "report" and not rel.parts[0].endswith(".figures"):  # a report's figure cache
            assert files[f"results/cpu-2core-epyc/{rel.as_posix()}"] == src.read_bytes(), rel
    assert not any(n.startswith("results/cpu-2core-epyc/report/") for n in files)  # its old report: rendered afresh
    assert any(n.startswith("results/toy-host/toy/") and n.endswith("/rows.jsonl") for n in files)
    for name in ("REPORT.md", "table1.csv", "tidy.csv", "epoch_time.png", "mlp_convergence.png"):
        assert f"report/{name}" in files, name
    assert ("report/tidy.parquet" in files) == has_pyarrow()
    tidy = pd.read_csv(io.BytesIO(files["report/tidy.csv"]))
    assert set(tidy.study) == {"mnist-cnn", "mlp-scratch", "toy"}
    env = json.loads(files["environment/environment.json"])
    assert env["exported_by"]["python"] == sys.version.split()[0] and env["exported_by"]["host"]
    lock = ROOT / "requirements" / "host.txt"
    assert env["requirements_locks_sha256"]["requirements/host.txt"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert files["environment/requirements/host.txt"] == lock.read_bytes()
    assert b"==" in files["environment/pip-freeze.txt"]
    assert env["recorded_by_the_rows"]["libraries"]["torch"]
    commands = files["COMMANDS.md"].decode()
    assert "orchestrate.py export" in commands and str(out) in commands
    for rows in REF.glob("*/*/rows.jsonl"):
        assert json.loads(rows.read_text().splitlines()[0])["command"] in commands
    assert b"sha256sum -c MANIFEST.sha256" in files["README.md"]


def _export_cli(tmp_path: Path, *dirs: str, out: Path | None = None):
    out = out or tmp_path / "out" / "b.tar.gz"
    out.parent.mkdir(exist_ok=True)
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "export", *dirs, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    return r, out


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: p / "nope", "does not exist"),
        (lambda p: (p / "empty").mkdir() or p / "empty", "no results under"),
        (lambda p: (p / "other").mkdir() or (p / "other" / "notes.txt").write_text("hi") and p / "other", "no results under"),
        (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "is not a directory"),
    ],
    ids=["missing", "empty", "not-results", "a-file"],
)
def test_export_bad_input_is_one_line_and_leaves_no_file(tmp_path, make, message):
    r, out = _export_cli(tmp_path, str(make(tmp_path)))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], r.stderr
    assert os.listdir(out.parent) == []


def test_export_to_a_missing_folder_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "export", str(REF), "--out", str(tmp_path / "no" / "b.tar.gz")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr
    assert os.listdir(tmp_path) == []


def test_export_failing_midway_leaves_no_half_bundle(tmp_path, monkeypatch):
    """An earlier bundle at --out (only a bundle is ever replaced) stays whole when the new one fails:
    one line naming the bundle and the cause."""
    out = tmp_path / "b.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        body = b"an earlier bundle\n"
        ti = tarfile.TarInfo("b/MANIFEST.sha256")
        ti.size = len(body)
        tar.addfile(ti, io.BytesIO(body))
    before = out.read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_mod, "_pip_freeze", boom)
    with pytest.raises(KitError, match=r"cannot write .*b\.tar\.gz \(No space left on device\)"):
        export_mod.export([REF], out, argv=["test"])
    assert sorted(os.listdir(tmp_path)) == ["b.tar.gz"] and out.read_bytes() == before


def test_tidy_csv_from_the_committed_reference_report_matches_its_table1():
    """The committed reference report carries a tidy table that agrees with its own Table I."""
    report = REF / "report"
    if not (report / "tidy.csv").is_file():
        pytest.skip("reference report not re-rendered with the tidy table")
    df = pd.read_csv(report / "tidy.csv")
    with open(report / "table1.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    t1 = table1(df).set_index(TABLE1_KEYS)
    for r in table:
        got = t1.loc[(r["host"], r["device"], r["backend"], r["pipeline"], r["variant"], int(r["repeat"]))]
        assert got.median_samples_per_s == pytest.approx(float(r["median_samples_per_s"]), rel=1e-12)


def test_a_bundle_of_one_dir_unpacks_to_that_dirs_name_and_says_what_it_does(tmp_path):
    """`export results/<host> --out results.tar.gz` unpacks to `<host>/` (its result files under
    `<host>/results/`), never `results/results/<host>/`; on a log each stage is a line."""
    import shutil

    mine = tmp_path / "myhost"
    shutil.copytree(REF / "mlp-scratch", mine / "mlp-scratch")
    out = tmp_path / "results.tar.gz"
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "export", str(mine), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "KIT_PROGRESS": "1"},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    files = verify_bundle(out)
    with tarfile.open(out) as tar:
        assert {n.split("/", 1)[0] for n in tar.getnames()} == {"myhost"}
    cells = sorted(p.relative_to(mine).as_posix() for p in mine.rglob("rows.jsonl"))
    assert cells and all(f"results/{c}" in files for c in cells)
    assert "report/REPORT.md" in files and not any(n.startswith("results/myhost/") for n in files)
    assert "orchestrate.py report <bundle>/results --out <bundle>/report" in files["COMMANDS.md"].decode()
    said = [line for line in r.stderr.splitlines() if line.startswith("export: ")]
    assert any(line.startswith("export: report: mlp-scratch: tables and plots") for line in said), r.stderr
    n = len(files) - 1  # every member but the manifest, written last
    assert said[-1].startswith(f"export: compressing files into the bundle {n:,}/{n:,} ("), said


# ---- energy per sample: only from a window the kit's one rule accepts ---------------------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.core.resultset import ResultCell  # noqa: E402
from bench.measure import energy as E  # noqa: E402
from host.tidy import WITHHELD, tidy_records  # noqa: E402

_num = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**6), st.text(max_size=4))


@given(
    per_sample=st.one_of(st.floats(1e-6, 1e3), st.integers(1, 100)),
    key=st.sampled_from(E.PER_SAMPLE_KEYS),
    window=_num,
    gross=_num,
    limit=_num,
    source=st.sampled_from(["", "GPU (NVML energy counter)", "GPU (NVML power samples: 10 Hz)", "CPU (RAPL)"]),
    device=st.sampled_from(["cuda:0", "cpu", "NVIDIA H200", "mps"]),
    derived=st.lists(st.sampled_from(["img_per_j", "gpu0_j_per_img", "gpu1_j_per_img", "gpu3_img_per_j"]), unique=True),
)
def test_a_tidy_row_holds_an_energy_figure_only_where_the_window_rule_gives_one(
    per_sample, key, window, gross, limit, source, device, derived
):
    """Every per-sample figure of the window follows its rule: the profile's per-GPU J / image and
    images per J were exported from 0.11-0.73 s windows whose energy_j_per_sample tidy withheld."""
    row = {"study": "profile", "backend": "torch", "device": device, "status": "ok", key: per_sample}
    row |= {k: 0.25 for k in derived}
    for k, v in (("energy_window_s", window), ("energy_gross_j", gross), ("energy_limit_w", limit), ("energy_source", source)):
        if v is not None:
            row[k] = v
    cell = ResultCell(dir=Path("/nonexistent/profile/c0"), rows=[row], system={"gpu": {"power_limit_w": 700}})
    [rec], _ = tidy_records([cell])
    platform = "cuda" if "cuda" in device or "NVIDIA" in device else "mps" if device == "mps" else "cpu"
    rule = E.row_energy(row, cell.system, 1, platform)
    if rule.j_per_sample is None:
        assert rec[key] is None and rec[WITHHELD] == (rule.why or "no figure"), (rec, rule)
        assert all(rec[k] is None for k in derived), rec
    else:
        assert rec[key] == per_sample and WITHHELD not in rec
        assert all(rec[k] == 0.25 for k in derived), rec
    # a window under a second never gives a figure, whatever else the row says
    if isinstance(window, (int, float)) and not isinstance(window, bool) and 0 <= window < E.MIN_WINDOW_S:
        assert rec[key] is None and rec[WITHHELD]
