"""Input pipelines: what feeds a training step, named in every row (`pipeline`).

    loader         the seed's: a torch DataLoader over the uint8 subsample, per-sample
                   RandomCrop(32, padding=4) + RandomHorizontalFlip + normalisation in the
                   workers (num_workers, pin_memory on CUDA), batches copied to the device
    resident       the uint8 subsample lives on the device, zero-padded once to 40x40; each
                   batch is gathered with its random crop offsets and flips in ONE indexing
                   kernel, then normalised there (as fast CIFAR trainers do); no host work
    synthetic-gpu  one fixed random batch kept on the device and reused every step: the
                   throughput upper bound (TorchBench's way); its accuracy means nothing

All three drop the last partial batch (`last_batch: drop`): a fixed batch shape keeps
compiled code and CUDA graphs from recompiling or recapturing for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from bench.core.machine import usable_cores

PAD = 4  # RandomCrop(32, padding=4)


def mean_std(x_u8: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of uint8 (N,3,H,W) images scaled to [0,1] (the training subsample's)."""
    x = x_u8.astype(np.float64) / 255.0
    return x.mean(axis=(0, 2, 3)).tolist(), x.std(axis=(0, 2, 3)).tolist()


def normalise(x_u8: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """uint8 (N,3,H,W) -> float32, (x/255 - mean)/std per channel."""
    return (x_u8.float().mul_(1 / 255) - mean.view(1, 3, 1, 1)) / std.view(1, 3, 1, 1)


def workers_for(num_workers: int, device: str) -> int:
    """-1: the seed's count (8 on CPU, 4 on a GPU host) capped at the cores this process may use."""
    if num_workers >= 0:
        return num_workers
    return min(8 if device == "cpu" else 4, usable_cores())


class _Augmented(torch.utils.data.Dataset):
    """The seed's per-sample path: crop + flip + normalise one image at a time (in a worker)."""

    def __init__(self, x_u8: np.ndarray, y: np.ndarray, mean: list[float], std: list[float]):
        from torchvision.transforms import v2

        self.x, self.y = torch.tensor(x_u8), torch.tensor(y)  # copies: the loaded arrays are read-only
        self.tf = v2.Compose(
            [
                v2.RandomCrop(32, padding=PAD),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(mean, std),
            ]
        )

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.tf(self.x[i]), self.y[i]


class LoaderPipeline:
    name = "loader"

    def __init__(self, x_u8, y, mean, std, batch: int, seed: int, device: str, num_workers: int):
        self.device = torch.device(device)
        self.workers = workers_for(num_workers, device)
        self.batch, self.n = batch, len(y)
        gen = torch.Generator().manual_seed(seed)  # shuffling and the workers' augmentation seeds
        self.loader = torch.utils.data.DataLoader(
            _Augmented(x_u8, y, mean, std),
            batch_size=batch,
            shuffle=True,
            drop_last=True,
            num_workers=self.workers,
            pin_memory=self.device.type == "cuda",
            generator=gen,
        )

    @property
    def steps(self) -> int:
        return self.n // self.batch

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        nb = self.device.type == "cuda"
        for xb, yb in self.loader:
            yield xb.to(self.device, non_blocking=nb), yb.to(self.device, non_blocking=nb)


class ResidentPipeline:
    name = "resident"

    def __init__(self, x_u8, y, mean, std, batch: int, seed: int, device: str, num_workers: int = 0):
        dev = self.device = torch.device(device)
        padded = np.pad(x_u8, ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))  # zeros, as RandomCrop's padding
        self.x = torch.from_numpy(padded).to(dev)  # uint8 (N,3,40,40) on the device
        self.y = torch.tensor(y, device=dev)
        self.mean = torch.tensor(mean, device=dev)
        self.std = torch.tensor(std, device=dev)
        self.gen = torch.Generator(device=dev).manual_seed(seed)
        self.batch, self.n, self.workers = batch, len(y), 0
        self.ar = torch.arange(32, device=dev)
        self.ci = torch.arange(3, device=dev).view(1, 3, 1, 1)

    @property
    def steps(self) -> int:
        return self.n // self.batch

    def augment(self, idx: torch.Tensor) -> torch.Tensor:
        """Crop (offsets 0..8) and flip each image named by IDX (B,), normalised: float32 (B,3,32,32)."""
        b = len(idx)
        dy = torch.randint(0, 2 * PAD + 1, (b, 1), device=self.device, generator=self.gen)
        dx = torch.randint(0, 2 * PAD + 1, (b, 1), device=self.device, generator=self.gen)
        flip = torch.rand(b, 1, device=self.device, generator=self.gen) < 0.5
        rows = dy + self.ar  # (B,32)
        cols = torch.where(flip, dx + 31 - self.ar, dx + self.ar)  # a flip reads the columns backwards
        x = self.x[idx.view(b, 1, 1, 1), self.ci, rows.view(b, 1, 32, 1), cols.view(b, 1, 1, 32)]
        return normalise(x, self.mean, self.std)

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        perm = torch.randperm(self.n, device=self.device, generator=self.gen)
        for s in range(self.steps):
            idx = perm[s * self.batch : (s + 1) * self.batch]
            yield self.augment(idx), self.y[idx]


class SyntheticGpuPipeline:
    name = "synthetic-gpu"

    def __init__(self, x_u8, y, mean, std, batch: int, seed: int, device: str, num_workers: int = 0):
        dev = self.device = torch.device(device)
        g = torch.Generator(device=dev).manual_seed(seed)
        self.x = torch.randn(batch, 3, 32, 32, device=dev, generator=g)  # already "normalised"
        self.y = torch.randint(0, 10, (batch,), device=dev, generator=g)
        self.batch, self.n, self.workers = batch, len(y), 0

    @property
    def steps(self) -> int:
        return self.n // self.batch

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _ in range(self.steps):
            yield self.x, self.y


PIPELINE_CLASSES = {"loader": LoaderPipeline, "resident": ResidentPipeline, "synthetic-gpu": SyntheticGpuPipeline}


def make(name: str, x_u8, y, mean, std, batch: int, seed: int, device: str, num_workers: int):
    return PIPELINE_CLASSES[name](x_u8, y, mean, std, batch, seed, device, num_workers)
