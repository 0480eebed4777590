"""Where a kernel's time goes, by source line: reads the CSV of ncu's source page (`ncu --page
source --print-source cuda,sass --csv`, kernels compiled with line information:
KIT_NUMBA_LINEINFO=1 for the numba-cuda kernels) and prints, per kernel, the source lines with
the most warp-stall samples (the sampler's picture of where warps spend their cycles) and the
instructions each line executed.

    python -m lab.ncu_source src.csv[.gz] [--top 15] [--json out.json]

The CSV holds one block per profiled launch: a "File Path" line, a "Function Name" line, a header,
then rows; a row whose "Line No" is set sums that source line's machine instructions (the rows
that follow it, with an address, are those instructions). Only the per-line rows are read.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import sys
from pathlib import Path


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    return gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()


def _num(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def kernels(text: str) -> list[dict]:
    """One dict per profiled launch: name, file, and its source lines (line, source, stall
    samples, instructions executed)."""
    out: list[dict] = []
    cur: dict | None = None
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "File Path" and len(row) >= 2:
            cur = {"file": row[1], "name": "", "lines": []}
            out.append(cur)
            header = None
            continue
        if cur is None:
            continue
        if row[0] == "Function Name" and len(row) >= 2:
            cur["name"] = re.sub(r"\[abi:.*", "", row[1]).split("::")[-1]
            continue
        if row[0] == "Line No":
            header = row
            continue
        if header is None or not row[0].strip():
            continue
        cols = dict(zip(header, row, strict=False))  # the first "Source" is the line's text
        cur["lines"].append(
            {
                "line": int(_num(row[0])),
                "source": row[1].strip(),
                "stall_samples": _num(cols.get("Warp Stall Sampling (All Samples)", "0")),
                "instructions": _num(cols.get("Instructions Executed", "0")),
            }
        )
    return out


def summary(k: dict, top: int) -> list[str]:
    lines = k["lines"]
    total_s = sum(x["stall_samples"] for x in lines) or 1.0
    total_i = sum(x["instructions"] for x in lines) or 1.0
    out = [f"{k['name']} ({Path(k['file']).name}): {total_s:,.0f} stall samples, {total_i:,.0f} warp instructions"]
    for x in sorted(lines, key=lambda x: -x["stall_samples"])[:top]:
        out.append(
            f"  {100 * x['stall_samples'] / total_s:5.1f}% samples {100 * x['instructions'] / total_i:5.1f}% instr"
            f"  line {x['line']:4d}  {x['source'][:90]}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", type=Path, default=None, help="write every kernel's per-line figures here")
    a = ap.parse_args(argv)
    try:
        ks = kernels(read_text(a.csv))
    except (OSError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        print(f"ncu_source: cannot read {a.csv}: {exc}", file=sys.stderr)
        return 2
    if not ks:
        print(f"ncu_source: {a.csv} holds no ncu source page (run ncu with --page source --csv)", file=sys.stderr)
        return 2
    for k in ks:
        print("\n".join(summary(k, a.top)))
    if a.json:
        a.json.write_text(json.dumps(ks, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
