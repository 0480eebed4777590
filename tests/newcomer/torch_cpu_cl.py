"""torch-cpu-cl: the seed CNN through torch on the CPU with its weights and batches in
channels_last, the layout oneDNN prefers for convolutions; the rest is torch-cpu's trainer.
A newcomer's mnist-cnn backend: tests/test_newcomer.py copies it to
bench/studies/mnist_cnn/backends/ in a copy of the kit and adds its one registry line."""

from __future__ import annotations


def available() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as err:
        return f"torch not installed: {err}"
    return None


def create(cell, data):
    import torch

    from bench.studies.mnist_cnn.backends.torch_common import TorchTrainer

    trainer = TorchTrainer(data.cfg, data.params, data.dataset, device="cpu")
    trainer.model = trainer.model.to(memory_format=torch.channels_last)
    trainer.x_train = trainer.x_train.contiguous(memory_format=torch.channels_last)
    trainer.x_test = trainer.x_test.contiguous(memory_format=torch.channels_last)
    return trainer
