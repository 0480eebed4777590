"""GPU check of the numba-cuda CNN kernels: every variant against the reference, then timed.

    python -m lab.check_numba_cuda --out results/numba_cuda_check.json
    python -m lab.check_numba_cuda --variants fast --steps 500   # one variant

Per variant (bench/studies/mnist_cnn/kernels/numba_cuda: VARIANTS), in order:
1. first call: DeviceNet + one forward/backward/step on the GPU, wall time incl. the JIT
   compile of every kernel it launches ("first_call_s"), reported apart from step times.
2. correctness at --batch on fresh random MNIST-like data: logits, loss and all 8 gradients
   against the float64 NumPy reference and against torch-cpu (fp32, if torch imports);
   one SGD-momentum step (params, momentum buffers) against the reference; a short batch;
   predict against the reference argmax; epoch_loss_sum against the summed reference losses.
   A variant that fails is not timed.
3. timing: --warmup steps, then --repeats x --steps train_steps between two CUDA events
   (device time, includes launch gaps: this workload is launch-bound), plus wall time and
   host enqueue time of the same loop; then per-phase times (events between forward,
   backward and step of every step). The device is synchronised before and after each timed
   region; every duration is checked non-negative.
Prints a table; writes every number (and the samples behind each median) to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

from bench.studies.mnist_cnn.kernels import numba_cuda as K
from bench.studies.mnist_cnn.net import IMAGE_SHAPE, MNIST_MEAN, MNIST_STD, N_CLASSES, PARAM_NAMES, init_params

RTOL = 1e-4  # fp32, norm-wise ||a-b|| / ||b|| (the project's tolerance, tests/tolerances.py)


def mnist_like(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random images in [0,1] (about 80% zeros, like MNIST), normalised; random int64 labels."""
    img = rng.random((n, *IMAGE_SHAPE), dtype=np.float32)
    img[rng.random(img.shape) < 0.8] = 0.0
    return ((img - MNIST_MEAN) / MNIST_STD).astype(np.float32), rng.integers(0, N_CLASSES, n).astype(np.int64)


def torch_reference(params, x, y):
    """torch-cpu fp32 logits, loss, grads; None if torch is not importable."""
    try:
        import torch
        from torch import nn
    except Exception:  # noqa: BLE001
        return None
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
    layer = {"conv1": net[0], "conv2": net[3], "fc1": net[7], "fc2": net[9]}
    with torch.no_grad():
        for name in PARAM_NAMES:
            ln, w = name.split(".")
            getattr(layer[ln], w).copy_(torch.from_numpy(params[name]))
    logits = net(torch.from_numpy(x))
    loss = nn.functional.cross_entropy(logits, torch.from_numpy(y))
    loss.backward()
    grads = {n: getattr(layer[n.split(".")[0]], n.split(".")[1]).grad.numpy().copy() for n in PARAM_NAMES}
    return loss.item(), grads, logits.detach().numpy()


def compare(tag: str, got: tuple, want: tuple, errs: dict) -> None:
    loss, grads, logits = got
    rloss, rgrads, rlogits = want
    errs[f"{tag} logits"] = K.rel_err(logits, rlogits)
    errs[f"{tag} loss"] = K.rel_err(loss, rloss)
    for name in PARAM_NAMES:
        errs[f"{tag} grad {name}"] = K.rel_err(grads[name], rgrads[name])


def check_variant(variant: str, batch: int, seed: int, max_blocks=None) -> dict:
    from numba import cuda

    rng = np.random.default_rng(seed)
    params = init_params(seed)
    x, y = mnist_like(rng, batch)
    xs, ys = mnist_like(rng, max(1, min(batch - 1, batch // 2 + 3)))  # a short batch
    xp, _ = mnist_like(rng, 2 * batch + batch // 3 + 1)  # predict: two full chunks and a short one
    xd, yd = cuda.to_device(x), cuda.to_device(y)

    # 1. first call (JIT compile of forward, backward, step + one run)
    cuda.synchronize()
    t0 = time.perf_counter()
    net = K.DeviceNet(params, batch, variant, max_blocks=max_blocks)
    net.train_step(xd, yd, 0.01, 0.9)
    cuda.synchronize()
    first_call_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    net.predict(cuda.to_device(xp[:3]))
    net.backward(yd)  # also compiles the separate loss head (a forward without labels ran)
    cuda.synchronize()
    first_call_extra_s = time.perf_counter() - t0
    del net

    # 2. correctness on a fresh net
    errs: dict[str, float] = {}
    net = K.DeviceNet(params, batch, variant, max_blocks=max_blocks)
    got = net.loss_and_grads(xd, yd)
    ref = K.reference_step(params, x, y)
    compare("ref", got, ref, errs)
    tref = torch_reference(params, x, y)
    if tref is not None:
        compare("torch", got, tref, errs)
    p_ref = {k: v.astype(np.float64) for k, v in params.items()}
    v_ref = {k: np.zeros_like(v) for k, v in p_ref.items()}
    K.reference_sgd(p_ref, ref[1], v_ref, 0.05, 0.9)
    net.step(0.05, 0.9)
    # a short batch from the updated weights, then a second step (momentum now matters)
    got_s = net.loss_and_grads(cuda.to_device(xs), cuda.to_device(ys))
    ref_s = K.reference_step({k: v.astype(np.float32) for k, v in p_ref.items()}, xs, ys)
    compare("short-batch ref", got_s, ref_s, errs)
    K.reference_sgd(p_ref, ref_s[1], v_ref, 0.05, 0.9)
    net.step(0.05, 0.9)
    gp, gv = net.params_host(), net.velocity_host()
    for name in PARAM_NAMES:
        errs[f"sgd param {name}"] = K.rel_err(gp[name], p_ref[name])
        errs[f"sgd momentum {name}"] = K.rel_err(gv[name], v_ref[name])
    want_sum = batch * ref[0] + xs.shape[0] * ref_s[0]
    errs["epoch loss sum"] = K.rel_err(net.epoch_loss_sum(), want_sum)
    pred = net.predict(cuda.to_device(xp))
    ref_pred = K.reference_step({k: v.astype(np.float32) for k, v in p_ref.items()}, xp, np.zeros(len(xp), np.int64))[2].argmax(1)
    agree = float((pred == ref_pred).mean())
    worst = max(errs.items(), key=lambda kv: kv[1])
    ok = worst[1] <= RTOL and agree >= 0.999
    return dict(
        variant=variant,
        ok=ok,
        worst_err_name=worst[0],
        worst_err=worst[1],
        errors=errs,
        predict_agreement=agree,
        first_call_s=first_call_s,
        first_call_extra_s=first_call_extra_s,
        device_bytes=net.device_bytes(),
    )


def _stamp():
    """A CUDA event recorded now on the default stream, and the host clock."""
    from numba import cuda

    e = cuda.event()
    e.record()
    return e, time.perf_counter()


def _ms(a, b) -> float:
    """Milliseconds from stamp a to stamp b: device time between the events on a GPU; host
    time under the simulator (its events return -1)."""
    if K.simulated():
        return (b[1] - a[1]) * 1e3
    return a[0].elapsed_time(b[0])


def time_variant(variant: str, batch: int, steps: int, warmup: int, repeats: int, seed: int, max_blocks=None) -> dict:
    from numba import cuda

    rng = np.random.default_rng(seed + 1)
    pool = [tuple(cuda.to_device(a) for a in mnist_like(rng, batch)) for _ in range(8)]
    net = K.DeviceNet(init_params(seed), batch, variant, max_blocks=max_blocks)
    lr, mom = 0.01, 0.9
    for i in range(warmup):
        net.train_step(*pool[i % len(pool)], lr, mom)
    cuda.synchronize()
    net.epoch_loss_sum()

    step_ms, wall_ms, enqueue_ms = [], [], []
    for _ in range(repeats):
        cuda.synchronize()
        s0 = _stamp()
        for i in range(steps):
            net.train_step(*pool[i % len(pool)], lr, mom)
        s1 = _stamp()
        t1 = time.perf_counter()  # all launches enqueued
        s1[0].synchronize()
        t2 = time.perf_counter()
        dev = _ms(s0, s1)
        for v in (dev, t1 - s0[1], t2 - s0[1]):
            assert v >= 0, f"negative duration {v}"
        step_ms.append(dev / steps)
        wall_ms.append((t2 - s0[1]) * 1e3 / steps)
        enqueue_ms.append((t1 - s0[1]) * 1e3 / steps)
    loss_sum = net.epoch_loss_sum()  # the one sync a training epoch has

    # per phase: events between the phases of every step (each record adds a little launch cost)
    n_ph = max(steps // 2, 1)
    cuda.synchronize()
    stamps = []
    for i in range(n_ph):
        x, y = pool[i % len(pool)]
        st = [_stamp()]
        net.forward(x, y)
        st.append(_stamp())
        net.backward()
        st.append(_stamp())
        net.step(lr, mom)
        st.append(_stamp())
        stamps.append(st)
    stamps[-1][3][0].synchronize()
    phase = {name: [_ms(st[j], st[j + 1]) for st in stamps] for j, name in enumerate(("forward_ms", "backward_ms", "step_ms"))}
    for v in phase.values():
        assert min(v) >= 0, "negative phase duration"
    graph = graph_times(net, pool, lr, mom, steps, repeats) if variant != "naive" and not K.simulated() else {}
    med = statistics.median(step_ms)
    return dict(
        variant=variant,
        **graph,
        batch=batch,
        steps=steps,
        warmup=warmup,
        repeats=repeats,
        launches_per_step=K.LAUNCHES_PER_STEP[variant],
        step_ms_median=med,
        step_ms_min=min(step_ms),
        step_ms_max=max(step_ms),
        step_ms_samples=step_ms,
        wall_ms_per_step_median=statistics.median(wall_ms),
        wall_ms_samples=wall_ms,
        enqueue_ms_per_step_median=statistics.median(enqueue_ms),
        enqueue_ms_samples=enqueue_ms,
        samples_per_s=batch / (med * 1e-3),
        phase_ms_median={k: statistics.median(v) for k, v in phase.items()},
        phase_ms_samples=phase,
        loss_mean_over_timed_steps=loss_sum / (repeats * steps * batch),
        device_bytes=net.device_bytes(),
    )


def graph_times(net, pool, lr: float, mom: float, steps: int, repeats: int) -> dict:
    """The same train_steps recorded once as a CUDA graph (DeviceNet.capture_steps) and replayed
    `repeats` times: device time per step between events around each replay, and the host's
    time to enqueue a replay."""
    from numba import cuda

    batches = [pool[i % len(pool)] for i in range(steps)]
    t0 = time.perf_counter()
    g = net.capture_steps(batches, lr, mom)
    capture_s = time.perf_counter() - t0
    g.replay()  # a first replay uploads the graph
    cuda.synchronize()
    per_step, enqueue = [], []
    for _ in range(repeats):
        cuda.synchronize()
        s0 = _stamp()
        g.replay()
        t1 = time.perf_counter()
        s1 = _stamp()
        s1[0].synchronize()
        per_step.append(_ms(s0, s1) / steps)
        enqueue.append((t1 - s0[1]) * 1e3)
    net.epoch_loss_sum()
    med = statistics.median(per_step)
    return dict(
        graph_capture_s=capture_s,
        graph_step_ms_median=med,
        graph_step_ms_min=min(per_step),
        graph_step_ms_max=max(per_step),
        graph_step_ms_samples=per_step,
        graph_samples_per_s=net.batch / (med * 1e-3),
        graph_replay_enqueue_ms_samples=enqueue,
    )


def environment() -> dict:
    import numba
    from numba import cuda

    env = dict(python=platform.python_version(), numba=numba.__version__, simulator=K.simulated())
    try:
        import numba_cuda

        env["numba_cuda"] = numba_cuda.__version__
    except Exception:  # noqa: BLE001
        env["numba_cuda"] = None
    try:
        dev = cuda.get_current_device()
        env["gpu"] = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        env["compute_capability"] = list(dev.compute_capability)
        env["sm_count"] = dev.MULTIPROCESSOR_COUNT
        env["driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
        free, total = cuda.current_context().get_memory_info()
        env["gpu_mem_total_bytes"], env["gpu_mem_free_bytes"] = int(total), int(free)
    except Exception as exc:  # noqa: BLE001
        env["gpu_error"] = f"{type(exc).__name__}: {exc}"
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200, help="train_steps per timed repeat (fast)")
    ap.add_argument("--naive-steps", type=int, default=20, help="train_steps per timed repeat (naive: slow)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", default=",".join(K.VARIANTS))
    ap.add_argument("--out", default=None, help="JSON file for every number")
    ap.add_argument("--max-blocks", type=int, default=None, help="grid cap (only for simulator smoke runs)")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message=r".*will likely result in GPU under-utilization")  # small grids
    why = K.available()
    if why is not None:
        print(f"numba.cuda not usable: {why}", file=sys.stderr)
        return 2
    env = environment()
    print("environment:", json.dumps(env))
    results = []
    for variant in a.variants.split(","):
        print(f"[{variant}] checking at batch {a.batch} ...", flush=True)
        chk = check_variant(variant, a.batch, a.seed, a.max_blocks)
        print(
            f"[{variant}] ok={chk['ok']} worst {chk['worst_err_name']} {chk['worst_err']:.2e}"
            f" predict agreement {chk['predict_agreement']:.4f} first call {chk['first_call_s']:.1f} s",
            flush=True,
        )
        row = dict(check=chk)
        if chk["ok"]:
            steps = a.naive_steps if variant == "naive" else a.steps
            row["timing"] = time_variant(variant, a.batch, steps, min(a.warmup, steps), a.repeats, a.seed, a.max_blocks)
            t = row["timing"]
            print(f"[{variant}] {t['step_ms_median'] * 1e3:.1f} us/step, {t['samples_per_s']:,.0f} samples/s", flush=True)
            if "graph_step_ms_median" in t:
                print(
                    f"[{variant}] as a CUDA graph of {steps} steps: {t['graph_step_ms_median'] * 1e3:.1f} us/step"
                    f" [{t['graph_step_ms_min'] * 1e3:.1f}..{t['graph_step_ms_max'] * 1e3:.1f}],"
                    f" {t['graph_samples_per_s']:,.0f} samples/s (capture {t['graph_capture_s']:.2f} s)",
                    flush=True,
                )
            if t.get("kernel_us_median"):
                print(
                    f"[{variant}] per launch, us: " + ", ".join(f"{k} {v:.1f}" for k, v in t["kernel_us_median"].items()),
                    flush=True,
                )
        results.append(row)

    head = (
        f"{'variant':8} {'ok':3} {'worst rel err':>13} {'1st call s':>10} {'launch':>6} {'step us':>8}"
        f" {'[min..max]':>15} {'samples/s':>11} {'fwd us':>7} {'bwd us':>7} {'sgd us':>7}"
        f" {'enqueue us':>10} {'dev MiB':>7}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in results:
        c, t = r["check"], r.get("timing")
        line = f"{c['variant']:8} {'yes' if c['ok'] else 'NO':3} {c['worst_err']:13.2e} {c['first_call_s']:10.2f}"
        if t:
            ph = t["phase_ms_median"]
            spread = f"[{t['step_ms_min'] * 1e3:.0f}..{t['step_ms_max'] * 1e3:.0f}]"
            line += (
                f" {t['launches_per_step']:6d} {t['step_ms_median'] * 1e3:8.1f} {spread:>15}"
                f" {t['samples_per_s']:11,.0f} {ph['forward_ms'] * 1e3:7.1f} {ph['backward_ms'] * 1e3:7.1f}"
                f" {ph['step_ms'] * 1e3:7.1f} {t['enqueue_ms_per_step_median'] * 1e3:10.1f}"
                f" {t['device_bytes'] / 2**20:7.2f}"
            )
        print(line)
    print(
        f"(batch {a.batch}; step = forward+backward+SGD between CUDA events, median of {a.repeats} repeats;"
        " phases: median per step with events between phases)"
    )
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(environment=env, args=vars(a), results=results), f, indent=1, default=float)
        os.replace(tmp, a.out)
        print(f"wrote {a.out}")
    return 0 if all(r["check"]["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
