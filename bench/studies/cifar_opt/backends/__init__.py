"""cifar-opt backends: one thin module per device (available, create). Each create() returns
bench.studies.cifar_opt.trainer.Trainer for its device; `Trainer` below is what the protocol,
the inference forms and the Optuna search use of it (every member required)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Trainer(Protocol):
    device: Any  # torch.device the cell runs on
    model: Any  # the nn.Module (eager)
    fwd: Any  # the module a step calls (torch.compile'd under 'compile')
    opt: Any  # torch.optim.SGD
    opts: set  # the variant's options (bf16, fp16, cl, compile, graphs)
    fmt: Any  # torch memory format (channels_last under 'cl')
    amp: Any  # autocast dtype, or None
    batch: int  # images per step
    pipe: Any  # the input pipeline (loader | resident | synthetic-gpu); .workers
    mean: list  # per-channel normalisation of the training subsample
    std: list
    x_eval: Any  # the normalised test subsample on the device
    y_eval: Any

    def sync_device(self) -> None: ...
    def warmup(self, steps: int = 3) -> float: ...
    def train_epoch(self) -> dict: ...
    def evaluate(self, batch: int = 500) -> float: ...
    def calibration_batches(self, n: int) -> list: ...
    def reset_peak(self) -> None: ...
    def memory(self) -> dict: ...
    def python_heap_peak_mb(self, steps: int = 4) -> float: ...
