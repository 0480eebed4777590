"""torch-mps: torchvision models on an Apple GPU (natively: docker/mps/run.sh), fp32."""

from __future__ import annotations

from bench.studies.roofline.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    from bench.measure.torchdev import unavailable

    return unavailable("mps")
