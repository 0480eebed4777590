"""torch-mps: the seed CNN through PyTorch on an Apple-silicon GPU (native runtime only)."""
NAME = "torch-mps"
PIPELINES = ("seed", "resident")
VARIANTS = ("default",)


def available() -> str | None:
    try:
        import torch
    except ImportError as err:
        return f"torch not installed: {err}"
    if not torch.backends.mps.is_available():
        return "no Apple MPS device (needs macOS on Apple silicon, run natively)"
    return None


def create(cfg, params, data):
    from bench.backends.torch_cnn import TorchTrainer

    return TorchTrainer(cfg, params, data, device="mps")
