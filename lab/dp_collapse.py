"""Why does nn.DataParallel collapse with cudnn.benchmark on? A training step (forward, backward)
of the profile study's model timed with benchmark on and off, in the places DataParallel runs it.

    python -m lab.dp_collapse [--model densenet121] [--batch 128] [--steps 3] [--out DIR]   (a GPU; dp: two)
    python -m lab.dp_collapse --tiny      (resnet18 at 32 px, batch 4, CPU: the code path, for CI)

The suspect: cuDNN's benchmarked execution plans are cached per thread in ATen (Conv_v8.cpp keeps
its benchmark cache thread_local; PyTorch PR #191744 "Share benchmarked conv plans across
threads" is open), and nn.DataParallel's parallel_apply runs each replica's forward in a fresh
Python thread every step. If so, every DataParallel step searches again for every convolution.
The places, each with benchmark on and off:

    main    every step in the main thread (the one-GPU cell's way)
    fresh   every step in a new thread, started and joined (parallel_apply's way)
    worker  every step in one persistent worker thread (what a shared or kept cache would give)
    dp      nn.DataParallel over GPUs 0 and 1 at BATCH per GPU (CUDA with two GPUs; else skipped)

Per place: the first step (where any search runs) and STEPS more, each timed with the device
synced at both ends (ms), then one more step under torch.profiler, entered in the thread that runs the step: its CUDA
kernels (every thread and GPU: CUPTI sees them all) or, on the CPU, its aten operators (that
thread's), counted from the exported trace's events (bench.measure.profiling's reader).
A search that runs again shows as a later step as slow as the first and with its kernels
multiplied; the table prints each place's median step, first step and count.
Writes OUT/dp_collapse.json (options, versions, every step of every place) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

PLACES = ("main", "fresh", "worker", "dp")
TINY = {"model": "resnet18", "batch": 4, "image_size": 32, "steps": 2, "device": "cpu"}


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


class Runner:
    """Runs a callable in one of the places: here, in a fresh thread, or in one kept worker."""

    def __init__(self, place: str):
        self.place = place
        self.jobs: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.worker: threading.Thread | None = None
        if place == "worker":
            self.worker = threading.Thread(target=self._serve, daemon=True)
            self.worker.start()

    def _serve(self) -> None:
        while (fn := self.jobs.get()) is not None:
            try:
                fn()
                self.done.put(None)
            except BaseException as err:  # handed to the caller's thread
                self.done.put(err)

    def __call__(self, fn: Callable[[], None]) -> None:
        if self.place in ("main", "dp"):
            fn()
            return
        if self.place == "worker":
            self.jobs.put(fn)
            err = self.done.get()
        else:
            box: list[BaseException | None] = [None]

            def run() -> None:
                try:
                    fn()
                except BaseException as e:
                    box[0] = e

            t = threading.Thread(target=run)
            t.start()
            t.join()
            err = box[0]
        if err is not None:
            raise err

    def close(self) -> None:
        if self.worker is not None:
            self.jobs.put(None)
            self.worker.join()


def count_events(trace: Path, device: str) -> int:
    """CUDA kernels (cat 'kernel') or, on the CPU, aten operators (cat 'cpu_op') in a trace."""
    from bench.measure.profiling import parse_trace

    cat = "kernel" if device == "cuda" else "cpu_op"
    return sum(1 for e in parse_trace(trace) if e.get("cat") == cat and e.get("ph") == "X")


def measure(place: str, benchmark: bool, a: argparse.Namespace, tmp: Path) -> dict:
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = benchmark
    dev = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")
    torch.manual_seed(0)
    model: torch.nn.Module = torchvision.models.get_model(a.model, weights=None, num_classes=2).to(dev)
    n = a.batch
    if place == "dp":
        model = torch.nn.DataParallel(model, device_ids=[0, 1])
        n = 2 * a.batch  # BATCH per GPU, as the profile study's dp cells
    x = torch.randn(n, 3, a.image_size, a.image_size, device=dev)
    y = torch.randint(0, 2, (n,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    run = Runner(place)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()

    times = []
    try:
        for _ in range(1 + a.steps):
            _sync(a.device)
            t0 = time.perf_counter()
            run(step)
            _sync(a.device)
            times.append((time.perf_counter() - t0) * 1e3)
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
        trace = tmp / f"{place}-{int(benchmark)}.json"

        def profiled() -> None:  # entered in the step's own thread: the CPU side records that thread's operators
            with profile(activities=acts) as prof:
                step()
                _sync(a.device)
            prof.export_chrome_trace(str(trace))

        try:  # the timed steps are the evidence: a profiler that fails here costs only the count
            run(profiled)
            count, why = count_events(trace, a.device), None
        except Exception as err:
            count, why = None, " ".join(f"{type(err).__name__}: {err}".split())[:300]
        trace.unlink()
    finally:
        run.close()
    return {
        "place": place,
        "cudnn_benchmark": benchmark,
        "first_step_ms": times[0],
        "step_ms": times[1:],
        "median_step_ms": statistics.median(times[1:]),
        "events_per_step": count,
        "events_error": why,
        "events": "CUDA kernels" if a.device == "cuda" else "aten operators",
        "images_per_step": n,
        "img_per_s": n / statistics.median(times[1:]) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="densenet121")
    ap.add_argument("--batch", type=int, default=128, help="images per step per GPU")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=3, help="timed steps after the first")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--tiny", action="store_true", help="resnet18, 32 px, batch 4, 2 steps, CPU (CI)")
    ap.add_argument("--out", default="results/lab")
    if "--tiny" in (sys.argv[1:] if argv is None else argv):  # its sizes as defaults: an option given still counts
        ap.set_defaults(**TINY)
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1:
        print("error: --steps and --batch must be >= 1", file=sys.stderr)
        return 2
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but torch sees no CUDA device (--tiny runs on the CPU)", file=sys.stderr)
        return 2
    two = a.device == "cuda" and torch.cuda.device_count() >= 2
    skipped = {} if two else {"dp": "needs two CUDA GPUs" if a.device == "cuda" else "nn.DataParallel needs CUDA GPUs"}
    got = []
    with tempfile.TemporaryDirectory(prefix="dp-collapse-") as tmp:
        for place in PLACES:
            if place in skipped:
                continue
            for bench in (True, False):
                r = measure(place, bench, a, Path(tmp))
                got.append(r)
                print(
                    f"{place:<7} benchmark {'on ' if bench else 'off'} first {r['first_step_ms']:>9.1f} ms  "
                    f"median {r['median_step_ms']:>9.1f} ms  {r['events_per_step']!s:>7} {r['events']} a step",
                    flush=True,
                )
    meta = {
        "options": {k: getattr(a, k) for k in ("model", "batch", "image_size", "steps", "device")},
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None,
        "device_name": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
        "gpus": torch.cuda.device_count() if a.device == "cuda" else 0,
        "skipped": skipped,
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dp_collapse.json").write_text(json.dumps({"meta": meta, "places": got}, indent=1) + "\n")
    on = {r["place"]: r for r in got if r["cudnn_benchmark"]}
    off = {r["place"]: r for r in got if not r["cudnn_benchmark"]}
    print(f"\n{'place':<7} {'on: median ms':>14} {'off: median ms':>15} {'on/off':>7} {'events on':>10} {'events off':>11}")
    for p in on:
        print(
            f"{p:<7} {on[p]['median_step_ms']:>14.1f} {off[p]['median_step_ms']:>15.1f} "
            f"{on[p]['median_step_ms'] / off[p]['median_step_ms']:>7.2f} {on[p]['events_per_step']!s:>10} "
            f"{off[p]['events_per_step']!s:>11}"
        )
    for p, why in skipped.items():
        print(f"{p:<7} skipped: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
