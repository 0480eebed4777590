"""Backends against their study's torch-CPU golden reference (tests/golden/).

Generated from the registry: every registered backend of a study that has a golden file
(tests/golden/<study package>_*.npz) replays the golden 20-step SGD curve through its own
trainer (tests/golden/<study package>.py says how), each step's loss within 1e-3 of torch's;
a backend that cannot run here skips with its reason. And the numba-cpu kernels directly:
same weights and batch, logits, loss and all 8 gradients within 1e-4 relative (fp32).
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from references import kit_studies
from tolerances import CURVE_ATOL, assert_close

from bench.core.registry import studies
from bench.studies.mnist_cnn.net import PARAM_NAMES

GOLDEN = Path(__file__).resolve().parent / "golden"


def _package(study: str) -> str:
    return type(studies()[study]).__module__.split(".")[2]


def _cases() -> list:
    out = []
    for name in kit_studies():
        files = sorted(GOLDEN.glob(f"{_package(name)}_*.npz"))
        if not files:
            why = f"{name} has no golden file (tests/golden/{_package(name)}_*.npz)"
            out.append(pytest.param(name, None, None, id=f"{name}:no-golden", marks=pytest.mark.skip(reason=why)))
        out += [pytest.param(name, b, f, id=f"{name}:{b}:{f.stem}") for f in files for b in studies()[name].backends]
    return out


def _replayer(study: str):
    path = GOLDEN / f"{_package(study)}.py"
    assert path.is_file(), f"{study} has a golden file but no {path.name} beside it to replay it through a backend"
    spec = importlib.util.spec_from_file_location(f"golden_{_package(study)}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.replay


@pytest.mark.parametrize(("study", "backend", "path"), _cases())
def test_every_backend_replays_its_studys_golden_curve(study, backend, path, tmp_path, monkeypatch):
    st = studies()[study]
    why = st.why_unavailable(backend)
    if why:
        pytest.skip(f"{backend} cannot run here: {why}")
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    golden = np.load(path)
    got = _replayer(study)(st, backend, golden)
    want = golden["curve_loss"]
    diff = np.abs(got - want)
    assert got.shape == want.shape and diff.max() <= CURVE_ATOL, (
        f"{backend}: loss curve differs from torch's by up to {diff.max():.2e} at step {diff.argmax()}"
    )


def _kernels():
    return pytest.importorskip("bench.studies.mnist_cnn.kernels.numba_cpu_cnn")


def _params(golden):
    return {k: golden[f"p.{k}"].copy() for k in PARAM_NAMES}


def test_forward_loss_and_every_gradient_match_torch(golden):
    K = _kernels()
    params = _params(golden)
    ws = K.Workspace(len(golden["y"]))
    grads = K.zeros_like_params(params)
    logits = K.forward(params, golden["x"], ws)
    loss = K.loss_backward(params, golden["y"], ws, grads)
    errs = {"logits": assert_close("logits", logits, golden["logits"]), "loss": assert_close("loss", loss, golden["loss"])}
    for name in PARAM_NAMES:
        errs[name] = assert_close(f"grad {name}", grads[name], golden[f"g.{name}"])
    print("largest relative error:", max(errs.items(), key=lambda kv: kv[1]))


def test_twenty_step_loss_curve_matches_torch(golden):
    K = _kernels()
    params = _params(golden)
    n = golden["curve_x"].shape[1]
    ws, grads, vel = K.Workspace(n), K.zeros_like_params(params), K.zeros_like_params(params)
    curve = []
    for i in range(golden["curve_x"].shape[0]):
        K.forward(params, np.ascontiguousarray(golden["curve_x"][i]), ws)
        curve.append(K.loss_backward(params, golden["curve_y"][i], ws, grads))
        K.sgd_momentum_step(params, grads, vel, 0.01, 0.9)
    diff = np.abs(np.array(curve) - golden["curve_loss"])
    assert diff.max() <= CURVE_ATOL, f"loss curves differ by up to {diff.max():.2e} at step {diff.argmax()}"
    assert golden["curve_loss"][-1] < golden["curve_loss"][0], "reference curve should descend (golden file sane)"


def test_golden_is_sensitive_to_a_wrong_gradient(golden):
    """The check can fail: a gradient scaled by 1.001 is caught."""
    with pytest.raises(AssertionError):
        assert_close("scaled", golden["g.fc1.weight"] * 1.001, golden["g.fc1.weight"])


def test_the_replay_fails_a_backend_that_trains_another_net(golden):
    """The generated check can fail: torch-cpu started from a last layer 5 % off gives another curve."""
    st = studies()["mnist-cnn"]
    why = st.why_unavailable("torch-cpu")
    if why:
        pytest.skip(why)
    off = dict(golden)
    off["p.fc2.weight"] = golden["p.fc2.weight"] * 1.05
    got = _replayer("mnist-cnn")(st, "torch-cpu", off)
    assert np.abs(got - golden["curve_loss"]).max() > CURVE_ATOL
