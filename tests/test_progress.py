"""What the long commands say while they work: host.progress's stages (plain lines on a log, a
rich line on a terminal that leaves the output as it was), the debootstrap log followed as the
base's progress, and scripts/pip_progress.py over a real pip install (wheels built here)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from host.progress import follow_log, stages

ROOT = Path(__file__).resolve().parents[1]


def test_plain_stages_are_one_line_each_and_counted_ones_each_tenth(capsys) -> None:
    with stages("report", mode="plain") as say:
        say("reading 2 result dirs")
        say("reading 2 result dirs")  # the same stage again: no second line
        for i in range(1, 101):
            say("compressing", i, 100)
        say("done")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("report: reading 2 result dirs (") and err[-1].startswith("report: done (")
    counted = [line for line in err if line.startswith("report: compressing")]
    assert len(counted) == 11 and counted[0].startswith("report: compressing 1/100") and "100/100" in counted[-1]


def test_rich_stages_leave_nothing_on_stdout_and_off_says_nothing(capsys) -> None:
    with stages("export", mode="rich") as say:
        say("report: mnist-cnn", 1, 5)
        print("bundle: x")
    with stages("export", mode="off") as say:
        say("anything")
    out = capsys.readouterr()
    assert out.out == "bundle: x\n"


def test_the_base_shows_the_last_line_of_its_log(tmp_path) -> None:
    log = tmp_path / "debootstrap.log"
    seen: list[str] = []
    done = threading.Event()
    watcher = threading.Thread(target=follow_log, args=(str(log), lambda w, *_: seen.append(w), done.is_set, 0.05))
    watcher.start()
    for line in ("I: Retrieving InRelease", "I: Unpacking libc6...", "I: Configuring python3..."):
        with log.open("a") as fh:
            fh.write(line + "\n")
        time.sleep(0.3)
    done.set()
    watcher.join()
    assert "I: Unpacking libc6..." in seen and seen[-1] == "I: Configuring python3..."


def _wheel(tmp: Path, name: str) -> None:
    src = tmp / "src" / name
    (src / name).mkdir(parents=True)
    (src / name / "__init__.py").write_text("X = 1\n")
    (src / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{name}"]\n'
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp / "wheels"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]


def test_pip_progress_counts_a_real_installs_packages_as_they_land(tmp_path) -> None:
    names = ["kitprobe_a", "kitprobe_b", "kitprobe_c"]
    for n in names:
        _wheel(tmp_path, n)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(tmp_path / "wheels")]
    pip += ["--target", str(site), "--progress-bar", "off", "--disable-pip-version-check", *names]
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pip_progress.py"), str(site), "--expect", "3", "--", *pip],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in site.glob("*.dist-info")) == [f"{n}-1.0.dist-info" for n in names]
    err = r.stderr.splitlines()
    assert any(line.startswith("collecting (hash-checked): 3/3 packages") for line in err), r.stderr
    assert any(line.startswith("installing: 3/3 packages") for line in err), r.stderr
    assert "Successfully installed kitprobe_a-1.0 kitprobe_b-1.0 kitprobe_c-1.0" in r.stdout
    assert "Collecting" not in r.stdout  # pip's per-package lines became the count
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "pip_progress.py"), str(site), "--", *pip[:3], "nope"])
    assert bad.returncode != 0  # pip's own exit status comes back
