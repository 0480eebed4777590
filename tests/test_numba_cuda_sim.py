"""Numba CUDA kernels (bench/studies/mnist_cnn/kernels/numba_cuda/) against the same net in torch (CPU, fp32),
run on CPU CI under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1).

For every variant, same weights and batch: logits, loss and all 8 gradients within the fp32
tolerances of tests/tolerances.py (norm-wise 1e-4 relative); then two SGD-momentum steps
(the second a short batch, through train_step) leave parameters, momentum buffers and the
epoch loss sum where torch.optim.SGD(momentum=0.9) leaves them; predict matches torch's argmax.

The simulator runs every GPU thread as a Python thread (~0.4 ms each before any work), so
the nets here cap their grids at MAX_BLOCKS blocks (all kernels are grid-stride, so the
result does not depend on the cap) and use batches of 1 to 3. The full-size launch configuration
is checked on a GPU by `python -m lab.check_numba_cuda`.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

# the simulator must be chosen before numba.cuda is first imported; numba's config may already
# have been read (another test module imported numba for the CPU), so it is re-read here
_CUDA_IMPORTED_BEFORE = "numba.cuda" in sys.modules
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if "numba.core.config" in sys.modules and not _CUDA_IMPORTED_BEFORE:
    sys.modules["numba.core.config"].reload_config()

from tolerances import ATOL, RTOL, assert_close  # noqa: E402  (tolerances, defined once, per dtype)

torch = pytest.importorskip("torch")
nn = torch.nn
try:
    from numba import cuda  # noqa: F401,E402
except Exception as exc:  # noqa: BLE001
    pytest.skip(f"numba.cuda (numba-cuda) cannot be imported: {exc}", allow_module_level=True)

from bench.studies.mnist_cnn.kernels import numba_cuda as K  # noqa: E402

# numba has chosen the simulator for this process; keep the variable from leaking into the
# subprocesses other tests start (a matrix cell would otherwise "run on a GPU" in the simulator)
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
from bench.studies.mnist_cnn.net import IMAGE_SHAPE, MNIST_MEAN, MNIST_STD, N_CLASSES, PARAM_NAMES, init_params  # noqa: E402

if K.available() is not None:  # e.g. numba.cuda came up in GPU mode before this file, with no GPU
    pytest.skip(
        f"numba.cuda unusable: {K.available()}"
        + (
            " (numba.cuda was imported before this file could select the simulator: run this file on its own)"
            if _CUDA_IMPORTED_BEFORE
            else ""
        ),
        allow_module_level=True,
    )

# rows of the net; the second step uses one row fewer (a short last batch of one), predict one
# more (a full chunk and a short one). Two rows, not four: the simulator's time grows with the
# rows (variant tiled: 77 s for one loss_and_grads at 4 rows, 48 s at 2, on a 2-core VM); two
# rows still give every kernel more than one sample, a short batch and a partly filled 32-row tile.
BATCH = 2
MAX_BLOCKS = 1  # grid cap for the simulator (see the module docstring)
LR, MOMENTUM = 0.1, 0.9
SEED = 0
F32 = np.float32


def mnist_like(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random images in [0,1] (about 80% zeros, like MNIST), normalised; random labels."""
    img = rng.random((n, *IMAGE_SHAPE), dtype=np.float32)
    img[rng.random(img.shape) < 0.8] = 0.0
    x = ((img - MNIST_MEAN) / MNIST_STD).astype(np.float32)
    return x, rng.integers(0, N_CLASSES, n).astype(np.int64)


def torch_net(params: dict[str, np.ndarray]) -> nn.Module:
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    layer = {"conv1": net[0], "conv2": net[3], "fc1": net[7], "fc2": net[9]}
    with torch.no_grad():
        for name in PARAM_NAMES:
            ln, w = name.split(".")
            getattr(layer[ln], w).copy_(torch.from_numpy(params[name]))
    return net


def torch_named(net: nn.Module, what: str) -> dict[str, np.ndarray]:
    """Parameters ("param") or their .grad ("grad") as torch-named numpy arrays."""
    layer = {"conv1": net[0], "conv2": net[3], "fc1": net[7], "fc2": net[9]}
    out = {}
    for name in PARAM_NAMES:
        ln, w = name.split(".")
        t = getattr(layer[ln], w)
        out[name] = (t.grad if what == "grad" else t).detach().numpy().copy()
    return out


_CASES: dict[int, dict] = {}


def make_case(batch: int) -> dict:
    """Two batches (batch rows, then batch - 1) and everything torch computes on them: step-1
    logits/loss/grads; after two SGD-momentum steps the parameters, momentum buffers and the
    losses; and torch's argmax on batch + 1 more images (predict: a full chunk and a short one)."""
    if batch in _CASES:
        return _CASES[batch]
    rng = np.random.default_rng(1234)
    params = init_params(SEED)
    x1, y1 = mnist_like(rng, batch)
    x2, y2 = mnist_like(rng, batch - 1)
    x3, _ = mnist_like(rng, batch + 1)
    net = torch_net(params)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    logits1 = net(torch.from_numpy(x1))
    loss1 = nn.functional.cross_entropy(logits1, torch.from_numpy(y1))
    opt.zero_grad()
    loss1.backward()
    grads1 = torch_named(net, "grad")
    opt.step()
    opt.zero_grad()
    loss2 = nn.functional.cross_entropy(net(torch.from_numpy(x2)), torch.from_numpy(y2))
    loss2.backward()
    opt.step()
    layer_params = list(net.parameters())
    vel = dict(zip(PARAM_NAMES, (opt.state[p]["momentum_buffer"].numpy().copy() for p in layer_params)))
    with torch.no_grad():
        pred3 = net(torch.from_numpy(x3)).argmax(1).numpy()
    _CASES[batch] = dict(
        params=params,
        x1=x1,
        y1=y1,
        x2=x2,
        y2=y2,
        x3=x3,
        logits1=logits1.detach().numpy(),
        loss1=loss1.item(),
        grads1=grads1,
        loss2=loss2.item(),
        params2=torch_named(net, "param"),
        vel2=vel,
        pred3=pred3,
    )
    return _CASES[batch]


def test_simulator_or_gpu_is_usable():
    assert K.available() is None
    if not K.simulated():
        assert cuda.is_available(), "numba.cuda was imported in GPU mode before this file, without a GPU"


def test_numpy_reference_matches_torch():
    """The float64 NumPy reference that check_numba_cuda times against is itself right."""
    case = make_case(8)
    loss, grads, logits = K.reference_step(case["params"], case["x1"], case["y1"])
    errs = {"logits": assert_close("ref logits", logits, case["logits1"]), "loss": assert_close("ref loss", loss, case["loss1"])}
    for name in PARAM_NAMES:
        errs[name] = assert_close(f"ref grad {name}", grads[name], case["grads1"][name])
    print("reference vs torch, largest relative error:", max(errs.items(), key=lambda kv: kv[1]))


@pytest.mark.slow
@pytest.mark.parametrize("variant", K.VARIANTS)
def test_variant_matches_torch(variant):
    batch = BATCH
    case = make_case(batch)
    net = K.DeviceNet(case["params"], batch, variant, max_blocks=MAX_BLOCKS)
    x1, y1 = cuda.to_device(case["x1"]), cuda.to_device(case["y1"])

    # step 1: forward + backward, compared layer by layer
    loss, grads, logits = net.loss_and_grads(x1, y1)
    errs = {"logits": assert_close("logits", logits, case["logits1"]), "loss": assert_close("loss", loss, case["loss1"])}
    for name in PARAM_NAMES:
        ref = case["grads1"][name]
        assert np.abs(ref).sum() > 0, f"torch grad of {name} is all zero: the test would be vacuous"
        errs[f"grad {name}"] = assert_close(f"grad {name}", grads[name], ref)
    worst = max(errs.items(), key=lambda kv: kv[1])
    print(
        f"{variant}: largest relative error vs torch: {worst[0]} {worst[1]:.2e}"
        f" (bound rtol {RTOL[F32]:.0e} / atol {ATOL[F32]:.0e})"
    )
    with pytest.raises(AssertionError):  # the comparison can fail: a 0.1% error is caught
        assert_close("scaled", grads["conv1.weight"] * 1.001, case["grads1"]["conv1.weight"])
    net.step(LR, MOMENTUM)

    # step 2: a short batch (batch - 1 rows) through the timed path, train_step
    net.train_step(cuda.to_device(case["x2"]), cuda.to_device(case["y2"]), LR, MOMENTUM)
    got_p, got_v = net.params_host(), net.velocity_host()
    errs2 = {}
    for name in PARAM_NAMES:
        errs2[f"momentum {name}"] = assert_close(f"momentum buffer {name}", got_v[name], case["vel2"][name])
        errs2[f"param {name}"] = assert_close(f"param {name}", got_p[name], case["params2"][name])
        assert not np.array_equal(got_p[name], case["params"][name]), f"{name} never updated"
    want_sum = batch * case["loss1"] + (batch - 1) * case["loss2"]
    errs2["epoch loss sum"] = assert_close("epoch loss sum", net.epoch_loss_sum(), want_sum)
    assert net.epoch_loss_sum() == 0.0, "epoch_loss_sum(reset=True) did not reset"
    worst = max(errs2.items(), key=lambda kv: kv[1])
    print(f"{variant}: after 2 SGD steps, largest relative error vs torch: {worst[0]} {worst[1]:.2e}")

    # predict: chunks of 6 + 1, against torch's argmax after the same two steps
    pred = net.predict(cuda.to_device(case["x3"]))
    assert pred.shape == (batch + 1,) and pred.dtype == np.int64
    assert (pred == case["pred3"]).all(), f"predict {pred} != torch argmax {case['pred3']}"

    assert net.device_bytes() >= 3 * K.N_PARAMS * 4  # P, G, V at least
    assert K.device_bytes() >= net.device_bytes()
