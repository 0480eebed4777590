"""One model on one device at one precision: its counts (FLOPs, bytes), its input pipelines,
a timed training pass, a timed validation pass, and one batch size of the sweep.

Step: eager (every kernel launched from Python) or, with `step=cuda-graph`, the training step
captured once per batch shape as a CUDA graph (torch.cuda.graph, the whole step: forward, loss,
backward, optimizer step, the loss summed on the device) and replayed, each batch copied into
the graph's input tensors first. `capture` checks the graph against the eager step before any
step is timed: from the same weights and a fresh optimizer state, the same steps must give the
same losses and move the weights as far (GRAPH_TOL), else KitError.

Sync points: `train_pass` and `val_pass` sync the device at their end (inside the clock)
and read the summed loss / correct count once; nothing in the step loop syncs. The loader
pipeline's time blocked waiting for the next batch is summed apart (`data_wait_s`): with
DataLoader workers the JPEG decode runs in them, and this is what of it the step loop sees.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from bench.core.errors import KitError
from bench.measure.torchdev import sync
from bench.studies.roofline.config import IMAGE_SIDE, MEAN, STD, Settings
from bench.studies.roofline.roofmath import Affine

GRAPH_TOL = 0.02  # capture's check: |graph / eager - 1| of each step's loss and of the weights' movement


def build(name: str, n_classes: int, seed: int) -> torch.nn.Module:
    """torchvision's NAME with N_CLASSES outputs, weights=None; KitError when torchvision lacks it."""
    import torchvision

    fn = getattr(torchvision.models, name, None)
    if fn is None or not callable(fn):
        raise KitError(f"torchvision {torchvision.__version__} has no model {name!r}")
    torch.manual_seed(seed)
    return fn(weights=None, num_classes=n_classes)


def is_oom(err: BaseException) -> bool:
    """An allocation failure: torch's OutOfMemoryError (CUDA, MPS), or the CPU allocator's; also
    one raised while handling it (a CUDA graph capture that ends on an OOM raises from its exit)."""
    if err.__context__ is not None and err.__context__ is not err and is_oom(err.__context__):
        return True
    if isinstance(err, (getattr(torch, "OutOfMemoryError", MemoryError), MemoryError)):
        return True
    msg = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg)


def set_tf32(precision: str) -> dict[str, bool]:
    """TF32 on for the tf32 precision, off otherwise (fp32 means IEEE fp32); returns what torch now says."""
    on = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32), "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32)}


class Trainer:
    def __init__(self, cfg: Settings, n_classes: int, side: int = IMAGE_SIDE, dist: Any = None):
        """DIST (bench.core.dist.Dist): this rank of a many-device cell: its device, and the
        training step through DDP (counting, validation and snapshots use the model itself)."""
        self.cfg = cfg
        # px of the square input: what it trains on, and what every FLOP and byte is counted at;
        # open_cell sets the tree's own (index.image_size), so the counts match the trained work
        self.side = side
        self.device = dist.device if dist else torch.device(cfg.device)
        self.bf16 = cfg.precision == "bf16-cl"
        self.fmt = torch.channels_last if self.bf16 else torch.contiguous_format
        self.n_classes = n_classes
        self.model = build(cfg.model, n_classes, cfg.seed).to(self.device).to(memory_format=self.fmt)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.train_model = dist.wrap(self.model) if dist else self.model
        self.mean = torch.tensor(MEAN, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=self.device).view(1, 3, 1, 1)
        self.loss_sum = torch.zeros((), device=self.device)
        self.graph: Any = None  # step=cuda-graph: the captured step (torch.cuda.CUDAGraph) and its input tensors
        self.static: tuple[torch.Tensor, torch.Tensor] | None = None
        self.eager_peak = 0  # bytes: the allocator's peak over the capture's eager steps

    def sync_device(self) -> None:
        sync(self.device)

    def autocast(self, cache: bool = True):
        """bf16 autocast for bf16-cl; CACHE off inside a graph capture (torch's notes on CUDA graphs)."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16, cache_enabled=cache)

    # ---- counts (untimed; at the input it trains on: side x side px)
    def count(self, batch: int) -> dict[str, Any]:
        """FLOPs per sample (counter + analytic, bench.measure.flops) and the bytes per sample at
        BATCH from the affine fit of two byte counts (roofmath.Affine), in the cell's precision,
        at the trained input (3, side, side). A model that cannot take that input is a KitError."""
        from bench.measure.bytecount import count_bytes
        from bench.measure.flops import count_flops

        shape = (3, self.side, self.side)
        try:
            fl = count_flops(self.model, shape, 2, name=self.cfg.model)
        except RuntimeError as err:
            if is_oom(err):
                raise
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise KitError(f"{self.cfg.model} cannot take {self.side}x{self.side} px images (the tree's size): {first}") from None
        with self.autocast():  # bf16: the counters see the casts and the half-size activations
            b2 = count_bytes(self.model, shape, 2, name=self.cfg.model)
            b4 = count_bytes(self.model, shape, 4, name=self.cfg.model)
        fits = {
            "train": Affine.fit(2, b2.train_bytes * 2, 4, b4.train_bytes * 4),
            "forward": Affine.fit(2, b2.forward_bytes * 2, 4, b4.forward_bytes * 4),
            "train_lower": Affine.fit(2, b2.train_bytes_lower * 2, 4, b4.train_bytes_lower * 4),
            "forward_lower": Affine.fit(2, b2.forward_bytes_lower * 2, 4, b4.forward_bytes_lower * 4),
            "saved": Affine.fit(2, b2.memory.saved_activation_bytes, 4, b4.memory.saved_activation_bytes),
        }
        return {"flops": fl, "bytes2": b2, "fits": fits}

    # ---- pipelines: (uint8 or float batch on the device, labels) per step
    def normalise(self, xb: torch.Tensor) -> torch.Tensor:
        x = xb.to(self.device, non_blocking=True)
        if x.dtype == torch.uint8:
            x = (x.float().mul_(1 / 255) - self.mean) / self.std
        return x.contiguous(memory_format=self.fmt)

    def loader(self, ds, batch: int, shuffle: bool):
        return torch.utils.data.DataLoader(
            ds,
            batch_size=batch,
            shuffle=shuffle,
            num_workers=self.cfg.num_workers,
            drop_last=True,
            pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(self.cfg.seed),
        )

    def fixed_batch(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.cfg.seed)
        x = torch.randn(batch, 3, self.side, self.side, generator=g).to(self.device).contiguous(memory_format=self.fmt)
        y = torch.randint(0, self.n_classes, (batch,), generator=g).to(self.device)
        return x, y

    # ---- one step: no host sync
    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if self.graph is None:
            self.eager_step(x, y)
            return
        sx, sy = self.static  # type: ignore[misc]
        if x.shape != sx.shape or y.shape != sy.shape:
            raise KitError(f"a batch of shape {tuple(x.shape)} for a step captured at {tuple(sx.shape)}")
        if x is not sx:
            sx.copy_(x, non_blocking=True)
        if y is not sy:
            sy.copy_(y, non_blocking=True)
        self.graph.replay()

    def eager_step(self, x: torch.Tensor, y: torch.Tensor, cache: bool = True) -> None:
        with self.autocast(cache):
            loss = F.cross_entropy(self.train_model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum += loss.detach().float()

    # ---- the step as a CUDA graph (step=cuda-graph)
    def capture(self, x: torch.Tensor, y: torch.Tensor, steps: int) -> dict[str, Any]:
        """Capture the step at X, Y's shape as a CUDA graph, checked; the weights are as before.

        STEPS eager steps (at least 3) on a side stream first, as torch's notes on graphs ask
        (cuDNN's autotune, the optimizer's momentum buffers: made outside the capture, so the
        graph updates them in place), each step's loss kept, and the allocator's peak over them
        (a replay's own activations sit in the graph's pool, which the peak of replays leaves
        out: `memory` reports this one with the graph); then the capture; then the weights back
        and the momentum zeroed in place (the addresses the graph holds; SGD's first step from a
        zero buffer is its first step from none) and the CUDA RNG as it was (a dropout's masks
        are the eager steps' again); as many steps through `step`, the batch copied into the
        graph's emptied inputs as the timed pass copies it; their losses and how far they moved
        the weights held to the eager steps' (GRAPH_TOL); the weights back again. KitError when
        the graph does not reproduce the eager step; not checked (None) where the eager losses
        were not finite: the timed pass's loss then flags the cell."""
        if self.device.type != "cuda":
            raise KitError(f"step=cuda-graph needs a CUDA device, not {self.device.type}")
        self.release()
        self.model.train()  # a graph keeps the mode it was captured in
        n = max(steps, 3)
        sx, sy = x.clone(memory_format=torch.preserve_format), y.clone()
        snap = self.snapshot()
        self.loss_sum.zero_()
        rng = torch.cuda.get_rng_state(self.device)  # dropout (MobileNetV2's head): the replays draw the eager steps' masks
        torch.cuda.reset_peak_memory_stats(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        eager = []
        try:
            with torch.cuda.stream(side):
                for _ in range(n):
                    self.eager_step(sx, sy)
                    eager.append(float(self.loss_sum.item()))
        finally:  # an OOM here: the restore that follows runs after these steps, not beside them
            torch.cuda.current_stream(self.device).wait_stream(side)
        self.eager_peak = torch.cuda.max_memory_allocated(self.device)
        moved_eager = self._moved(snap)
        self.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.eager_step(sx, sy, cache=False)
        self.graph, self.static = graph, (sx, sy)
        self._reset(snap)
        torch.cuda.set_rng_state(rng, self.device)
        sx.zero_()  # the replays below must get their batch through step's copy
        sy.zero_()
        replayed = []
        for _ in range(n):
            self.step(x, y)
            replayed.append(float(self.loss_sum.item()))
        moved_graph = self._moved(snap)
        self._reset(snap)
        losses = [b - a for a, b in zip([0.0, *eager], eager, strict=False)]
        glosses = [b - a for a, b in zip([0.0, *replayed], replayed, strict=False)]
        check: dict[str, Any] = {
            "graph_check_steps": n,
            "graph_check_loss_rel": None,
            "graph_check_moved_rel": None,
            "graph_check_eager_losses": losses,
            "graph_check_graph_losses": glosses,
        }
        if not all(map(math.isfinite, [*losses, moved_eager])):
            return check
        rels = [abs(g / e - 1) if e and math.isfinite(g) else math.inf for e, g in zip(losses, glosses, strict=True)]
        moved_rel = abs(moved_graph / moved_eager - 1) if moved_eager and math.isfinite(moved_graph) else math.inf
        check.update(graph_check_loss_rel=max(rels), graph_check_moved_rel=moved_rel)
        if not (max(rels) <= GRAPH_TOL and moved_rel <= GRAPH_TOL):
            self.release()
            raise KitError(
                f"the CUDA graph of the step does not reproduce the eager step over {n} steps: losses "
                f"{', '.join(f'{v:.4g}' for v in glosses)} against {', '.join(f'{v:.4g}' for v in losses)}, "
                f"the weights moved {moved_graph:.4g} against {moved_eager:.4g} (tolerance {GRAPH_TOL:.0%})"
            )
        return check

    def _moved(self, snap: dict) -> float:
        """How far the weights are from SNAP's: the sum of |w - w0| over every parameter."""
        with torch.no_grad():
            return float(sum((p.detach().float() - snap[k].float()).abs().sum() for k, p in self.model.named_parameters()))

    def _reset(self, snap: dict) -> None:
        """Weights and BN statistics back, the momentum zeroed, the loss sum zeroed: all in place."""
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(snap[k])
            for st in self.opt.state.values():
                buf = st.get("momentum_buffer")
                if buf is not None:
                    buf.zero_()
        self.loss_sum.zero_()
        sync(self.device)

    def release(self) -> None:
        """Drop the captured step (its memory pool goes with it at the next free_cached)."""
        self.graph = self.static = None

    def train_pass(self, batches, n_max: int) -> dict[str, Any]:
        """Up to N_MAX steps (0: all) over BATCHES (an iterable of (x, y)); the caller's clock runs
        around this. Returns steps, images, mean loss, data wait (s), first-batch time (s)."""
        self.model.train()
        self.loss_sum.zero_()
        n = images = 0
        wait = 0.0
        first = None
        t0 = time.perf_counter()
        it = iter(batches)
        while not n_max or n < n_max:
            t = time.perf_counter()
            try:
                xb, yb = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - t
            first = time.perf_counter() - t0 if first is None else first
            self.step(self.normalise(xb), yb.to(self.device, non_blocking=True))
            n += 1
            images += int(yb.shape[0])
        del it  # DataLoader workers shut down here, inside the clock (they start inside it too)
        loss = float(self.loss_sum.item()) / max(n, 1)  # the one host sync
        return {"steps": n, "images": images, "train_loss": loss, "data_wait_s": wait, "first_batch_s": first}

    def val_pass(self, batches, n_max: int) -> dict[str, Any]:
        self.model.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        n = images = 0
        wait = 0.0
        it = iter(batches)
        with torch.no_grad(), self.autocast():
            while not n_max or n < n_max:
                t = time.perf_counter()
                try:
                    xb, yb = next(it)
                except StopIteration:
                    break
                wait += time.perf_counter() - t
                y = yb.to(self.device, non_blocking=True)
                correct += (self.model(self.normalise(xb)).argmax(1) == y).sum()
                n += 1
                images += int(yb.shape[0])
        del it
        acc = int(correct.item()) / max(images, 1)
        self.model.train()
        return {"steps": n, "images": images, "val_acc": acc, "data_wait_s": wait}

    # ---- warm-up and restore
    def snapshot(self) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def restore(self, snap: dict) -> None:
        """Weights and BN statistics back; momentum dropped (a fresh SGD state); with a captured
        step, zeroed in place instead (the graph holds its addresses): the same first step."""
        if self.graph is not None:
            self._reset(snap)
            return
        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(snap[k])
        self.opt.state.clear()
        self.loss_sum.zero_()
        sync(self.device)

    def warmup(
        self, x: torch.Tensor, y: torch.Tensor, steps: int, evaluate: bool = True, snap: dict | None = None
    ) -> tuple[float, dict[str, Any]]:
        """STEPS untimed training steps at X, Y (cuDNN's autotune, the allocator, clocks) and, with
        EVALUATE, one validation forward, then the weights back (to SNAP when given: the caller's
        snapshot of them, not a second copy); with step=cuda-graph the step is captured at this
        shape instead (`capture`, whose check it returns). Returns (s, check)."""
        t0 = time.perf_counter()
        check: dict[str, Any] = {}
        if self.cfg.step == "cuda-graph":
            check = self.capture(x, y, steps)
        else:
            snap = snap if snap is not None else self.snapshot()
            for _ in range(steps):
                self.step(x, y)
            sync(self.device)
            self.restore(snap)
        if evaluate:
            self.model.eval()
            with torch.no_grad(), self.autocast():
                self.model(x)
            self.model.train()
            sync(self.device)
        return time.perf_counter() - t0, check

    # ---- memory
    def reset_peak(self) -> None:
        from bench.measure.torchdev import reset_peak

        reset_peak(self.device)

    def memory(self) -> dict[str, float | None]:
        """The allocator's peaks since reset_peak (MB); with a captured step, at least the peak of
        its eager steps (the replays' activations live in the graph's pool, uncounted)."""
        from bench.measure.torchdev import memory_peaks

        peaks = memory_peaks(self.device)
        if self.graph is not None and peaks.get("gpu_alloc_peak_mb") is not None:
            peaks["gpu_alloc_peak_mb"] = max(float(peaks["gpu_alloc_peak_mb"] or 0.0), self.eager_peak / 1e6)
        return peaks

    def free_bytes(self) -> float:
        """Memory the next sweep size may use, bytes: CUDA free + what torch holds cached;
        CPU and MPS: the machine's available memory (MPS shares it)."""
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            return float(free + torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device))
        import psutil

        return float(psutil.virtual_memory().available)

    def predicted_bytes(self, batch: int, saved: Affine) -> float:
        """One training step at BATCH beyond what is allocated now: the saved activations, twice
        (their gradients in backward), plus weights' gradients and momentum: a rough bound, meant to
        stop a CPU sweep before it swaps (a GPU sweep stops at its first OOM anyway)."""
        params = sum(p.numel() * p.element_size() for p in self.model.parameters())
        return 2.0 * saved.total_at(batch) + 2.0 * params

    def free_cached(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        elif self.device.type == "mps":
            torch.mps.empty_cache()


def finite(v: float) -> bool:
    return isinstance(v, float) and math.isfinite(v)
