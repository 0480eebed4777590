"""Seed 000's own Numba setups as labelled variants (`numba-cpu --variant seed`,
`numba-cuda --variant seed`) and the seed's initialisation, input scaling and optimizer form
as options (init=seed, input_scale=div255, sgd=seed).

Data: the embedded digits (28x28, always there), a few hundred samples. The numba-cuda test
runs in a subprocess under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1 must be set before
numba.cuda is first imported, and this process must not import it in GPU mode: other test
files select the simulator in-process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tolerances import RTOL, assert_close  # noqa: E402  (defined once, per dtype)

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import get_study
from bench.core.study import RunContext

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]
DENSE = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
CONV = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias")
SEED_PARAMS = {"init": "seed", "input_scale": "div255", "sgd": "seed"}


def _digits(n_train: int = 256):
    import dataclasses

    from bench.data.embedded import load_digits_28

    d = load_digits_28()
    return dataclasses.replace(d, x_train=d.x_train[:n_train], y_train=d.y_train[:n_train])


def _cpu_trainer(variant: str = "seed", batch: int = 64, **params):
    from bench.studies.mnist_cnn.backends.numba_cpu import NumbaCpuTrainer
    from bench.studies.mnist_cnn.config import settings
    from bench.studies.mnist_cnn.net import init_params

    cfg = settings(Cell("mnist-cnn", "numba-cpu", variant, {"batch_size": batch, "epochs": 1, **params}))
    p0 = init_params(0, cfg.init)
    return NumbaCpuTrainer(cfg, p0, _digits()), p0


# ------------------------------------------------------------------ the matrix and validation
def test_full_profile_has_the_seed_variants_with_the_seeds_settings():
    from bench.core import params as P

    s = get_study("mnist-cnn")
    for platform, backend in (("cpu", "numba-cpu"), ("cuda", "numba-cuda")):
        assert not [c for c in s.matrix(platform, "default") if c.variant == "seed"], "not in the default matrix"
        seeds = [c for c in s.matrix(platform, "full") if P.matches(c, ["variant=seed"])]
        assert [c.backend for c in seeds] == [backend]
        c = seeds[0]
        assert {k: c.params[k] for k in SEED_PARAMS} == SEED_PARAMS, "the cell spec records the seed's settings"
        s.validate(c)
        # --set overrides what the matrix put there
        (c2,) = P.apply(s, [c], ["init=kit", "input_scale=normalize", "sgd=torch"], [s])
        s.validate(c2)
        assert c2.params["init"] == "kit" and c2.id != c.id
    for c in s.matrix("cpu", "full") + s.matrix("cuda", "full"):  # everyone else keeps today's behaviour
        if c.variant != "seed":
            assert (c.params["init"], c.params["input_scale"], c.params["sgd"]) == ("kit", "normalize", "torch")


@pytest.mark.parametrize(
    "backend,variant,params,message",
    [
        ("torch-cpu", "default", {"input_scale": "div255"}, "input_scale=normalize"),
        ("torch-cuda", "default", {"input_scale": "div255"}, "input_scale=normalize"),
        ("numba-cpu", "default", {"sgd": "seed"}, "seed variants only"),
        ("torch-cpu", "default", {"sgd": "seed"}, "seed variants only"),
        ("numba-cpu", "seed", {"init": "he"}, "unknown init 'he'"),
        ("numba-cpu", "seed", {"input_scale": "raw"}, "unknown input_scale 'raw'"),
        ("numba-cpu", "seed", {"sgd": "adam"}, "unknown sgd 'adam'"),
        ("torch-cpu", "seed", {}, "has no variant 'seed'"),
    ],
)
def test_options_a_backend_cannot_apply_are_one_clear_line(backend, variant, params, message):
    s = get_study("mnist-cnn")
    with pytest.raises(KitError, match=message) as err:
        s.validate(s.cell(backend, variant, **params))
    assert "\n" not in str(err.value)


def test_torch_accepts_the_seeds_init():
    s = get_study("mnist-cnn")
    s.validate(s.cell("torch-cpu", "default", init="seed"))


# ------------------------------------------------------------------ init and input scaling
def test_seed_init_is_the_seeds_distribution_and_kit_init_is_unchanged():
    from bench.studies.mnist_cnn.net import PARAM_SHAPES, init_params

    kit, seed = init_params(0), init_params(0, "seed")
    assert init_params(0, "kit").keys() == kit.keys() == seed.keys()
    for k in kit:
        np.testing.assert_array_equal(init_params(0, "kit")[k], kit[k])  # the default is what it was
        np.testing.assert_array_equal(init_params(0, "seed")[k], seed[k])  # deterministic per seed
        assert seed[k].dtype == np.float32 and seed[k].shape == PARAM_SHAPES[k]
        assert not np.array_equal(seed[k], kit[k])
    for k in ("conv1.bias", "conv2.bias", "fc1.bias", "fc2.bias"):
        assert not seed[k].any(), f"{k}: the seed's biases start at 0"
        assert kit[k].any()
    # conv: N(0,1) * 0.1; dense: He normal, std sqrt(2/fan_in) (fan_in 400, 128)
    assert abs(seed["conv2.weight"].std() - 0.1) < 0.01 and abs(seed["conv2.weight"].mean()) < 0.01
    assert abs(seed["fc1.weight"].std() - np.sqrt(2 / 400)) < 0.002
    assert abs(seed["fc2.weight"].std() - np.sqrt(2 / 128)) < 0.01
    assert abs(kit["fc1.weight"]).max() <= 1 / np.sqrt(400)  # kit: U(+-1/sqrt(fan_in))
    assert not np.array_equal(init_params(1, "seed")["fc1.weight"], seed["fc1.weight"])


def test_input_scale_changes_what_the_numba_trainers_see():
    from bench.studies.mnist_cnn.net import normalise_u8, scale_u8

    x = _digits().x_train
    np.testing.assert_array_equal(scale_u8(x, "normalize"), normalise_u8(x))
    d = scale_u8(x, "div255")
    np.testing.assert_array_equal(d, x.astype(np.float32)[:, None] / np.float32(255))
    assert d.min() == 0.0 and d.max() <= 1.0
    t_div, _ = _cpu_trainer(input_scale="div255")
    t_norm, _ = _cpu_trainer(input_scale="normalize")
    np.testing.assert_array_equal(t_div.x_train, d)
    assert t_norm.x_train.min() < 0 and t_div.x_test.min() == 0.0


def test_a_seed_cell_starts_from_the_seeds_weights_and_rows_say_what_was_trained(tmp_path):
    from bench.studies.mnist_cnn.net import init_params

    s = get_study("mnist-cnn")
    rows = {}
    for variant, params in (("seed", SEED_PARAMS), ("default", {})):
        c = s.resolve(s.cell("numba-cpu", variant, epochs=1, dataset="digits", limit_train=256, batch_size=64, **params), None)
        run = s.open(c, RunContext(tmp_path, tmp_path / variant, None, "id"))
        p = run.trainer.params()
        for k, v in init_params(0, params.get("init", "kit")).items():
            np.testing.assert_array_equal(p[k], v, err_msg=k)
        rows[variant] = run.step(0)[0]
    assert rows["seed"]["trains"] == "dense layers only"
    assert rows["default"]["trains"] == "all layers"


# ------------------------------------------------------------------ numba-cpu --variant seed
@pytest.mark.parametrize("params", [SEED_PARAMS, {}], ids=["seed settings", "kit settings"])
def test_numba_cpu_seed_keeps_conv_weights_trains_dense_and_its_loss_falls(params):
    t, p0 = _cpu_trainer(**params)
    order = np.arange(256, dtype=np.int64)
    losses = [t.train_epoch(order, _NoTimer())["train_loss"] for _ in range(4)]
    p = t.params()
    for k in CONV:
        np.testing.assert_array_equal(p[k], p0[k], err_msg=f"{k} must keep its initial value")
    for k in DENSE:
        assert not np.array_equal(p[k], p0[k]), f"{k} never updated"
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"
    full, _ = _cpu_trainer("default", **{k: v for k, v in params.items() if k != "sgd"})
    full.train_epoch(order, _NoTimer())
    assert not np.array_equal(full.params()["conv1.weight"], p0["conv1.weight"]), "default trains the convs"


def test_dense_gradients_equal_full_backprop_and_the_numpy_reference():
    from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as K
    from bench.studies.mnist_cnn.net import init_params, scale_u8

    d = _digits(64)
    for init, scale in (("seed", "div255"), ("kit", "normalize")):
        p = init_params(3, init)
        x, y = scale_u8(d.x_train, scale), d.y_train.astype(np.int64)
        ws = K.Workspace(len(y))
        K.forward(p, x, ws)
        full = K.zeros_like_params(p)
        loss_full = K.loss_backward(p, y, ws, full)
        dense = {k: np.full(v.shape, np.nan, np.float32) for k, v in p.items()}
        loss_dense = K.loss_backward_dense(p, y, ws, dense)
        assert loss_dense == loss_full
        ref_loss, ref = _numpy_dense_reference(p, x, y)
        assert_close("loss vs NumPy", loss_dense, ref_loss)
        for k in DENSE:
            np.testing.assert_array_equal(dense[k], full[k], err_msg=f"{k}: dense-only != full backprop")
            assert np.abs(ref[k]).sum() > 0
            assert_close(f"{k} vs NumPy float64", dense[k], ref[k])
        for k in CONV:
            assert np.isnan(dense[k]).all(), f"{k}: the dense-only backward must not write conv gradients"


def _numpy_dense_reference(p: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    """Float64 NumPy: the whole forward, mean softmax-CE, and the dense layers' gradients."""
    from numpy.lib.stride_tricks import sliding_window_view as win

    q = {k: v.astype(np.float64) for k, v in p.items()}
    a = x.astype(np.float64)
    for layer in ("conv1", "conv2"):
        c = np.einsum("nchwij,ocij->nohw", win(a, (3, 3), axis=(2, 3)), q[f"{layer}.weight"])
        c = np.maximum(c + q[f"{layer}.bias"][:, None, None], 0)
        s = c.shape[2] // 2
        a = c[:, :, : 2 * s, : 2 * s].reshape(c.shape[0], c.shape[1], s, 2, s, 2).max((3, 5))
    f = a.reshape(len(y), -1)  # (n, 400), torch's flatten order
    h = np.maximum(f @ q["fc1.weight"].T + q["fc1.bias"], 0)
    z = h @ q["fc2.weight"].T + q["fc2.bias"]
    z = z - z.max(1, keepdims=True)
    lse = np.log(np.exp(z).sum(1))
    loss = float(np.mean(lse - z[np.arange(len(y)), y]))
    dz = np.exp(z - lse[:, None])
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    dh = (dz @ q["fc2.weight"]) * (h > 0)
    return loss, {"fc2.weight": dz.T @ h, "fc2.bias": dz.sum(0), "fc1.weight": dh.T @ f, "fc1.bias": dh.sum(0)}


def test_seed_sgd_is_the_seeds_update_rule():
    """sgd=seed: v = m*v + (1-m)*G, G the gradient of the batch-summed loss; p -= lr*v."""
    from bench.studies.mnist_cnn.kernels import numba_cpu_cnn as K

    rng = np.random.default_rng(0)
    n, lr, m = 64, 0.01, 0.9
    p = {k: rng.standard_normal(5).astype(np.float32) for k in DENSE}
    g = {k: rng.standard_normal(5).astype(np.float32) for k in DENSE}  # batch-mean gradients
    v = {k: rng.standard_normal(5).astype(np.float32) for k in DENSE}
    want_v = {k: m * v[k].astype(np.float64) + (1 - m) * (n * g[k].astype(np.float64)) for k in DENSE}
    want_p = {k: p[k] - lr * want_v[k] for k in DENSE}
    K.sgd_momentum_step(p, g, v, lr, m, DENSE, grad_scale=(1 - m) * n)
    for k in DENSE:
        assert_close(f"velocity {k}", v[k], want_v[k])
        assert_close(f"param {k}", p[k], want_p[k])


# ------------------------------------------------------------------ numba-cuda --variant seed (simulator)
_SIM_SCRIPT = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, "tests")
from test_seed_variants import _digits, _NoTimer, DENSE, CONV
from bench.core.cell import Cell
from bench.studies.mnist_cnn.config import settings
from bench.studies.mnist_cnn.net import init_params
from bench.studies.mnist_cnn.backends import numba_cuda
from bench.studies.mnist_cnn.backends.numba_cpu import NumbaCpuTrainer
from bench.studies.mnist_cnn.kernels import numba_cuda as K
assert K.simulated(), "not the simulator"
assert numba_cuda.available() is None, numba_cuda.available()
out = {}
for sgd in ("seed",):  # the variant's default; sgd=torch differs only on the CPU (tested above)
    params = {"batch_size": 2, "epochs": 1, "init": "seed", "input_scale": "div255", "sgd": sgd}
    cfg = settings(Cell("mnist-cnn", "numba-cuda", "seed", params))
    data = _digits(8)
    p0 = init_params(0, "seed")
    t0 = time.perf_counter()
    gpu = numba_cuda.create(None, type("D", (), {"cfg": cfg, "params": p0, "dataset": data})())
    cpu = NumbaCpuTrainer(settings(Cell("mnist-cnn", "numba-cpu", "seed", params)), p0, data)
    order = np.array([3, 0, 5, 1, 6, 2], np.int64)  # 3 steps of 2
    lg = gpu.train_epoch(order, _NoTimer())["train_loss"]
    lc = cpu.train_epoch(order, _NoTimer())["train_loss"]
    pg, pc, host = gpu.params(), cpu.params(), gpu.p
    out[sgd] = {
        "loss": [lg, lc],
        "dense_err": {k: float(np.linalg.norm(pg[k] - pc[k]) / np.linalg.norm(pc[k])) for k in DENSE},
        "device_equals_host": all(np.array_equal(pg[k], host[k]) for k in DENSE),
        "conv_unchanged": all(np.array_equal(pg[k], p0[k]) and np.array_equal(pc[k], p0[k]) for k in CONV),
        "dense_changed": all(not np.array_equal(pg[k], p0[k]) for k in DENSE),
        "fields": sorted(gpu.phase_fields(_NoTimer())),
        "s": time.perf_counter() - t0,
    }
snap = gpu.snapshot()
gpu.train_epoch(order[:2], _NoTimer())
gpu.restore(snap)
out["restore_ok"] = all(np.array_equal(gpu.params()[k], pg[k]) for k in DENSE)
print("RESULT " + json.dumps(out))
"""


class _NoTimer:
    enabled = False

    def phase(self, name):
        import contextlib

        return contextlib.nullcontext()

    def as_fields(self):
        return {}


@pytest.mark.slow
def test_numba_cuda_seed_under_the_simulator_matches_numba_cpu_seed():
    pytest.importorskip("numba.cuda")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "KIT_ALLOW_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _SIM_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    out = json.loads(line[len("RESULT ") :])
    for sgd in ("seed",):
        o = out[sgd]
        assert o["conv_unchanged"] and o["dense_changed"], o
        assert o["device_equals_host"], "the updated dense weights reach the GPU every step"
        assert abs(o["loss"][0] - o["loss"][1]) <= RTOL[np.float32] * abs(o["loss"][1]), o["loss"]
        worst = max(o["dense_err"].values())
        assert worst <= RTOL[np.float32], f"sgd={sgd}: numba-cuda seed vs numba-cpu seed after 3 steps: {o['dense_err']}"
    assert out["restore_ok"], "restore() puts the dense weights back on the GPU"


# ------------------------------------------------------------------ numba-cuda --variant graph (simulator)
_GRAPH_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, "tests")
from test_seed_variants import _digits, _NoTimer
from bench.core.cell import Cell
from bench.studies.mnist_cnn.config import settings
from bench.studies.mnist_cnn.net import init_params
from bench.studies.mnist_cnn.backends import numba_cuda
from bench.studies.mnist_cnn.kernels import numba_cuda as K
assert K.simulated(), "not the simulator"
data = _digits(12)
p0 = init_params(0)
out = {}
for variant in ("default", "graph"):
    cfg = settings(Cell("mnist-cnn", "numba-cuda", variant, {"batch_size": 2, "epochs": 1}))  # 2 rows: the simulator's time grows with them
    tr = numba_cuda.create(None, type("D", (), {"cfg": cfg, "params": p0, "dataset": data})())
    tr._new_net()  # what warmup() ends with (its check against torch is tested elsewhere: slow here)
    loss = tr.train_epoch(np.array([5, 0, 9, 2], np.int64), _NoTimer())["train_loss"]
    f = tr.phase_fields(_NoTimer())
    out[variant] = {"loss": loss, "params": {k: v.tolist() for k, v in tr.params().items()},
                    "kernel_variant": f["kernel_variant"], "cuda_graph": f["cuda_graph"]}
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_numba_cuda_graph_variant_trains_like_the_default_under_the_simulator():
    """Variant graph runs kernel variant 6 (sparse); the simulator cannot capture a graph, so it
    launches eagerly and says so. Two SGD steps of both variants from the same weights agree."""
    pytest.importorskip("numba.cuda")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "KIT_ALLOW_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _GRAPH_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    out = json.loads(line[len("RESULT ") :])
    from bench.studies.mnist_cnn.net import init_params

    p0 = init_params(0)
    d, g = out["default"], out["graph"]
    assert (d["kernel_variant"], g["kernel_variant"]) == ("fast", "uconv")
    assert d["cuda_graph"] == "no" and g["cuda_graph"].startswith("no: the CUDA simulator cannot capture"), g["cuda_graph"]
    assert g["loss"] == pytest.approx(d["loss"], rel=1e-5)
    for k in d["params"]:
        a, b = np.asarray(g["params"][k]), np.asarray(d["params"][k])
        assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b), k
        assert not np.array_equal(b, p0[k]), f"{k} did not train"
