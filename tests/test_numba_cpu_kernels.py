"""Numba CPU kernels (bench/studies/mnist_cnn/kernels/numba_cpu_cnn.py) against the same net built in torch (CPU,
float32): logits, loss, every parameter's gradient, a 20-step SGD-momentum loss curve,
predict, partial batches, pool tie-breaking, and independence of the chunk count."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
numba = pytest.importorskip("numba")
nn = torch.nn

from tolerances import CURVE_ATOL, RTOL, assert_close, rel_err  # noqa: E402  (defined once, per dtype)

from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as K  # noqa: E402
from bench.studies.mnist_cnn.net import IMAGE_SHAPE, MNIST_MEAN, MNIST_STD, N_CLASSES, PARAM_NAMES, init_params  # noqa: E402

BATCH = 64
SEEDS = (0, 1)
LAYERS = ("conv1", "conv2", "fc1", "fc2")


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
    layers = dict(zip(LAYERS, (net[0], net[3], net[7], net[9])))
    with torch.no_grad():
        for name in PARAM_NAMES:
            layer, what = name.split(".")
            getattr(layers[layer], what).copy_(torch.from_numpy(params[name]))
    net.layers = layers
    return net


def torch_grads(net: nn.Module) -> dict[str, np.ndarray]:
    return {name: getattr(net.layers[name.split(".")[0]], name.split(".")[1]).grad.numpy().copy() for name in PARAM_NAMES}


def torch_params(net: nn.Module) -> dict[str, np.ndarray]:
    return {name: getattr(net.layers[name.split(".")[0]], name.split(".")[1]).detach().numpy().copy() for name in PARAM_NAMES}


def mnist_like(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random images in [0,1] (about 80% zeros, like MNIST), normalised; random labels."""
    img = rng.random((n, *IMAGE_SHAPE), dtype=np.float32)
    img[rng.random(img.shape) < 0.8] = 0.0
    x = ((img - MNIST_MEAN) / MNIST_STD).astype(np.float32)
    y = rng.integers(0, N_CLASSES, n).astype(np.int64)
    return x, y


def numba_step(params, x, y, n):
    ws = K.Workspace(n)
    grads = K.zeros_like_params(params)
    logits = K.forward(params, x, ws).copy()
    loss = K.loss_backward(params, y, ws, grads)
    return logits, loss, grads


def torch_step(params, x, y):
    net = torch_net(params)
    logits = net(torch.from_numpy(x))
    loss = nn.functional.cross_entropy(logits, torch.from_numpy(y))
    loss.backward()
    return logits.detach().numpy(), loss.item(), torch_grads(net)


def assert_grads_close(grads, ref):
    """Every gradient within tolerance; each message names the largest error over all of them."""
    errs = {name: rel_err(grads[name], ref[name]) for name in PARAM_NAMES}
    worst = max(errs, key=errs.get)
    for name in PARAM_NAMES:
        assert grads[name].shape == ref[name].shape, name
        assert np.abs(ref[name]).sum() > 0, f"torch's d{name} is all zero: the check would be vacuous"
        assert_close(f"d{name} (largest: d{worst} {errs[worst]:.2e})", grads[name], ref[name])


@pytest.fixture(scope="module", autouse=True)
def _jit():
    K.warmup()


@pytest.mark.parametrize("n", [BATCH, 7, 1])
@pytest.mark.parametrize("seed", SEEDS)
def test_forward_loss_grads_match_torch(seed, n):
    rng = np.random.default_rng(1000 + seed)
    params = init_params(seed)
    x, y = mnist_like(rng, n)
    logits_t, loss_t, grads_t = torch_step(params, x, y)
    logits, loss, grads = numba_step(params, x, y, n)
    assert logits.shape == (n, N_CLASSES)
    assert_close("logits", logits, logits_t)
    assert abs(loss - loss_t) <= RTOL[np.float32] * abs(loss_t), f"loss {loss} vs torch {loss_t}"
    assert_grads_close(grads, grads_t)


def test_pool_ties_follow_torch():
    """Exact ties in both pools (integer images, centre-tap-only convs, dyadic weights so every
    sum is exact in any order): the first max of a window (row-major) must get the gradient,
    as in torch; the other taps' weight gradients tell which position got it."""
    rng = np.random.default_rng(11)
    n = 16
    params = init_params(3)
    params["conv1.weight"][:] = 0.0
    params["conv1.weight"][:, 0, 1, 1] = 1.0
    params["conv1.bias"][:] = 0.5
    params["conv2.weight"][:] = 0.0
    params["conv2.weight"][:, :, 1, 1] = rng.choice([-0.25, 0.25, 0.5], size=(16, 8)).astype(np.float32)
    params["conv2.bias"][:] = 0.25
    x = rng.integers(0, 4, (n, *IMAGE_SHAPE)).astype(np.float32)
    y = rng.integers(0, N_CLASSES, n).astype(np.int64)
    _, _, grads_t = torch_step(params, x, y)
    _, _, grads = numba_step(params, x, y, n)
    assert_grads_close(grads, grads_t)


def test_chunk_count_does_not_change_results():
    """One chunk (1 thread) vs one per thread: same loss and gradients up to summation order."""
    params = init_params(2)
    x, y = mnist_like(np.random.default_rng(7), 37)
    old = numba.get_num_threads()
    runs = []
    try:
        for threads in (1, old):
            numba.set_num_threads(threads)
            runs.append(numba_step(params, x, y, 37))
            runs[-1] += (K.Workspace(37).nch,)
    finally:
        numba.set_num_threads(old)
    (_, loss1, g1, nch1), (_, loss2, g2, nch2) = runs
    assert (nch1, nch2) == (1, min(37, old))
    assert abs(loss1 - loss2) <= 1e-6 * abs(loss1)
    for name in PARAM_NAMES:
        assert_close(f"d{name}, 1 vs {nch2} chunks", g2[name], g1[name])


def test_backward_rejects_bad_labels_and_shapes():
    params = init_params(0)
    x, _ = mnist_like(np.random.default_rng(0), 4)
    ws = K.Workspace(4)
    with pytest.raises(ValueError):
        K.forward(params, x[:3], ws)
    K.forward(params, x, ws)
    with pytest.raises(ValueError):
        K.loss_backward(params, np.array([0, 1, 2, 10]), ws, K.zeros_like_params(params))


def test_sgd_momentum_step_is_torch_form():
    rng = np.random.default_rng(5)
    p = init_params(5)
    g = {k: rng.standard_normal(a.shape).astype(np.float32) for k, a in p.items()}
    v = {k: rng.standard_normal(a.shape).astype(np.float32) for k, a in p.items()}
    want_v = {k: 0.9 * v[k] + g[k] for k in p}
    want_p = {k: p[k] - 0.1 * want_v[k] for k in p}
    K.sgd_momentum_step(p, g, v, 0.1, 0.9)
    for k in PARAM_NAMES:
        assert_close(f"velocity {k}", v[k], want_v[k])
        assert_close(f"param {k}", p[k], want_p[k])


def test_sgd_momentum_loss_curve_matches_torch():
    seed, steps, lr, momentum, n = 3, 20, 0.01, 0.9, BATCH
    rng = np.random.default_rng(2000)
    distinct = [mnist_like(rng, n) for _ in range(2)]  # revisited, so the loss can fall
    batches = [distinct[i % 2] for i in range(steps)]
    params = init_params(seed)
    p0 = {k: v.copy() for k, v in params.items()}

    net = torch_net(params)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    curve_t = []
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        curve_t.append(loss.item())

    ws = K.Workspace(n)
    grads = K.zeros_like_params(params)
    vel = K.zeros_like_params(params)
    curve = []
    for x, y in batches:
        K.forward(params, x, ws)
        curve.append(K.loss_backward(params, y, ws, grads))
        K.sgd_momentum_step(params, grads, vel, lr, momentum)

    diff = np.abs(np.array(curve) - np.array(curve_t))
    assert diff.max() <= CURVE_ATOL, f"loss curves differ by up to {diff.max():.3e} at step {diff.argmax()}"
    assert curve_t[-1] < curve_t[0] - 0.03, f"torch's loss did not fall ({curve_t[0]:.3f} -> {curve_t[-1]:.3f})"
    final_t = torch_params(net)
    for name in PARAM_NAMES:
        assert not np.array_equal(params[name], p0[name]), f"{name} never updated"
        # looser than one step's tolerance: 20 steps of float32 rounding differences compound
        err = rel_err(params[name], final_t[name])
        assert err < 1e-3, f"{name} after {steps} steps differs from torch's by rel {err:.3e}"


def test_predict_matches_torch_argmax():
    rng = np.random.default_rng(3000)
    params = init_params(4)
    x, _ = mnist_like(rng, 300)
    logits_t = torch_net(params)(torch.from_numpy(x)).detach().numpy()
    want = logits_t.argmax(1)
    got = K.predict(params, x, batch=128)  # 128 + 128 + a partial 44
    assert got.dtype == np.int64 and got.shape == (300,)
    # a flip is allowed only where torch's top two logits tie within float32 noise
    top2 = np.sort(logits_t, axis=1)[:, -2:]
    flips = got != want
    assert np.all(top2[flips, 1] - top2[flips, 0] < 1e-4), f"{flips.sum()} predictions differ from torch"
