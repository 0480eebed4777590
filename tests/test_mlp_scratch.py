"""mlp-scratch (seed 001): the xp network, its runs, the tuned CuPy variant, bad input.

NumPy tests run everywhere (CI); CuPy tests run where CuPy and a GPU exist, else skip
with the reason. Data: synthetic, sklearn's digits (8x8 upscaled into 28x28), and real
MNIST if the gzip IDX files are found ($KIT_DATA_DIR/mnist or ../shared/datasets/mnist).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench.studies.mlp_scratch import net, runner
from bench.studies.mlp_scratch.net import MLPInputError

CUPY_WHY = net.cupy_unavailable_reason()
needs_cupy = pytest.mark.skipif(CUPY_WHY is not None, reason=f"CuPy path skipped: {CUPY_WHY}")
VARIANT_PARAMS = [pytest.param(v, marks=() if v == "numpy" else needs_cupy) for v in runner.VARIANTS]
SMALL = runner.RunConfig(iterations=20, record_every=10, warmup_iters=1)


def synthetic(n: int, seed: int = 0):
    """Learnable toy data: each class lights its own band of pixels, plus noise. X (n, 784) in [0, 1]."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    X = rng.random((n, 784)) * 0.2
    for c in range(10):
        X[y == c, c * 78 : (c + 1) * 78] += 0.6
    return np.clip(X, 0, 1).astype(np.float32), y


def digits():
    """sklearn digits, 8x8 upscaled x3 and centred in 28x28, /16 -> [0, 1]; (1797, 784), (1797,)."""
    sk = pytest.importorskip("sklearn.datasets", reason="sklearn not installed")
    d = sk.load_digits()
    img = np.kron(d.images, np.ones((3, 3)))
    X = np.zeros((len(img), 28, 28), np.float32)
    X[:, 2:26, 2:26] = img / 16.0
    return X.reshape(-1, 784), d.target


# ---------------------------------------------------------------- the maths


def test_forward_shapes_and_softmax():
    X, y = synthetic(64)
    XT, yd = net.prepare_data(X, y, np)
    p = net.to_device(net.init_params(0), np)
    c = net.forward(p, XT)
    assert XT.shape == (784, 64) and XT.flags.c_contiguous
    assert {k: v.shape for k, v in c.items()} == {k: (10, 64) for k in ("Z1", "A1", "Z2", "A2")}
    np.testing.assert_allclose(c["A2"].sum(axis=0), 1.0, rtol=1e-6)
    assert (c["A1"] >= 0).all()
    assert all(v.dtype == np.float32 for v in c.values())


def test_gradient_matches_finite_differences():
    """Central differences of the mean cross-entropy, float64, every param tensor."""
    X, y = synthetic(40, seed=3)
    XT, yd = net.prepare_data(X, y, np, "float64")
    p = net.to_device(net.init_params(5, "float64"), np)
    grads = net.backward(p, net.forward(p, XT), XT, yd)
    rng = np.random.default_rng(0)
    eps, worst = 1e-6, 0.0
    for k, g in grads.items():
        assert g.shape == p[k].shape and g.dtype == np.float64
        idx = [np.unravel_index(i, g.shape) for i in rng.choice(g.size, min(g.size, 25), replace=False)]
        for i in idx:
            old = p[k][i]
            p[k][i] = old + eps
            lp = float(net.loss(net.forward(p, XT)["Z2"], yd))
            p[k][i] = old - eps
            lm = float(net.loss(net.forward(p, XT)["Z2"], yd))
            p[k][i] = old
            fd = (lp - lm) / (2 * eps)
            worst = max(worst, abs(fd - g[i]) / max(1e-8, abs(fd) + abs(g[i])))
    assert worst < 1e-5, f"largest relative gradient error {worst:.2e}"


def test_loss_matches_direct_cross_entropy():
    X, y = synthetic(30)
    XT, yd = net.prepare_data(X, y, np, "float64")
    c = net.forward(net.to_device(net.init_params(1, "float64"), np), XT)
    direct = -np.mean(np.log(c["A2"][yd, np.arange(30)]))
    assert float(net.loss(c["Z2"], yd)) == pytest.approx(direct, rel=1e-12)


def test_init_is_seeded_uniform_and_dtype_selectable():
    a, b = net.init_params(7), net.init_params(7, "float64")
    assert all(a[k].dtype == np.float32 and b[k].dtype == np.float64 for k in a)
    assert all(np.array_equal(a[k], b[k].astype(np.float32)) for k in a)
    assert all(-0.5 <= v.min() and v.max() < 0.5 for v in b.values())
    assert not np.array_equal(net.init_params(8)["W1"], a["W1"])


def test_training_learns_digits():
    X, y = digits()
    r = runner.plain_run(
        "numpy", X[300:900], y[300:900], X[:300], y[:300], runner.RunConfig(iterations=100, seed=2, warmup_iters=1)
    )
    conv = r["convergence"]
    assert conv[-1]["loss"] < 0.5 * conv[0]["loss"]
    assert r["final_train_acc"] > 0.6 and r["final_val_acc"] > 0.5


# ---------------------------------------------------------------- runs (one body per variant)


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_plain_run_keys_timings_and_curve(variant):
    X, y = synthetic(600)
    r = runner.plain_run(variant, X[100:], y[100:], X[:100], y[:100], SMALL)
    for k in ("total_s", "loop_wall_s", "warmup_s", "first_iter_ms", "per_iter_ms", "per_iter_median_ms"):
        assert r[k] >= 0, k
    assert len(r["per_iter_samples_ms"]) == SMALL.iterations
    assert r["total_s"] * 1e3 == pytest.approx(sum(r["per_iter_samples_ms"]))
    assert r["per_iter_ms"] == pytest.approx(r["total_s"] * 1e3 / SMALL.iterations)
    if variant != "cupy-tuned":
        f, b = r["forward_samples_ms"], r["backward_samples_ms"]
        assert all(x >= 0 for x in f + b + r["update_samples_ms"])
        np.testing.assert_allclose(np.add(f, b), r["per_iter_samples_ms"], rtol=1e-6, atol=1e-3)
    assert [c["iteration"] for c in r["convergence"]] == [0, 10, 20]
    assert all(0 <= c["train_acc"] <= 1 and 0 <= c["val_acc"] <= 1 and c["loss"] > 0 for c in r["convergence"])
    assert r["convergence"][-1]["loss"] < r["convergence"][0]["loss"]
    assert r["final_val_acc"] == r["convergence"][-1]["val_acc"]


def test_first_record_is_the_initial_params():
    """Warm-up must not leak into the timed run: row 0 is evaluated on the untouched init."""
    X, y = synthetic(300)
    init = net.init_params(SMALL.seed)
    r = runner.plain_run("numpy", X[50:], y[50:], X[:50], y[:50], SMALL)
    XT, yd = net.prepare_data(X[50:], y[50:], np)
    acc, loss = net.evaluate(net.to_device(init, np), XT, yd)
    assert r["convergence"][0]["train_acc"] == acc and r["convergence"][0]["loss"] == pytest.approx(loss, rel=1e-6)
    assert all(np.array_equal(init[k], net.init_params(SMALL.seed)[k]) for k in init)


def test_numpy_runs_are_deterministic():
    X, y = synthetic(300)
    a = runner.plain_run("numpy", X, y, X[:50], y[:50], SMALL)["convergence"]
    b = runner.plain_run("numpy", X, y, X[:50], y[:50], SMALL)["convergence"]
    assert a == b


def test_breakdown_run_ops():
    X, y = synthetic(300)
    r = runner.breakdown_run("numpy", X, y, SMALL, iterations=4)
    ops = {o["op"]: o for o in r["ops"]}
    assert list(ops) == list(net.OPS)
    assert {k: o["calls"] for k, o in ops.items()} == {"matmul": 20, "relu": 4, "softmax": 4, "gradient": 16, "update": 4}
    assert all(o["ms_total"] >= 0 and o["ms_per_iter"] == pytest.approx(o["ms_total"] / 4) for o in r["ops"])
    assert r["ops_sum_ms_per_iter"] <= r["per_iter_ms"] * 1.0001


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_memory_breakdown(variant):
    X, y = synthetic(500)
    m = runner.memory_breakdown(variant, X[100:], y[100:], X[:100], y[:100], runner.RunConfig(dtype="float64"))
    keys = (
        "params_bytes",
        "input_bytes",
        "activations_bytes",
        "gradients_bytes",
        "framework_overhead_bytes",
        "pool_used_bytes",
        "pool_total_bytes",
        "rss_bytes",
        "rss_peak_bytes",
    )
    assert all(k in m for k in keys)
    if variant == "numpy":
        assert m["params_bytes"] == 8 * (7840 + 10 + 100 + 10)
        assert m["input_bytes"] == 8 * 784 * 500 + 8 * 500
        assert m["activations_bytes"] == 4 * 8 * 10 * 400
        assert m["pool_used_bytes"] is None
    else:
        assert m["pool_used_bytes"] >= m["accounted_bytes"] > 0
        assert m["pool_total_bytes"] >= m["pool_used_bytes"]
    assert m["rss_peak_bytes"] >= m["rss_bytes"] > 0


@pytest.mark.parametrize(
    "variant, gemm",
    [pytest.param(v, "kernels", marks=() if v == "numpy" else needs_cupy) for v in runner.VARIANTS]
    + [pytest.param("cupy-tuned", "cublas", marks=needs_cupy)],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_numpy_reference(variant, gemm, dtype):
    """Params after each of 3 steps within the per-dtype tolerance of the NumPy path.
    700 rows: not a multiple of the tuned kernels' 256-row blocks, so tails are exercised."""
    X, y = synthetic(700, seed=4)
    r = runner.check_against_numpy(variant, X, y, steps=3, cfg=runner.RunConfig(dtype=dtype), gemm=gemm)
    assert r["ok"], r


@needs_cupy
@pytest.mark.parametrize("variant", ["cupy", "cupy-tuned"])
def test_cupy_curve_agrees_with_numpy(variant):
    X, y = synthetic(2000, seed=6)
    cfg = runner.RunConfig(iterations=60, warmup_iters=1, dtype="float64")
    a = runner.plain_run("numpy", X[200:], y[200:], X[:200], y[:200], cfg)["convergence"]
    b = runner.plain_run(variant, X[200:], y[200:], X[:200], y[:200], cfg)["convergence"]
    cmp = runner.compare_curves(a, b)
    assert cmp["agree"] and cmp["max_abs_diff_loss"] < 1e-9, cmp


@needs_cupy
def test_tuned_graph_matches_uncaptured():
    X, y = synthetic(1000, seed=8)
    cfg = runner.RunConfig(iterations=30, warmup_iters=2, dtype="float64")
    g = runner.plain_run("cupy-tuned", X[100:], y[100:], X[:100], y[:100], cfg)
    u = runner.plain_run("cupy-tuned", X[100:], y[100:], X[:100], y[:100], cfg, use_graph=False)
    assert g["graph"], g["graph_error"]
    assert not u["graph"]
    assert runner.compare_curves(g["convergence"], u["convergence"], tol=0.0)["agree"]


# ---------------------------------------------------------------- timers


def test_clock_measures_a_known_sleep():
    clock = runner._Clock(np)
    a = clock.mark()
    time.sleep(0.05)
    b = clock.mark()
    assert 45 <= clock.ms(a, b) < 500
    assert 0 <= clock.ms(a, a) < 1
    with pytest.raises(net.MLPError, match="negative"):
        clock.ms(b, a)


def test_op_timer_sums_per_op():
    t = runner._OpTimer(runner._Clock(np))
    for _ in range(2):
        with t("sleep"):
            time.sleep(0.01)
        with t("null"):
            pass
    assert t.calls == {"sleep": 2, "null": 2}
    assert 18 <= t.ms["sleep"] < 300 and 0 <= t.ms["null"] < 5


# ---------------------------------------------------------------- bad input

GOOD_X, GOOD_Y = synthetic(20)


def _tuned(**kw):
    from bench.studies.mlp_scratch.tuned_cupy import TunedCupyMLP

    return TunedCupyMLP(GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, net.init_params(0), **kw)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: runner.plain_run("numpy", None, GOOD_Y, GOOD_X, GOOD_Y, SMALL), "train data missing"),
        (lambda: runner.plain_run("numpy", GOOD_X, GOOD_Y, GOOD_X, None, SMALL), "val data missing"),
        (lambda: runner.plain_run("numpy", GOOD_X.reshape(20, 28, 28), GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"shape \(20, 28, 28\)"),
        (lambda: runner.plain_run("numpy", GOOD_X[:, :100], GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"expected \(n, 784\)"),
        (lambda: runner.plain_run("numpy", GOOD_X, GOOD_Y[:5], GOOD_X, GOOD_Y, SMALL), "y has shape"),
        (lambda: runner.plain_run("numpy", GOOD_X[:0], GOOD_Y[:0], GOOD_X, GOOD_Y, SMALL), "empty"),
        (lambda: runner.plain_run("numpy", GOOD_X * 255, GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"expected \[0, 1\]"),
        (lambda: runner.plain_run("numpy", GOOD_X, GOOD_Y + 10, GOOD_X, GOOD_Y, SMALL), "labels"),
        (lambda: runner.plain_run("numpy", GOOD_X, GOOD_Y.astype(float), GOOD_X, GOOD_Y, SMALL), "integer labels"),
        (lambda: runner.plain_run("tensorflow", GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, SMALL), "unknown variant"),
        (lambda: runner.RunConfig(iterations=0), "iterations must be > 0"),
        (lambda: runner.RunConfig(iterations=-5), "iterations must be > 0"),
        (lambda: runner.RunConfig(iterations=2.5), "iterations must be an int"),
        (lambda: runner.RunConfig(dtype="float16"), "unknown dtype 'float16'"),
        (lambda: runner.RunConfig(dtype=None), "unknown dtype"),
        (lambda: runner.RunConfig(lr=-0.1), "learning rate"),
        (lambda: runner.breakdown_run("numpy", GOOD_X, GOOD_Y, SMALL, iterations=0), "iterations must be > 0"),
        (lambda: net.init_params(0, "int8"), "unknown dtype"),
        (lambda: net.get_xp("jax"), "unknown backend"),
        (lambda: _tuned(gemm="cutlass"), "unknown gemm"),
    ],
)
def test_bad_input_raises_one_line_error(call, match):
    with pytest.raises(MLPInputError, match=match) as e:
        call()
    assert "\n" not in str(e.value)


def test_unavailable_backend_is_a_clear_error():
    if CUPY_WHY is None:
        pytest.skip("CuPy and a GPU are available here; nothing to refuse")
    with pytest.raises(net.BackendUnavailable) as e:
        runner.plain_run("cupy", GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, SMALL)
    assert "\n" not in str(e.value) and str(e.value)


# ---------------------------------------------------------------- real MNIST (optional)


def test_real_mnist_subset_learns(real_mnist_dir):
    from bench.data.mnist import load_mnist

    ds = load_mnist(real_mnist_dir)  # the kit's one IDX reader
    x, y = ds.x_train, ds.y_train
    assert x.shape == (60000, 28, 28) and y.shape == (60000,)
    X = x.reshape(60000, 784).astype(np.float32) / 255.0
    # the seed's split is 59,000 / 1,000; a 5,000-sample slice keeps CI fast on 2 cores
    r = runner.plain_run(
        "numpy",
        X[1000:6000],
        y[1000:6000].astype(np.int64),
        X[:1000],
        y[:1000].astype(np.int64),
        runner.RunConfig(iterations=60, warmup_iters=1),
    )
    conv = r["convergence"]
    assert conv[-1]["loss"] < conv[0]["loss"] and r["final_val_acc"] > 0.3, conv[-1]
