"""lab/peer_check.py for real, tiny (resnet18 at 32 px, batch 4, 2 steps, CPU): both sides measured,
each in a process of its own, the ratio and the JSON written. No mocks; no wall-clock bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def peer_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.peer_check", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_tiny_runs_both_sides_in_their_own_processes(tmp_path: Path) -> None:
    r = peer_check("--tiny", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "peer_check.json").read_text())
    assert doc["status"] == "ok"
    opts = doc["meta"]["options"]
    assert (opts["models"], opts["batches"], opts["precisions"], opts["image_size"], opts["device"]) == (
        ["resnet18"], [4], ["fp32"], 32, "cpu"
    )  # fmt: skip
    (cfg,) = doc["configs"]
    assert (cfg["model"], cfg["batch"], cfg["precision"], cfg["image_size"], cfg["steps"]) == ("resnet18", 4, "fp32", 32, 2)
    kit, peer = cfg["kit"]["0"], cfg["peer"]["0"]
    assert kit["img_per_s"] > 0 and peer["img_per_s"] > 0 and cfg["ratio"] > 0
    assert cfg["ratio"] == pytest.approx(kit["img_per_s"] / peer["img_per_s"])
    # the kit's cell trained what was asked, at the tree's 32 px
    assert (kit["steps"], kit["images"], kit["image_size"], kit["num_classes"]) == (2, 8, 32, 10)
    assert Path(kit["cell_dir"], "rows.jsonl").is_file()
    # each side a process of its own: the kit's cell and the peer (which reports its own pid), neither this one
    assert peer["pid"] == peer["process_pid"]
    assert len({kit["pid"], peer["pid"], os.getpid()}) == 3
    assert peer["timm"] and peer["optimizer"].startswith("SGD(nesterov=True")
    assert "resnet18 b4 fp32" in r.stdout and "kit/peer" in r.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--device", "cpu", "--precisions", "bf16-cl"], "precision 'bf16-cl' does not run on cpu"),
        (["--device", "cpu", "--models", "vgg11"], "unknown model 'vgg11'"),
        (["--device", "cpu", "--steps", "0"], "--steps must be >= 1"),
        (["--batches", "x"], "invalid int value"),
        (["--device", "cpu", "--peer", "kit-graph"], "it needs --device cuda"),
    ],
)
def test_bad_input_is_one_line(args: list[str], said: str, tmp_path: Path) -> None:
    r = peer_check(*args, "--out", str(tmp_path))
    assert r.returncode == 2
    assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "peer_check.json").exists()


@pytest.mark.slow
def test_tiny_against_the_bare_loop(tmp_path: Path) -> None:
    """--peer bare: the kit's own loop without the kit, in a process of its own that imports no bench."""
    r = peer_check("--tiny", "--peer", "bare", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "peer_check.json").read_text())
    assert doc["status"] == "ok" and doc["meta"]["options"]["peer"] == "bare"
    assert doc["meta"]["peer_source"].startswith("bare:")
    (cfg,) = doc["configs"]
    kit, bare = cfg["kit"]["0"], cfg["peer"]["0"]
    assert cfg["peer_kind"] == "bare" and bare["optimizer"] == "SGD(lr=0.01, momentum=0.9)" and "timm" not in bare
    assert bare["kit_imported"] is False
    assert bare["img_per_s"] > 0 and bare["train_loss"] > 0 and bare["pid"] == bare["process_pid"] != kit["pid"]
    assert cfg["ratio"] == pytest.approx(kit["img_per_s"] / bare["img_per_s"])
    assert "peer: bare" in r.stdout
