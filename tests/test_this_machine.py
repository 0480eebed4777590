"""'This machine' in the main job's report and in `orchestrate.py worth` (issue 53, item 2): where a
report has context dirs (the committed references), the hosts of its own cells are named "this
machine (<label>)" in the headline, the worth table and the answers' texts, its rows come first and
the headline opens with what it answers itself and why not the rest; a context host of the same
class is not this machine (the cells decide, not the host key); without context no host is. `worth
--this DIR` lists this machine's answers first, labelled, or one line saying why it forms none.

Built from copies of the committed references' mnist-cnn cells, their system.json rewritten to make
the machines: "vm" (this machine: the 2-core EPYC reference's CPU cells and the seed setups' Numba
CPU cells, all on one 2-core AMD EPYC), "ref" (the H100 host's GPU cells and its own CPU's) and
"twin" (more of the 2-core EPYC's cells: the same machine class as vm, another run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from references import REF

from bench.core.answers import host_of
from bench.core.resultset import collect
from bench.core.text import md
from host import worth as HW
from host.report import build_report

ROOT = Path(__file__).resolve().parent.parent
EPYC = REF / "cpu-2core-epyc" / "mnist-cnn"
H100 = REF / "H100-80GB-HBM3" / "mnist-cnn"
SETUPS = REF / "H100-80GB-HBM3-seed-setups" / "mnist-cnn"
THIS = "this machine (2-core AMD EPYC)"
CUDA_OVER_CPU = "| H100 80GB HBM3 host (16-core Intel Xeon) / this machine (2-core AMD EPYC) |"
HOSTILE = "Evil <b>x</b> | [l](http://e) `c` \x1b[2J\u202e"


def _copy(src: Path, prefix: str, dest: Path, run: str, repeats: int = 3, cpu: str | None = None, synthetic: bool = False):
    """The first REPEATS cells of SRC whose name starts with PREFIX, copied into DEST/mnist-cnn as
    run RUN; CPU: their host made a CPU alone with that model and 2 cores; SYNTHETIC: their rows
    made the embedded digits (the default data of a run without MNIST)."""
    got = 0
    for d in sorted(src.iterdir()):
        if not d.name.startswith(prefix):
            continue
        cell = json.loads((d / "cell.json").read_text())
        if cell.get("repeat", 0) >= repeats:
            continue
        out = dest / "mnist-cnn" / d.name
        shutil.copytree(d, out)
        s = json.loads((out / "system.json").read_text())
        s["run_label"] = run
        if cpu is not None:
            # one machine, recorded (same host needs a recorded machine or boot: issue 55 item 10)
            s.update(cpu_model=cpu, cpu_logical_cores=2, cpu_affinity=2, gpu=None, gpu_count=None, machine_id="0e9c0e9c0e9c")
        (out / "system.json").write_text(json.dumps(s))
        if synthetic:
            rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
            for r in rows:
                r.update(dataset="digits-embedded", dataset_real=False, dataset_real_mnist=False)
            (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            cell["params"]["dataset"] = "digits"
            (out / "cell.json").write_text(json.dumps(cell))
        got += 1
    assert got == repeats, (src, prefix)
    return dest


def _vm(dest: Path, cpu: str = "AMD EPYC", synthetic: bool = False) -> Path:
    """This machine: torch-cpu (seed and resident pipelines) and numba-cpu seed on one 2-core CPU."""
    _copy(EPYC, "torch-cpu_seed_default-", dest, "vm", cpu=cpu, synthetic=synthetic)
    _copy(EPYC, "torch-cpu_resident_default-", dest, "vm", cpu=cpu, synthetic=synthetic)
    if not synthetic:
        _copy(SETUPS, "numba-cpu_resident_seed-", dest, "vm", cpu=cpu)
    return dest


def _ref(dest: Path) -> Path:
    """A reference: the H100 host's torch-cuda (seed and resident) and its own CPU's torch-cpu resident."""
    _copy(H100, "torch-cuda_seed_default-", dest, "ref")
    _copy(H100, "torch-cuda_resident_default-", dest, "ref")
    return _copy(H100, "torch-cpu_resident_default-", dest, "ref")


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    root = tmp_path_factory.mktemp("machines")
    twin = _copy(EPYC, "numba-cpu_resident_default-", root / "twin", "twin", cpu="AMD EPYC")
    return {"vm": _vm(root / "vm"), "ref": _ref(root / "ref"), "twin": twin, "root": root}


def _report(out: Path, dirs: list[Path], context: list[Path] | None = None) -> tuple[str, dict]:
    build_report(dirs, out, context, jobs=1, figure_cache=None)
    return (out / "REPORT.md").read_text(), json.loads((out / "report.json").read_text())


def _headline_rows(text: str) -> list[str]:
    head = text.split("## Headline", 1)[1].split("\n### ", 1)[0]
    return [x for x in head.splitlines() if x.startswith("| ") and not x.startswith("| #")]


@pytest.fixture(scope="module")
def with_context(machines):
    return _report(machines["root"] / "rep", [machines["vm"]], [machines["ref"], machines["twin"]])


def test_a_report_with_context_names_its_own_host_this_machine_and_puts_its_rows_first(with_context):
    text, got = with_context
    rows = _headline_rows(text)
    assert rows, text[:3000]
    # every row holds this machine; its same-host answer (Numba over PyTorch on its CPU, declared
    # after the GPU-over-CPU claims) comes first, then this machine against the H100 reference
    assert "CPU: Numba over PyTorch" in rows[0] and rows[0].endswith(f"| {THIS} |"), rows
    assert all(r.endswith(CUDA_OVER_CPU) for r in rows[1:]) and len(rows) >= 3, rows
    # the headline opens with which machine this is and how many headline comparisons it answers
    head = text.split("## Headline: how much faster, and does the seed's claim hold?\n\n", 1)[1].splitlines()
    assert head[0].startswith("**This machine** is 2-core AMD EPYC (") and f"It answers {len(rows)} of " in head[0]
    reasons = [x for x in head[1:4] if x.startswith("- ")]
    assert 1 <= len(reasons) <= 3 and any("need a GPU beside this CPU: none here" in x for x in reasons), head[:5]
    total = int(head[0].split(" of ")[1].split()[0])
    counted = sum(int(part.split()[0]) for x in reasons for part in x[2:].split("; ") if part.split()[0].isdigit())
    assert counted == total - len(rows), head[:5]  # every headline comparison it does not answer, counted once
    # the answers' texts name it too, and the worth table, this machine's rows first
    assert f"what differs: host: H100 80GB HBM3 host (16-core Intel Xeon) / {THIS}" in text
    worth = text.split("### Is the GPU worth it? Time, energy and cost", 1)[1].split("\n### ", 1)[0]
    assert f"| NVIDIA H100 80GB HBM3 / {THIS} |" in worth
    # report.json says which answers and sides are this machine's
    assert all(c["this_machine"] for c in got["claims"] if c["findings"])
    assert all(w["this_machine"] for w in got["worth"]) and got["worth"]
    sides = [s for c in got["claims"] for f in c["findings"] for s in f["sides"]]
    assert {s["run"] for s in sides if s["this_machine"]} == {"vm"} and any(not s["this_machine"] for s in sides)


def test_a_context_host_of_the_same_class_is_not_this_machine(with_context):
    """The twin is a 2-core AMD EPYC as this machine is (one host key): its side keeps its plain
    label beside this machine's, in the seed's claims table and in report.json."""
    text, got = with_context
    (c,) = [c for c in got["claims"] if c["id"] == "kit-cpu-numba-vs-torch" and c["findings"]]
    runs = {s["run"]: s["this_machine"] for f in c["findings"] for s in f["sides"]}
    assert runs == {"twin": False, "vm": True}
    assert f"| 2-core AMD EPYC / {THIS} |" in text
    assert "this machine (2-core AMD EPYC) / this machine" not in text


def test_without_context_no_host_is_this_machine(machines):
    text, got = _report(machines["root"] / "plain", [machines["vm"], machines["ref"], machines["twin"]])
    assert _headline_rows(text)  # the same answers (and the references' own) are there
    assert "this machine" not in text.lower()
    assert not any(c["this_machine"] for c in got["claims"]) and not any(w["this_machine"] for w in got["worth"])


def _worth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "orchestrate.py", "worth", *args, "--study", "mnist-cnn"], capture_output=True, text=True, cwd=ROOT
    )


def _blocks(out: str) -> list[str]:
    """The worth command's comparisons, one text block each (a header line and its indented lines)."""
    blocks: list[str] = []
    for line in out.splitlines():
        if line.startswith("  ") and blocks:
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    return blocks


def test_worth_lists_this_machines_answers_first_and_labels_them(machines):
    vm, ref, twin = (str(machines[k]) for k in ("vm", "ref", "twin"))
    r = _worth(ref, vm, twin, "--this", vm)
    assert r.returncode == 0, r.stderr
    blocks = _blocks(r.stdout)
    mine = [b for b in blocks if THIS in b]
    assert mine and blocks[: len(mine)] == mine, r.stdout  # this machine's first
    assert all(f"CPU {THIS}:" in b for b in mine)
    others = blocks[len(mine) :]
    assert others and all("16-core Intel Xeon" in b and "this machine" not in b for b in others), r.stdout
    r = _worth(ref, vm, twin, "--this", vm, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    flags = [g["this_machine"] for g in got]
    assert flags == sorted(flags, reverse=True) and True in flags and False in flags
    assert all(g["cpu"]["this_machine"] and not g["gpu"]["this_machine"] for g in got if g["this_machine"])
    # without --this and no dir outside the references' folder to default to: every dir is equal
    r = _worth(ref, vm, twin)
    assert r.returncode == 0 and "this machine" not in r.stdout, r.stdout


def test_worth_with_no_answer_of_this_machine_says_why_in_one_line(tmp_path, machines):
    """A run on the embedded digits pairs with no reference on real MNIST: one line says so and
    what to fetch, then the reference's own answers."""
    vm = _vm(tmp_path / "digits", synthetic=True)
    r = _worth(str(vm), str(machines["ref"]), "--this", str(vm))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{THIS} forms no GPU-over-CPU answer: of ")
    assert "need the real mnist data" in lines[0] and "orchestrate.py data fetch mnist" in lines[0]
    assert lines[1].startswith("mnist-cnn: ") and "this machine" not in "\n".join(lines[1:])
    r = _worth(str(vm), str(machines["ref"]), "--this", str(vm), "--json")
    assert r.returncode == 0 and "forms no GPU-over-CPU answer" in r.stderr
    assert not any(g["this_machine"] for g in json.loads(r.stdout))  # stdout stays JSON


def test_this_dirs_defaults_to_the_one_dir_outside_the_references(tmp_path):
    refs = tmp_path / "results" / "reference"
    a, b, c = tmp_path / "results" / "vm", refs / "H100", refs / "cpu"
    assert HW.this_dirs([b, a, c], None, refs) == ([a], [b, c])
    assert HW.this_dirs([b, c], None, refs) == ([], [b, c])
    assert HW.this_dirs([a, tmp_path / "other", b], None, refs) == ([], [a, tmp_path / "other", b])
    assert HW.this_dirs([a, b], [b], refs) == ([b], [a])


def test_a_hostile_host_name_is_escaped_wherever_this_machine_is_named(tmp_path, machines):
    vm = _vm(tmp_path / "evil", cpu=HOSTILE)
    cells, _, _ = collect([vm])
    label = host_of(cells[0]).label
    assert "\x1b" in label  # the name reaches the label as it is: the sinks escape it
    text, _ = _report(tmp_path / "rep", [vm], [machines["ref"]])
    assert "\x1b" not in text and "\u202e" not in text and "<b>" not in text and "[l](http" not in text
    assert f"**This machine** is {md(label)} (" in text
    assert f"/ this machine ({md(label)}) |" in text  # the headline's and the worth table's rows
    html = (tmp_path / "rep" / "REPORT.html").read_text()
    assert "<b>x</b>" not in html and 'href="http://e"' not in html
    r = _worth(str(vm), str(machines["ref"]), "--this", str(vm))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout and "this machine (2-core Evil <b>x</b>" in r.stdout
    assert "\\x1b[2J\\u202e)" in r.stdout
