"""torch-cuda: torchvision models on an NVIDIA GPU (fp32, tf32, bf16 autocast + channels_last)."""

from __future__ import annotations

from bench.studies.roofline.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("cuda")
