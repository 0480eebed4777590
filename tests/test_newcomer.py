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
