"""Torch device facts every torch study shares: is a device there, its sync, its memory peaks.
Imports torch only inside the functions (study packages must stay cheap to import)."""

from __future__ import annotations

from typing import Any

TORCHVISION = ("torch", "torchvision")  # BackendSpec.needs of the torchvision-model backends


def unavailable(kind: str) -> str | None:
    """Why torch + torchvision cannot run on KIND (cpu | cuda | mps) here, or None."""
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    if kind == "cuda" and not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (torch.cuda.is_available() is False)"
    if kind == "mps" and not torch.backends.mps.is_available():
        return "no Apple GPU (torch.backends.mps.is_available() is False)"
    return None


def set_threads(n: int) -> int:
    """torch's intra-op threads: N, or every core this process may use when N is 0; returns the count."""

    from bench.core.machine import pin_threads

    return pin_threads(n, "torch")


def sync(device: Any) -> None:
    """Wait for the device's queued work (CUDA, MPS); nothing to wait for on the CPU."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def reset_peak(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def memory_peaks(device: Any) -> dict[str, float | None]:
    """The allocator's peaks since reset_peak, MB (10^6): CUDA allocated and reserved; MPS the
    driver's allocation now (it keeps no peak); the CPU has none (RSS comes from the sampler)."""
    import torch

    if device.type == "cuda":
        return {
            "gpu_alloc_peak_mb": torch.cuda.max_memory_allocated(device) / 1e6,
            "gpu_reserved_peak_mb": torch.cuda.max_memory_reserved(device) / 1e6,
        }
    if device.type == "mps":
        return {"gpu_alloc_peak_mb": torch.mps.driver_allocated_memory() / 1e6, "gpu_reserved_peak_mb": None}
    return {"gpu_alloc_peak_mb": None, "gpu_reserved_peak_mb": None}
