"""torch-cuda: DenseNet-121 transfer learning on NVIDIA GPUs (one, nn.DataParallel, or DDP under torchrun)."""

from __future__ import annotations

from bench.studies.profile.backends.torch_cpu import create  # noqa: F401  (the same protocol; the cell names the device)


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cuda")
