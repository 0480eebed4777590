"""mlp-scratch (seed 001): the xp network, its runs, the tuned CuPy variant, bad input.

NumPy tests run everywhere (CI); CuPy tests run where CuPy and a GPU exist, else skip
with the reason. Data: synthetic, sklearn's digits (8x8 upscaled into 28x28), and real
MNIST if the gzip IDX files are found ($KIT_DATA_DIR/mnist or ../shared/datasets/mnist).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench.core import machine
from bench.studies.mlp_scratch import MlpScratch, net, runner
from bench.studies.mlp_scratch.backends import make
from bench.studies.mlp_scratch.backends.cupy_tuned import TunedCupy
from bench.studies.mlp_scratch.net import MLPInputError

CUPY_WHY = net.cupy_unavailable_reason()
needs_cupy = pytest.mark.skipif(CUPY_WHY is not None, reason=f"CuPy path skipped: {CUPY_WHY}")
# one param per registered backend (MlpScratch.backends, the only list); the cupy family needs CuPy and a GPU
VARIANT_PARAMS = [pytest.param(v, marks=needs_cupy if s.family == "cupy" else ()) for v, s in MlpScratch.backends.items()]
NUMPY = make("numpy")
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
        NUMPY, X[300:900], y[300:900], X[:300], y[:300], runner.RunConfig(iterations=100, seed=2, warmup_iters=1)
    )
    conv = r["convergence"]
    assert conv[-1]["loss"] < 0.5 * conv[0]["loss"]
    assert r["final_train_acc"] > 0.6 and r["final_val_acc"] > 0.5


# ---------------------------------------------------------------- runs (one body per variant)


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_plain_run_keys_timings_and_curve(variant):
    X, y = synthetic(600)
    r = runner.plain_run(make(variant), X[100:], y[100:], X[:100], y[:100], SMALL)
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
    r = runner.plain_run(NUMPY, X[50:], y[50:], X[:50], y[:50], SMALL)
    XT, yd = net.prepare_data(X[50:], y[50:], np)
    acc, loss = net.evaluate(net.to_device(init, np), XT, yd)
    assert r["convergence"][0]["train_acc"] == acc and r["convergence"][0]["loss"] == pytest.approx(loss, rel=1e-6)
    assert all(np.array_equal(init[k], net.init_params(SMALL.seed)[k]) for k in init)


def test_numpy_runs_are_deterministic():
    X, y = synthetic(300)
    a = runner.plain_run(NUMPY, X, y, X[:50], y[:50], SMALL)["convergence"]
    b = runner.plain_run(NUMPY, X, y, X[:50], y[:50], SMALL)["convergence"]
    assert a == b


def test_breakdown_run_ops():
    X, y = synthetic(300)
    r = runner.breakdown_run(NUMPY, X, y, SMALL, iterations=4)
    ops = {o["op"]: o for o in r["ops"]}
    assert list(ops) == list(net.OPS)
    assert {k: o["calls"] for k, o in ops.items()} == {"matmul": 20, "relu": 4, "softmax": 4, "gradient": 16, "update": 4}
    assert all(o["ms_total"] >= 0 and o["ms_per_iter"] == pytest.approx(o["ms_total"] / 4) for o in r["ops"])
    assert r["ops_sum_ms_per_iter"] <= r["per_iter_ms"] * 1.0001


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_memory_breakdown(variant):
    X, y = synthetic(500)
    m = runner.memory_breakdown(make(variant), X[100:], y[100:], X[:100], y[:100], runner.RunConfig(dtype="float64"))
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
    [pytest.param(v, "kernels", marks=needs_cupy if s.family == "cupy" else ()) for v, s in MlpScratch.backends.items()]
    + [pytest.param("cupy-tuned", "cublas", marks=needs_cupy)],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matches_numpy_reference(variant, gemm, dtype):
    """Params after each of 3 steps within the per-dtype tolerance of the NumPy path.
    700 rows: not a multiple of the tuned kernels' 256-row blocks, so tails are exercised."""
    X, y = synthetic(700, seed=4)
    backend = make(variant) if gemm == "kernels" else TunedCupy(gemm=gemm)
    r = runner.check_against_numpy(backend, make("numpy"), X, y, steps=3, cfg=runner.RunConfig(dtype=dtype))
    assert r["ok"], r


@needs_cupy
@pytest.mark.parametrize("variant", ["cupy", "cupy-tuned"])
def test_cupy_curve_agrees_with_numpy(variant):
    X, y = synthetic(2000, seed=6)
    cfg = runner.RunConfig(iterations=60, warmup_iters=1, dtype="float64")
    a = runner.plain_run(NUMPY, X[200:], y[200:], X[:200], y[:200], cfg)["convergence"]
    b = runner.plain_run(make(variant), X[200:], y[200:], X[:200], y[:200], cfg)["convergence"]
    cmp = runner.compare_curves(a, b)
    assert cmp["agree"] and cmp["max_abs_diff_loss"] < 1e-9, cmp


@needs_cupy
def test_tuned_graph_matches_uncaptured():
    X, y = synthetic(1000, seed=8)
    cfg = runner.RunConfig(iterations=30, warmup_iters=2, dtype="float64")
    g = runner.plain_run(make("cupy-tuned"), X[100:], y[100:], X[:100], y[:100], cfg)
    u = runner.plain_run(TunedCupy(use_graph=False), X[100:], y[100:], X[:100], y[:100], cfg)
    assert g["graph"], g["graph_error"]
    assert not u["graph"]
    assert runner.compare_curves(g["convergence"], u["convergence"], tol=0.0)["agree"]


# ---------------------------------------------------------------- timers


def test_clock_measures_a_known_sleep():
    clock = runner.Clock()
    t0 = time.perf_counter()
    a = clock.mark()
    time.sleep(0.05)
    b = clock.mark()
    outer_ms = (time.perf_counter() - t0) * 1e3  # orderings, not wall-clock bounds
    assert 45 <= clock.ms(a, b) <= outer_ms
    assert 0 <= clock.ms(a, a) < clock.ms(a, b)
    with pytest.raises(net.MLPError, match="negative"):
        clock.ms(b, a)


def test_op_timer_sums_per_op():
    t = runner._OpTimer(runner.Clock())
    for _ in range(2):
        with t("sleep"):
            time.sleep(0.01)
        with t("null"):
            pass
    assert t.calls == {"sleep": 2, "null": 2}
    assert 18 <= t.ms["sleep"] and 0 <= t.ms["null"] < t.ms["sleep"]


# ---------------------------------------------------------------- bad input

GOOD_X, GOOD_Y = synthetic(20)


def _tuned(**kw):
    from bench.studies.mlp_scratch.tuned_cupy import TunedCupyMLP

    return TunedCupyMLP(GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, net.init_params(0), **kw)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: runner.plain_run(NUMPY, None, GOOD_Y, GOOD_X, GOOD_Y, SMALL), "train data missing"),
        (lambda: runner.plain_run(NUMPY, GOOD_X, GOOD_Y, GOOD_X, None, SMALL), "val data missing"),
        (lambda: runner.plain_run(NUMPY, GOOD_X.reshape(20, 28, 28), GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"shape \(20, 28, 28\)"),
        (lambda: runner.plain_run(NUMPY, GOOD_X[:, :100], GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"expected \(n, 784\)"),
        (lambda: runner.plain_run(NUMPY, GOOD_X, GOOD_Y[:5], GOOD_X, GOOD_Y, SMALL), "y has shape"),
        (lambda: runner.plain_run(NUMPY, GOOD_X[:0], GOOD_Y[:0], GOOD_X, GOOD_Y, SMALL), "empty"),
        (lambda: runner.plain_run(NUMPY, GOOD_X * 255, GOOD_Y, GOOD_X, GOOD_Y, SMALL), r"expected \[0, 1\]"),
        (lambda: runner.plain_run(NUMPY, GOOD_X, GOOD_Y + 10, GOOD_X, GOOD_Y, SMALL), "labels"),
        (lambda: runner.plain_run(NUMPY, GOOD_X, GOOD_Y.astype(float), GOOD_X, GOOD_Y, SMALL), "integer labels"),
        (lambda: runner.plain_run(make("tensorflow"), GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, SMALL), "unknown variant"),
        (lambda: runner.RunConfig(iterations=0), "iterations must be > 0"),
        (lambda: runner.RunConfig(iterations=-5), "iterations must be > 0"),
        (lambda: runner.RunConfig(iterations=2.5), "iterations must be an int"),
        (lambda: runner.RunConfig(dtype="float16"), "unknown dtype 'float16'"),
        (lambda: runner.RunConfig(dtype=None), "unknown dtype"),
        (lambda: runner.RunConfig(lr=-0.1), "learning rate"),
        (lambda: runner.breakdown_run(NUMPY, GOOD_X, GOOD_Y, SMALL, iterations=0), "iterations must be > 0"),
        (lambda: net.init_params(0, "int8"), "unknown dtype"),
        (lambda: net.get_xp("jax"), "unknown array module"),
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
        runner.plain_run(make("cupy"), GOOD_X, GOOD_Y, GOOD_X, GOOD_Y, SMALL)
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
        NUMPY,
        X[1000:6000],
        y[1000:6000].astype(np.int64),
        X[:1000],
        y[:1000].astype(np.int64),
        runner.RunConfig(iterations=60, warmup_iters=1),
    )
    conv = r["convergence"]
    assert conv[-1]["loss"] < conv[0]["loss"] and r["final_val_acc"] > 0.3, conv[-1]


# ---------------------------------------------------------------- issue 9 part 5: seed 001 details


def _study():
    from bench.studies.mlp_scratch import MlpScratch

    return MlpScratch()


def test_matrix_has_a_labelled_float64_cell_beside_float32():
    study = _study()
    for platform in ("cpu", "cuda"):
        for profile in ("default", "full"):
            cells = study.matrix(platform, profile)
            assert [c.params["dtype"] for c in cells] == ["float32", "float64"], (platform, profile)
            assert [c.name for c in cells] == [f"{cells[0].backend}_float32", f"{cells[0].backend}_float64"]
            assert len({c.id for c in cells}) == 2
            for c in cells:
                study.validate(c)
                assert c.params["threads"] == 0  # every core the process may use
    assert [c.params["dtype"] for c in study.matrix("cpu", "smoke")] == ["float32"]  # a wiring check stays one cell
    from bench.core.errors import KitError

    for bad in (-1, 1.5, True):
        with pytest.raises(KitError, match="threads"):
            study.validate(study.cell("numpy", threads=bad))


@pytest.fixture(scope="module")
def float64_cell_rows(tmp_path_factory):
    """One float64 numpy cell on the embedded digits, stepped as the scheduler would: (rows, system_extra)."""
    from bench.core.study import RunContext
    from bench.studies.mlp_scratch.protocol import open_cell

    study = _study()
    out = tmp_path_factory.mktemp("cell")
    cell = study.cell(
        "numpy", dtype="float64", iterations=30, plain_runs=2, breakdown_iterations=3, check_steps=1, threads=1, dataset="digits"
    )
    cell = study.resolve(cell, None)
    study.validate(cell)
    run = open_cell(study, cell, RunContext(out, out / "c", None, "test"))
    rows = [r for i in range(run.steps) for r in run.step(i)] + run.close()
    return rows, run.system_extra()


def test_float64_cell_runs_and_records_its_dtype(float64_cell_rows):
    rows, _ = float64_cell_rows
    assert {r["phase"] for r in rows} == {"plain", "op", "memory", "convergence"}
    assert all(r["status"] == "ok" and r["dtype"] == "float64" for r in rows)
    mem = next(r for r in rows if r["phase"] == "memory")
    assert mem["params_bytes"] == 8 * (7840 + 10 + 100 + 10)  # float64: 8 bytes a parameter
    plain = [r for r in rows if r["phase"] == "plain"]
    assert [r["plain_run"] for r in plain] == [0, 1] and all(r["loop_wall_s"] >= r["total_s"] > 0 for r in plain)


def test_convergence_rows_carry_training_and_validation_accuracy(float64_cell_rows):
    rows, _ = float64_cell_rows
    conv = [r for r in rows if r["phase"] == "convergence"]
    assert [r["iteration"] for r in conv] == [0, 10, 20, 30]
    assert all(0 <= r["train_acc"] <= 1 and 0 <= r["val_acc"] <= 1 and r["loss"] > 0 for r in conv)
    assert conv[-1]["train_acc"] > conv[0]["train_acc"]
    final = next(r for r in rows if r["phase"] == "plain" and r["plain_run"] == 0)
    assert conv[-1]["train_acc"] == final["final_train_acc"]


def test_blas_and_thread_limit_are_recorded_in_every_row_and_system_json(float64_cell_rows):
    rows, extra = float64_cell_rows
    assert all(r["blas_threads"] == 1 and r["blas"].endswith(", 1 thread") for r in rows)
    assert extra["numpy_blas"]["blas_threads"] == 1 and extra["numpy_blas"]["blas_threads_requested"] == 1
    libs = extra["numpy_blas"]["blas_libs"]
    assert libs and all(lib["num_threads"] == 1 and lib["internal_api"] for lib in libs)
    # every BLAS NumPy's folder holds is named (a process that loaded two lists both, sorted)
    named = sorted({f"{lib['internal_api']} {lib['version']}" for lib in libs})
    assert rows[0]["blas"] == f"{' + '.join(named)}, 1 thread", (rows[0]["blas"], libs)
    assert "framework overhead = total - the arrays' bytes" in extra["memory_overhead_definition"]


def test_thread_limit_is_applied_inside_the_run_and_lifted_after(monkeypatch):
    """threadpool_info read from inside the training steps shows the limit; 0 means every usable core."""
    seen: list[int] = []
    forward = net.forward

    def spying_forward(p, XT, ops=net.no_ops):
        seen.append(min(d["num_threads"] for d in runner.numpy_blas()))
        return forward(p, XT, ops)

    before = [d["num_threads"] for d in runner.numpy_blas()]
    monkeypatch.setattr(net, "forward", spying_forward)
    X, y = synthetic(200)
    r = runner.plain_run(NUMPY, X[50:], y[50:], X[:50], y[:50], runner.RunConfig(iterations=5, warmup_iters=1, threads=1))
    assert seen and set(seen) == {1} and r["blas_threads"] == 1
    assert [d["num_threads"] for d in runner.numpy_blas()] == before  # the limit ends with the run
    seen.clear()
    r = runner.plain_run(NUMPY, X[50:], y[50:], X[:50], y[:50], runner.RunConfig(iterations=5, warmup_iters=1))
    assert set(seen) == {machine.usable_cores()} and r["blas_threads"] == machine.usable_cores()
    seen.clear()
    runner.breakdown_run(NUMPY, X, y, runner.RunConfig(iterations=5, warmup_iters=1, threads=1), iterations=2)
    assert seen and set(seen) == {1}
    with pytest.raises(MLPInputError, match="threads"):
        runner.RunConfig(threads=-1)


def test_convergence_records_are_outside_total_s_and_inside_loop_wall_s(monkeypatch):
    """The every-10-iteration records (the seed's print) cost the entire-process total, not the steps total."""
    accuracy = net.accuracy

    def slow_accuracy(A2, y):
        time.sleep(0.05)
        return accuracy(A2, y)

    monkeypatch.setattr(net, "accuracy", slow_accuracy)
    X, y = synthetic(200)
    r = runner.plain_run(NUMPY, X[50:], y[50:], X[:50], y[:50], runner.RunConfig(iterations=20, warmup_iters=1))
    # records at iterations 0 and 10, two accuracy calls each: >= 200 ms in the loop, none of it
    # in total_s (the timed steps): the steps and the loop differ by at least the records' sleeps
    assert r["loop_wall_s"] - r["total_s"] >= 0.2
    assert sum(r["per_iter_samples_ms"]) / 1e3 == pytest.approx(r["total_s"])


# ---------------------------------------------------------------- the report (synthetic rows)


def _result_cells(tmp_path, variants=("numpy", "cupy"), dtype="float32", repeats=3, memory=True):
    from bench.core.resultset import ResultCell

    cells = []
    for rep in range(repeats):
        rows = []
        for k, v in enumerate(variants):
            speed = 1.0 + 4.0 * k  # numpy 1x, cupy 5x, cupy-tuned 9x
            base = {"backend": v, "status": "ok", "dtype": dtype, "repeat": rep, "dataset": "mnist", "dataset_real": True}
            for pr in range(2):
                t = (10.0 + 0.1 * rep + 0.05 * pr) / speed
                rows.append(
                    {
                        **base,
                        "phase": "plain",
                        "plain_run": pr,
                        "total_s": t,
                        "loop_wall_s": t + 0.5,
                        "per_iter_median_ms": 2 * t,
                        "forward_median_ms": t,
                        "backward_median_ms": t,
                        "final_train_acc": 0.85,
                        "final_val_acc": 0.84,
                        "blas": "openblas 0.3.31, 2 threads",
                    }
                )
            for it in range(0, 51, 10):
                acc = 0.1 + 0.015 * it + 0.001 * k
                rows.append(
                    {**base, "phase": "convergence", "iteration": it, "train_acc": acc, "val_acc": acc - 0.01, "loss": 1.0}
                )
            if memory:
                parts = {
                    "params_bytes": 10**5,
                    "input_bytes": 2 * 10**8,
                    "activations_bytes": 10**7,
                    "gradients_bytes": 8 * 10**6,
                }
                parts["other_bytes"] = 0
                parts["framework_overhead_bytes"] = (5 + 100 * k) * 10**6
                rows.append({**base, "phase": "memory", **parts, "memory_total_bytes": sum(parts.values())})
        spec = {
            "study": "mlp-scratch",
            "backend": "+".join(variants),
            "variant": "default",
            "params": {"dtype": dtype},
            "repeat": rep,
        }
        cells.append(ResultCell(tmp_path / f"{dtype}_{rep}", rows, spec=spec))
    return cells


def _cells_of_table(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_table3_has_a_speedup_on_every_row_and_both_totals(tmp_path):
    from bench.studies.mlp_scratch import report

    lines = report.table3(_result_cells(tmp_path, ("numpy", "cupy", "cupy-tuned")))
    head = _cells_of_table(lines[0])
    assert "Total, steps only (s)" in head and "Total, entire process (s)" in head
    speed_cols = [i for i, h in enumerate(head) if h.startswith("Speedup")]
    assert len(speed_cols) == 2
    body = {c[0]: c for c in map(_cells_of_table, lines[2:])}
    assert list(body) == ["numpy", "cupy", "cupy-tuned"]
    for v, row in body.items():
        for i in speed_cols:
            assert row[i], (v, head[i])
        assert all("x" in row[i] for i in range(len(head)) if "speedup" in head[i].lower()), v
    assert body["numpy"][speed_cols[0]] == "1.0x (reference)"
    assert body["cupy"][speed_cols[0]].startswith("5.0x [")
    steps, whole = head.index("Total, steps only (s)"), head.index("Total, entire process (s)")
    assert float(body["numpy"][whole]) == pytest.approx(float(body["numpy"][steps]) + 0.5, abs=1e-3)
    assert body["cupy"][head.index("Per iteration (ms, median; speedup)")].endswith("(5.0x)")


def test_table5_has_a_total_row_and_one_overhead_definition(tmp_path):
    from bench.studies.mlp_scratch import report

    cell = _result_cells(tmp_path, repeats=1)[0]
    lines, one = report.table5(cell)
    assert one
    rows = {c[0]: c[1:] for c in map(_cells_of_table, lines[2:])}
    assert "**Total**" in rows and "Framework overhead" in rows and "Other arrays (tuned: record buffers)" not in rows
    parts = ("Model parameters", "Input data", "Intermediate activations", "Gradient storage", "Framework overhead")
    for col in range(2):
        total = float(rows["**Total**"][col].strip("*").replace(",", ""))
        assert total == pytest.approx(sum(float(rows[p][col].replace(",", "")) for p in parts), rel=1e-3)
    # rows written before memory_total_bytes: the Total is the sum, and the report says the definitions differ
    for r in cell.rows:
        r.pop("memory_total_bytes", None)
    lines, one = report.table5(cell)
    assert not one and any(line.startswith("| **Total**") for line in lines)
    md = report.section([cell], tmp_path)
    assert report.OVERHEAD_DEFINITION in " ".join(md) and report.OLD_OVERHEAD in " ".join(md)
    assert any(line.startswith("NumPy BLAS (threadpoolctl") and "2 threads" in line for line in md)


def test_fig3_training_and_validation_panels_follow_the_figure_rules(tmp_path, monkeypatch):
    """Training accuracy (the seed's Fig. 3) and validation side by side with shared y-limits,
    a difference-to-NumPy panel under each, the legend outside the data, a distinct colour and
    marker per series, titles without repeated words."""
    import matplotlib.pyplot as plt

    from bench.studies.mlp_scratch import report

    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))  # draw_convergence's figure kept open to read
    cells = _result_cells(tmp_path, ("numpy", "cupy", "cupy-tuned")) + _result_cells(tmp_path, ("numpy", "cupy"), "float64")
    assert report.convergence_plot(cells, tmp_path) == tmp_path / "mlp_convergence.png"
    monkeypatch.undo()
    assert (tmp_path / "mlp_convergence.png").stat().st_size > 0
    (fig,) = [f for f in figs if hasattr(f, "canvas")]  # the figure closed, not a close("all")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (train, val), (dtrain, dval) = fig.axes[:2], fig.axes[2:4]
    assert train.get_title().startswith("Training accuracy") and val.get_title().startswith("Validation accuracy")
    assert train.get_ylim() == val.get_ylim() and dtrain.get_ylim() == dval.get_ylim()
    assert "numpy float64" in dtrain.get_title()
    titles = [ax.get_title() for ax in fig.axes] + [fig._suptitle.get_text()]
    for t in titles:
        words = t.lower().split()
        assert len(words) == len(set(words)), t
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            for other in fig.axes:
                assert not leg.get_window_extent(renderer).overlaps(other.get_window_extent(renderer)), "legend over data"
        styles = [(str(line.get_color()), line.get_marker()) for line in ax.get_lines() if line.get_label()[:1] != "_"]
        assert len(styles) == len(set(styles))
    assert val.get_legend() is not None and len(val.get_legend().get_texts()) == 5
    labelled = [line for line in train.get_lines() if line.get_label()[:1] != "_"]
    assert len({(str(line.get_color()), line.get_marker()) for line in labelled}) == 5
    # the difference panel: NumPy float64 is the zero line, cupy float32 is 0.1 points above it
    diffs = {line.get_color(): line.get_ydata() for line in dtrain.get_lines() if len(line.get_ydata()) > 2}
    assert any(np.allclose(d, 0.1) for d in diffs.values()) and any(np.allclose(d, 0.0) for d in diffs.values())
    plt.close(fig)
