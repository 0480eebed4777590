"""scripts/gpu_reference.sh carries a results dir between device calls: the archive comes back in
parts under the device's 16 MiB a file (an 18 MB one of profile cells with traces was lost whole),
joins and resumes whole, and a missing part stops the next call in one line.

The device tools (nvidia-smi) and the kit's commands are stand-ins on PATH here: what is under test
is the script's packing and unpacking, which the real runs on the H200 use as written."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NVIDIA_SMI = """#!/bin/sh
echo "NVIDIA H200, 580.0, 700 W, 1980 MHz"
"""
# `python3 orchestrate.py reference gpu ... --out DEST`: a cell of 20 MB (over one part) on the first
# call, which pauses (75); the second finds it (the resume) and ends (0). `verify`: ok.
PYTHON3 = """#!/bin/bash
if [ "$2" = verify ]; then echo "verify ok"; exit 0; fi
while [ $# -gt 0 ]; do [ "$1" = --out ] && dest=$2; shift; done
mkdir -p "$dest/profile/cell-r0"
if [ -f "$dest/profile/cell-r0/rows.jsonl" ]; then
  echo "found $(wc -c < "$dest/profile/cell-r0/trace.bin") bytes"; echo '{"repeat": 1}' > "$dest/profile/cell-r1.json"; exit 0
fi
echo '{"repeat": 0}' > "$dest/profile/cell-r0/rows.jsonl"
head -c 20000000 /dev/urandom > "$dest/profile/cell-r0/trace.bin"
exit 75
"""


def _tree(tmp: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_reference.sh", repo / "scripts")
    bin_ = tmp / "bin"
    bin_.mkdir()
    for name, text in (("nvidia-smi", NVIDIA_SMI), ("python3", PYTHON3)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(stat.S_IRWXU)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "KIT_GIT_SHA": "0" * 40, "DEST": "results/reference/H200-t"}
    return repo, env


def _call(repo: Path, env: dict[str, str], out: Path) -> subprocess.CompletedProcess:
    out.mkdir()
    return subprocess.run(
        ["bash", "scripts/gpu_reference.sh"], cwd=repo, env={**env, "OUT": str(out)}, capture_output=True, text=True, timeout=120
    )


def _carry(repo: Path, out: Path) -> None:
    carry = repo / ".refcarry"
    shutil.rmtree(carry, ignore_errors=True)
    carry.mkdir()
    for p in out.glob("reference.tar.gz.*"):
        shutil.copy(p, carry)


def test_the_archive_comes_back_in_parts_and_resumes_whole(tmp_path):
    repo, env = _tree(tmp_path)
    first = _call(repo, env, tmp_path / "out1")
    assert first.returncode == 75, first.stdout + first.stderr
    parts = sorted(p.name for p in (tmp_path / "out1").glob("reference.tar.gz.part-*"))
    assert parts == ["reference.tar.gz.part-aa", "reference.tar.gz.part-ab"]
    assert all((tmp_path / "out1" / p).stat().st_size <= 15 * 2**20 for p in parts)
    assert not (tmp_path / "out1" / "reference.tar.gz").exists()
    assert (tmp_path / "out1" / "status").read_text().strip() == "paused"
    shutil.rmtree(repo / "results")  # the next call is a fresh copy of the tree: only .refcarry travels
    _carry(repo, tmp_path / "out1")
    second = _call(repo, env, tmp_path / "out2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed results/reference/H200-t: 1 cells from the last call" in second.stdout
    assert "found 20000000 bytes" in second.stdout  # the cell came through whole
    assert (tmp_path / "out2" / "status").read_text().strip() == "done"


def test_a_missing_part_stops_the_next_call_in_one_line(tmp_path):
    repo, env = _tree(tmp_path)
    assert _call(repo, env, tmp_path / "out1").returncode == 75
    _carry(repo, tmp_path / "out1")
    (repo / ".refcarry" / "reference.tar.gz.part-ab").unlink()
    got = _call(repo, env, tmp_path / "out2")
    assert got.returncode == 1
    assert got.stdout.strip().splitlines() == [
        "error: .refcarry/reference.tar.gz.part-* do not join into the archive .refcarry/reference.tar.gz.sha256 names "
        "(a part missing or half-copied): bring back every part of the last call again"
    ]
    assert (tmp_path / "out2" / "status").read_text().strip() == "failed"


def test_an_earlier_calls_parts_in_out_are_not_joined_to_this_ones(tmp_path):
    """$OUT defaults to results/gpu-out in the tree: a longer archive's third part left there by an
    earlier call must not be joined to this call's two."""
    repo, env = _tree(tmp_path)
    out = tmp_path / "out1"
    out.mkdir()
    (out / "reference.tar.gz.part-ac").write_bytes(b"stale")
    first = subprocess.run(
        ["bash", "scripts/gpu_reference.sh"], cwd=repo, env={**env, "OUT": str(out)}, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 75, first.stdout + first.stderr
    assert sorted(p.name for p in out.glob("reference.tar.gz.part-*")) == ["reference.tar.gz.part-aa", "reference.tar.gz.part-ab"]
    shutil.rmtree(repo / "results")
    _carry(repo, out)
    assert _call(repo, env, tmp_path / "out2").returncode == 0


def test_parts_beside_a_whole_archive_are_refused_in_one_line(tmp_path):
    repo, env = _tree(tmp_path)
    assert _call(repo, env, tmp_path / "out1").returncode == 75
    _carry(repo, tmp_path / "out1")
    (repo / ".refcarry" / "reference.tar.gz").write_bytes(b"an older call's archive")
    got = _call(repo, env, tmp_path / "out2")
    assert got.returncode == 1 and len(got.stdout.strip().splitlines()) == 1
    assert "both parts" in got.stdout and (tmp_path / "out2" / "status").read_text().strip() == "failed"
