"""The seed-000 CNN in torch, and its trainer for any torch device.

Pipelines:
  seed      per-sample transforms through a DataLoader (PIL image -> ToTensor -> Normalize),
            as the seed did; batch order from the study's seeded permutation.
  resident  the whole training set normalised once into one tensor on the device; batches
            are slices of a seeded permutation (index_select); no per-sample Python work.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.measure.timer import NullTimer
from bench.studies.mnist_cnn.net import MNIST_MEAN, MNIST_STD, PARAM_NAMES, normalise_u8  # noqa: F401 (re-exported)


class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc1 = nn.Linear(400, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):  # x (N,1,28,28) -> logits (N,10)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def build_model(params: dict[str, np.ndarray], device: str = "cpu") -> SeedCNN:
    model = SeedCNN()
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(params[k])) for k in PARAM_NAMES})
    return model.to(device)


class _SeedDataset(torch.utils.data.Dataset):
    """Per-sample transforms, as torchvision.datasets.MNIST + transforms did in the seed."""

    def __init__(self, x_u8: np.ndarray, y: np.ndarray):
        from torchvision import transforms

        self.x, self.y = x_u8, y
        self.tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MNIST_MEAN,), (MNIST_STD,))])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        from PIL import Image

        return self.tf(Image.fromarray(self.x[i], mode="L")), int(self.y[i])


class _FixedOrder(torch.utils.data.Sampler):
    def __init__(self):
        self.order: np.ndarray = np.zeros(0, np.int64)

    def __iter__(self):
        return iter(self.order.tolist())

    def __len__(self):
        return len(self.order)


_NO_PHASES = NullTimer()  # warm-up steps record nothing


class TorchTrainer:
    profiles_phases = True  # the profiling pass times its phases (synced) before epoch 1

    def __init__(self, cfg, params, data, device: str = "cpu", dist=None):
        """DIST (bench.core.dist.Dist): this rank of a many-device cell: its device, DDP around
        the model (evaluation and params() use the model itself)."""
        self.cfg, self.device = cfg, dist.device if dist else torch.device(device)
        self.core = build_model(params, str(self.device))
        self.model = dist.wrap(self.core) if dist else self.core
        self.opt = torch.optim.SGD(self.core.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        self.loss_fn = nn.CrossEntropyLoss()
        self.data = data
        self.x_test = torch.from_numpy(normalise_u8(data.x_test)).to(self.device)
        self.y_test = torch.from_numpy(data.y_test).to(self.device)
        self.y_train = torch.from_numpy(data.y_train).to(self.device)
        if cfg.pipeline == "resident":
            self.x_train = torch.from_numpy(normalise_u8(data.x_train)).to(self.device)
        else:
            self.sampler = _FixedOrder()
            self.loader = torch.utils.data.DataLoader(
                _SeedDataset(data.x_train, data.y_train),
                batch_size=cfg.batch_size,
                sampler=self.sampler,
                num_workers=0,
                drop_last=False,
            )

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def warmup(self) -> float:
        """Two real training steps (forward, backward, optimizer: the momentum buffers and the
        optimizer's first-step paths get made) on a real batch shape through the cell's own
        pipeline, then weights and optimizer state put back: training starts from the seed's
        initial state, and epoch 1 pays no first-step cost."""
        t0 = time.perf_counter()
        snap = self.snapshot()
        order = np.arange(2 * self.cfg.batch_size, dtype=np.int64) % len(self.data.y_train)
        self.train_epoch(order, _NO_PHASES)
        self.sync()
        self.restore(snap)
        self.sync()
        return time.perf_counter() - t0

    def snapshot(self):
        """Weights and optimizer state, to undo warm-up and profiling steps."""
        return {k: v.detach().clone() for k, v in self.core.state_dict().items()}, copy.deepcopy(self.opt.state_dict())

    def restore(self, snap) -> None:
        weights, opt_state = snap
        with torch.no_grad():
            for k, v in self.core.state_dict().items():
                v.copy_(weights[k])  # in place: parameter addresses stay (graphs, the optimizer)
        self.opt.load_state_dict(opt_state)  # no momentum buffers yet: the next step starts them, as at step 1
        self.opt.zero_grad(set_to_none=True)

    def compile_kind(self) -> str:
        return "none (eager: first-call kernel selection and allocator warm-up only)"

    def _batches(self, order: np.ndarray, timer):
        bs = self.cfg.batch_size
        if self.cfg.pipeline == "resident":
            idx_all = torch.from_numpy(order).to(self.device)
            for s in range(0, len(order), bs):
                with timer.phase("data"):
                    idx = idx_all[s : s + bs]
                    xb, yb = self.x_train.index_select(0, idx), self.y_train.index_select(0, idx)
                yield xb, yb
        else:
            self.sampler.order = order
            it = iter(self.loader)
            while True:
                with timer.phase("data"):
                    try:
                        xb, yb = next(it)
                    except StopIteration:
                        return
                    xb, yb = xb.to(self.device, non_blocking=True), yb.to(self.device, non_blocking=True)
                yield xb, yb

    def train_epoch(self, order: np.ndarray, timer) -> dict:
        self.model.train()
        losses, used = [], set()
        for xb, yb in self._batches(order, timer):
            used.add(int(xb.shape[0]))
            with timer.phase("forward"):
                loss = self.loss_fn(self.model(xb), yb)
            with timer.phase("backward"):
                loss.backward()
            with timer.phase("step"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        self.sync()
        return {"train_loss": float(torch.stack(losses).mean()), "batch_size_used": max(used), "batch_sizes_seen": sorted(used)}

    @torch.no_grad()
    def evaluate(self) -> float:
        self.core.eval()  # the model itself: a DDP forward would wait for the other ranks
        correct = 0
        for s in range(0, len(self.y_test), 2048):
            correct += int((self.core(self.x_test[s : s + 2048]).argmax(1) == self.y_test[s : s + 2048]).sum())
        return correct / len(self.y_test)

    def phase_fields(self, timer) -> dict:
        return timer.as_fields()

    def memory(self) -> dict:
        return {}

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy() for k, v in self.core.state_dict().items()}
