"""Bytes a torch model moves per sample, two bounds, and its memory model.

- Upper bound (`ByteCounter`, a TorchDispatchMode): every aten op reads its tensor inputs
  and writes its tensor outputs in full, each distinct tensor once per op; views cost
  nothing. That is the DRAM traffic of an unfused run in which each op streams its operands
  through DRAM exactly once: an upper bound for fused or cache-friendly execution (a kernel
  that re-reads its inputs, via im2col, split-K or a workspace, can still move more). Seen
  at the dispatch level, so the same on every device.
- Lower bound: what any implementation must move once: parameters + input + output
  (training adds the gradients written once).

Both are per sample at the counting pass's batch: parameters are read once per batch, so the
per-sample bytes (and the arithmetic intensity) depend on the batch, unlike FLOPs.

The memory model (`MemoryModel`): parameter, buffer and gradient bytes, and the activations
autograd saves for backward (`torch.autograd.graph.saved_tensors_hooks`, each distinct
storage once, parameters excluded), measured on the counting device (cuDNN and CPU kernels
save nearly the same tensors; BatchNorm's saved statistics differ in size by a few floats).

Arithmetic intensity = FLOPs / bytes: `arithmetic_intensity` gives both variants (low = FLOPs
/ upper-bound bytes, high = FLOPs / lower-bound bytes); a roofline point lies between them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from torch.utils._python_dispatch import TorchDispatchMode

from bench.measure.flops import default_loss, eager_copy

if TYPE_CHECKING:
    from bench.measure.flops import FlopCount

COUNTER = "dispatch-level tensor nbytes (bench.measure.bytecount.ByteCounter)"

# aten overload packets by name (torch.ops.aten.<name>), to keep this module cheap to import
_ALIAS = {"_unsafe_view", "alias", "lift_fresh", "detach"}  # return a tensor sharing the input's memory
_NO_WRITE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}  # allocate, write nothing
_INPUTS_NOT_READ = {"empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros", "new_ones", "new_full"}
_SELF_NOT_READ = {"copy_", "fill_", "zero_"}  # overwrite their first argument without reading it


def _nbytes(t) -> int:
    """Distinct bytes a tensor spans: its numel x itemsize, capped by its storage (an expanded
    tensor with stride 0 spans only its storage)."""
    n = t.numel() * t.element_size()
    try:
        return min(n, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):  # no storage (sparse, some subclasses)
        return n


def _distinct_tensors(tree) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    seen: dict[int, Any] = {}
    for x in tree_leaves(tree):
        if isinstance(x, torch.Tensor):
            seen.setdefault(id(x), x)
    return list(seen.values())


class ByteCounter(TorchDispatchMode):
    """`with ByteCounter() as bc: work()` then `bc.read_bytes`, `bc.written_bytes`, `bc.by_op`
    (op name -> [calls, read bytes, written bytes]). Counts every aten op below autograd, so
    a backward pass inside the block is counted too."""

    def __init__(self) -> None:
        super().__init__()
        self.by_op: dict[str, list[int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if func.is_view or name in _ALIAS:
            rd = wr = 0
        else:
            ins = [] if name in _INPUTS_NOT_READ else _distinct_tensors((args, kwargs))
            if name in _SELF_NOT_READ and args:
                ins = [t for t in ins if t is not args[0]]
            rd = sum(_nbytes(t) for t in ins)
            wr = 0 if name in _NO_WRITE else sum(_nbytes(t) for t in _distinct_tensors(out))
        rec = self.by_op.setdefault(str(func), [0, 0, 0])
        rec[0] += 1
        rec[1] += rd
        rec[2] += wr
        return out

    @property
    def read_bytes(self) -> int:
        return sum(r[1] for r in self.by_op.values())

    @property
    def written_bytes(self) -> int:
        return sum(r[2] for r in self.by_op.values())


class SavedTensorBytes:
    """`with SavedTensorBytes(exclude=params) as s: loss = f(x)` then `s.bytes`: the distinct
    storages autograd saved for backward during the block (nbytes of each storage once),
    leaving out the storages of the tensors in `exclude` (the parameters)."""

    def __init__(self, exclude=()) -> None:
        self._skip = {t.untyped_storage().data_ptr() for t in exclude}
        self._seen: dict[int, int] = {}  # storage data_ptr -> storage nbytes

    def _pack(self, t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in self._skip:
            self._seen.setdefault(ptr, t.untyped_storage().nbytes())
        return t

    def __enter__(self) -> SavedTensorBytes:
        import torch

        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    @property
    def bytes(self) -> int:
        return sum(self._seen.values())


@dataclass(frozen=True)
class MemoryModel:
    """Bytes for one training step at `batch` (whole batch, not per sample)."""

    batch: int
    param_bytes: int  # every parameter once
    buffer_bytes: int  # BatchNorm running statistics and other buffers
    grad_bytes: int  # one gradient per trainable parameter
    saved_activation_bytes: int  # saved for backward, distinct storages, parameters excluded, input included
    input_bytes: int
    output_bytes: int


@dataclass(frozen=True)
class ByteCount:
    """Bytes per sample at `batch` (upper bound: ByteCounter; lower bound: compulsory traffic)."""

    model: str
    input_shape: tuple[int, ...]  # one sample
    batch: int
    torch_version: str
    forward_read_bytes: float  # per sample, ByteCounter, eval mode under no_grad
    forward_written_bytes: float
    train_read_bytes: float  # per sample, ByteCounter, train mode, forward + loss.backward()
    train_written_bytes: float
    memory: MemoryModel
    counter: str = COUNTER
    by_op_forward: dict[str, dict[str, float]] = field(default_factory=dict)  # aten op -> calls per batch, bytes per sample
    by_op_train: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def forward_bytes(self) -> float:
        return self.forward_read_bytes + self.forward_written_bytes

    @property
    def train_bytes(self) -> float:
        return self.train_read_bytes + self.train_written_bytes

    @property
    def forward_bytes_lower(self) -> float:
        m = self.memory
        return (m.param_bytes + m.input_bytes + m.output_bytes) / self.batch

    @property
    def train_bytes_lower(self) -> float:
        m = self.memory
        return (m.param_bytes + m.grad_bytes + m.input_bytes + m.output_bytes) / self.batch

    def as_fields(self) -> dict[str, Any]:
        m = self.memory
        return {
            "bytes_counter": self.counter,
            "bytes_batch": self.batch,
            "forward_bytes_per_sample": self.forward_bytes,
            "forward_lower_bytes_per_sample": self.forward_bytes_lower,
            "train_bytes_per_sample": self.train_bytes,
            "train_lower_bytes_per_sample": self.train_bytes_lower,
            "param_bytes": m.param_bytes,
            "grad_bytes": m.grad_bytes,
            "saved_activation_bytes_per_sample": m.saved_activation_bytes / self.batch,
        }

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            forward_bytes=self.forward_bytes,
            train_bytes=self.train_bytes,
            forward_bytes_lower=self.forward_bytes_lower,
            train_bytes_lower=self.train_bytes_lower,
        )
        return d


def _per_sample(by_op: dict[str, list[int]], batch: int) -> dict[str, dict[str, float]]:
    return {op: {"calls": c, "read_bytes": r / batch, "written_bytes": w / batch} for op, (c, r, w) in by_op.items()}


def count_bytes(
    model, input_shape: tuple[int, ...] = (3, 64, 64), batch: int = 128, *, name: str | None = None, loss_fn=None, device=None
) -> ByteCount:
    """Bytes per sample of `model` at `input_shape` (one sample) and `batch`, and its memory
    model. Untimed; runs on an eager copy on `device` (default: the model's own)."""
    import torch

    m = eager_copy(model)
    if device is None:
        p = next(m.parameters(), None)
        device = p.device if p is not None else torch.device("cpu")
    m = m.to(device)
    loss_fn = loss_fn or default_loss
    x = torch.randn(batch, *input_shape, device=device)
    params = list(m.parameters())

    m.eval()
    with torch.no_grad(), ByteCounter() as fwd:
        out = m(x)
    output_bytes = out.numel() * out.element_size()
    del out

    m.train()
    m.zero_grad(set_to_none=True)  # as after optimizer.zero_grad(): the first backward stores grads, adds none
    with ByteCounter() as train:
        loss_fn(m(x)).backward()
    m.zero_grad(set_to_none=True)
    with SavedTensorBytes(exclude=params) as saved:
        loss = loss_fn(m(x))
    del loss

    memory = MemoryModel(
        batch=batch,
        param_bytes=sum(p.numel() * p.element_size() for p in params),
        buffer_bytes=sum(b.numel() * b.element_size() for b in m.buffers()),
        grad_bytes=sum(p.numel() * p.element_size() for p in params if p.requires_grad),
        saved_activation_bytes=saved.bytes,
        input_bytes=x.numel() * x.element_size(),
        output_bytes=output_bytes,
    )
    return ByteCount(
        model=name or type(m).__name__,
        input_shape=tuple(input_shape),
        batch=batch,
        torch_version=torch.__version__,
        forward_read_bytes=fwd.read_bytes / batch,
        forward_written_bytes=fwd.written_bytes / batch,
        train_read_bytes=train.read_bytes / batch,
        train_written_bytes=train.written_bytes / batch,
        memory=memory,
        by_op_forward=_per_sample(fwd.by_op, batch),
        by_op_train=_per_sample(train.by_op, batch),
    )


@dataclass(frozen=True)
class Intensity:
    """Arithmetic intensity, FLOPs per byte: low = FLOPs / upper-bound bytes (no fusion, no
    cache reuse), high = FLOPs / lower-bound bytes (every byte moved once)."""

    batch: int  # the bytes' batch (FLOPs per sample do not depend on it)
    forward_low: float
    forward_high: float
    train_low: float
    train_high: float

    def as_fields(self) -> dict[str, float]:
        return {f"{k}_flops_per_byte": v for k, v in asdict(self).items() if k != "batch"}


def arithmetic_intensity(flops: FlopCount, nbytes: ByteCount) -> Intensity:
    """Both variants for forward and training (training uses `flops.train_flops_used`)."""
    return Intensity(
        batch=nbytes.batch,
        forward_low=flops.forward_flops / nbytes.forward_bytes,
        forward_high=flops.forward_flops / nbytes.forward_bytes_lower,
        train_low=flops.train_flops_used / nbytes.train_bytes,
        train_high=flops.train_flops_used / nbytes.train_bytes_lower,
    )


__all__ = [
    "COUNTER",
    "ByteCount",
    "ByteCounter",
    "Intensity",
    "MemoryModel",
    "SavedTensorBytes",
    "arithmetic_intensity",
    "count_bytes",
]
