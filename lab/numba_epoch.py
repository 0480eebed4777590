"""Where the numba-cuda graph cell's epoch goes beyond its steps, on a GPU.

    python -m lab.numba_epoch [--rounds 10] [--batch 512] [--out FILE]

The mnist-cnn cell `graph` (bench/studies/mnist_cnn/backends/numba_cuda_trainer.py) on
MNIST-shaped random uint8 images (60,000 training, 10,000 test, as the cell's dataset), warmed up
and checked as a cell is. Its epoch took 20.6 ms against 19.5 ms of steps on an H100
(lab/results/numba_cuda_sparse-H100/). Each round runs, in a rotated order:

    cell      train_epoch under the protocol's clock (its stopwatch: the device synced, the wall
              from the call to the sync after it), inside a running RSSSampler as the protocol's
              (the thread's start and join outside the clock; until 2026-11-27 they were inside)
    nosampler the same without the RSSSampler
    parts     train_epoch's own sequence spelled out, each part timed on the host and between CUDA
              events: the order's staging into page-locked memory, the graph's replay call, the
              GPU's run of the graph (its first node copies the order), the loss read (the sync)
    graph     three replays back to back between two events, no copy and no sync between them: the
              graph's own GPU time per epoch (the floor an epoch can reach)

Per round and kind the milliseconds; the summary gives medians and each kind's excess over `graph`.
Then each host call an epoch makes, timed alone (host_calls).
Prints a table; writes every number to --out as JSON. Needs a CUDA GPU and torch (graph capture).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

KINDS = ("cell", "nosampler", "parts", "graph")


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def make_trainer(batch: int, seed: int):
    from bench.studies.mnist_cnn.backends.numba_cuda_trainer import NumbaCudaTrainer
    from bench.studies.mnist_cnn.config import Settings
    from bench.studies.mnist_cnn.net import init_params

    rng = np.random.default_rng(seed)

    def images(n: int) -> np.ndarray:
        img = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        img[rng.random(img.shape) < 0.8] = 0  # about as sparse as MNIST
        return img

    data = SimpleNamespace(
        x_train=images(60_000),
        y_train=rng.integers(0, 10, 60_000).astype(np.int64),
        x_test=images(10_000),
        y_test=rng.integers(0, 10, 10_000).astype(np.int64),
    )
    cfg = Settings(backend="numba-cuda", variant="graph", seed=seed, batch_size=batch)
    tr = NumbaCudaTrainer(cfg, init_params(seed), data)
    if not tr.use_graph:
        fail("no CUDA graph here (the CUDA simulator, or torch sees no GPU): this measures the graph cell on a GPU")
    tr.warmup()
    return tr, cfg


def one(tr, cfg, kind: str, epoch: int) -> dict:
    from bench.measure.memory import RSSSampler
    from bench.measure.timer import NullTimer, stopwatch
    from bench.studies.mnist_cnn.protocol import epoch_order

    cuda = tr.cuda
    order = epoch_order(int(tr.x_train.shape[0]), cfg.batch_size, cfg.seed, epoch, cfg.last_batch)
    tr.sync()
    if kind in ("cell", "nosampler"):  # the protocol's clock (mnist_cnn/protocol.py Run.step)
        if kind == "cell":
            with RSSSampler(), stopwatch(tr.sync) as sw:
                tr.train_epoch(order, NullTimer())
        else:
            with stopwatch(tr.sync) as sw:
                tr.train_epoch(order, NullTimer())
        return {"ms": 1e3 * sw.seconds}
    ev = [cuda.event() for _ in range(3)]
    if kind == "graph":
        ev[0].record()
        for _ in range(3):
            tr._graph.replay()
        ev[1].record()
        ev[1].synchronize()
        tr.net.epoch_loss_sum()
        return {"ms": ev[0].elapsed_time(ev[1]) / 3}
    t0 = time.perf_counter()
    tr.stage_order(order)
    t1 = time.perf_counter()
    ev[1].record()
    tr._graph.replay()
    t2 = time.perf_counter()
    ev[2].record()
    tr.net.epoch_loss_sum(reset=False)  # as train_epoch: the replay zeroed the sum at its start
    t3 = time.perf_counter()
    return {
        "ms": 1e3 * (t3 - t0),
        "stage_host_ms": 1e3 * (t1 - t0),
        "replay_call_ms": 1e3 * (t2 - t1),
        "graph_gpu_ms": ev[1].elapsed_time(ev[2]),  # the order's copy (its first node) and the steps
        "loss_read_ms": 1e3 * (t3 - t2),
    }


def host_calls(tr, n: int = 200) -> dict[str, float]:
    """Median host microseconds of each call an epoch makes (and the ways the order could be
    sent), each called n times with the device idle: numba's event create + record, its order
    copies (pageable synchronous, page-locked queued), torch's queued copy (what the cell did until
    2026-11-27; its graph now copies the order itself), the cell's staging of the order,
    the loss read, and each library's device sync."""
    import torch

    cuda = tr.cuda
    order = np.random.default_rng(0).permutation(len(tr._order_graph)).astype(np.int64)
    dev64 = cuda.to_device(np.zeros(len(order), np.int64))
    pinned = cuda.pinned_array(len(order), np.int64)
    stream0 = cuda.default_stream()
    t_dev = torch.zeros(len(order), dtype=torch.int32, device="cuda")
    t_pinned = torch.zeros(len(order), dtype=torch.int32).pin_memory()
    calls = {
        "numba event() + record()": lambda: cuda.event().record(),
        "numba copy_to_device int64 pageable sync": lambda: dev64.copy_to_device(order),
        "numba copy_to_device int64 pinned queued": lambda: dev64.copy_to_device(pinned, stream=stream0),
        "torch copy_ pinned queued": lambda: t_dev.copy_(t_pinned, non_blocking=True),
        "stage_order (the cast into page-locked memory)": lambda: tr.stage_order(order),
        "numba loss read (copy_to_host)": lambda: tr.net.epoch_loss_sum(reset=False),
        "numba cuda.synchronize()": cuda.synchronize,
        "torch.cuda.synchronize()": torch.cuda.synchronize,
    }
    out = {}
    for name, fn in calls.items():
        times = []
        for _ in range(n):
            cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        cuda.synchronize()
        out[name] = 1e6 * statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.batch < 1:
        fail("--rounds and --batch must be at least 1")
    tr, cfg = make_trainer(a.batch, a.seed)
    runs: dict[str, list[dict]] = {k: [] for k in KINDS}
    for r in range(a.rounds):
        for kind in KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]:
            runs[kind].append(one(tr, cfg, kind, r + 1))
    med = {k: statistics.median(x["ms"] for x in v) for k, v in runs.items()}
    parts = {p: statistics.median(x[p] for x in runs["parts"]) for p in runs["parts"][0] if p != "ms"}
    samples = len(tr._order_graph)
    print(f"numba-cuda graph cell, batch {a.batch}, {samples} samples an epoch, {a.rounds} rounds (median ms an epoch):")
    for k in KINDS:
        print(
            f"  {k:<10} {med[k]:7.3f} ms  {samples / med[k] * 1e3:12,.0f} samples/s  over graph {med[k] - med['graph']:+.3f} ms"
        )
    print("  parts: " + "  ".join(f"{p} {v:.3f}" for p, v in parts.items()))
    calls = host_calls(tr)
    print("host calls, median us of 200 with the device idle:")
    for name, us in calls.items():
        print(f"  {name:<42} {us:8.1f} us")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "batch": a.batch,
            "samples": samples,
            "rounds": a.rounds,
            "median_ms": med,
            "parts_median_ms": parts,
            "host_calls_us": calls,
            "runs": runs,
        }
        tmp = a.out.with_name(a.out.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(a.out)


if __name__ == "__main__":
    main()
