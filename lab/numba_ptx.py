"""The numba-cuda dense kernels' PTX, counted without a GPU: how many instructions each kernel
compiles to, and what the tile GEMM's inner loop spends per multiply-add.

    python -m lab.numba_ptx [--cc 9.0] [--out FILE]

numba-cuda compiles PTX with NVVM alone (`cuda.compile_ptx`), but it asks the current device for
its compute capability while compiling a device function; with no driver that query is answered
here with --cc (nothing is run). For variant 6's kernels (k3_fc1, k3_dense_bwd, k3_head, from
v3_split) and variant 7's (k7_fc1, k7_dense_bwd, v7_unsigned): the PTX instruction count and
the opcodes used most; for the tile GEMM's inner loop in k3_fc1 and k7_fc1 (the basic block that
holds its fma instructions, up to the branch back): instructions, FMAs, shared loads, and
instructions per FMA. PTX is not SASS (ptxas still schedules and allocates registers), and counts
are static, not executed: these say what the source asks for, a GPU run says what it costs.
Prints a table; writes the numbers to --out as JSON. Bad arguments: one line, exit 2.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import types
from pathlib import Path

A2 = "float32[:, ::1]"
SIGS = {  # kernel -> the signature the trainer launches it with (python ints are int64)
    "fc1": f"void(int64, {A2}, {A2}, int64, {A2})",
    "dense_bwd": f"void(int64, {A2}, {A2}, {A2}, int64)",
    "head": f"void(int64, int64[::1], {A2}, {A2}, {A2}, int64[::1], float32[::1], int64, {A2})",
}


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def instructions(ptx: str) -> list[str]:
    """The instruction lines of PTX text (no directives, labels, braces or comments)."""
    out = []
    for line in ptx.splitlines():
        s = line.strip()
        if s and not s.startswith(("//", ".", "{", "}", "$")) and not s.endswith(":"):
            out.append(s)
    return out


def fma_loop(ptx: str) -> dict:
    """The block from the label before the first fma to the branch after the last one: the tile
    GEMM's unrolled inner loop in these kernels (their only fma instructions)."""
    lines = ptx.splitlines()
    fmas = [i for i, s in enumerate(lines) if "fma.rn.f32" in s]
    if not fmas:
        return {"instructions": 0, "fma": 0, "shared_loads": 0}
    lo = max((i for i in range(fmas[0]) if lines[i].strip().endswith(":")), default=0)
    hi = fmas[-1]
    while hi < len(lines) - 1 and "bra" not in lines[hi]:
        hi += 1
    body = instructions("\n".join(lines[lo : hi + 1]))
    n_fma = sum("fma" in s for s in body)
    return {
        "instructions": len(body),
        "fma": n_fma,
        "shared_loads": sum("ld.shared" in s for s in body),
        "per_fma": round(len(body) / n_fma, 2) if n_fma else None,
    }


def compile_all(cc: tuple[int, int]) -> dict[str, dict]:
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)  # no driver asked
    from bench.studies.mnist_cnn.kernels.numba_cuda import v3_split, v7_unsigned

    kernels = {
        "k3_fc1": (v3_split.k3_fc1, "fc1"),
        "k3_dense_bwd": (v3_split.k3_dense_bwd, "dense_bwd"),
        "k3_head": (v3_split.k3_head, "head"),
        "k7_fc1": (v7_unsigned.k7_fc1, "fc1"),
        "k7_dense_bwd": (v7_unsigned.k7_dense_bwd, "dense_bwd"),
    }
    out = {}
    for name, (kernel, sig) in kernels.items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, SIGS[sig], cc=cc)
        ins = instructions(ptx)
        out[name] = {
            "instructions": len(ins),
            "opcodes": dict(collections.Counter(s.split()[0].rstrip(";") for s in ins).most_common(8)),
        }
        if name.endswith("fc1"):
            out[name]["gemm_inner_loop"] = fma_loop(ptx)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="9.0", help="compute capability to compile for (MAJOR.MINOR)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        major, minor = (int(x) for x in a.cc.split("."))
    except ValueError:
        fail(f"--cc {a.cc!r}: MAJOR.MINOR, e.g. 9.0")
    if not 5 <= major <= 12:
        fail(f"--cc {a.cc}: compute capability 5.0 to 12.x")
    got = compile_all((major, minor))
    print(f"PTX for compute capability {major}.{minor} (numba-cuda's cuda.compile_ptx, no GPU):")
    for name, d in got.items():
        loop = d.get("gemm_inner_loop")
        extra = ""
        if loop:
            extra = (
                f"  tile GEMM inner loop: {loop['instructions']} instructions, {loop['fma']} FMAs, "
                f"{loop['shared_loads']} shared loads, {loop['per_fma']} an FMA"
            )
        print(f"  {name:<13} {d['instructions']:6,} instructions{extra}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.out.with_name(a.out.name + ".tmp")
        tmp.write_text(json.dumps({"cc": f"{major}.{minor}", "kernels": got}, indent=1))
        tmp.replace(a.out)


if __name__ == "__main__":
    main()
