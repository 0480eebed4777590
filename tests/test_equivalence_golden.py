"""Every hand-written CPU backend against the torch-CPU golden reference (tests/golden/).

Same weights and batch: logits, loss and all 8 gradients within 1e-4 relative (fp32).
Same initial weights and batch order: the 20-step loss curves within 1e-3.
"""

import numpy as np
import pytest
from tolerances import CURVE_ATOL, assert_close

from bench.studies.mnist_cnn.net import PARAM_NAMES

K = pytest.importorskip("bench.studies.mnist_cnn.kernels.numba_cpu_cnn")


def _params(golden):
    return {k: golden[f"p.{k}"].copy() for k in PARAM_NAMES}


def test_forward_loss_and_every_gradient_match_torch(golden):
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
