"""A backend kept outside the kit, to prove that adding one to mnist-cnn is one file plus one
registry entry: named in KIT_STUDY_MODULES (tests/ on PYTHONPATH), this module adds its entry
to the study's `backends` and is itself the backend module.

torch-cpu-cl: the seed CNN through torch on the CPU with its weights and batches in
channels_last, the layout oneDNN prefers for convolutions; the rest is torch-cpu's trainer.
"""

from __future__ import annotations

from bench.core import BackendSpec
from bench.core.registry import get_study

NAME = "torch-cpu-cl"
get_study("mnist-cnn").backends[NAME] = BackendSpec(
    __name__, "cpu", family="torch", pipelines=("resident",), about="torch-cpu in channels_last (a test's backend)"
)


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
