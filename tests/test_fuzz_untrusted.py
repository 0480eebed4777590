"""Fuzzing the doors (Hypothesis): generated rows, side files (system.json, cell.json,
platforms.json) and job-dir manifests go to `report`, `verify`, `export` and `slurm`, which
must answer with their result or one KitError line: never another exception (a traceback),
never a program started from outside the kit, never a half-written report, never a live
formula or control character in what they write.

Every example edits a copy of committed results (results/reference/cpu-2core-epyc: one
mnist-cnn and one mlp-scratch cell) or of a fresh plan, one file at a time. The commands run in
this process, where an audit hook (sys.addaudithook) sees every program started. The run is
derandomized and bounded (KIT_FUZZ_EXAMPLES scales it: `KIT_FUZZ_EXAMPLES=500 pytest
tests/test_fuzz_untrusted.py` for a longer search).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shlex
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, Phase, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.core.errors import KitError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CPU = ROOT / "results" / "reference" / "cpu-2core-epyc"
TEMPLATE = {"mnist-cnn": "torch-cpu_seed_default-adcc67f3f870", "mlp-scratch": "numpy_float32-643e8eb22c8b"}
SCALE = int(os.environ.get("KIT_FUZZ_EXAMPLES", "0")) or None
PLANTED = "/tmp/planted-by-a-job-dir/python"


def budget(n: int):
    """N examples (KIT_FUZZ_EXAMPLES: that many, random, and a failure shrunk to its smallest)."""
    phases = list(Phase) if SCALE else [Phase.explicit, Phase.reuse, Phase.generate]  # no minutes-long shrinking in CI
    return settings(
        max_examples=SCALE or n,
        deadline=None,
        derandomize=SCALE is None,
        database=None,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


# ---------------------------------------------------------------------------- programs started
STARTED: list[tuple[str, list[str]]] = []
_RECORD = [False]


def _hook(event: str, args: tuple) -> None:
    if not _RECORD[0]:
        return
    if event == "subprocess.Popen":
        exe, argv = args[0], args[1]
        argv = [str(a) for a in (argv if isinstance(argv, (list, tuple)) else [argv])]
        STARTED.append((str(exe or argv[0]), argv))
    elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn"):
        STARTED.append((event, [str(a) for a in args[:2]]))


sys.addaudithook(_hook)


def kits_own(exe: str, argv: list[str]) -> bool:
    """A program the kit itself starts, by a name of its own: this Python (pip freeze for the
    bundle), git (the kit's sha), uname (the standard library's platform.platform(), for the
    bundle's environment.json); and no argument of it from the edited input."""
    named = exe == sys.executable or os.path.basename(exe) in ("git", "uname")
    return named and not any("planted" in a for a in argv)


class recording:
    def __enter__(self):
        STARTED.clear()
        _RECORD[0] = True

    def __exit__(self, *exc):
        _RECORD[0] = False
        foreign = [s for s in STARTED if not kits_own(*s)]
        assert not foreign, f"programs started from outside the kit: {foreign}"


# ---------------------------------------------------------------------------- values
TEXTS = st.sampled_from(
    [
        "",
        '=HYPERLINK("http://x")',
        "+1+2",
        "-3",
        "@SUM(1)",
        "\t=1",
        "\x1b[2J\x1b]0;t\x07",
        "\u202egnp.exe",
        "<script>alert(1)</script>",
        "a|b\n| c |",
        "../../etc/passwd",
        PLANTED,
        "ok",
        "mnist-cnn",
        "native",
        "x" * 300,
    ]
)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 0.0, -0.0, 1e308, -1e308, 1e-320, 10**400, 2**63, -1]),
)
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS, st.text(max_size=12))
JSON = st.recursive(
    LEAVES, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6) | TEXTS, c, max_size=3), max_leaves=6
)


def dumps(v: object) -> str:
    return json.dumps(v, default=str)


@st.composite
def edits(draw, root_keys: dict[str, list[str]]):
    """(file, how, key, value) edits of a result dir: FILE relative to the dir."""
    f = draw(st.sampled_from(sorted(root_keys)))
    how = draw(st.sampled_from(["set", "set", "set", "delete", "whole", "bytes", "cut"]))
    key = draw(st.sampled_from(root_keys[f]) | st.text(max_size=8) | TEXTS)
    value = draw(JSON)
    line = draw(st.integers(min_value=0, max_value=12))
    junk = draw(st.binary(max_size=64))
    return f, how, key, value, line, junk


def _parsed(p: Path, jsonl: bool):
    """P's rows (a non-empty list of objects) or object, or None when an earlier edit left none."""
    try:
        text = p.read_text()
        got = [json.loads(x) for x in text.splitlines()] if jsonl else json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    ok = (got and all(isinstance(r, dict) for r in got)) if jsonl else isinstance(got, dict)
    return got if ok else None


def apply_edit(d: Path, edit) -> None:
    f, how, key, value, line, junk = edit
    p = d / f
    if how == "bytes":
        p.write_bytes(junk)
        return
    if how == "cut":
        p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
        return
    jsonl = f.endswith(".jsonl")
    got = _parsed(p, jsonl)
    if got is None:  # an earlier edit left no JSON to edit: this one writes the value whole
        p.write_text(dumps(value) + "\n")
        return
    if jsonl:
        rows = got
        i = line % len(rows)
        if how == "whole":
            lines = [json.dumps(r) for r in rows]
            lines[i] = dumps(value)
            p.write_text("\n".join(lines) + "\n")
            return
        if how == "set":
            rows[i][key] = value
        else:
            rows[i].pop(key, None)
        p.write_text("".join(dumps(r) + "\n" for r in rows))
        return
    obj = got
    if how == "whole":
        obj = value
    elif how == "set":
        target = obj
        if "." in key and isinstance(obj.get(key.split(".")[0]), dict):
            head, _, key = key.partition(".")
            target = obj[head]
        target[key] = value
    else:
        obj.pop(key, None)
    p.write_text(dumps(obj))


def template(top: Path) -> tuple[Path, dict[str, list[str]]]:
    d = top / "res"
    keys: dict[str, list[str]] = {}
    for study, cell in TEMPLATE.items():
        shutil.copytree(CPU / study / cell, d / study / cell)
        for name in ("rows.jsonl", "system.json", "cell.json"):
            p = d / study / cell / name
            text = p.read_text()
            obj = json.loads(text.splitlines()[0]) if name.endswith(".jsonl") else json.loads(text)
            sub = [f"{k}.{s}" for k, v in obj.items() if isinstance(v, dict) for s in v]
            keys[f"{study}/{cell}/{name}"] = sorted(obj) + sub
    (d / "platforms.json").write_text(json.dumps({"cpu": {"status": "ran", "reason": "", "studies": ["mnist-cnn"]}}))
    keys["platforms.json"] = ["cpu", "cpu.status", "cpu.reason", "cpu.studies", "cuda"]
    return d, keys


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return template(tmp_path_factory.mktemp("fuzz-base"))


def fresh(base_dir: Path) -> tuple[Path, Path]:
    top = Path(tempfile.mkdtemp(prefix="fuzz-"))
    shutil.copytree(base_dir, top / "res")
    return top, top / "res"


# ---------------------------------------------------------------------------- what is written
FORMULA = ("=", "+", "-", "@")
HIDDEN = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066")


def assert_written_safely(out: Path) -> None:
    assert (out / "REPORT.md").is_file() and (out / "REPORT.html").is_file() and (out / "report.json").is_file()
    for name in ("REPORT.md", "REPORT.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert not any(ch in text for ch in HIDDEN), name
    for name in ("tidy.csv", "table1.csv", "table1_summary.csv"):
        if (out / name).is_file():
            with open(out / name, newline="", encoding="utf-8") as fh:
                for row in csv.reader(fh):
                    for v in row:
                        assert not any(ch in v for ch in HIDDEN), (name, v)
                        if v.lstrip().startswith(FORMULA):
                            float(v)  # only a number may start so
    cache = f".{out.name}.figures"  # the figure cache beside --out (host.figures) is kept on purpose
    left = [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.") and p.name != cache]
    assert not left, "a temp dir left beside --out"


# ---------------------------------------------------------------------------- report and verify
@budget(12)
@given(data=st.data())
def test_report_and_verify_answer_every_edit_of_a_result_dir_without_a_traceback(base, data):
    from host.report import build_report
    from host.verify import verify

    base_dir, keys = base
    top, d = fresh(base_dir)
    try:
        for edit in data.draw(st.lists(edits(keys), min_size=1, max_size=3)):
            apply_edit(d, edit)
        with recording():
            try:
                info = build_report([d], top / "report")
            except KitError as err:
                assert "\n" not in str(err)
                assert not (top / "report").exists(), "a failed report left files"
                event("report refused in one line")
            else:
                event(f"report written, {sum(s.get('ok', 0) for s in info['studies'].values())} cell(s) ok")
                assert_written_safely(top / "report")
                assert isinstance(info["studies"], dict)
            try:
                res = verify(d, strict=False)
            except KitError as err:
                assert "\n" not in str(err)
            else:
                assert res["cells"] >= 0 and all(
                    v.status in ("ok", "FAIL", "no baseline", "skipped", "interrupted") for v in res["verdicts"]
                )
    finally:
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------------------- export
def _manifest_entries(text: str) -> dict[str, str]:
    """name -> sha256 of a MANIFEST.sha256, names unescaped as `sha256sum -c` reads them."""
    out = {}
    for line in text.splitlines():
        esc = line.startswith("\\")
        digest, _, name = line[int(esc) :].partition("  ")
        if esc:
            name = name.replace("\\\\", "\0").replace("\\n", "\n").replace("\\r", "\r").replace("\0", "\\")
        out[name] = digest
    return out


@budget(4)
@given(data=st.data())
def test_export_answers_every_edit_with_a_bundle_whose_manifest_checks(base, data):
    from host.export import export

    base_dir, keys = base
    top, d = fresh(base_dir)
    try:
        for edit in data.draw(st.lists(edits(keys), min_size=1, max_size=2)):
            apply_edit(d, edit)
        name = data.draw(st.sampled_from(["notes.txt", "a\nb.txt", "back\\slash.txt", "cr\r.txt", "=x.csv"]))
        (d / "mnist-cnn" / name).write_text("planted\n")
        out = top / "b.tar.gz"
        with recording():
            try:
                export([d], out)
            except KitError as err:
                assert "\n" not in str(err) and not out.exists()
                return
        with tarfile.open(out) as tar:
            members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if m.isfile()}
            listed = _manifest_entries(tar.extractfile(members.pop("MANIFEST.sha256")).read().decode())  # type: ignore[union-attr]
            assert set(listed) == set(members)
            for n, m in members.items():
                assert hashlib.sha256(tar.extractfile(m).read()).hexdigest() == listed[n], n  # type: ignore[union-attr]
    finally:
        shutil.rmtree(top, ignore_errors=True)


# ---------------------------------------------------------------------------- slurm
@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    import subprocess

    top = tmp_path_factory.mktemp("fuzz-plan")
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "orchestrate.py"),
            "plan",
            str(top / "job"),
            "cpu",
            "--study",
            "mnist-cnn",
            "--profile",
            "smoke",
        ],
        capture_output=True,
        text=True,
        cwd=top,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return top / "job"


MANIFEST_KEYS = [
    "kit",
    "format",
    "kit_version",
    "kit_root",
    "environment",
    "environment.python",
    "environment.label",
    "environment.runtime",
    "environment.image",
    "data",
    "data.dir",
    "data.datasets",
    "cells",
    "shapes",
    "request",
    "command",
]
MANIFEST_VALUES = st.one_of(
    JSON,
    st.just(PLANTED),
    st.just("container"),
    st.just({"ref": PLANTED, "id": "sha256:x"}),
    st.just([{"task": "0000", "id": "x"}]),
    st.just("/data\nrm -rf ~"),
)


def _check_scripts(job_dir: Path, written: dict) -> None:
    from host.cluster.jobdir import KIT_ROOT

    for path in written.values():
        text = path.read_text()
        for line in text.splitlines():
            if "planted-by-a-job-dir" in line:  # only as data: the data dir (read-only) or the image's name as a label
                assert "--data-dir" in line or ":/data:ro" in line or line.startswith("export APPTAINERENV_KIT_IMAGE_ID="), line
            if line.startswith("cell=("):
                assert line == f"cell=({shlex.quote(sys.executable)})" or line.startswith("cell=(apptainer exec "), line
                if line.startswith("cell=(apptainer"):
                    assert line.endswith(f" {shlex.quote(str(job_dir.parent / 'image.sif'))} python)"), line
            if line.startswith("export PYTHONPATH="):
                assert line.startswith(f"export PYTHONPATH={shlex.quote(str(KIT_ROOT))}"), line


# edits a plan can hold and still be read: the keys the kit keeps only as a record, where a job
# dir's author would plant a program, and a switch to an image plan
SOFT_EDITS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["environment.python", "kit_root", "command", "kit_git_sha", "created_utc"]), TEXTS),
        st.tuples(st.just("data.dir"), st.sampled_from([PLANTED, "/data", "/shared/datasets"])),
        st.just(("environment.runtime", "container")),
        st.just(("environment.image", {"ref": PLANTED, "id": "sha256:0"})),
    ),
    min_size=1,
    max_size=4,
)


@budget(30)
@given(
    edits=st.lists(st.tuples(st.sampled_from(MANIFEST_KEYS), MANIFEST_VALUES), min_size=1, max_size=3) | SOFT_EDITS,
    whole=st.none() | st.none() | st.none() | JSON | st.binary(max_size=40),
    link=st.sampled_from([None, None, None, "slurm", "slurm/logs", "task-0000", "specs"]),
)
def test_slurm_answers_every_edit_of_a_manifest_without_a_traceback_or_a_foreign_program(plan, edits, whole, link):
    from host.cluster import slurm as S
    from host.cluster.jobdir import load

    top = Path(tempfile.mkdtemp(prefix="fuzz-job-"))
    job = top / "job"
    shutil.copytree(plan, job)
    (top / "image.sif").write_bytes(b"sif")
    try:
        m = json.loads((job / "manifest.json").read_text())
        for key, value in edits:
            head, _, sub = key.partition(".")
            if sub and isinstance(m.get(head), dict):
                m[head][sub] = value
            else:
                m[head] = value
        if whole is not None:
            (job / "manifest.json").write_bytes(whole if isinstance(whole, bytes) else dumps(whole).encode())
        else:
            (job / "manifest.json").write_text(dumps(m))
        if link:
            outside = top / "outside"
            outside.mkdir()
            if (job / link).exists():
                shutil.rmtree(job / link)
            (job / link).parent.mkdir(parents=True, exist_ok=True)
            (job / link).symlink_to(outside, target_is_directory=True)
        with recording():
            try:
                j = load(job)
                container = j.environment.get("runtime") == "container"
                written = S.write_scripts(j, S.Options(sif=top / "image.sif" if container else None))
            except KitError as err:
                assert "\n" not in str(err)
                event("refused in one line")
            else:
                _check_scripts(job, written)
                event("scripts written")
        if link:
            assert list((top / "outside").iterdir()) == [], "written through a planted link"
    finally:
        shutil.rmtree(top, ignore_errors=True)
