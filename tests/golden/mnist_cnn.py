"""mnist-cnn's replay of its golden file (mnist_cnn_torch.npz) through any backend: the
backend's own trainer, made by its create() from the golden initial weights and the golden
curve's 20 batches of 64 (as uint8 images, the form every backend loads), trains one batch per
train_epoch() call with lr 0.01, momentum 0.9; the 20 per-step losses are what torch gave."""

from __future__ import annotations

import numpy as np

from bench.core.study import Study
from bench.data.mnist import Dataset
from bench.measure.timer import NullTimer
from bench.studies.mnist_cnn.net import MNIST_MEAN, MNIST_STD, PARAM_NAMES
from bench.studies.mnist_cnn.protocol import CellData


def images_u8(x: np.ndarray) -> np.ndarray:
    """The golden's normalised float32 (N,1,28,28) back to the uint8 (N,28,28) it came from."""
    u8 = np.rint((x[:, 0].astype(np.float64) * MNIST_STD + MNIST_MEAN) * 255.0)
    assert np.abs(u8 - (x[:, 0] * MNIST_STD + MNIST_MEAN) * 255.0).max() < 0.01, "golden images are not normalised uint8"
    return u8.astype(np.uint8)


def replay(study: Study, backend: str, golden) -> np.ndarray:
    """Per-step training losses of BACKEND's default variant over the golden curve's batches."""
    from bench.studies.mnist_cnn.config import settings

    steps, batch = golden["curve_y"].shape
    x = images_u8(golden["curve_x"].reshape(steps * batch, 1, 28, 28))
    y = golden["curve_y"].reshape(-1).astype(np.int64)
    spec = study.backends[backend]
    pipeline = "resident" if "resident" in (spec.pipelines or ("resident",)) else spec.pipelines[0]
    cell = study.cell(backend, "default", batch_size=batch, lr=0.01, momentum=0.9, pipeline=pipeline)
    study.validate(cell)
    data = Dataset("golden-curve", False, x, y, x[:batch], y[:batch], "-", "tests/golden/mnist_cnn_torch.npz")
    params = {k: golden[f"p.{k}"].copy() for k in PARAM_NAMES}
    trainer = study.load_backend(backend).create(cell, CellData(settings(cell), params, data))
    trainer.warmup()
    timer = NullTimer()
    losses = [
        trainer.train_epoch(np.arange(i * batch, (i + 1) * batch, dtype=np.int64), timer)["train_loss"] for i in range(steps)
    ]
    return np.array(losses)
