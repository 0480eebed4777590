"""The numba-cuda kernels' PTX, counted without a GPU: how many instructions each kernel compiles
to, and what it spends per multiply-add.

    python -m lab.numba_ptx [--kernels dense|conv] [--cc 9.0] [--out FILE]

numba-cuda compiles PTX with NVVM alone (`cuda.compile_ptx`), but it asks the current device for
its compute capability while compiling a device function; with no driver that query is answered
here with --cc (nothing is run).

--kernels dense (the default): variant 6's dense kernels (k3_fc1, k3_dense_bwd, k3_head, from
v3_split) and variant 7's (k7_fc1, k7_dense_bwd, v7_unsigned): the PTX instruction count and the
opcodes used most; for the tile GEMM's inner loop in k3_fc1 and k7_fc1 (the basic block that
holds its fma instructions, up to the branch back): instructions, FMAs, shared loads, and
instructions per FMA.

--kernels conv: variant 6's convolutions (k4_conv_fwd from v4_tiled, k6_conv_bwd from v6_sparse)
and variant 8's (k8_conv_fwd, k8_conv_bwd, v8_uconv): instructions, FMAs, 64-bit integer adds,
selects, float64 instructions, instructions per FMA, and the same over only the basic blocks
that hold an FMA (the multiply-add bodies, each with its address arithmetic).

PTX is not SASS (ptxas still schedules and allocates registers), and counts
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
X4 = "float32[:, :, :, ::1]"  # the (n, 1, 28, 28) image batch
SIGS = {  # kernel -> the signature the trainer launches it with (python ints are int64)
    "conv_fwd": f"void({X4}, int64, {A2}, {A2}, int8[:, ::1])",
    "conv_bwd": f"void({X4}, int64, {A2}, {A2}, int8[:, ::1], {A2})",
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


def opcode(ins: str) -> str:
    """The opcode of a PTX instruction line, its predicate guard (@%p1) dropped."""
    words = ins.split()
    if words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(";")


def fma_blocks(ptx: str) -> dict:
    """Instructions and FMAs of the basic blocks (split at labels and after branches) that hold
    at least one fma: the multiply-add bodies with the address arithmetic around them."""
    blocks: list[list[str]] = [[]]
    for line in ptx.splitlines():
        s = line.strip()
        if s.startswith("$") and s.endswith(":"):
            blocks.append([])
            continue
        ins = instructions(s)
        if ins:
            blocks[-1].extend(ins)
            if opcode(ins[0]).startswith(("bra", "ret")):
                blocks.append([])
    hot = [b for b in blocks if any(opcode(s).startswith("fma") for s in b)]
    n_ins = sum(len(b) for b in hot)
    n_fma = sum(opcode(s).startswith("fma") for b in hot for s in b)
    return {"blocks": len(hot), "instructions": n_ins, "fma": n_fma, "per_fma": round(n_ins / n_fma, 2) if n_fma else None}


def conv_counts(ptx: str) -> dict:
    """The index-arithmetic figures of a conv kernel's PTX (see the module docstring)."""
    ops = [opcode(s) for s in instructions(ptx)]
    n_fma = sum(o.startswith("fma") for o in ops)
    return {
        "fma": n_fma,
        "add64": sum(o in ("add.s64", "add.u64") for o in ops),
        "selects": sum(o.startswith("selp") for o in ops),
        "f64": sum(".f64" in o for o in ops),
        "per_fma": round(len(ops) / n_fma, 2) if n_fma else None,
        "fma_blocks": fma_blocks(ptx),
    }


def kernel_table(kind: str) -> dict[str, tuple]:
    """Name -> (kernel, signature key) of the --kernels set KIND."""
    if kind == "conv":
        from bench.studies.mnist_cnn.kernels.numba_cuda import v4_tiled, v6_sparse, v8_uconv

        return {
            "k4_conv_fwd": (v4_tiled.k4_conv_fwd, "conv_fwd"),
            "k6_conv_bwd": (v6_sparse.k6_conv_bwd, "conv_bwd"),
            "k8_conv_fwd": (v8_uconv.k8_conv_fwd, "conv_fwd"),
            "k8_conv_bwd": (v8_uconv.k8_conv_bwd, "conv_bwd"),
        }
    from bench.studies.mnist_cnn.kernels.numba_cuda import v3_split, v7_unsigned

    return {
        "k3_fc1": (v3_split.k3_fc1, "fc1"),
        "k3_dense_bwd": (v3_split.k3_dense_bwd, "dense_bwd"),
        "k3_head": (v3_split.k3_head, "head"),
        "k7_fc1": (v7_unsigned.k7_fc1, "fc1"),
        "k7_dense_bwd": (v7_unsigned.k7_dense_bwd, "dense_bwd"),
    }


def compile_all(cc: tuple[int, int], kind: str = "dense") -> dict[str, dict]:
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)  # no driver asked
    out = {}
    for name, (kernel, sig) in kernel_table(kind).items():
        ptx, _ = cuda.compile_ptx(kernel.py_func, SIGS[sig], cc=cc)
        ins = instructions(ptx)
        out[name] = {
            "instructions": len(ins),
            "opcodes": dict(collections.Counter(s.split()[0].rstrip(";") for s in ins).most_common(8)),
        }
        if name.endswith("fc1"):
            out[name]["gemm_inner_loop"] = fma_loop(ptx)
        if kind == "conv":
            out[name].update(conv_counts(ptx))
    return out


def print_dense(got: dict[str, dict]) -> None:
    for name, d in got.items():
        loop = d.get("gemm_inner_loop")
        extra = ""
        if loop:
            extra = (
                f"  tile GEMM inner loop: {loop['instructions']} instructions, {loop['fma']} FMAs, "
                f"{loop['shared_loads']} shared loads, {loop['per_fma']} an FMA"
            )
        print(f"  {name:<13} {d['instructions']:6,} instructions{extra}")


def print_conv(got: dict[str, dict]) -> None:
    print("  kernel        instructions  FMAs  64-bit adds  selects  f64  per FMA  |  FMA blocks: instructions  per FMA")
    for name, d in got.items():
        hot = d["fma_blocks"]
        print(
            f"  {name:<13} {d['instructions']:12,} {d['fma']:5} {d['add64']:12,} {d['selects']:8,} {d['f64']:4}"
            f" {d['per_fma']:8}  |  {hot['instructions']:24,} {hot['per_fma']:8}"
        )
    for signed, unsigned in (("k4_conv_fwd", "k8_conv_fwd"), ("k6_conv_bwd", "k8_conv_bwd")):
        a, b = got[signed], got[unsigned]
        print(
            f"  {unsigned} / {signed}: instructions {b['instructions'] / a['instructions']:.2f}x, per FMA"
            f" {b['per_fma'] / a['per_fma']:.2f}x, in the FMA blocks {b['fma_blocks']['per_fma'] / a['fma_blocks']['per_fma']:.2f}x"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="dense", help="dense or conv: which kernels (see above)")
    ap.add_argument("--cc", default="9.0", help="compute capability to compile for (MAJOR.MINOR)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    try:
        major, minor = (int(x) for x in a.cc.split("."))
    except ValueError:
        fail(f"--cc {a.cc!r}: MAJOR.MINOR, e.g. 9.0")
    if not 5 <= major <= 12:
        fail(f"--cc {a.cc}: compute capability 5.0 to 12.x")
    if a.kernels not in ("dense", "conv"):
        fail(f"--kernels {a.kernels!r}: dense or conv")
    got = compile_all((major, minor), a.kernels)
    print(f"PTX for compute capability {major}.{minor} (numba-cuda's cuda.compile_ptx, no GPU):")
    (print_conv if a.kernels == "conv" else print_dense)(got)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.out.with_name(a.out.name + ".tmp")
        tmp.write_text(json.dumps({"cc": f"{major}.{minor}", "set": a.kernels, "kernels": got}, indent=1))
        tmp.replace(a.out)


if __name__ == "__main__":
    main()
