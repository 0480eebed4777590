"""torch-cuda: the seed CNN through PyTorch on an NVIDIA GPU.

Variants: `default` (plain eager loop; pipelines seed and resident), and for the resident
pipeline any '+'-combination of graphs, bf16, fp16, cl (channels_last), compile, or
`tuned` (see torch_cnn_gpu.TUNED).
"""
NAME = "torch-cuda"
PIPELINES = ("seed", "resident")
VARIANTS = ("default", "tuned", "graphs", "bf16", "graphs+bf16", "graphs+cl", "graphs+bf16+cl", "compile", "compile+graphs+bf16",
            "compile+graphs", "fp16", "cl")


def available() -> str | None:
    try:
        import torch
    except ImportError as err:
        return f"torch not installed: {err}"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU visible to torch (torch.cuda.is_available() is False)"
    return None


def create(cfg, params, data):
    from bench.backends.torch_cnn_gpu import CudaEagerTrainer, CudaTunedTrainer, parse_variant
    from bench.errors import KitError

    parse_variant(cfg.variant)
    if cfg.variant == "default":
        return CudaEagerTrainer(cfg, params, data)
    if cfg.pipeline != "resident":
        raise KitError(f"torch-cuda variant {cfg.variant} needs --pipeline resident")
    return CudaTunedTrainer(cfg, params, data)
