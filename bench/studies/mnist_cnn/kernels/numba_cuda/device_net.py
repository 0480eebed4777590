"""DeviceNet: the seed CNN on one GPU, what every kernel variant shares on the host side.

Parameters, momentum, gradients and activations stay on the device (the layout in net.py).
A variant (v1_naive.py .. v5_splitk.py) subclasses DeviceNet with its buffers, its launch
configurations and the launches of its forward, loss head and backward; the bookkeeping
(batch rows, labels, when G must be zeroed), SGD, the graph capture and the host copies are
here, once.
"""

from __future__ import annotations

import weakref

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.net import (
    IMPORT_ERROR,
    N_PARAMS,
    OFFSETS,
    SIM,
    TPB,
    cuda,
    k_fill_zero,
    k_sgd_state,
)
from bench.studies.mnist_cnn.net import PARAM_NAMES, PARAM_SHAPES

_LIVE: weakref.WeakSet[DeviceNet] = weakref.WeakSet()


def available() -> str | None:
    """None if numba.cuda can run kernels here (a GPU, or the simulator), else why not."""
    if cuda is None:
        return f"numba.cuda cannot be imported: {IMPORT_ERROR}"
    try:
        if not cuda.is_available():
            return "numba.cuda.is_available() is False (no CUDA driver or GPU visible)"
    except Exception as exc:  # noqa: BLE001
        return f"numba.cuda.is_available() failed: {type(exc).__name__}: {exc}"
    return None


def simulated() -> bool:
    """True when numba.cuda runs kernels in its CPU simulator (NUMBA_ENABLE_CUDASIM=1 was set
    before numba.cuda was first imported)."""
    return SIM


def device_bytes() -> int:
    """Bytes of device memory held by every live DeviceNet (its own buffers)."""
    return sum(net.device_bytes() for net in _LIVE)


def flat_view(buf, name: str):
    o = OFFSETS[name]
    return buf[o : o + int(np.prod(PARAM_SHAPES[name]))]


class DeviceNet:
    """The seed CNN on one GPU (one variant: a subclass).

    Sync points: epoch_loss_sum(), loss_and_grads(), params_host(), predict() (one each);
    forward/backward/step/train_step only enqueue kernels on the current stream.
    """

    VARIANT = ""

    def __init__(self, params: dict[str, np.ndarray], batch: int, *, samples_per_block: int = 1, max_blocks: int | None = None):
        """params: torch-named float32 arrays (copied to the device). batch: rows of the largest
        batch (buffers are allocated for it once). samples_per_block: samples each conv block
        of the fast backward sums before its atomics. max_blocks: cap on every grid (kernels
        are grid-stride, so any cap is correct); None on a GPU. The CUDA simulator runs each
        thread as a Python thread, so the simulator tests set a small cap."""
        why = available()
        if why is not None:
            raise RuntimeError(why)
        self.variant = self.VARIANT
        self.max_blocks = max_blocks
        self.batch = int(batch)
        self._arrays: list = []
        flat = np.concatenate([np.asarray(params[k], np.float32).ravel() for k in PARAM_NAMES])
        assert flat.size == N_PARAMS
        state = np.zeros((3, N_PARAMS), np.float32)
        state[0] = flat
        self.S = self._keep(cuda.to_device(state))  # [P; G; V], one buffer
        self.P, self.G, self.V = self.S[0], self.S[1], self.S[2]  # (N_PARAMS,) views
        self.params = {k: flat_view(self.P, k).reshape(PARAM_SHAPES[k]) for k in PARAM_NAMES}  # device views
        self.grads = {k: flat_view(self.G, k).reshape(PARAM_SHAPES[k]) for k in PARAM_NAMES}
        self.loss_sum = self._alloc(1, np.float64, zero=True)
        self._grads_dirty = False  # a backward ran since the last step (G holds gradients)
        self._have_head = False  # the last forward computed dlogits/dh (it was given labels)
        self._m = self.batch
        self._x_last = None  # input of the last forward (backward reads it)
        self._preds_all = None
        self._k_zero_1 = k_fill_zero[1, 32]
        self._grid: dict[str, int] = {"sgd": self.blocks(N_PARAMS), "zero_g": self.blocks(N_PARAMS)}
        self.stream = 0
        self._allocate(samples_per_block)
        self._configure()
        _LIVE.add(self)

    # ---------------------------------------------------------------- what a variant provides
    def _allocate(self, samples_per_block: int) -> None:
        """The variant's buffers and grid sizes (self._grid)."""

    def _configure(self) -> None:
        """The launch configurations on self.stream (0: the default stream)."""
        g, st = self._grid, self.stream
        self._k_sgd = k_sgd_state[g["sgd"], TPB, st]
        self._k_zero_g = k_fill_zero[g["zero_g"], TPB, st]

    def _launch_forward(self, x_dev, y_dev, mm: int, preds_out):
        """Enqueue the forward (with the loss head when y_dev is given); returns the logits."""
        raise NotImplementedError

    def _launch_loss_head(self, y_dev, mm: int) -> None:
        """Enqueue the loss head after a forward that had no labels."""
        raise NotImplementedError

    def _launch_backward(self, mm: int) -> None:
        """Enqueue the backward of the last forward (G is zero on entry)."""
        raise NotImplementedError

    def _launch_sgd(self, lr32, m32) -> None:
        self._k_sgd(self.S, lr32, m32)

    def _host_losses(self, mm: int) -> np.ndarray:
        """Each sample's loss of the last forward (host copy)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- buffers
    def cap(self, nb: int) -> int:
        """nb blocks, at most max_blocks (at least 1)."""
        return max(1, min(nb, self.max_blocks)) if self.max_blocks else max(1, nb)

    def blocks(self, count: int, tpb: int = TPB) -> int:
        """Blocks of tpb threads for count threads, capped."""
        return self.cap(max(1, (count + tpb - 1) // tpb))

    def _keep(self, arr):
        self._arrays.append(arr)
        return arr

    def _alloc(self, shape, dtype, zero: bool = False):
        if zero:
            return self._keep(cuda.to_device(np.zeros(shape, dtype)))
        return self._keep(cuda.device_array(shape, dtype))

    def _extra_bytes(self) -> int:
        return 0

    def device_bytes(self) -> int:
        """Bytes of device memory allocated by this net (parameters, state and workspace)."""
        extra = self._preds_all.nbytes if self._preds_all is not None else 0
        return int(sum(a.nbytes for a in self._arrays)) + int(extra) + self._extra_bytes()

    def _rows(self, x_dev) -> int:
        mm = int(x_dev.shape[0])
        if not 0 < mm <= self.batch:
            raise ValueError(f"{mm} rows for a net allocated for batch {self.batch}")
        return mm

    # ---------------------------------------------------------------- phases
    def use_stream(self, stream) -> None:
        """Enqueue train_step's kernels on a numba stream from now on (0: the default stream);
        capture_steps() records them on a torch stream this way."""
        self.stream = stream
        self._configure()

    def forward(self, x_dev, y_dev=None):
        """Enqueue the forward pass of x_dev (m,1,28,28) float32, m <= batch; returns the (m,10)
        logits (device). With y_dev (m,) int32/int64 the loss head runs too (loss, dlogits,
        dh) and the loss is added to the epoch sum. Labels must lie in [0, 10): checking them
        would cost a host sync, so they are not checked."""
        return self._forward(x_dev, y_dev, None)

    def _forward(self, x_dev, y_dev, preds_out):
        mm = self._rows(x_dev)
        if y_dev is not None and int(y_dev.shape[0]) < mm:
            raise ValueError(f"{y_dev.shape[0]} labels for {mm} images")
        self._m = mm
        self._x_last = x_dev  # conv1's weight gradient reads x in backward
        self._have_head = y_dev is not None
        return self._launch_forward(x_dev, y_dev, mm, preds_out)

    def backward(self, y_dev=None):
        """Enqueue the backward pass of the last forward (gradients into G). y_dev is needed
        only if that forward had no labels."""
        mm = self._m
        if not self._have_head:
            if y_dev is None:
                raise ValueError("the last forward had no labels: pass y_dev to backward")
            self._launch_loss_head(y_dev, mm)
            self._have_head = True
        if self._grads_dirty:  # two backwards without a step: G must restart from zero
            self._k_zero_g(self.G)
        self._grads_dirty = True
        self._launch_backward(mm)

    def step(self, lr: float, momentum: float) -> None:
        """Enqueue SGD with momentum (torch form) on all parameters; zeroes the gradients."""
        self._launch_sgd(np.float32(lr), np.float32(momentum))
        self._grads_dirty = False

    def train_step(self, x_dev, y_dev, lr: float, momentum: float) -> None:
        """forward (with the loss head) + backward + SGD step; no host sync, no allocation."""
        self.forward(x_dev, y_dev)
        self.backward()
        self.step(lr, momentum)

    def capture_steps(self, batches, lr: float, momentum: float, before=None, reset_loss: bool = False):
        """One CUDA graph of len(batches) train_steps on (x_dev, y_dev) device batches, each
        preceded by before(i, stream) if given (e.g. the gather that fills the batch buffers);
        .replay() enqueues them all with one host call. The graph reads this net's buffers and
        the batch arrays it was captured with. reset_loss: the graph first zeroes the epoch's
        loss sum (read it with epoch_loss_sum(reset=False))."""
        from bench.studies.mnist_cnn.kernels.numba_cuda.graph import CapturedLaunches

        def enqueue(stream) -> None:
            self.use_stream(stream)
            try:
                if reset_loss:
                    k_fill_zero[1, 32, stream](self.loss_sum)
                for i, (xb, yb) in enumerate(batches):
                    if before is not None:
                        before(i, stream)
                    self.train_step(xb, yb, lr, momentum)
            finally:
                self.use_stream(0)

        return CapturedLaunches(enqueue)

    # ---------------------------------------------------------------- host-side helpers (sync)
    def loss_and_grads(self, x_dev, y_dev) -> tuple[float, dict[str, np.ndarray], np.ndarray]:
        """Host copies of the mean loss, the 8 gradients and the logits for (x_dev, y_dev).
        For tests: syncs; adds the batch's loss to the epoch sum like train_step does."""
        logits = self.forward(x_dev, y_dev)
        self.backward()
        cuda.synchronize()
        losses = self._host_losses(self._m)
        grads = {k: self.grads[k].copy_to_host() for k in PARAM_NAMES}
        return float(np.mean(losses.astype(np.float64))), grads, logits.copy_to_host()

    def epoch_loss_sum(self, reset: bool = True) -> float:
        """The one host sync per epoch: the sum of every sample's loss since the last reset."""
        total = float(self.loss_sum.copy_to_host()[0])
        if reset:
            self._k_zero_1(self.loss_sum)
        return total

    def _host_rows(self, buf) -> dict[str, np.ndarray]:
        flat = buf.copy_to_host()
        return {k: flat[OFFSETS[k] : OFFSETS[k] + int(np.prod(s))].reshape(s).copy() for k, s in PARAM_SHAPES.items()}

    def params_host(self) -> dict[str, np.ndarray]:
        return self._host_rows(self.P)

    def velocity_host(self) -> dict[str, np.ndarray]:
        return self._host_rows(self.V)

    def predict(self, x_dev_all) -> np.ndarray:
        """Predicted labels (int64, host) for a device array (N,1,28,28) of any length, in chunks
        of `batch` (the last one short); one sync at the end. Does not touch gradients or loss."""
        total = int(x_dev_all.shape[0])
        if self._preds_all is None or self._preds_all.shape[0] < total:
            self._preds_all = cuda.device_array(max(total, 1), np.int32)
        out = self._preds_all
        for off in range(0, total, self.batch):
            mm = min(self.batch, total - off)
            self._forward(x_dev_all[off : off + mm], None, out[off : off + mm])
        self._have_head = False
        return out[:total].copy_to_host().astype(np.int64)
