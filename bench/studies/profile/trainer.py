"""The profile study's model, weights, data and training step (torch imported by the callers).

Model: torchvision `densenet121` (or another torchvision classifier) with its last Linear
replaced for the data's classes. Weights: <data dir>/<arch>-<hex>.pth when present and
`weights=auto` (torchvision's file name: <hex> is the first hex digits of the file's SHA-256,
checked before loading; a mismatch is an error, never a silent random init), else random
init; every row says which. Transfer: `frozen` turns requires_grad off in the backbone (the
new classifier trains), `finetune` trains everything. Optimizer: Adam over the trainable
parameters, the seed's.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from bench.core.errors import KitError
from bench.studies.profile.config import MEAN, STD, WEIGHTS_FILE, Settings


def weights_path(model: str, data_dir: str | os.PathLike | None) -> Path | None:
    """<data dir>/<file> for MODEL's torchvision weights file when it exists there, else None."""
    from bench.data import resolve_data_dir

    name = WEIGHTS_FILE.get(model) or ""
    p = resolve_data_dir(data_dir) / name if name else None
    return p if p is not None and p.is_file() else None


def check_weights(path: Path) -> str:
    """The file's SHA-256 when it starts with the hex prefix in its name (<arch>-<hex>.pth);
    KitError (one line) otherwise."""
    prefix = path.stem.rsplit("-", 1)[-1].lower()
    if not prefix or any(c not in "0123456789abcdef" for c in prefix):
        raise KitError(f"{path.name}: no hash prefix in the name (<arch>-<hex>.pth, as torchvision names its weights)")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if not digest.startswith(prefix):
        raise KitError(
            f"{path}: SHA-256 {digest[:12]}... does not start with {prefix} (its name's hash): a damaged or "
            "different file; delete it to train from random init, or put the right file there"
        )
    return digest


def build_model(cfg: Settings, n_classes: int, data_dir: str | os.PathLike | None) -> tuple[Any, dict]:
    """(model on the CPU, facts: weights, weights_sha256, trainable/total params)."""
    import torch
    import torchvision

    if cfg.model not in torchvision.models.list_models(module=torchvision.models):
        raise KitError(f"torchvision has no classification model {cfg.model!r} (torchvision {torchvision.__version__})")
    model = torchvision.models.get_model(cfg.model, weights=None)
    facts: dict[str, Any] = {"weights": "random", "weights_sha256": None}
    path = weights_path(cfg.model, data_dir) if cfg.weights == "auto" else None
    if path is not None:
        facts["weights_sha256"] = check_weights(path)
        state = torch.load(path, map_location="cpu", weights_only=True)
        if cfg.model.startswith("densenet"):  # the old checkpoints' 'norm.1' keys (torchvision's own fix-up)
            import re

            pat = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$")
            state = {(pat.sub(r"\1\2", k) if pat.match(k) else k): v for k, v in state.items()}
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise KitError(f"{path.name} does not fit torchvision's {cfg.model}: {str(err).splitlines()[0]}") from None
        facts["weights"] = "imagenet"
    head_name, head = _head(model)
    new = torch.nn.Linear(head.in_features, n_classes)
    _set_head(model, head_name, new)
    if cfg.transfer == "frozen":
        for p in model.parameters():
            p.requires_grad_(False)
        for p in new.parameters():
            p.requires_grad_(True)
    facts["params_total"] = sum(p.numel() for p in model.parameters())
    facts["params_trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return model, facts


def _head(model) -> tuple[str, Any]:
    import torch

    for name in ("classifier", "fc", "head", "heads"):
        m = getattr(model, name, None)
        if isinstance(m, torch.nn.Linear):
            return name, m
        if isinstance(m, torch.nn.Sequential) and isinstance(m[-1], torch.nn.Linear):
            return f"{name}.{len(m) - 1}", m[-1]
    raise KitError(f"{type(model).__name__}: no Linear classifier to replace (classifier, fc, head)")


def _set_head(model, name: str, new) -> None:
    parent = model
    *path, last = name.split(".")
    for p in path:
        parent = getattr(parent, p)
    if last.isdigit():
        parent[int(last)] = new
    else:
        setattr(parent, last, new)


class Batches:
    """Training and test batches: `loader` decodes the JPEG tree in DataLoader workers (uint8,
    normalised on the device), `synthetic-gpu` repeats one fixed batch already on the device."""

    def __init__(self, cfg: Settings, index, device, batch: int, rank: int = 0, world: int = 1):
        """BATCH images a step from this process; RANK of WORLD processes (ddp) each see their shard."""
        import torch

        self.cfg, self.device, self.batch, self.rank, self.world = cfg, device, batch, rank, world
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1) * 255
        self.n_classes = len(index.classes)
        self.n_train = len(index.files("train"))
        self.n_val = len(index.files("val"))
        if cfg.pipeline == "loader":
            from bench.data import imagefolder

            self.train_ds = imagefolder.dataset(index, "train", size=cfg.image_size)
            self.val_ds = imagefolder.dataset(index, "val", size=cfg.image_size)
        else:
            g = torch.Generator().manual_seed(cfg.seed)
            x = torch.randint(0, 256, (batch, 3, cfg.image_size, cfg.image_size), generator=g, dtype=torch.uint8)
            y = torch.randint(0, self.n_classes, (batch,), generator=g)
            self.fixed = (x.to(device), y.to(device))
        self.epoch = 0

    def steps_per_epoch(self) -> int:
        """loader: the shard's whole batches, at most max_steps. synthetic-gpu repeats one batch, so
        no tree limits it: max_steps when given, else as many steps as the train split would fill
        (ceil(n_train / a step's images), the loader's epoch)."""
        if self.cfg.pipeline == "synthetic-gpu":
            return self.cfg.max_steps or math.ceil(self.n_train / (self.batch * self.world))
        n = len(self.train_ds) // self.world // self.batch
        return min(n, self.cfg.max_steps) if self.cfg.max_steps else n

    def _loader(self, ds, shuffle: bool, epoch: int):
        import torch
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler: Any = None
        if self.world > 1:
            sampler = DistributedSampler(ds, self.world, self.rank, shuffle=shuffle, seed=self.cfg.seed, drop_last=True)
            sampler.set_epoch(epoch)
        g = torch.Generator().manual_seed(self.cfg.seed * 1000 + epoch)
        return DataLoader(
            ds,
            batch_size=self.batch,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            generator=g,
            num_workers=self.cfg.num_workers,
            pin_memory=self.device.type == "cuda",
            drop_last=shuffle,
            persistent_workers=False,
        )

    def train(self) -> Generator[tuple[Any, Any], None, None]:
        """One epoch's (x float normalised, y) batches on the device, `steps_per_epoch()` of them."""
        n = self.steps_per_epoch()
        self.epoch += 1
        if self.cfg.pipeline == "synthetic-gpu":
            x, y = self.fixed
            for _ in range(n):
                yield self.prep(x), y
            return
        for i, (x, y) in enumerate(self._loader(self.train_ds, True, self.epoch)):
            if i >= n:
                break
            yield self.prep(x.to(self.device, non_blocking=True)), y.to(self.device, non_blocking=True)

    def val(self) -> Iterator[tuple[Any, Any]]:
        if self.cfg.pipeline == "synthetic-gpu":
            return
        lim = self.cfg.max_eval_batches
        for i, (x, y) in enumerate(self._loader(self.val_ds, False, 0)):
            if lim and i >= lim:
                break
            yield self.prep(x.to(self.device, non_blocking=True)), y.to(self.device, non_blocking=True)

    def prep(self, x):
        import torch

        x = (x.float() - self.mean) / self.std
        return x.contiguous(memory_format=torch.channels_last) if self.cfg.bf16_cl else x


class Trainer:
    """Model, optimizer and one training step; `model` may be wrapped (DataParallel, DDP)."""

    def __init__(self, cfg: Settings, model, device, wrap=None, facts: dict | None = None):
        import torch

        self.cfg, self.device, self.facts = cfg, device, facts or {}
        model = model.to(device)
        if cfg.bf16_cl:
            model = model.to(memory_format=torch.channels_last)
        self.core = model
        self.model = wrap(model) if wrap is not None else model
        self.opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        if cfg.transfer == "frozen":  # the frozen backbone also keeps its BatchNorm statistics
            self.core.eval()
        self.amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16_cl)

    def train_mode(self) -> None:
        if self.cfg.transfer == "finetune":
            self.model.train()
        else:
            self.core.eval()
            _, head = _head(self.core)
            head.train()

    def step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        with self.amp:
            loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def sync(self) -> None:
        from bench.measure.torchdev import sync

        sync(self.device)

    def warmup(self, batches: Batches) -> float:
        """WARMUP_STEPS real steps (cuDNN autotune, allocator), then weights and optimizer restored."""
        import copy

        if self.cfg.warmup_steps <= 0:
            return 0.0
        t0 = time.perf_counter()
        model_state = copy.deepcopy(self.core.state_dict())
        opt_state = copy.deepcopy(self.opt.state_dict())
        self.train_mode()
        it = batches.train()
        for _ in range(self.cfg.warmup_steps):
            try:
                x, y = next(it)
            except StopIteration:
                break
            self.step(x, y)
        it.close()
        self.sync()
        self.core.load_state_dict(model_state)
        self.opt.load_state_dict(opt_state)
        batches.epoch = 0
        return time.perf_counter() - t0

    def evaluate(self, batches: Batches) -> tuple[float | None, int]:
        """(top-1 accuracy, images) over the val split; (None, 0) on synthetic-gpu."""
        import torch

        self.core.eval()  # unwrapped: a DDP forward would wait for the other ranks
        right = seen = 0
        with torch.no_grad(), self.amp:
            for x, y in batches.val():
                right += int((self.core(x).argmax(1) == y).sum())
                seen += int(y.numel())
        self.train_mode()
        return (right / seen if seen else None), seen


def train_epoch(tr: Trainer, batches: Batches, barrier=None) -> dict:
    """One timed epoch: device synced (and, under ddp, every rank met at BARRIER) before the
    clock starts and after the last step; first_batch_s: from the start to the first batch in
    hand (the DataLoader's workers start every epoch; about 0 on synthetic-gpu). Monotonic start/end times (CLOCK_MONOTONIC is one
    clock for every process of the host) let the telemetry sampler cut out the window."""
    import torch

    tr.train_mode()
    tr.sync()
    if barrier is not None:
        barrier()
    t0, m0 = time.perf_counter(), time.monotonic()
    total = torch.zeros((), device=batches.device)
    steps = 0
    first_batch_s = None
    for x, y in batches.train():
        if first_batch_s is None:  # the loader's start and first batch (its workers start each epoch)
            first_batch_s = time.perf_counter() - t0
        total += tr.step(x, y)
        steps += 1
    tr.sync()
    if barrier is not None:
        barrier()
    t1, m1 = time.perf_counter(), time.monotonic()
    if not steps:  # never an `ok` row of nothing (protocol.check_steps refuses such a cell up front)
        raise KitError(
            f"an epoch ran 0 training steps (train split {batches.n_train} images, {batches.batch * batches.world} a step)"
        )
    loss = float(total) / steps
    return {
        "epoch_s": t1 - t0,
        "steps": steps,
        "samples": steps * batches.batch * batches.world,
        "samples_per_s": steps * batches.batch * batches.world / (t1 - t0) if steps else None,
        "first_batch_s": first_batch_s,  # inside epoch_s: what a longer epoch pays once (the report's projection)
        "train_loss": loss,
        "loss_finite": math.isfinite(loss),
        "t_start_mono": m0,
        "t_end_mono": m1,
    }
