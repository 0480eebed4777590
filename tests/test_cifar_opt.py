"""cifar-opt (seed 002): matrix and validation, the resident pipeline's crops, the trainer's
warm-up/restore and determinism, the inference forms, the Optuna search (journal, resume,
Pareto pick, pruner), the validity flags, and a whole smoke cell."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core.errors import KitError
from bench.core.registry import get_study

ROOT = Path(__file__).resolve().parent.parent
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def study():
    return get_study("cifar-opt")


@pytest.fixture(scope="module")
def tiny():
    """A learnable 10-class set in the study's shapes: 300 train / 100 test uint8 (N,3,32,32)."""
    from bench.data import cifar10

    rng = np.random.default_rng(0)
    y = np.arange(400) % 10
    x = rng.integers(0, 60, size=(400, 3, 32, 32), dtype=np.uint8)
    x[:, y % 3, :, :] += (y[:, None, None] * 19).astype(np.uint8)  # colour by class
    ds = cifar10.Cifar10(
        "cifar10-synthetic", False, x[:300], y[:300].astype(np.int64), x[300:], y[300:].astype(np.int64), "t", "t"
    )
    return ds


def _cfg(study, **kw):
    from bench.studies.cifar_opt.config import settings

    base = {"n_train": 300, "n_test": 100, "batch_size": 30, "epochs": 1, "threads": 1, "num_workers": 0, "pipeline": "resident"}
    variant = kw.pop("variant", "default")
    return settings(study.cell("torch-cpu", variant, **{**base, **kw}))


def _split(ds):
    from bench.studies.cifar_opt.trainer import Split

    return Split(ds.x_train, ds.y_train, ds.x_test, ds.y_test)


# ---- matrix and validation ----------------------------------------------------------------


@pytest.mark.parametrize("platform", ["cpu", "cuda", "mps"])
@pytest.mark.parametrize("profile", ["smoke", "default", "full"])
def test_every_matrix_cell_validates(study, platform, profile):
    cells = study.matrix(platform, profile)
    assert cells, (platform, profile)
    for c in cells:
        study.validate(c)
    assert len({c.key for c in cells}) == len(cells), "two cells of one matrix are the same work"


def test_the_seeds_configurations_are_in_the_default_matrices(study):
    cpu = {(c.params["model"], c.variant) for c in study.matrix("cpu", "default")}
    full = {(c.params["model"], c.variant) for c in study.matrix("cpu", "full")}
    cuda = {(c.params["model"], c.variant, c.params["pipeline"]) for c in study.matrix("cuda", "default")}
    for m in ("resnet18", "mobilenet_v2"):
        assert {(m, v) for v in ("default", "int8", "optuna")} <= cpu  # Default, Quantized (the kit's int8), Tuned
        assert {(m, v) for v in ("quant-dynamic", "compile")} <= full  # the seed's quantize_dynamic, the kit's compile
        assert {(m, "default", "loader"), (m, "amp", "loader"), (m, "optuna", "loader"), (m, "tuned", "resident")} <= cuda
    assert {c.params["epochs"] for c in study.matrix("cpu", "default")} == {5}
    assert {c.params["epochs"] for c in study.matrix("cuda", "default")} == {10}


def test_auto_profile_is_smoke_on_cpu_only(study):
    assert study.profile_for("cpu", "auto") == "smoke"
    assert study.profile_for("cuda", "auto") == "default"
    assert get_study("mnist-cnn").profile_for("cpu", "auto") == "default"
    assert study.profile_for("cpu", "full") == "full"


@pytest.mark.parametrize(
    "backend,variant,params,match",
    [
        ("torch-cpu", "amp", {}, "GPU variant"),
        ("torch-cpu", "bf16+graphs", {}, "GPU variant"),
        ("torch-cpu", "tuned", {}, "GPU variant"),
        ("torch-cuda", "int8", {}, "CPU variant"),
        ("torch-cuda", "fp16+graphs", {}, "GradScaler"),
        ("torch-cuda", "bf16+fp16", {}, "exclude"),
        ("torch-cuda", "bf16+turbo", {}, "unknown cifar-opt variant"),
        ("torch-cpu", "default", {"model": "vgg11"}, "unknown model"),
        ("torch-cpu", "default", {"pipeline": "dali"}, "unknown pipeline"),
        ("torch-cpu", "default", {"batch_size": 6000}, "larger than the training subsample"),
        ("torch-cpu", "int8", {"infer_batch": 5000}, "int8 export"),
        ("torch-cpu", "int8", {"calib_batches": 1000}, "calibration"),
        ("torch-cpu", "default", {"lr": float("nan")}, "lr must be"),
        ("torch-cpu", "optuna", {"val_fraction": 0.9}, "val_fraction"),
        ("torch-cpu", "optuna", {"objective": "speed"}, "unknown objective"),
    ],
)
def test_bad_cells_are_one_line(study, backend, variant, params, match):
    with pytest.raises(KitError, match=match) as err:
        study.validate(study.cell(backend, variant, **params))
    assert "\n" not in str(err.value)


def test_gpu_variant_on_cpu_host_is_one_line_and_exit_2(study, tmp_path):
    spec = study.cell("torch-cpu", "amp").to_json()  # a hand-written spec asking the CPU backend for AMP
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cell", spec, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "GPU variant" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not any(tmp_path.iterdir())


# ---- the resident pipeline ----------------------------------------------------------------


def test_resident_crops_and_flips_are_real_crops_of_the_padded_image(tiny):
    from bench.studies.cifar_opt.pipeline import PAD, ResidentPipeline

    mean, std = [0.0, 0.0, 0.0], [1 / 255] * 3  # normalise = x (identity on the 0..255 scale)
    pipe = ResidentPipeline(tiny.x_train, tiny.y_train, mean, std, batch=20, seed=3, device="cpu")
    idx = torch.arange(20)
    out = pipe.augment(idx).round().to(torch.uint8).numpy()
    padded = np.pad(tiny.x_train[:20], ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    kinds = set()
    for i in range(20):
        found = [
            (dy, dx, f)
            for dy in range(2 * PAD + 1)
            for dx in range(2 * PAD + 1)
            for f in (False, True)
            if np.array_equal(
                out[i], (padded[i, :, dy : dy + 32, dx : dx + 32])[..., ::-1] if f else padded[i, :, dy : dy + 32, dx : dx + 32]
            )
        ]
        assert found, f"image {i} is not a crop (or flipped crop) of its padded original"
        kinds.add(found[0][2])
    assert kinds == {False, True}, "20 images and never (or always) flipped"


def test_pipelines_yield_whole_batches(tiny):
    from bench.studies.cifar_opt import pipeline

    for name in pipeline.PIPELINES if hasattr(pipeline, "PIPELINES") else pipeline.PIPELINE_CLASSES:
        p = pipeline.make(name, tiny.x_train, tiny.y_train, [0.5] * 3, [0.25] * 3, 64, 0, "cpu", 0)
        shapes = [(tuple(x.shape), tuple(y.shape), x.dtype) for x, y in p.batches()]
        assert len(shapes) == 300 // 64 == p.steps, name
        assert set(shapes) == {((64, 3, 32, 32), (64,), torch.float32)}, name


# ---- the trainer ----------------------------------------------------------------------------


def test_warmup_leaves_the_initial_weights_and_training_is_deterministic(study, tiny):
    from bench.studies.cifar_opt.trainer import Trainer

    cfg = _cfg(study, model="resnet18")
    torch.set_num_threads(1)
    a = Trainer(cfg, _split(tiny), 30, 0.01, seed=5)
    init = {k: v.clone() for k, v in a.model.state_dict().items()}
    a.warmup(2)
    assert all(torch.equal(init[k], v) for k, v in a.model.state_dict().items()), "warm-up changed the weights"
    la = a.train_epoch()
    b = Trainer(cfg, _split(tiny), 30, 0.01, seed=5)
    b.warmup(1)
    lb = b.train_epoch()
    assert la["steps"] == 10 and la["samples"] == 300
    assert math.isfinite(la["train_loss"]) and la["train_loss"] == lb["train_loss"], (la, lb)
    assert 0.0 <= a.evaluate() <= 1.0


def test_loader_pipeline_trains(study, tiny):
    from bench.studies.cifar_opt.trainer import Trainer

    cfg = _cfg(study, model="mobilenet_v2", pipeline="loader")
    t = Trainer(cfg, _split(tiny), 30, 0.01, seed=0)
    stats = [t.train_epoch() for _ in range(2)]
    assert all(s["steps"] == 10 and math.isfinite(s["train_loss"]) for s in stats), stats
    assert t.pipe.workers == 0
    assert t.python_heap_peak_mb() > 0


# ---- inference forms ------------------------------------------------------------------------


def test_quant_dynamic_form_is_the_seeds_linear_only_quantizer(study, tiny):
    from bench.studies.cifar_opt import inference
    from bench.studies.cifar_opt.trainer import Trainer

    cfg = _cfg(study, model="mobilenet_v2", variant="quant-dynamic")
    t = Trainer(cfg, _split(tiny), 30, 0.01, seed=0)
    forms = inference.forms_for("quant-dynamic", t, 16, 2)
    assert [f.name for f in forms] == ["fp32-eager", "int8-dynamic"]
    assert "Linear layers only" in forms[1].path
    rows = inference.measure(forms, t, calls=20, warmup=2, infer_batch=16)
    for r in rows:
        assert r["latency_calls"] == 20 and 0 < r["latency_p50_ms"] <= r["latency_p90_ms"] <= r["latency_p99_ms"]
        assert r["infer_samples_per_s"] > 0 and 0 <= r["test_acc"] <= 1
    # MobileNetV2's classifier is 1280x10 of its 2.2M weights: quantising Linear barely changes the size
    assert rows[1]["model_size_mb"] > 0.9 * rows[0]["model_size_mb"]


@pytest.mark.slow
def test_int8_pt2e_is_smaller_and_agrees_with_fp32(study, tiny):
    from bench.studies.cifar_opt import inference
    from bench.studies.cifar_opt.trainer import Trainer

    cfg = _cfg(study, model="resnet18", variant="int8", threads=2)
    t = Trainer(cfg, _split(tiny), 30, 0.01, seed=0)
    t.train_epoch()
    forms = inference.forms_for("int8", t, 16, 4)
    assert [f.name for f in forms] == ["fp32-compiled", "int8-pt2e"]
    rows = {r["form"]: r for r in inference.measure(forms, t, calls=30, warmup=3, infer_batch=16)}
    assert rows["int8-pt2e"]["model_size_mb"] <= 0.3 * rows["fp32-compiled"]["model_size_mb"]
    assert "NOT folded" not in forms[1].path, forms[1].path  # this torch folds the weights to int8
    with torch.no_grad():
        x = t.x_eval[:16]
        agree = (forms[0].fn(x).argmax(1) == forms[1].fn(x).argmax(1)).float().mean().item()
    assert agree >= 0.8, agree


@given(st.lists(st.tuples(st.sampled_from(["int8", "uint8", "float32", "int32"]), st.integers(0, 64)), max_size=6))
def test_int8_share_is_the_int8_bytes_over_all_bytes(parts):
    """inference.int8_share: what says whether a PT2E model's weights were folded to int8 (a
    model that kept fp32 weights reads near 0 and its row says so)."""
    from bench.studies.cifar_opt import inference

    state = {f"t{i}": torch.zeros(n, dtype=getattr(torch, dt)) for i, (dt, n) in enumerate(parts)}
    size = {"int8": 1, "uint8": 1, "float32": 4, "int32": 4}
    total = sum(size[dt] * n for dt, n in parts)
    want = sum(size[dt] * n for dt, n in parts if dt in ("int8", "uint8")) / total if total else 0.0
    assert inference.int8_share(state) == pytest.approx(want)
    assert 0.0 <= inference.int8_share(state) <= 1.0


# ---- Optuna ---------------------------------------------------------------------------------


def _make(cfg):
    """What open_cell hands the search: the backend's create() for (split, batch, lr, variant)."""
    from bench.studies.cifar_opt.trainer import Trainer

    return lambda split, bs, lr, variant=None: Trainer(cfg, split, bs, lr, cfg.seed, variant)


def test_search_journal_resume_and_pareto_pick(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=2, pipeline="resident")
    s = Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    rows = [s.trial(0), s.trial(1)]
    assert (tmp_path / JOURNAL).stat().st_size > 0
    assert {r["trial_state"] for r in rows} <= {"complete", "pruned"}
    assert all(r["trial_batch_size"] in (8, 16, 32, 64, 128) and 1e-4 <= r["trial_lr"] <= 0.1 for r in rows)
    again = Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    assert again.trial(0)["trial_state"].endswith("(from the journal)")
    if any(r["trial_state"] == "complete" for r in rows):
        pick = again.pick()
        assert pick["picked_trial"] in [int(x) for x in pick["pareto_trials"].split(";")]


def test_search_with_accuracy_objective_uses_a_pruner(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1, objective="accuracy")
    s = Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    assert type(s.study.pruner).__name__ == "MedianPruner"
    assert s.trial(0)["trial"] == 0


def test_a_corrupt_journal_is_one_line_and_kept(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    (tmp_path / JOURNAL).write_text("{not json\n")
    cfg = _cfg(study, variant="optuna", trials=1)
    with pytest.raises(KitError, match="journal") as err:
        Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    assert "\n" not in str(err.value)
    assert (tmp_path / JOURNAL).read_text() == "{not json\n", "the journal was overwritten"


# ---- flags ----------------------------------------------------------------------------------


def test_validity_flags_catch_divergence_and_chance():
    from bench.studies.cifar_opt.protocol import validity_flags

    def ep(e, loss, acc):
        return {
            "phase": "epoch",
            "status": "ok",
            "epoch": e,
            "train_loss": loss,
            "test_acc": acc,
            "n_test": 1000,
            "chance_epochs": 2,
        }

    assert validity_flags([ep(1, 2.0, 0.3), ep(2, 1.5, 0.5)]) == []
    assert validity_flags([ep(1, 2.0, 0.3), ep(2, float("nan"), 0.1)])[0].startswith("diverged(epoch 2)")
    assert validity_flags([ep(1, 2.3, 0.1), ep(2, 2.3, 0.11)]) == ["at-chance(acc 0.110 after 2 epochs)"]
    assert validity_flags([ep(1, 2.3, 0.1)]) == [], "one epoch is too early to call chance"


# ---- a whole cell ---------------------------------------------------------------------------


@pytest.mark.slow
def test_smoke_matrix_runs_and_reports(tmp_path):
    env = {"KIT_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    import os

    env = {**os.environ, **env}
    env.pop("KIT_DATA_DIR", None)
    out = tmp_path / "r"
    (tmp_path / "nodata").mkdir()  # a named data dir without CIFAR-10: auto falls back to the synthetic set
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "matrix",
            "cifar-opt",
            "--profile",
            "smoke",
            "--only",
            "model=mobilenet_v2",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "nodata"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    from bench.core.resultset import load_cells

    cells = load_cells(sorted(p for p in (out / "cifar-opt").iterdir() if p.is_dir()))
    assert [c.status for c in cells] == ["ok"]
    rows = cells[0].rows
    assert {r["phase"] for r in rows} == {"epoch", "inference"}
    assert all(r["dataset"] == "cifar10-synthetic" and r["dataset_real"] is False for r in rows)
    rep = subprocess.run(
        [sys.executable, "orchestrate.py", "report", str(out), "--out", str(tmp_path / "rep")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr[-2000:]
    text = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "## cifar-opt (seed 002)" in text and "NOT CIFAR-10" in text
    assert (tmp_path / "rep" / "cifar-opt_fig4_latency.png").stat().st_size > 0
