"""torch-cuda: torchvision models on an NVIDIA GPU (AMP, bf16, channels_last, compile, CUDA graphs)."""

from __future__ import annotations

from bench.studies.cifar_opt.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cuda")
