"""Pack a results dir into .tgz files a device call can bring back (each under a size limit, few of them).

    python -m lab.pack_results RESULTS_DIR OUT_DIR --name NAME [--max-mb 15] [--max-trace-files 6]

OUT_DIR/NAME-results.tgz holds everything under RESULTS_DIR but the profiler traces (`trace/*.json.gz`);
the traces go into OUT_DIR/NAME-traces-<k>.tgz, each at most MAX_MB, in file order, at most
MAX_TRACE_FILES of them. Every archive's paths start with RESULTS_DIR's own name, so unpacking them
all into one folder (in any order) rebuilds the dir. A trace that fits no archive is named in
OUT_DIR/NAME-left-out.txt (and on stderr): that cell's trace check then fails in `verify`.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path


def is_trace(p: Path) -> bool:
    return p.parent.name == "trace" and p.name.endswith(".json.gz")


def pack(src: Path, out: Path, name: str, max_mb: float, max_trace_files: int) -> list[Path]:
    """The files written under OUT; the traces left out are listed in <name>-left-out.txt."""
    limit = int(max_mb * 1024 * 1024)
    files = sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink())
    traces = [p for p in files if is_trace(p)]
    out.mkdir(parents=True, exist_ok=True)
    written = [out / f"{name}-results.tgz"]
    with tarfile.open(written[0], "w:gz") as tar:
        for p in files:
            if not is_trace(p):
                tar.add(p, arcname=str(Path(src.name) / p.relative_to(src)))
    groups: list[list[Path]] = []
    sizes: list[int] = []
    left: list[Path] = []
    for p in traces:  # first fit: gzip inside gzip barely shrinks, so a file's size is its share
        n = p.stat().st_size
        k = next((i for i, s in enumerate(sizes) if s + n <= limit), None)
        if k is None and len(groups) < max_trace_files and n <= limit:
            groups.append([])
            sizes.append(0)
            k = len(groups) - 1
        if k is None:
            left.append(p)
            continue
        groups[k].append(p)
        sizes[k] += n
    for i, group in enumerate(groups):
        path = out / f"{name}-traces-{i}.tgz"
        with tarfile.open(path, "w:gz") as tar:
            for p in group:
                tar.add(p, arcname=str(Path(src.name) / p.relative_to(src)))
        written.append(path)
    if left:
        note = out / f"{name}-left-out.txt"
        note.write_text("".join(f"{p.relative_to(src)} {p.stat().st_size} bytes\n" for p in left), encoding="utf-8")
        written.append(note)
        print(f"left out {len(left)} trace(s) over the limits: {note}", file=sys.stderr)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--name", required=True)
    ap.add_argument("--max-mb", type=float, default=15.0)
    ap.add_argument("--max-trace-files", type=int, default=6)
    a = ap.parse_args(argv)
    if not a.results.is_dir():
        print(f"error: {a.results} is not a dir", file=sys.stderr)
        return 2
    for p in pack(a.results, a.out, a.name, a.max_mb, a.max_trace_files):
        print(f"{p.name} {p.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
