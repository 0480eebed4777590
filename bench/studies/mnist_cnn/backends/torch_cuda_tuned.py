"""torch on an NVIDIA GPU: the plain trainer's CUDA timing, and the tuned resident loop.

Variant strings combine options with '+': `graphs`, `bf16` | `fp16` (autocast), `cl`
(channels_last), `compile` (torch.compile). `tuned` is the combination measured fastest
on an H100 (see results/reference/H100-80GB-HBM3/variant_sweep_3epochs.log). Eager variants time each phase with CUDA events;
a graph variant runs forward+backward+step as ONE replay, so its phases cannot be split:
it reports the replay time as `step_graph_s` and leaves forward/backward/step empty.

Resident data path (every variant here): the normalised training set is uploaded once
(h2d_s, outside the epoch); each epoch uploads its int64 order (one copy, timed as
h2d); batch b is gathered on the device with index_select from order[b*B:(b+1)*B]. The
loss is summed on the device; the host reads it once per epoch.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from bench.measure.timer import EventPhaseTimer
from bench.studies.mnist_cnn.backends.cuda_variants import parse_variant
from bench.studies.mnist_cnn.backends.torch_common import TorchTrainer, build_model, normalise_u8


class CudaEagerTrainer(TorchTrainer):
    """The plain trainer (seed or resident pipeline), with CUDA-event phase times and VRAM."""

    def __init__(self, cfg, params, data, dist=None):
        t0 = time.perf_counter()
        super().__init__(cfg, params, data, device="cuda", dist=dist)
        torch.cuda.synchronize()
        self.h2d_setup_s = time.perf_counter() - t0

    def train_epoch(self, order, timer):
        # timed epochs get a no-op timer (no events, no syncs in the loop); the profiling
        # pass gets a synced PhaseTimer
        torch.cuda.reset_peak_memory_stats()
        return super().train_epoch(order, timer)

    def phase_fields(self, timer) -> dict:
        return {**timer.as_fields(), "h2d_setup_s": self.h2d_setup_s}

    def memory(self) -> dict:
        return {
            "vram_peak_mb": torch.cuda.max_memory_allocated() / 1e6,
            "vram_reserved_peak_mb": torch.cuda.max_memory_reserved() / 1e6,
        }


class CudaTunedTrainer:
    """Resident data, optional autocast / channels_last / compile, and one CUDA graph per step."""

    profiles_phases = False  # one graph (or fused) step: its loop is timed as a whole by two events

    def compile_kind(self) -> str:
        if "compile" in self.opts:
            return "torch.compile (inductor; a cold compile and an FX-graph cache load are not told apart)"
        return "graph capture" if "graphs" in self.opts else "none (eager: first-call kernel selection only)"

    def __init__(self, cfg, params, data):
        self.cfg, self.opts = cfg, parse_variant(cfg.variant)
        dev = torch.device("cuda")
        t0 = time.perf_counter()
        self.model = build_model(params, "cuda")
        fmt = torch.channels_last if "cl" in self.opts else torch.contiguous_format
        self.model = self.model.to(memory_format=fmt)
        self.x_train = torch.from_numpy(normalise_u8(data.x_train)).to(dev).contiguous(memory_format=fmt)
        self.y_train = torch.from_numpy(data.y_train).to(dev)
        self.x_test = torch.from_numpy(normalise_u8(data.x_test)).to(dev).contiguous(memory_format=fmt)
        self.y_test = torch.from_numpy(data.y_test).to(dev)
        torch.cuda.synchronize()
        self.h2d_setup_s = time.perf_counter() - t0
        self.amp = torch.bfloat16 if "bf16" in self.opts else torch.float16 if "fp16" in self.opts else None
        self.scaler = torch.amp.GradScaler("cuda") if self.amp == torch.float16 else None
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.fwd = torch.compile(self.model) if "compile" in self.opts else self.model
        bs = cfg.batch_size
        self.idx = torch.zeros(bs, dtype=torch.long, device=dev)  # static: the graph reads the batch's indices here
        self.loss_sum = torch.zeros((), device=dev)  # device-side accumulator, read once per epoch
        self.graph = None
        self._fields: dict = {}

    def sync(self) -> None:
        torch.cuda.synchronize()

    def _step(self) -> None:
        """One training step on the batch named by self.idx; no host sync anywhere in it."""
        xb = self.x_train.index_select(0, self.idx)
        yb = self.y_train.index_select(0, self.idx)
        with torch.autocast("cuda", dtype=self.amp, enabled=self.amp is not None):
            loss = F.cross_entropy(self.fwd(xb), yb)
        if self.scaler:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.opt.zero_grad(set_to_none=False)  # graph-safe: grads keep their addresses
        self.loss_sum += loss.detach().float()

    def warmup(self) -> float:
        """JIT/cuDNN autotune/compile and, for graphs, capture. Weights and momentum are
        restored afterwards, so training starts from the seed's initial state."""
        t0 = time.perf_counter()
        state = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.idx.copy_(torch.arange(self.cfg.batch_size, device="cuda") % len(self.y_train))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream, as graph capture requires
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        if "graphs" in self.opts:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._step()
        torch.cuda.synchronize()
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(state[k])
            for st in self.opt.state.values():
                if "momentum_buffer" in st and st["momentum_buffer"] is not None:
                    st["momentum_buffer"].zero_()
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad.zero_()
        # a zero momentum buffer equals torch's first-step behaviour (buf = grad) since buf = m*0 + grad
        self.loss_sum.zero_()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def train_epoch(self, order: np.ndarray, timer) -> dict:
        torch.cuda.reset_peak_memory_stats()
        ev = EventPhaseTimer(torch)
        bs, n_steps = self.cfg.batch_size, len(order) // self.cfg.batch_size
        self.model.train()
        with ev.phase("h2d"):
            order_dev = torch.from_numpy(order).to("cuda", non_blocking=False)
        self.loss_sum.zero_()
        with ev.phase("graph_step" if self.graph else "step_total"):
            for s in range(n_steps):
                self.idx.copy_(order_dev[s * bs : (s + 1) * bs])
                if self.graph:
                    self.graph.replay()
                else:
                    self._step()
        t = ev.totals()  # the one sync of the epoch
        loss = float(self.loss_sum) / n_steps
        self._fields = {
            "h2d_s": t["h2d"],
            "h2d_setup_s": self.h2d_setup_s,
            "forward_s": None,
            "backward_s": None,
            "step_s": None,
            ("step_graph_s" if self.graph else "step_total_s"): t.get("graph_step", t.get("step_total")),
        }
        return {"train_loss": loss, "batch_size_used": int(self.idx.shape[0]), "batch_sizes_seen": [int(self.idx.shape[0])]}

    def phase_fields(self, timer) -> dict:
        return self._fields

    def snapshot(self):
        """Weights and momentum buffers, cloned; restore() copies them back in place, so a
        captured graph keeps reading the same addresses."""
        with torch.no_grad():
            weights = {k: v.clone() for k, v in self.model.state_dict().items()}
            bufs = [st.get("momentum_buffer") for st in self.opt.state.values()]
            return weights, [None if b is None else b.clone() for b in bufs]

    def restore(self, snap) -> None:
        weights, bufs = snap
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(weights[k])
            for st, saved in zip(self.opt.state.values(), bufs):
                if st.get("momentum_buffer") is not None:
                    st["momentum_buffer"].copy_(saved) if saved is not None else st["momentum_buffer"].zero_()

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        correct = torch.zeros((), dtype=torch.long, device="cuda")
        with torch.autocast("cuda", dtype=self.amp, enabled=self.amp is not None):
            for s in range(0, len(self.y_test), 2048):
                correct += (self.model(self.x_test[s : s + 2048]).argmax(1) == self.y_test[s : s + 2048]).sum()
        return int(correct) / len(self.y_test)

    def memory(self) -> dict:
        return {
            "vram_peak_mb": torch.cuda.max_memory_allocated() / 1e6,
            "vram_reserved_peak_mb": torch.cuda.max_memory_reserved() / 1e6,
        }

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.detach().float().cpu().numpy() for k, v in self.model.state_dict().items()}
