"""What the kit's sampler threads cost a GIL-bound training loop, on the CPU.

    python -m lab.sampler_cost [--repeats 5] [--seconds 2] [--out DIR]

Two measurements. (1) Each sampler's one reading, called in a loop in this thread: its CPU time
(time.thread_time) and wall time per call, in us, times how often its thread calls it (Hz) = the
CPU it takes per second of a timed region. (2) A launch-bound proxy for a CUDA step: a loop of tiny
torch CPU ops on one intra-op thread (each op ~ Python + dispatcher, like a kernel launch; it holds
the GIL between ops) timed with no sampler thread, then with each sampler's thread running at its
own rate, the order rotated per repeat; the median op time per arm and its ratio to no sampler.
The samplers: RSSSampler (bench/measure/memory.py, around every timed pass of mnist-cnn, roofline,
cifar-opt), Telemetry (bench/measure/telemetry.py, every cell), CpuUsage (bench/measure/usage.py,
two reads a pass), TelemetrySampler (bench/measure/sampler.py, profile's epochs). NVML reads
(GpuUsage, the GPU side of the others) need a GPU: not measured here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import threading
import time
from pathlib import Path


def per_call(fn, seconds: float) -> dict:
    """CPU and wall us per call of FN, over about SECONDS."""
    fn()
    n, c0, w0 = 0, time.thread_time(), time.perf_counter()
    while time.perf_counter() - w0 < seconds:
        fn()
        n += 1
    return {"calls": n, "cpu_us": 1e6 * (time.thread_time() - c0) / n, "wall_us": 1e6 * (time.perf_counter() - w0) / n}


@contextlib.contextmanager
def thread_at(fn, hz: float):
    """FN called HZ times a second from a daemon thread while the block runs."""
    stop = threading.Event()
    calls = [0]

    def loop() -> None:
        while not stop.wait(1 / hz):
            fn()
            calls[0] += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield calls
    finally:
        stop.set()
        t.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    ap.add_argument("--out", type=Path, default=Path("results/lab"))
    ap.add_argument("--arms", nargs="*", default=None, help="words: time only the loop arms whose name holds one")
    a = ap.parse_args()
    import psutil
    import torch

    from bench.measure import memory, telemetry, usage
    from bench.measure.sampler import TelemetrySampler

    torch.set_num_threads(1)
    proc = psutil.Process()
    tel = telemetry.Telemetry(gpu=False)
    ts = TelemetrySampler(None, hz=10).start()  # its thread runs meanwhile at 10 Hz: stopped below
    ts.stop()
    cpu = usage.CpuUsage()
    readings = {  # name: (one reading, its thread's calls per second in a cell)
        "RSSSampler before: psutil memory_info()": (proc.memory_info, 1 / 0.01),
        "Telemetry: psutil.cpu_freq()": (psutil.cpu_freq, 1 / tel.interval_s),
        "CpuUsage: cpu_percent() x2": (cpu._read, 0.0),
        "TelemetrySampler._sample() (CPU only)": (ts._sample, 10.0),
    }
    readings["Telemetry: _ours() process scan (GPU cells)"] = (lambda: telemetry._ours([]), 1 / tel.interval_s)
    readings[f"RSSSampler now: {memory.RSS_HOW}"] = (memory._read_rss, 1 / memory.RSSSampler().interval_s)
    calls = {name: {**per_call(fn, a.seconds / 2), "hz": hz} for name, (fn, hz) in readings.items()}
    for name, c in calls.items():
        c["cpu_ms_per_s"] = c["cpu_us"] * c["hz"] / 1e3
        print(
            f"{name:<44} {c['cpu_us']:>8.1f} us CPU {c['wall_us']:>8.1f} us wall per call, x {c['hz']:>5.1f} Hz = {c['cpu_ms_per_s']:.2f} ms CPU/s"
        )

    x = torch.ones(8)

    def ops(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(100):
                x.add_(1.0).mul_(0.5)
            n += 200
        return 1e6 * (time.perf_counter() - t0) / n

    arms = {
        "none": (None, 0.0),
        **{name: readings[name] for name in readings if readings[name][1] > 0 and (not a.arms or any(w in name for w in a.arms))},
    }
    got: dict[str, list[float]] = {k: [] for k in arms}
    counted: dict[str, list[int]] = {k: [] for k in arms}
    names = list(arms)
    for r in range(a.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, hz = arms[name]
            with thread_at(fn, hz) if fn else contextlib.nullcontext([0]) as n:
                got[name].append(ops(a.seconds))
            counted[name].append(n[0])
    base = statistics.median(got["none"])
    print(f"\ntiny-op loop (torch, 1 thread), median of {a.repeats} x {a.seconds:g} s: us per op, and / none")
    table = []
    for name in names:
        med = statistics.median(got[name])
        print(f"  {name:<44} {med:.3f} us/op  {med / base:.4f}  ({statistics.median(counted[name])} samples a run)")
        table.append({"arm": name, "us_per_op": got[name], "median": med, "over_none": med / base, "samples": counted[name]})
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "psutil": psutil.__version__, "cpus": psutil.cpu_count()}
    (a.out / "sampler_cost.json").write_text(json.dumps({"meta": meta, "calls": calls, "loop": table}, indent=1))


if __name__ == "__main__":
    main()
