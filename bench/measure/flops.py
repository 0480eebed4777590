"""FLOPs of a torch model per sample: forward, and forward + backward (one training step's
maths, optimizer excluded), counted two ways and cross-checked.

- The counter: `torch.utils.flop_counter.FlopCounterMode` (what DESIGN.md names for torch
  models) on an eager copy of the model, in an untimed pass at the cell's real input size.
  It counts matmul / conv / SDPA only (no BatchNorm, ReLU, pooling, adds), 2 FLOPs per
  multiply-add, bias adds excluded.
- The analytic count: forward hooks on every nn.Conv1d/2d/3d and nn.Linear read the real
  shapes; forward = 2 * MACs; backward = grad-input + grad-weight, each the forward's count,
  grad-input only where the layer's input requires grad (so never for the first layer).

Both store FLOPs, not MACs. Counts are exact and linear in the batch, so a batch of 2 gives
the per-sample figure of any batch.

Finding (torch 2.14.1+cu130 on CPU, 2026-11; torchvision 0.29.1 models, 200 classes, input
3x64x64, batch 2; MFLOPs per sample; `lab/roofs_check.py` prints this table):

    model          fwd ctr  fwd ana  train ctr  train ana  ctr/ana  train/fwd ctr  train/fwd ana
    resnet18         296.3    296.3      869.6      869.6    1.000           2.93           2.93
    resnet50         668.1    668.1     1985.1     1985.1    1.000           2.97           2.97
    mobilenet_v2      49.4     49.4     1003.3      146.5    6.851          20.31           2.96
    squeezenet1_1     35.8     35.8      104.1      104.1    1.000           2.91           2.91

(The seed's "FLOPs/Image" at 224x224, e.g. 1.824 G for ResNet-18, are MACs: 1.824e9 MACs x 2
x (64/224)^2 = 297.8 MFLOPs, the counter's 296.3 up to bias and rounding.)

The issue's H100 ratios (MobileNetV2 train = 20x forward, ResNet-18 2.9x) are reproduced on
CPU: the counter works at the dispatch level (aten.convolution / aten.convolution_backward,
the same ops on every device), so its counts do not depend on the device. The 20x is a
counter bug, not real work:

- A depthwise conv's backward dispatches one `aten.convolution_backward.default(grad_out, x,
  w[C, 1, k, k], ..., groups=C, output_mask=[True, True, False])` (seen with a
  TorchDispatchMode on CPU).
- flop_counter's `conv_backward_flop` ignores `groups` (its argument `_groups` is unused).
  grad-input is still right, because it reads C_in/groups from the weight's shape. But
  grad-weight is counted as conv(t(x), t(grad_out)) with x's full C_in, which is `groups`
  times the true count: exactly C times too much for a depthwise conv (C up to 960 in
  MobileNetV2). The forward formula is right (it uses the weight's C_in/groups).
- So the counter's MobileNetV2 training count is 6.85x the analytic count (20.3x forward,
  against 2.9-3.0x for the other three; train/forward is just under 3 because the first
  conv needs no grad-input). With a groups-aware formula for
  aten.convolution_backward (`_conv_backward_flop` below, passed as `custom_mapping`) the
  counter agrees with the analytic count exactly for all four models.

`count_flops` therefore reports the counter's raw figure and the analytic one, and uses the
analytic one for training when they differ by more than 10% (`train_flops_used`, `why`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any

COUNTER = "torch.utils.flop_counter.FlopCounterMode"
AGREE_REL = 0.10  # counter and analytic training counts "agree" within 10 %
FORWARD_AGREE_REL = 0.01  # the analytic count covers the model when the forward counts agree within 1 %


@dataclass(frozen=True)
class LayerFlops:
    """One Conv/Linear layer, FLOPs per sample. `counter_*` are FlopCounterMode's figures for
    the same module (forward pass, and forward + backward)."""

    name: str  # qualified module name, e.g. "features.1.conv.0.0"
    kind: str  # "Conv2d", "Linear", ...
    groups: int
    forward: float  # 2 * MACs
    grad_input: float  # 0 where the layer's input needs no grad (the first layer)
    grad_weight: float
    counter_forward: float
    counter_train: float

    @property
    def train(self) -> float:
        return self.forward + self.grad_input + self.grad_weight


@dataclass(frozen=True)
class FlopCount:
    """FLOPs per sample of one model at one input size. Units: FLOPs (not MACs)."""

    model: str  # a label: the name given, else the model's class name
    input_shape: tuple[int, ...]  # one sample, e.g. (3, 64, 64)
    batch: int  # the counting pass's batch (counts are per sample: linear in the batch)
    torch_version: str
    forward_flops: float  # counter, eval mode under no_grad
    train_flops_counted: float  # counter, train mode, forward + loss.backward()
    train_flops_corrected: float  # counter with a groups-aware conv backward formula
    forward_flops_analytic: float
    train_flops_analytic: float
    train_flops_used: float  # what FLOP/s figures should use
    why: str  # "counter" or "analytic (...)" / "counter, groups-corrected (...)": the reason
    counter: str = COUNTER
    by_module_forward: dict[str, dict[str, float]] = field(default_factory=dict)  # module -> aten op -> FLOPs/sample
    by_module_train: dict[str, dict[str, float]] = field(default_factory=dict)
    layers: list[LayerFlops] = field(default_factory=list)

    @property
    def train_to_forward_counted(self) -> float:
        return self.train_flops_counted / self.forward_flops if self.forward_flops else math.nan

    @property
    def train_to_forward_analytic(self) -> float:
        return self.train_flops_analytic / self.forward_flops_analytic if self.forward_flops_analytic else math.nan

    @property
    def counted_to_analytic_train(self) -> float:
        return self.train_flops_counted / self.train_flops_analytic if self.train_flops_analytic else math.nan

    def as_fields(self) -> dict[str, Any]:
        """Flat, row-ready scalars; names end in their unit (FLOPs per sample, a ratio)."""
        return {
            "flops_counter": self.counter,
            "flops_torch_version": self.torch_version,
            "forward_flops_per_sample": self.forward_flops,
            "train_counted_flops_per_sample": self.train_flops_counted,
            "train_corrected_flops_per_sample": self.train_flops_corrected,
            "forward_analytic_flops_per_sample": self.forward_flops_analytic,
            "train_analytic_flops_per_sample": self.train_flops_analytic,
            "train_flops_per_sample": self.train_flops_used,
            "train_flops_why": self.why,
            "train_to_forward_counted_ratio": self.train_to_forward_counted,
            "train_to_forward_analytic_ratio": self.train_to_forward_analytic,
        }

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["layers"] = [{**asdict(r), "train": r.train} for r in self.layers]
        d.update(
            train_to_forward_counted=self.train_to_forward_counted,
            train_to_forward_analytic=self.train_to_forward_analytic,
            counted_to_analytic_train=self.counted_to_analytic_train,
        )
        return d


# ---- the groups-aware backward formula ---------------------------------------------------


def _conv_backward_flop(
    grad_out_shape,
    x_shape,
    w_shape,
    _bias,
    _stride,
    _padding,
    _dilation,
    transposed,
    _output_padding,
    groups,
    output_mask,
    out_shape,
    **kwargs,
) -> int:
    """aten.convolution_backward FLOPs with groups counted (FlopCounterMode passes shapes).

    Shapes: x [N, C_in, *in], grad_out [N, C_out, *out]; w [C_out, C_in/g, *k] (transposed:
    [C_in, C_out/g, *k]). Each of grad-input and grad-weight does the forward's multiply-adds:
    2 * N * C_out * C_in/g * prod(k) * prod(the non-transposed conv's output size).
    """
    spatial = x_shape[2:] if transposed else grad_out_shape[2:]  # the "output" of the non-transposed conv
    per_grad = 2 * x_shape[0] * w_shape[0] * w_shape[1] * math.prod(w_shape[2:]) * math.prod(spatial)
    return per_grad * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


# ---- analytic count -----------------------------------------------------------------------


def _analytic_hooks(model, records: list[dict]):
    """Forward hooks on Conv1d/2d/3d and Linear; each call appends the layer's FLOPs (whole
    batch). Transposed convs are left to the counter (not in the study's models)."""
    import torch.nn as nn

    handles = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Conv1d | nn.Conv2d | nn.Conv3d):

            def hook(m, inp, out, name=name):
                w = m.weight  # [C_out, C_in/groups, *k]
                fwd = 2 * out.shape[0] * w.shape[0] * w.shape[1] * math.prod(w.shape[2:]) * math.prod(out.shape[2:])
                records.append(
                    dict(
                        name=name,
                        kind=type(m).__name__,
                        groups=m.groups,
                        fwd=fwd,
                        x_grad=inp[0].requires_grad,
                        w_grad=w.requires_grad,
                    )
                )

        elif isinstance(mod, nn.Linear):

            def hook(m, inp, out, name=name):
                rows = inp[0].numel() // m.in_features  # batch x any leading dims
                fwd = 2 * rows * m.in_features * m.out_features
                records.append(
                    dict(name=name, kind="Linear", groups=1, fwd=fwd, x_grad=inp[0].requires_grad, w_grad=m.weight.requires_grad)
                )

        else:
            continue
        handles.append(mod.register_forward_hook(hook))
    return handles


def default_loss(out):
    import torch
    import torch.nn.functional as F

    if out.dim() == 2:  # logits [N, classes]: the training loss the studies use
        return F.cross_entropy(out.float(), torch.zeros(out.shape[0], dtype=torch.long, device=out.device))
    return out.float().sum()


def _per_sample(counts: dict[str, dict[Any, int]], batch: int) -> dict[str, dict[str, float]]:
    return {mod: {str(op): n / batch for op, n in ops.items()} for mod, ops in counts.items()}


def eager_copy(model):
    """A deep copy of the eager module (a torch.compile wrapper's original), so counting passes
    touch neither the timed model's BatchNorm statistics nor its compiled graph."""
    return copy.deepcopy(getattr(model, "_orig_mod", model))


def count_flops(
    model, input_shape: tuple[int, ...] = (3, 64, 64), batch: int = 2, *, name: str | None = None, loss_fn=None, device=None
) -> FlopCount:
    """Count FLOPs per sample of `model` at `input_shape` (one sample, no batch dim).

    Untimed: never call inside a timed region. Runs on an eager copy on `device` (default: the
    model's own). The forward pass runs in eval mode under no_grad; the training pass in train
    mode, `loss_fn(out).backward()` (default: cross-entropy on logits). `name` labels the
    result (default: the model's class name).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    m = eager_copy(model)
    if device is None:
        p = next(m.parameters(), None)
        device = p.device if p is not None else torch.device("cpu")
    m = m.to(device)
    loss_fn = loss_fn or default_loss
    root = type(m).__name__
    x = torch.randn(batch, *input_shape, device=device)

    m.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as fwd_counter:
        m(x)

    m.train()
    records: list[dict] = []
    handles = _analytic_hooks(m, records)
    try:
        with FlopCounterMode(display=False) as train_counter:
            loss_fn(m(x)).backward()
    finally:
        for h in handles:
            h.remove()
    m.zero_grad(set_to_none=True)
    fixed = {torch.ops.aten.convolution_backward: _conv_backward_flop}
    with FlopCounterMode(display=False, custom_mapping=fixed) as fixed_counter:
        loss_fn(m(x)).backward()

    fwd_mod, train_mod = fwd_counter.get_flop_counts(), train_counter.get_flop_counts()
    layers = []
    for r in records:
        key = f"{root}.{r['name']}"
        layers.append(
            LayerFlops(
                name=r["name"],
                kind=r["kind"],
                groups=r["groups"],
                forward=r["fwd"] / batch,
                grad_input=r["fwd"] / batch if r["x_grad"] else 0.0,
                grad_weight=r["fwd"] / batch if r["w_grad"] else 0.0,
                counter_forward=sum(fwd_mod.get(key, {}).values()) / batch,
                counter_train=sum(train_mod.get(key, {}).values()) / batch,
            )
        )

    fwd = fwd_counter.get_total_flops() / batch
    counted = train_counter.get_total_flops() / batch
    corrected = fixed_counter.get_total_flops() / batch
    a_fwd = sum(r.forward for r in layers)
    a_train = sum(r.train for r in layers)
    used, why = _choose(fwd, counted, corrected, a_fwd, a_train, layers)
    return FlopCount(
        model=name or root,
        input_shape=tuple(input_shape),
        batch=batch,
        torch_version=torch.__version__,
        forward_flops=fwd,
        train_flops_counted=counted,
        train_flops_corrected=corrected,
        forward_flops_analytic=a_fwd,
        train_flops_analytic=a_train,
        train_flops_used=used,
        why=why,
        by_module_forward=_per_sample(fwd_mod, batch),
        by_module_train=_per_sample(train_mod, batch),
        layers=layers,
    )


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def _choose(fwd, counted, corrected, a_fwd, a_train, layers: list[LayerFlops]) -> tuple[float, str]:
    """Which training count to use, and why (in words that say the evidence)."""
    if a_train and _rel(counted, a_train) <= AGREE_REL:
        return counted, "counter"
    grouped = [r for r in layers if r.groups > 1]
    detail = (
        f"counter {counted:.4g}, analytic {a_train:.4g}, groups-aware counter {corrected:.4g} FLOPs/sample; "
        f"{len(grouped)} grouped conv layers (groups up to {max((r.groups for r in grouped), default=1)})"
    )
    if a_fwd and _rel(fwd, a_fwd) <= FORWARD_AGREE_REL:  # the analytic count covers every counted op
        return a_train, f"analytic (FlopCounterMode overcounts grouped conv backward by {counted / a_train:.2f}x: {detail})"
    return corrected, f"counter, groups-corrected (the analytic count misses ops the counter sees: {detail})"


def format_table(counts: list[FlopCount]) -> str:
    """The cross-check table, MFLOPs per sample, one line per model."""
    head = f"{'model':<16}{'fwd ctr':>10}{'fwd ana':>10}{'train ctr':>11}{'train ana':>11}{'ctr/ana':>9}{'trn/fwd ctr':>12}{'trn/fwd ana':>12}  used"
    lines = [head]
    for c in counts:
        lines.append(
            f"{c.model:<16}{c.forward_flops / 1e6:>10.1f}{c.forward_flops_analytic / 1e6:>10.1f}"
            f"{c.train_flops_counted / 1e6:>11.1f}{c.train_flops_analytic / 1e6:>11.1f}{c.counted_to_analytic_train:>9.3f}"
            f"{c.train_to_forward_counted:>12.2f}{c.train_to_forward_analytic:>12.2f}  {c.why.split(' (')[0]}"
        )
    return "\n".join(lines)


__all__ = ["COUNTER", "FlopCount", "LayerFlops", "count_flops", "default_loss", "eager_copy", "format_table"]
