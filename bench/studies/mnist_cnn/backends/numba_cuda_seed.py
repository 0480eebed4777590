"""numba-cuda variant "seed": seed 000's own Numba CUDA setup, as its text and code describe it.

"Forward pass operations were implemented as CUDA kernels ... Backpropagation for dense
layers and weight updates were performed on the CPU after copying required data back from
the GPU. Updated weights were copied back to the GPU." (seed 000, III.C). Conv weights are
never updated. One training step here, every step:

    data      host gather of the batch (the training set stays in host memory, as the
              seed's NumPy arrays did) -> H2D copy of x (n,1,28,28) float32 (labels stay
              on the host: the loss is computed there)
    forward   k_forward on the GPU (conv1, pool, conv2, pool, fc1, fc2; DeviceNet "fast",
              no labels) + k_dense_inputs, then D2H copies of pool2's output (n,400), fc1's
              activations (n,128) and the logits (n,10) into numba-cpu's Workspace (the
              first copy waits for the kernels)
    backward  on the CPU: softmax-CE and the dense layers' gradients (numba_cpu_cnn's
              loss_backward_dense, @njit(parallel=True))
    step      on the CPU: SGD with momentum on fc1/fc2 (torch's form), then one H2D copy of
              the four updated dense tensors into the GPU's parameter buffer

Pageable host memory throughout (the seed used plain NumPy arrays). The gradients are those
of the batch-mean loss, equal to the full-backprop ones (tests/test_seed_variants.py); with
sgd=seed (the matrix's default for this variant) the update is the seed's, v = m*v + (1-m)*G
with G the batch-summed gradient (= (1-m)*n times the mean one), p -= lr*v; with sgd=torch,
torch's v = m*v + g. What differs from the seed's code: the kit's kernels (one fused forward
launch instead of six, plus the packing one), the seed's separate GPU launch for dlogits is
folded into the CPU backward, and the forward computes no softmax on the GPU. Evaluation runs
the whole forward on the GPU over the test set kept there (timed apart, as always).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench.measure.timer import NullTimer


class NumbaCudaSeedTrainer:
    profiles_phases = True  # host-driven phases: the profiling pass times them with syncs

    def __init__(self, cfg, params, data):
        from numba import cuda

        from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as KC
        from bench.studies.mnist_cnn.kernels import numba_cuda as K
        from bench.studies.mnist_cnn.kernels.numba_cuda import seed as KS
        from bench.studies.mnist_cnn.net import DENSE_NAMES, PARAM_SHAPES, scale_u8

        self.cuda, self.K, self.KC, self.KS, self.cfg = cuda, K, KC, KS, cfg
        self.params0 = params
        # the CUDA simulator runs each GPU thread as a Python thread: one block per grid there
        # (every kernel is grid-stride, so the cap changes the speed, never the result)
        self.max_blocks = 1 if K.simulated() else None
        bs = cfg.batch_size
        t0 = time.perf_counter()
        self.x_host = scale_u8(data.x_train, cfg.input_scale)  # stays on the host
        self.y_host = np.ascontiguousarray(data.y_train, np.int64)
        self.x_test = cuda.to_device(scale_u8(data.x_test, cfg.input_scale))
        self.y_test = data.y_test
        self.xb_host = np.empty((bs, 1, 28, 28), np.float32)
        self.yb = np.empty(bs, np.int64)
        self.xb = cuda.device_array((bs, 1, 28, 28), np.float32)
        self.f_dev = cuda.device_array((bs, KS.N_P2), np.float32)
        self.h_dev = cuda.device_array((bs, KS.D1), np.float32)
        cuda.synchronize()
        self.h2d_setup_s = time.perf_counter() - t0
        self._pack = KS.k_dense_inputs[KS.blocks(bs, self.max_blocks), KS.TPB]
        self.ws = KC.Workspace(bs)
        # the dense parameters on the host, flat in the GPU buffer's order (fc1.weight, fc1.bias,
        # fc2.weight, fc2.bias are the last four of torch's state_dict order): one H2D per step
        self.dense_names = DENSE_NAMES
        sizes = [int(np.prod(PARAM_SHAPES[k])) for k in DENSE_NAMES]
        self.dense = np.empty(sum(sizes), np.float32)
        self.vel_flat = np.zeros_like(self.dense)
        self.p: dict[str, np.ndarray] = {}
        self.vel: dict[str, np.ndarray] = {}
        o = 0
        for k, n in zip(DENSE_NAMES, sizes):
            self.p[k] = self.dense[o : o + n].reshape(PARAM_SHAPES[k])
            self.vel[k] = self.vel_flat[o : o + n].reshape(PARAM_SHAPES[k])
            o += n
        self.grads = {k: np.zeros(PARAM_SHAPES[k], np.float32) for k in DENSE_NAMES}
        assert K.O_F1W + self.dense.size == K.N_PARAMS, "dense parameters must be the tail of the GPU buffer"
        self.net: Any = None
        self.dense_dev: Any = None
        self.check: dict = {}
        self.grad_scale = (1.0 - cfg.momentum) * bs if cfg.sgd == "seed" else None  # see numba_cpu
        self._new_net()

    # ------------------------------------------------------------ state
    def _new_net(self) -> None:
        """A DeviceNet holding the cell's initial weights; host dense weights and momentum reset."""
        self.net = self.K.DeviceNet(self.params0, self.cfg.batch_size, "fast", max_blocks=self.max_blocks)
        self.dense_dev = self.net.P[self.K.O_F1W :]  # device view: fc1.weight .. fc2.bias
        for k in self.dense_names:
            self.p[k][...] = self.params0[k]
        self.vel_flat[:] = 0.0
        self.cuda.synchronize()

    def snapshot(self):
        return self.dense.copy(), self.vel_flat.copy()

    def restore(self, snap) -> None:
        dense, vel = snap
        self.dense[:] = dense
        self.vel_flat[:] = vel
        self.dense_dev.copy_to_device(self.dense)
        self.cuda.synchronize()

    def sync(self) -> None:
        self.cuda.synchronize()

    # ------------------------------------------------------------ warm-up
    def warmup(self) -> float:
        """Check the GPU kernels against torch (as the default variant does), compile the CPU
        kernels (or load them from numba's cache) and this variant's kernels, then one real
        training step, undone: epoch 1 pays no first-call cost."""
        from bench.core.errors import KitError
        from bench.studies.mnist_cnn.backends.numba_cuda_trainer import CHECK_RTOL, equivalence_check

        t0 = time.perf_counter()
        n = min(64, self.cfg.batch_size)
        self.check = equivalence_check(
            self.K, self.params0, np.ascontiguousarray(self.x_host[:n]), self.y_host[:n], "fast", self.max_blocks
        )
        if not self.check["equiv_ok"]:
            raise KitError(
                f"numba-cuda disagrees with torch on this GPU: {self.check['equiv_worst']} "
                f"relative error {self.check['equiv_max_rel_err']:.2e} > {CHECK_RTOL}"
            )
        self.KC.warmup()
        snap = self.snapshot()
        self.train_epoch(np.arange(self.cfg.batch_size, dtype=np.int64) % len(self.y_host), _NO_PHASES)
        self.restore(snap)
        self.net.predict(self.x_test[: self.cfg.batch_size])
        self.cuda.synchronize()
        return time.perf_counter() - t0

    def compile_kind(self) -> str:
        return "cold (numba.cuda kernels are compiled in every process); CPU kernels from numba's cache when present"

    # ------------------------------------------------------------ training
    def train_epoch(self, order: np.ndarray, timer) -> dict:
        KC, net, ws, bs, cfg = self.KC, self.net, self.ws, self.cfg.batch_size, self.cfg
        losses = []
        for s in range(0, len(order), bs):
            idx = order[s : s + bs]
            if len(idx) != bs:
                raise ValueError(f"partial batch of {len(idx)}: the study must pad or drop")
            with timer.phase("data"):
                np.take(self.x_host, idx, axis=0, out=self.xb_host)
                np.take(self.y_host, idx, out=self.yb)
                self.xb.copy_to_device(self.xb_host)  # H2D, every step
            with timer.phase("forward"):
                net.forward(self.xb)  # GPU: every layer's forward, no loss head
                self._pack(net.act, bs, self.f_dev, self.h_dev)
                self.f_dev.copy_to_host(ws.p2)  # D2H (waits for the kernels)
                self.h_dev.copy_to_host(ws.h1)
                net.logits.copy_to_host(ws.logits)
            with timer.phase("backward"):  # CPU: dense layers only
                losses.append(KC.loss_backward_dense(self.p, self.yb, ws, self.grads))
            with timer.phase("step"):  # CPU SGD on the dense layers, then H2D of their weights
                KC.sgd_momentum_step(self.p, self.grads, self.vel, cfg.lr, cfg.momentum, None, self.grad_scale)
                self.dense_dev.copy_to_device(self.dense)
        return {
            "train_loss": float(np.mean(losses)),
            "batch_size_used": bs,
            "batch_sizes_seen": [bs],
        }

    def phase_fields(self, timer) -> dict:
        return {**timer.as_fields(), "h2d_setup_s": self.h2d_setup_s, **self.check}

    def evaluate(self) -> float:
        return float((self.net.predict(self.x_test) == self.y_test).mean())

    def memory(self) -> dict:
        mine = sum(a.nbytes for a in (self.x_test, self.xb, self.f_dev, self.h_dev))
        out = {"vram_peak_mb": (mine + self.net.device_bytes()) / 1e6, "vram_net_mb": self.net.device_bytes() / 1e6}
        if not self.K.simulated():
            free, total = self.cuda.current_context().get_memory_info()
            out["vram_context_used_mb"] = (total - free) / 1e6
        return out

    def params(self) -> dict[str, np.ndarray]:
        return self.net.params_host()


_NO_PHASES = NullTimer()  # warm-up steps record nothing
