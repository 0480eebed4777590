"""The numba-cuda `graph` cell on a real GPU (skipped without one): its captured epoch, whose first
node copies the epoch's order from the page-locked buffer the host stages, trains as the launched
`default` variant does from the same weights over the same orders, epoch after epoch (a graph that
kept reading the first epoch's order, or a stale buffer, would not), and its rows say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, "tests")
from test_seed_variants import _digits, _NoTimer
from bench.core.cell import Cell
from bench.studies.mnist_cnn.config import settings
from bench.studies.mnist_cnn.net import init_params
from bench.studies.mnist_cnn.backends import numba_cuda

data = _digits(64)
p0 = init_params(0)
orders = [np.random.default_rng(e).permutation(64).astype(np.int64) for e in (1, 2, 3)]
out = {}
for variant, eps in (("default", orders), ("graph", orders), ("stale", [orders[0]] * 3)):
    cfg = settings(Cell("mnist-cnn", "numba-cuda", "default" if variant == "stale" else variant, {"batch_size": 8, "epochs": 3}))
    tr = numba_cuda.create(None, type("D", (), {"cfg": cfg, "params": p0, "dataset": data})())
    tr.warmup()  # the check against torch, every kernel compiled, the graph captured
    epochs = []
    for order in eps:
        loss = tr.train_epoch(order, _NoTimer())["train_loss"]
        f = tr.phase_fields(_NoTimer())
        epochs.append({"loss": loss, "h2d_s": f["h2d_s"], "params": {k: v.tolist() for k, v in tr.params().items()}})
    out[variant] = {"epochs": epochs, "kernel_variant": f["kernel_variant"], "cuda_graph": f["cuda_graph"]}
print("RESULT " + json.dumps(out))
"""


def test_the_graph_epoch_copies_each_epochs_order_itself_and_trains_as_the_launched_one() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("numba.cuda")
    if not torch.cuda.is_available() or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("needs a CUDA GPU (the simulator cannot capture graphs)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stdout[-2000:] + r.stderr[-4000:]
    out = json.loads(line[len("RESULT ") :])
    d, g, stale = out["default"], out["graph"], out["stale"]
    assert g["cuda_graph"].startswith("epoch: the order's copy"), g["cuda_graph"]

    def apart(x: dict, y: dict) -> float:  # the largest relative distance between two sets of weights
        return max(float(np.linalg.norm(np.subtract(x[k], y[k])) / np.linalg.norm(y[k])) for k in y)

    tol = 1e-4  # two kernel variants sum in other orders: float32 rounding, not training
    # a graph that kept the first epoch's order would train as `stale`: that must be far outside tol
    assert apart(stale["epochs"][2]["params"], d["epochs"][2]["params"]) > 20 * tol
    for e, (de, ge) in enumerate(zip(d["epochs"], g["epochs"], strict=True)):
        assert ge["loss"] == pytest.approx(de["loss"], rel=tol), (e, ge["loss"], de["loss"])
        assert apart(ge["params"], de["params"]) <= tol, e
        assert 0 <= ge["h2d_s"] < 0.1 and de["h2d_s"] > 0
