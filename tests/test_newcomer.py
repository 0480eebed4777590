"""The promise of docs/ARCHITECTURE.md ("How to add a study", "How to add a backend") held for CI:
a copy of the kit with a newcomer's toy study (tests/newcomer/tally/, one package under
bench/studies/) and a newcomer's mnist-cnn backend (tests/newcomer/torch_cpu_cl.py, one file
plus one registry line) passes the whole fast suite, no other file edited. The copy is the
tracked and untracked-but-not-ignored files of this checkout, so it tests the tree as it is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEWCOMER = Path(__file__).resolve().parent / "newcomer"
REGISTRY_LINE = (
    '        "torch-cpu-cl": BackendSpec(_B + "torch_cpu_cl", "cpu", family="torch", pipelines=("resident",),'
    ' about="torch-cpu in channels_last (a newcomer\'s backend)"),\n'
)


def kit_copy(dest: Path) -> Path:
    """The files git knows here (tracked, and untracked but not ignored) copied to DEST."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the copy is made from `git ls-files`")
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def plant(kit: Path) -> None:
    """The newcomer's edits: a study package, a backend file and its one registry line."""
    shutil.copytree(NEWCOMER / "tally", kit / "bench" / "studies" / "tally")
    shutil.copy2(NEWCOMER / "torch_cpu_cl.py", kit / "bench" / "studies" / "mnist_cnn" / "backends" / "torch_cpu_cl.py")
    init = kit / "bench" / "studies" / "mnist_cnn" / "__init__.py"
    text = init.read_text()
    anchor = "    backends = {\n"
    assert text.count(anchor) == 1, "mnist-cnn's backends dict moved: update the registry line's anchor"
    init.write_text(text.replace(anchor, anchor + REGISTRY_LINE))


# the tests generated from the registry and the committed references; KIT_NEWCOMER_SUITE=all runs
# the whole fast suite in the copy instead (about an hour on CI's 2 shared cores)
GENERATED = [
    "tests/test_layering.py",
    "tests/test_backends.py",
    "tests/test_equivalence_golden.py",
    "tests/test_run_summary.py",
    "tests/test_answers.py",
    "tests/test_core.py",
    "tests/test_cli.py",
    "tests/test_worth.py",
]


NEWCOMER_IDS = ("tally", "torch-cpu-cl")


def newcomer_cases(kit: Path, env: dict) -> list[str]:
    """GENERATED's tests in KIT that the newcomer's edits reach: every test that is not
    parametrized (those walk the registry themselves) and every case whose parameters name the
    newcomer's study or backend. The other studies' and backends' cases are the same code on the
    same inputs as in the suite itself, which runs them."""
    co = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-m", "not docker", *GENERATED],
        cwd=kit, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert co.returncode == 0, co.stdout[-3000:] + co.stderr[-2000:]
    ids = [ln.strip() for ln in co.stdout.splitlines() if "::" in ln and not ln.startswith(" ")]
    keep = [i for i in ids if "[" not in i or any(n in i.split("[", 1)[1] for n in NEWCOMER_IDS)]
    assert any("tally" in i for i in keep) and any("torch-cpu-cl" in i for i in keep), ids[:20]
    return keep


@pytest.mark.slow
def test_a_newcomers_study_and_backend_pass_the_generated_tests_untouched(tmp_path):
    kit = kit_copy(tmp_path / "kit")
    plant(kit)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KIT_DATA_DIR", "KIT_TESTS", "KIT_STUDY_MODULES", "PYTHONPATH", "PYTEST_ADDOPTS")
    }
    env["KIT_CACHE_DIR"] = str(tmp_path / "cache")
    listed = subprocess.run([sys.executable, "-m", "bench", "list"], cwd=kit, env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "tally: tally (a newcomer's toy study)" in listed.stdout and "torch-cpu-cl [cpu; torch" in listed.stdout
    files = [] if os.environ.get("KIT_NEWCOMER_SUITE") == "all" else newcomer_cases(kit, env)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rs", "-m", "not docker", *files],
        cwd=kit, env=env, capture_output=True, text=True,
    )  # fmt: skip
    print(f"the planted copy's tests took {time.monotonic() - t0:.0f} s")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    passed = {line.split(" PASSED")[0].split("::")[-1] for line in r.stdout.splitlines() if " PASSED" in line}
    # the newcomer's study and backend were in the generated tests, not left out of them
    for want in (
        "test_the_layering_holds",
        "test_every_registered_backend_keeps_the_contract[tally:loop]",
        "test_every_registered_backend_keeps_the_contract[mnist-cnn:torch-cpu-cl]",
        "test_every_backend_replays_its_studys_golden_curve[mnist-cnn:torch-cpu-cl:mnist_cnn_torch]",
        "test_every_claim_is_well_formed[tally]",
    ):
        assert want in passed, (want, sorted(x for x in passed if "tally" in x or "cl" in x))
    assert "tally has no committed reference" in r.stdout  # its summary tests skip, with the reason
