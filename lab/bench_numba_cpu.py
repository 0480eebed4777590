"""Micro-benchmark: numba-cpu kernels vs torch-cpu, one training step (forward + loss backward +
SGD momentum) on the seed CNN, same thread count, interleaved rounds on random MNIST-shaped data.

    .venv/bin/python -m lab.bench_numba_cpu --threads 2 --batches 20 --batch 512 --rounds 3

Prints samples/s per round and the median of each, and the ratio numba/torch. Both sides get
the data already as one normalised float32 array (torch: a tensor sharing its memory) and
slice batches from it; both run 3 warm-up steps before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)  # torch and numba threads
    ap.add_argument("--batches", type=int, default=20)  # timed steps per round
    ap.add_argument("--batch", type=int, default=512)  # samples per step
    ap.add_argument("--rounds", type=int, default=3)  # interleaved torch/numba rounds
    a = ap.parse_args()

    import numba
    import torch

    from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as K
    from bench.studies.mnist_cnn.net import IMAGE_SHAPE, MNIST_MEAN, MNIST_STD, init_params

    torch.set_num_threads(a.threads)
    numba.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    n_all = a.batches * a.batch
    x_all = ((rng.random((n_all, *IMAGE_SHAPE), dtype=np.float32) - MNIST_MEAN) / MNIST_STD).astype(np.float32)
    y_all = rng.integers(0, 10, n_all).astype(np.int64)
    lr, momentum = 0.01, 0.9

    # torch
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    xt, yt = torch.from_numpy(x_all), torch.from_numpy(y_all)

    def torch_step(i: int) -> None:
        sl = slice(i * a.batch, (i + 1) * a.batch)
        opt.zero_grad()
        nn.functional.cross_entropy(net(xt[sl]), yt[sl]).backward()
        opt.step()

    # numba
    K.warmup()
    params = init_params(0)
    ws = K.Workspace(a.batch)
    grads, vel = K.zeros_like_params(params), K.zeros_like_params(params)

    def numba_step(i: int) -> None:
        sl = slice(i * a.batch, (i + 1) * a.batch)
        K.forward(params, x_all[sl], ws)
        K.loss_backward(params, y_all[sl], ws, grads)
        K.sgd_momentum_step(params, grads, vel, lr, momentum)

    def timed(step) -> float:
        t0 = time.perf_counter()
        for i in range(a.batches):
            step(i)
        return n_all / (time.perf_counter() - t0)

    for i in range(3):
        torch_step(i)
        numba_step(i)
    rates: dict[str, list[float]] = {"torch": [], "numba": []}
    for r in range(a.rounds):
        order = ("torch", "numba") if r % 2 == 0 else ("numba", "torch")
        for name in order:
            rates[name].append(timed(torch_step if name == "torch" else numba_step))
        print(f"round {r}: torch {rates['torch'][-1]:9.0f}  numba {rates['numba'][-1]:9.0f} samples/s")
    t, nb = statistics.median(rates["torch"]), statistics.median(rates["numba"])
    print(f"threads={a.threads} batch={a.batch} steps/round={a.batches} (median of {a.rounds} rounds)")
    print(f"torch-cpu {t:9.0f} samples/s   numba-cpu {nb:9.0f} samples/s   ratio numba/torch {nb / t:.2f}x")


if __name__ == "__main__":
    main()
