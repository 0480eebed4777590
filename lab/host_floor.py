"""Where a GPU training step's time is the host's: the roofline sweep's step time at each batch.

    python -m lab.host_floor RESULT_DIR [RESULT_DIR ...] [--json OUT.json]

For every roofline sweep cell (scenario B, one process, batch doubled from 16) under the dirs: the
step time at each batch (batch / img_per_s, ms). The floor is the median step time of the three
smallest batches, where the device has least to do; a batch whose step stays within 1.3x of the
floor is host-paced: four or more times the images in about the same time means the device idled
for most of the step, and the host (Python, the dispatcher, the launches) set the pace. A kit
figure at such a batch measures the host's speed, and its spread is the host's spread.

Rows are read through bench.core.rows.read_rows_checked (a result dir is untrusted): a file that
cannot be trusted is named on one line and skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.studies.roofline.roofmath import HOST_PACED  # the rule lives with the study's report, which marks such batches
from bench.studies.roofline.roofmath import host_floor as floor_of


def sweep(rows: list[dict]) -> list[tuple[int, float]]:
    """(batch, step ms) of a cell's ok sweep rows, by batch."""
    out = {}
    for r in rows:
        b, ips = r.get("batch_size"), r.get("img_per_s")
        if r.get("phase") == "sweep" and r.get("status") == "ok" and isinstance(b, int) and isinstance(ips, float) and ips > 0:
            out[b] = 1e3 * b / ips
    return sorted(out.items())


def main(argv: list[str] | None = None) -> int:
    from bench.core.rows import read_rows_checked

    ap = argparse.ArgumentParser(prog="python -m lab.host_floor", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    found: dict[str, dict] = {}
    for d in a.dirs:
        if not d.is_dir():
            print(f"host_floor: error: {d}: not a directory", file=sys.stderr)
            return 2
        for f in sorted(d.glob("**/roofline/*_sweep-*/rows.jsonl")):
            rows, problems = read_rows_checked(f)
            if problems:
                print(f"host_floor: skipped {problems[0]}", file=sys.stderr)
                continue
            got = floor_of(sweep(rows))
            if got:
                device = next((r.get("device") for r in rows if r.get("device")), "?")
                found[f"{f.parent.parent.parent.name}/{f.parent.name}"] = {"device": device, **got}
    if not found:
        print("host_floor: error: no roofline sweep cell with 3 or more ok sizes under the dirs", file=sys.stderr)
        return 1
    for name, g in found.items():
        print(f"{name} ({g['device']}): floor {g['floor_ms']:.1f} ms a step, host-paced up to batch {g['host_paced_up_to']}")
        print("  " + "  ".join(f"b{b} {ms:.1f}" + ("*" if b in g["host_paced"] else "") for b, ms in g["points"]))
    print(f"(step ms at each batch; * within {HOST_PACED}x of the floor, the median of the three smallest batches)")
    if a.json:
        a.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
