"""torch-cuda: the seed CNN through PyTorch on an NVIDIA GPU."""
NAME = "torch-cuda"
PIPELINES = ("seed", "resident")
VARIANTS = ("default", "tuned")


def available() -> str | None:
    try:
        import torch
    except ImportError as err:
        return f"torch not installed: {err}"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU visible to torch (torch.cuda.is_available() is False)"
    return None


def create(cfg, params, data):
    from bench.backends.torch_cnn import TorchTrainer

    if cfg.variant != "default":
        raise NotImplementedError(f"torch-cuda variant {cfg.variant} is not built yet")
    return TorchTrainer(cfg, params, data, device="cuda")
