"""One fresh process of the noise check's fixed probe: `python -m bench.measure.noiseprobe cpu|gpu`
prints one JSON line {"per_s": ..., "device": ...} and exits.

The probe is a fixed piece of a CNN benchmark's hot loop, about a second a process on the
2-core reference machine: a dense layer's forward and backward (a 512 x 784 batch through
784 x 256 and 256 x 10 float32 weights, the matmuls an MLP step does), WARMUP untimed reps, then
TIMED timed reps; the process's figure is the median rate over its timed reps (batches per
second). Each rep is tens of milliseconds of arithmetic, so the figure is the machine's, not a
thread's wake-up latency (a 100x smaller layer measured mostly that here: 0.24 ms a rep on one
thread, 40 ms on two with the other core busy). The spread the check reports is between processes, each a
fresh interpreter, as a repeat is: within-process steps share warm caches and clocks.

cpu: NumPy on the kit's thread rule (bench.core.machine.pin_threads: every usable core), as a
NumPy cell runs; on a host whose cores are busy with other work, a BLAS that waits for its
threads is exactly the noise a cell sees. gpu: torch on cuda:0 with CUDA
events around each rep (synchronised), else CuPy; neither: {"error": why}.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

BATCH, IN, HIDDEN, OUT = 512, 784, 256, 10
WARMUP, TIMED = 1, 5


def cpu() -> dict:
    import numpy as np

    from bench.core.machine import pin_threads

    threads = pin_threads(0, "numpy")  # the kit's thread rule, as a NumPy cell runs

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, IN), dtype=np.float32)
    w1 = rng.standard_normal((IN, HIDDEN), dtype=np.float32) * 0.05
    w2 = rng.standard_normal((HIDDEN, OUT), dtype=np.float32) * 0.05
    rates = []
    for i in range(WARMUP + TIMED):
        t0 = time.perf_counter()
        h = np.maximum(x @ w1, 0)
        y = h @ w2
        gh = (y @ w2.T) * (h > 0)
        gw1 = x.T @ gh
        gw2 = h.T @ y
        w1 -= 1e-6 * gw1
        w2 -= 1e-6 * gw2
        dt = time.perf_counter() - t0
        if i >= WARMUP:
            rates.append(1.0 / dt)
    return {"per_s": statistics.median(rates), "device": "cpu", "unit": "batches/s", "threads": threads}


def gpu() -> dict:
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except Exception as err:  # noqa: BLE001 - no torch or no GPU: CuPy may still answer
        return _cupy(f"torch: {err}")
    dev = torch.device("cuda:0")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(BATCH * 16, IN, device=dev, generator=g)
    w1 = torch.randn(IN, HIDDEN * 4, device=dev, generator=g) * 0.05
    w2 = torch.randn(HIDDEN * 4, OUT, device=dev, generator=g) * 0.05
    rates = []
    for i in range(WARMUP + TIMED):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        for _ in range(10):
            h = torch.relu(x @ w1)
            y = h @ w2
            gh = (y @ w2.T) * (h > 0)
            w1 -= 1e-9 * (x.T @ gh)
            w2 -= 1e-9 * (h.T @ y)
        b.record()
        torch.cuda.synchronize()
        ms = a.elapsed_time(b)
        if i >= WARMUP and ms > 0:
            rates.append(10_000.0 / ms)
    return {"per_s": statistics.median(rates), "device": torch.cuda.get_device_name(0), "unit": "batches/s"}


def _cupy(why: str) -> dict:
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - neither library can reach a GPU here
        return {"error": f"no GPU probe here ({why}; cupy: {err})"}
    x = cp.random.standard_normal((BATCH * 16, IN), dtype=cp.float32)
    w1 = cp.random.standard_normal((IN, HIDDEN * 4), dtype=cp.float32) * 0.05
    rates = []
    for i in range(WARMUP + TIMED):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(10):
            w1 -= 1e-9 * (x.T @ cp.maximum(x @ w1, 0))
        b.record()
        b.synchronize()
        ms = cp.cuda.get_elapsed_time(a, b)
        if i >= WARMUP and ms > 0:
            rates.append(10_000.0 / ms)
    return {"per_s": statistics.median(rates), "device": "cupy cuda:0", "unit": "batches/s"}


def main(argv: list[str]) -> int:
    kind = argv[0] if argv else "cpu"
    if kind not in ("cpu", "gpu"):
        print(json.dumps({"error": f"unknown probe {kind!r}: cpu or gpu"}))
        return 2
    print(json.dumps(cpu() if kind == "cpu" else gpu()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
