"""torch-cuda: the seed CNN through PyTorch on an NVIDIA GPU.

Variants: `default` (the plain eager loop; pipelines seed and resident), and for the
resident pipeline any '+'-combination of graphs, bf16, fp16, cl, compile, or `tuned`
(see cuda_variants.TUNED).
"""

from __future__ import annotations


def available() -> str | None:
    try:
        import torch
    except ImportError as err:
        return f"torch not installed: {err}"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU visible to torch (torch.cuda.is_available() is False)"
    return None


def validate(cell) -> None:
    """Any '+' combination of cuda_variants.OPTIONS (or default, tuned); a combination needs the
    resident pipeline (its graphs and compile work on one tensor)."""
    from bench.core.errors import KitError
    from bench.studies.mnist_cnn.backends.cuda_variants import parse_variant

    if parse_variant(cell.variant) and cell.params.get("pipeline") != "resident":
        raise KitError(f"torch-cuda variant {cell.variant} needs pipeline resident")
    if cell.devices and cell.variant != "default":
        raise KitError(f"torch-cuda variant {cell.variant} runs on one device: devices=... runs variant default under DDP")


def create(cell, data):
    from bench.studies.mnist_cnn.backends.torch_cuda_tuned import CudaEagerTrainer, CudaTunedTrainer

    if cell.variant == "default":
        return CudaEagerTrainer(data.cfg, data.params, data.dataset, dist=data.dist)
    return CudaTunedTrainer(data.cfg, data.params, data.dataset)
