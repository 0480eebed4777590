"""Regenerate tests/golden/mnist_cnn_torch.npz, the torch-CPU reference every hand-written
backend's equivalence test loads.

    .venv/bin/python tests/golden/make_golden.py

What it holds (float32 unless noted): the initial weights for seed 0 (p.<name>); one batch
(x: 64 normalised MNIST-shaped images from the embedded digits, y: int64 labels); torch's
logits, mean cross-entropy loss and every parameter gradient for that batch (g.<name>);
and a 20-step SGD-momentum (lr 0.01, m 0.9) loss curve over 20 fixed batches of 64
(curve_x, curve_y, curve_loss). Regenerate only when the network or its init changes,
and commit the new file with the torch version it was made with (stored as torch_version).
"""

from pathlib import Path

import numpy as np
import torch

from bench.data.embedded import load_digits_28
from bench.studies.mnist_cnn.backends.torch_common import build_model, normalise_u8
from bench.studies.mnist_cnn.net import init_params

OUT = Path(__file__).with_name("mnist_cnn_torch.npz")


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    params = init_params(0)
    d = load_digits_28()
    rng = np.random.default_rng(123)
    idx = rng.permutation(len(d.y_train))
    x = normalise_u8(d.x_train[idx[:64]])
    y = d.y_train[idx[:64]].astype(np.int64)

    model = build_model(params)
    logits = model(torch.from_numpy(x))
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y))
    loss.backward()
    grads = {f"g.{k}": v.grad.numpy().copy() for k, v in model.named_parameters()}

    curve_idx = np.stack([rng.permutation(len(d.y_train))[:64] for _ in range(20)])
    cx, cy = normalise_u8(d.x_train[curve_idx.reshape(-1)]).reshape(20, 64, 1, 28, 28), d.y_train[curve_idx]
    model = build_model(params)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    curve = []
    for i in range(20):
        opt.zero_grad()
        step_loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(cx[i])), torch.from_numpy(cy[i]))
        step_loss.backward()
        opt.step()
        curve.append(step_loss.item())

    np.savez_compressed(
        OUT,
        x=x,
        y=y,
        logits=logits.detach().numpy(),
        loss=np.float32(loss.item()),
        curve_x=cx,
        curve_y=cy.astype(np.int64),
        curve_loss=np.array(curve, np.float32),
        torch_version=np.array(torch.__version__),
        **{f"p.{k}": v for k, v in params.items()},
        **grads,
    )
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes) with torch {torch.__version__}")


if __name__ == "__main__":
    main()
