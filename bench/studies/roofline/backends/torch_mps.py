"""torch-mps: torchvision models on an Apple GPU (natively: docker/mps/run.sh), fp32."""

from __future__ import annotations

from bench.studies.roofline.backends.torch_cpu import create  # noqa: F401  (the same Trainer; the cell names the device)


def available() -> str | None:
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    if not torch.backends.mps.is_available():
        return "no Apple GPU (torch.backends.mps.is_available() is False)"
    return None
