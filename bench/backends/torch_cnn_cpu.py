"""torch-cpu: the seed CNN through PyTorch on the CPU."""
NAME = "torch-cpu"
PIPELINES = ("seed", "resident")
VARIANTS = ("default",)


def available() -> str | None:
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as err:
        return f"torch/torchvision not installed: {err}"
    return None


def create(cfg, params, data):
    from bench.backends.torch_cnn import TorchTrainer

    return TorchTrainer(cfg, params, data, device="cpu")
