"""The numba-cuda trainer (variants default, naive, graph): the kernels of
bench.studies.mnist_cnn.kernels.numba_cuda driven for the mnist-cnn protocol, and the
check against torch every numba-cuda trainer runs before anything is timed
(equivalence_check). backends/numba_cuda.py picks the trainer for a cell.

Variant -> kernels: default -> "fast" (variant 2, 3 launches a step), naive -> "naive" (variant
1), graph -> "uconv" (variant 8, 6 launches a step; variant 6 before 2026-11-27) with each timed
epoch recorded once as a CUDA graph (kernels/numba_cuda/graph.py) and replayed with one host call:
the order's copy from a page-locked buffer (its first node), the loss reset, and every step's
batch gather and launches. The graph is captured in warmup() and again whenever the net is
rebuilt, outside every timed epoch. The CUDA simulator cannot capture graphs: there the graph
variant launches eagerly, and its rows say so (cuda_graph).

The graph cell's epoch beyond its graph (lab/numba_epoch.py, H100, variant 8, 60,416 samples an
epoch): the graph's own GPU time 11.77-11.80 ms; the cell's clock added 0.56 ms with the order's
copy queued by torch before the replay and two events made each epoch, 0.47 ms with the copy in
the graph and the events made once (two H100s of one kind; lab/results/numba_cuda_stage-H100/).
What is left: the host's work before the GPU starts (the order's cast into the page-locked
buffer, 63 us; the replay call, 139-144 us, the same with the copy done by a kernel), the loss
read, the stopwatch's syncs, and perhaps the RSS sampler's child (the cell against no sampler:
0.08 ms, medians of 12 rounds without an interval). Cell on real MNIST, side by side with the
trainer before, three interleaved rounds on each of two H100s (2026-11-27): 1.018x [1.016-1.021]
and 1.014x [1.009-1.028]; six cells 4.90-5.00M samples/s, median 4.96M (the graph alone 5.12M)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

CHECK_RTOL = 1e-4  # largest relative error (norm-wise) against torch-CPU before timing
KERNELS = {"default": "fast", "naive": "naive", "graph": "uconv"}  # cell variant -> DeviceNet variant
SIM_MAX_BLOCKS = 4  # grid cap under the CUDA simulator (a Python thread per GPU thread); kernels are grid-stride


class _HostMark:
    """The CUDA simulator runs kernels synchronously and its events report -1 ms, so under
    NUMBA_ENABLE_CUDASIM=1 a host clock stands in for the events."""

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end) -> float:
        return (end.t - self.t) * 1e3


class NumbaCudaTrainer:
    profiles_phases = True  # the profiling pass times its phases (synced) before epoch 1

    def __init__(self, cfg, params, data):
        from numba import cuda

        from bench.studies.mnist_cnn.kernels import numba_cuda as K
        from bench.studies.mnist_cnn.net import scale_u8

        self.cuda, self.K, self.cfg = cuda, K, cfg
        self.params0 = params
        self.kernel_variant = KERNELS[cfg.variant]
        self.use_graph = cfg.variant == "graph" and not K.simulated()
        self.max_blocks = SIM_MAX_BLOCKS if K.simulated() else None
        self._graph: Any = None
        self._graph_steps = 0
        t0 = time.perf_counter()
        self.x_host = scale_u8(data.x_train, cfg.input_scale)
        self.x_train = cuda.to_device(self.x_host)
        self.y_train = cuda.to_device(np.ascontiguousarray(data.y_train, np.int64))
        self.x_test = cuda.to_device(scale_u8(data.x_test, cfg.input_scale))
        self.y_test = data.y_test
        bs = cfg.batch_size
        self.xb = cuda.device_array((bs, 1, 28, 28), np.float32)
        self.yb = cuda.device_array(bs, np.int64)
        cuda.synchronize()
        self.h2d_setup_s = time.perf_counter() - t0
        from bench.studies.mnist_cnn.kernels.numba_cuda.gather import gather

        self._gather_kernel = gather
        self._gather = gather[(bs * 784 + 255) // 256, 256]
        self.net: Any = None  # the DeviceNet, made in warmup()
        self._event = _HostMark if K.simulated() else cuda.event
        self._timed_events = [self._event() for _ in range(2)]  # made once: 20 us each on the epoch's clock (H100)
        self._fields: dict = {}
        self.check: dict = {}

    def sync(self) -> None:
        self.cuda.synchronize()

    def _equivalence_check(self) -> dict:
        """This GPU vs torch-CPU on the same weights and 64 training samples."""
        n = min(64, self.cfg.batch_size)
        xh = np.ascontiguousarray(self.x_host[:n])
        yh = self.y_train.copy_to_host()[:n]
        return equivalence_check(self.K, self.params0, xh, yh, self.kernel_variant, self.max_blocks)

    def warmup(self) -> float:
        """Compile every kernel (first calls), check against torch, then start from the seed's
        weights with zero momentum (a fresh DeviceNet: warm-up steps leave no trace)."""
        from bench.core.errors import KitError

        t0 = time.perf_counter()
        self.check = self._equivalence_check()
        if not self.check["equiv_ok"]:
            raise KitError(
                f"numba-cuda disagrees with torch on this GPU: {self.check['equiv_worst']} "
                f"relative error {self.check['equiv_max_rel_err']:.2e} > {CHECK_RTOL}"
            )
        warm = self.K.DeviceNet(self.params0, self.cfg.batch_size, variant=self.kernel_variant, max_blocks=self.max_blocks)
        order = self.cuda.to_device(np.arange(self.cfg.batch_size, dtype=np.int64) % self.x_train.shape[0])
        self._gather(self.x_train, self.y_train, order, 0, self.xb, self.yb)
        warm.train_step(self.xb, self.yb, self.cfg.lr, self.cfg.momentum)
        warm.epoch_loss_sum()
        warm.predict(self.x_test[: self.cfg.batch_size])
        self.cuda.synchronize()
        self._new_net()
        return time.perf_counter() - t0

    def _new_net(self) -> None:
        """A fresh DeviceNet from the seed's weights; for the graph variant, the timed epoch's
        launches captured on it (the order buffer is refilled before each replay)."""
        from bench.studies.mnist_cnn.protocol import epoch_order

        self._graph = None  # it reads the old net's buffers: never replayed again
        self.net = self.K.DeviceNet(self.params0, self.cfg.batch_size, variant=self.kernel_variant, max_blocks=self.max_blocks)
        if self.use_graph:
            cuda, bs = self.cuda, self.cfg.batch_size
            n = len(epoch_order(int(self.x_train.shape[0]), bs, self.cfg.seed, 0, self.cfg.last_batch))
            # the order's device buffer and its page-locked twin, made once per net: the graph's
            # first node copies the one the host fills (stage_order) to the one the gathers read
            dtype = np.int32 if self.x_train.shape[0] < 1 << 31 else np.int64
            self._order_pinned = cuda.pinned_array(n, dtype=dtype)
            self._order_pinned[:] = 0
            self._order_graph = cuda.to_device(self._order_pinned)
            self._graph_steps = n // bs
            grid = (bs * 784 + 255) // 256

            # compiled (for the order's type) and loaded before the capture, not inside it
            self._gather_kernel[grid, 256](self.x_train, self.y_train, self._order_graph, 0, self.xb, self.yb)
            cuda.synchronize()

            def gather(i: int, stream) -> None:
                if i == 0:  # the graph's first node: this epoch's order from the page-locked buffer stage_order filled
                    self._order_graph.copy_to_device(self._order_pinned, stream=stream)
                self._gather_kernel[grid, 256, stream](self.x_train, self.y_train, self._order_graph, i * bs, self.xb, self.yb)

            self._graph = self.net.capture_steps(
                [(self.xb, self.yb)] * self._graph_steps, self.cfg.lr, self.cfg.momentum, gather, reset_loss=True
            )
        self.cuda.synchronize()

    def stage_order(self, order: np.ndarray) -> None:
        """The graph variant: this epoch's sample order into the page-locked buffer the graph's
        first node copies to the device (captured once: no copy call an epoch). The host's work
        before the replay is on the epoch's clock with the GPU idle: queuing the copy from here
        with torch took 72 us of host time there (25 us in a loop), numba's copy_to_device
        118-174 us, the cast into the buffer 49 us (lab/numba_epoch.py, H100). The buffer is
        refilled only after the epoch's loss read: the replay that read it is done."""
        np.copyto(self._order_pinned, order, casting="unsafe")  # indices < the training set's size

    def train_epoch(self, order: np.ndarray, timer) -> dict:
        cuda, net, bs = self.cuda, self.net, self.cfg.batch_size
        n_steps = len(order) // bs
        timed = not getattr(timer, "enabled", False)
        ev = self._timed_events if timed else [self._event() for _ in range(2)]
        marks = []  # per step: events at the boundaries data|forward|backward|step
        if timed and self._graph is not None:  # the graph variant: one replay is the epoch
            if n_steps != self._graph_steps or len(order) != self._order_graph.shape[0]:
                from bench.core.errors import KitError

                raise KitError(
                    f"an epoch of {len(order)} samples, but the captured graph holds {self._graph_steps} steps of {bs}"
                )
            t0 = time.perf_counter()
            self.stage_order(order)
            h2d_host = time.perf_counter() - t0
            self._graph.replay()
        else:
            h2d_host = None
            ev[0].record()
            order_dev = cuda.to_device(order)
            ev[1].record()
        if timed and self._graph is None:  # a timed epoch: launches only, no events in the loop
            for s in range(n_steps):
                self._gather(self.x_train, self.y_train, order_dev, s * bs, self.xb, self.yb)
                net.forward(self.xb, self.yb)
                net.backward()
                net.step(self.cfg.lr, self.cfg.momentum)
        elif not timed:  # the profiling pass: events at every phase boundary
            for s in range(n_steps):
                e = [self._event() for _ in range(5)]
                e[0].record()
                self._gather(self.x_train, self.y_train, order_dev, s * bs, self.xb, self.yb)
                e[1].record()
                net.forward(self.xb, self.yb)
                e[2].record()
                net.backward()
                e[3].record()
                net.step(self.cfg.lr, self.cfg.momentum)
                e[4].record()
                marks.append(e)
        # the epoch's one host sync; a replay zeroes the sum at its start (no launch after the read)
        loss_sum = net.epoch_loss_sum(reset=not (timed and self._graph is not None))
        phases = {"data_s": 0.0, "forward_s": 0.0, "backward_s": 0.0, "step_s": 0.0}
        for e in marks:
            for name, a, b in (("data_s", 0, 1), ("forward_s", 1, 2), ("backward_s", 2, 3), ("step_s", 3, 4)):
                ms = e[a].elapsed_time(e[b])
                assert ms >= 0, f"negative CUDA event time in {name}"
                phases[name] += ms / 1e3
        if not marks:
            phases = {}
        self._fields = {
            **phases,
            # the graph: the host's staging of the order (its copy is the graph's first node)
            "h2d_s": h2d_host if h2d_host is not None else ev[0].elapsed_time(ev[1]) / 1e3,
            "h2d_setup_s": self.h2d_setup_s,
            **self.check,
            "kernel_variant": self.kernel_variant,
            "cuda_graph": self._graph_note(),
        }
        return {
            "train_loss": loss_sum / (n_steps * bs),
            "batch_size_used": int(self.xb.shape[0]),
            "batch_sizes_seen": [int(self.xb.shape[0])],
        }

    def _graph_note(self) -> str:
        if self.use_graph:
            steps, launches = self._graph_steps, self.K.LAUNCHES_PER_STEP[self.kernel_variant] + 1
            return f"epoch: the order's copy, a loss reset and {steps} steps x {launches} launches, one replay"
        if self.cfg.variant == "graph":
            return "no: the CUDA simulator cannot capture graphs (launched eagerly)"
        return "no"

    def phase_fields(self, timer) -> dict:
        return self._fields

    def snapshot(self):
        return None  # the state to return to is always the seed's: a fresh DeviceNet from params0

    def restore(self, snap) -> None:
        self._new_net()

    def compile_kind(self) -> str:
        return "cold (numba.cuda kernels are compiled in every process; no on-disk cache)"

    def evaluate(self) -> float:
        return float((self.net.predict(self.x_test) == self.y_test).mean())

    def memory(self) -> dict:
        # every device array this backend holds (data + DeviceNet buffers); nothing is
        # allocated per step, so this steady state is also the peak of what we allocate
        mine = sum(a.nbytes for a in (self.x_train, self.y_train, self.x_test, self.xb, self.yb))
        out = {"vram_peak_mb": (mine + self.net.device_bytes()) / 1e6, "vram_net_mb": self.net.device_bytes() / 1e6}
        if not self.K.simulated():  # device memory in use by this process's context (all of it)
            free, total = self.cuda.current_context().get_memory_info()
            out["vram_context_used_mb"] = (total - free) / 1e6
        return out

    def params(self) -> dict[str, np.ndarray]:
        return self.net.params_host()


def equivalence_check(K, params0, xh: np.ndarray, yh: np.ndarray, kernel_variant: str, max_blocks: int | None = None) -> dict:
    """A DeviceNet of KERNEL_VARIANT vs torch-CPU on the same weights and batch (xh, yh host
    arrays): logits, loss and all 8 gradients, norm-wise relative error; the worst of them."""
    import torch
    from numba import cuda

    from bench.studies.mnist_cnn.backends.torch_common import build_model
    from bench.studies.mnist_cnn.net import PARAM_NAMES

    net = K.DeviceNet(params0, len(yh), variant=kernel_variant, max_blocks=max_blocks)
    loss, grads, logits = net.loss_and_grads(cuda.to_device(xh), cuda.to_device(yh))
    model = build_model(params0)
    ref_logits = model(torch.from_numpy(xh))
    ref_loss = torch.nn.functional.cross_entropy(ref_logits, torch.from_numpy(yh))
    ref_loss.backward()

    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-30))

    errs = {"logits": rel(logits, ref_logits.detach().numpy()), "loss": rel(loss, ref_loss.item())}
    for name, p in zip(PARAM_NAMES, model.parameters()):
        assert p.grad is not None
        errs[f"grad {name}"] = rel(grads[name], p.grad.numpy())
    worst = max(errs, key=lambda k: errs[k])
    return {"equiv_max_rel_err": errs[worst], "equiv_worst": worst, "equiv_ok": errs[worst] <= CHECK_RTOL}
