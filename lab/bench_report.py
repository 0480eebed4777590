"""How long `orchestrate.py report` takes to merge the committed references, and 5x and 10x them.

    python -m lab.bench_report [--scales 1,5,10] [--repeats 3] [--work DIR] [--jobs N] [--json FILE]

A scale of N is N copies of every result dir `orchestrate.py report results/reference/*` merges
(`holding_results`), each copy its own run: copy k > 0 gets `-xk` on its folder's name, its rows'
run ids and its system.json run label, so no copy is read as a second copy of another (one input,
one count) and no two copies' repeats group together. Other files are hard links (or copies).

Each measurement is one fresh process running `host.report.build_report` as `orchestrate.py
report` does, printing its stages (import, read, stats, plots, html; `build_report`'s `timings`),
its wall time and CPU time (cpu: this process and its waited children; cpu_all: that and the CPU
seconds the figure pool's workers report for their drawings, their start-up not counted: the work
a merge needs, where wall time on a busy machine is what the other work leaves it); `cold` has an
empty figure cache, `warm` runs the same merge again
beside it (the figures come from the cache). The runs are interleaved: every repeat runs every
scale once, cold then warm, so load on a shared machine falls on all of them alike. Per scale and
stage: the median over repeats with its interval (bench.core.stats.summarize: the range of the
repeats below 6), and the load average (1 min) read before each run.

--baseline TREE (a checkout of another commit, e.g. `git worktree add --detach /tmp/base main`)
adds a `base` run to every repeat of the scales in --baseline-scales: the same copies merged by
TREE's `build_report` in a fresh process (its total wall and CPU time only: an older build_report
gives no stages, and its cpu_all is its cpu, without any pool workers), interleaved with the
others; the summary gives base/cold per scale, paired by repeat (bench.core.stats.ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("import", "read", "stats", "plots", "html", "total")


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _rewrite_rows(src: Path, dst: Path, tag: str) -> None:
    """SRC's rows with every run_id tagged TAG (a line that is not a JSON object is kept as it is)."""
    out = []
    for line in src.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(row, dict) and isinstance(row.get("run_id"), str):
            row["run_id"] += tag
        out.append(json.dumps(row))
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")


def _rewrite_system(src: Path, dst: Path, tag: str) -> None:
    try:
        obj = json.loads(src.read_text(encoding="utf-8"))
    except ValueError:
        _link(src, dst)
        return
    if isinstance(obj, dict):
        for key in ("run_label", "run_id"):
            if isinstance(obj.get(key), str) and obj[key].strip():
                obj[key] += tag
    dst.write_text(json.dumps(obj, indent=2), encoding="utf-8")


def scaled_copy(dirs: list[Path], k: int, dest: Path) -> list[Path]:
    """Copy K of DIRS under DEST (see the module docstring); copy 0 is the dirs as they are."""
    if k == 0:
        return dirs
    tag = f"-x{k}"
    made = []
    for d in dirs:
        top = dest / f"{d.name}{tag}"
        if not top.exists():
            tmp = dest / f".{d.name}{tag}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            for here, _sub, files in os.walk(d):
                rel = Path(here).relative_to(d)
                (tmp / rel).mkdir(parents=True, exist_ok=True)
                for f in files:
                    s, t = Path(here) / f, tmp / rel / f
                    if s.is_symlink():
                        continue
                    if f in ("rows.jsonl", "rows.partial.jsonl"):
                        _rewrite_rows(s, t, tag)
                    elif f == "system.json":
                        _rewrite_system(s, t, tag)
                    else:
                        _link(s, t)
            tmp.rename(top)
        made.append(top)
    return made


def reference_dirs() -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from bench.core.resultset import holding_results

    refs = sorted(p for p in (ROOT / "results" / "reference").iterdir())
    keep, _ = holding_results(refs)
    return keep


def child(dirs: list[str], out: str, jobs: int | None) -> None:
    """One measured merge, in this fresh process: JSON of its stages on stdout."""
    t0, c0 = time.perf_counter(), time.process_time()
    sys.path.insert(0, str(ROOT))
    from bench.core.resultset import holding_results
    from host.report import build_report

    keep, _ = holding_results([Path(d) for d in dirs])
    t_import = time.perf_counter() - t0
    info = build_report(keep, Path(out), jobs=jobs)
    wall = time.perf_counter() - t0
    kids = os.times()
    cpu = time.process_time() - c0 + kids.children_user + kids.children_system
    print(
        json.dumps(
            {
                "import": t_import,
                **info.get("timings", {}),
                "total": wall,
                "cpu_s": cpu,
                "cpu_all_s": cpu + info.get("figures", {}).get("worker_cpu_s", 0.0),
                "cells": sum(s["cells"] for s in info["studies"].values()),
                "figures": info.get("figures", {}),
            }
        )
    )


BASE_CHILD = """
import json, os, sys, time
t0, c0 = time.perf_counter(), time.process_time()
sys.path.insert(0, os.getcwd())
from pathlib import Path
from bench.core.resultset import holding_results
from host.report import build_report
keep, _ = holding_results([Path(d) for d in sys.argv[2:]])
info = build_report(keep, Path(sys.argv[1]))
kids = os.times()
print(json.dumps({"total": time.perf_counter() - t0,
    "cpu_s": time.process_time() - c0 + kids.children_user + kids.children_system,
    "cells": sum(s["cells"] for s in info["studies"].values())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scales", default="1,5,10")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="where the copies and reports go (default: a temp dir)")
    ap.add_argument("--jobs", type=int, default=None, help="figure processes (default: the usable cores)")
    ap.add_argument("--json", type=Path, default=None, help="write every measurement here")
    ap.add_argument("--baseline", type=Path, default=None, help="a checkout whose build_report is timed beside this one")
    ap.add_argument("--baseline-scales", default=None, help="the scales the baseline runs at (default: --scales)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.out, a.jobs)
        return
    sys.path.insert(0, str(ROOT))
    from bench.core import stats

    work = a.work or Path(tempfile.mkdtemp(prefix="bench-report-"))
    work.mkdir(parents=True, exist_ok=True)
    refs = reference_dirs()
    scales = [int(s) for s in a.scales.split(",")]
    sets = {n: [d for k in range(n) for d in scaled_copy(refs, k, work / "copies")] for n in scales}
    base_scales = [int(s) for s in (a.baseline_scales or a.scales).split(",")] if a.baseline else []
    runs: list[dict] = []
    for rep in range(a.repeats):
        for n in scales:
            out = work / f"report-{n}x-r{rep}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(out.parent / f".{out.name}.figures", ignore_errors=True)
            shutil.rmtree(work / f"base-{n}x-r{rep}", ignore_errors=True)
            for phase in ("cold", "warm", "base") if n in base_scales else ("cold", "warm"):
                load = os.getloadavg()[0]
                cmd = [sys.executable, "-m", "lab.bench_report", "--out", str(out), "--child", *map(str, sets[n])]
                if a.jobs:
                    cmd[3:3] = ["--jobs", str(a.jobs)]
                where = ROOT
                if phase == "base":
                    cmd = [sys.executable, "-c", BASE_CHILD, str(work / f"base-{n}x-r{rep}"), *map(str, sets[n])]
                    where = a.baseline
                res = subprocess.run(cmd, cwd=where, capture_output=True, text=True, check=False)
                if res.returncode:
                    sys.exit(f"{n}x {phase}: exit {res.returncode}: {res.stderr.strip().splitlines()[-1:]}")
                m = {"scale": n, "repeat": rep, "phase": phase, "load_1min": load, **json.loads(res.stdout.splitlines()[-1])}
                m.setdefault("cpu_all_s", m["cpu_s"])  # a baseline's build_report reports no pool workers
                runs.append(m)
                print(
                    f"{n:>3}x r{rep} {phase:<4} load {load:4.1f}  "
                    + "  ".join(f"{s} {m.get(s, 0):6.2f}" for s in STAGES)
                    + f"  cpu {m['cpu_s']:6.1f}  cpu_all {m['cpu_all_s']:6.1f}  cells {m['cells']}",
                    flush=True,
                )
    print(f"\nmedian over {a.repeats} interleaved repeats, seconds [{stats.INTERVAL_TEXT}]; {os.cpu_count()} CPUs")
    for n in scales:
        for phase in ("cold", "warm", "base") if n in base_scales else ("cold", "warm"):
            ms = [m for m in runs if m["scale"] == n and m["phase"] == phase]
            cells = ms[0]["cells"]
            parts = []
            for s in (*STAGES, "cpu_s", "cpu_all_s"):
                sm = stats.summarize([m.get(s, 0.0) for m in ms])
                parts.append(f"{s} {sm.median:.2f}{sm.bracket('{:.2f}')}")
            loads = [m["load_1min"] for m in ms]
            print(f"{n:>3}x ({cells} cells) {phase}: " + "; ".join(parts) + f"; load {min(loads):.1f}-{max(loads):.1f}")
    for n in base_scales:
        tot = {
            p: {m["repeat"]: m["total"] for m in runs if m["scale"] == n and m["phase"] == p} for p in ("base", "cold", "warm")
        }
        for p in ("cold", "warm"):
            r = stats.ratio(tot["base"], tot[p])
            print(f"{n:>3}x base/{p}: {r.median:.2f}x{r.bracket('{:.2f}')} (wall, paired by repeat)")
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
