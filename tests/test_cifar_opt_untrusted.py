"""cifar-opt under untrusted input: an Optuna journal left in a cell dir (from another search
space or study, a planted symlink, a non-file, a symlinked cell dir), a search interrupted
mid-trial (a killed run, Ctrl-C), an epoch that ran no step, and batch sizes BatchNorm
cannot train on. Each is one line (KitError) and nothing is written through a link."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from bench.core.errors import KitError
from bench.core.registry import get_study

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def study():
    return get_study("cifar-opt")


@pytest.fixture(scope="module")
def tiny():
    """As tests/test_cifar_opt.py's: a learnable 10-class set, 300 train / 100 test uint8 (N,3,32,32)."""
    from bench.data import cifar10

    rng = np.random.default_rng(0)
    y = np.arange(400) % 10
    x = rng.integers(0, 60, size=(400, 3, 32, 32), dtype=np.uint8)
    x[:, y % 3, :, :] += (y[:, None, None] * 19).astype(np.uint8)
    return cifar10.Cifar10(
        "cifar10-synthetic", False, x[:300], y[:300].astype(np.int64), x[300:], y[300:].astype(np.int64), "t", "t"
    )


def _cfg(study, **kw):
    from bench.studies.cifar_opt.config import settings

    base = {"n_train": 300, "n_test": 100, "batch_size": 30, "epochs": 1, "threads": 1, "num_workers": 0, "pipeline": "resident"}
    variant = kw.pop("variant", "default")
    return settings(study.cell("torch-cpu", variant, **{**base, **kw}))


def _split(ds):
    from bench.studies.cifar_opt.trainer import Split

    return Split(ds.x_train, ds.y_train, ds.x_test, ds.y_test)


def _make(cfg):
    from bench.studies.cifar_opt.trainer import Trainer

    return lambda split, bs, lr, variant=None: Trainer(cfg, split, bs, lr, cfg.seed, variant)


def _name(cfg) -> str:
    """The study name a cell's Search uses in its journal."""
    return f"cifar-opt-{cfg.model}-{cfg.device}-seed{cfg.seed}-{cfg.objective}"


def _storage(path: Path):
    import optuna

    try:
        from optuna.storages.journal import JournalFileBackend
    except ImportError:  # optuna < 4.0
        from optuna.storages import JournalFileStorage as JournalFileBackend
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def _one_line(err) -> str:
    msg = str(err.value)
    assert msg and "\n" not in msg, msg
    return msg


# ---- 1. a journal from another search space or study ----------------------------------------


@pytest.mark.parametrize(
    "what,batches,lr_range",
    [
        ("batch_size", [1000, 2000], (1e-4, 1e-1)),  # the reproduced case: 2000 picked on 80 images
        ("lr", [8, 16, 32, 64, 128], (1e-6, 1.0)),
    ],
)
def test_a_journal_from_another_search_space_is_refused_and_kept(study, tiny, tmp_path, what, batches, lr_range):
    optuna = pytest.importorskip("optuna")
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    from bench.studies.cifar_opt.search import JOURNAL, Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=2)
    journal = tmp_path / JOURNAL
    st = optuna.create_study(study_name=_name(cfg), storage=_storage(journal), directions=["maximize", "minimize"])
    st.add_trial(
        optuna.trial.create_trial(
            params={"batch_size": batches[-1], "lr": lr_range[1]},
            distributions={"batch_size": CategoricalDistribution(batches), "lr": FloatDistribution(*lr_range, log=True)},
            values=[0.9, 0.01],
            user_attrs={"epoch_s": 0.01},
        )
    )
    before = journal.read_bytes()
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    msg = _one_line(err)
    assert str(journal) in msg and "search space" in msg and what in msg, msg
    assert journal.read_bytes() == before, "the foreign journal was written to"


def test_a_journal_holding_another_study_is_refused_and_kept(study, tiny, tmp_path):
    optuna = pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    journal = tmp_path / JOURNAL
    optuna.create_study(study_name="somebody-elses-study", storage=_storage(journal), direction="maximize")
    before = journal.read_bytes()
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    msg = _one_line(err)
    assert str(journal) in msg and "somebody-elses-study" in msg, msg
    assert journal.read_bytes() == before


# ---- 2. a planted journal symlink, a non-file, a symlinked cell dir ---------------------------


@pytest.mark.parametrize("target_exists", [True, False], ids=["to-a-file", "dangling"])
def test_a_planted_journal_symlink_is_refused_and_its_target_untouched(study, tiny, tmp_path, target_exists):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    cell_dir = tmp_path / "cell"
    cell_dir.mkdir()
    victim = tmp_path / "victim.log"
    if target_exists:
        victim.write_bytes(b"")
    (cell_dir / JOURNAL).symlink_to(victim)
    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train, tiny.y_train, cell_dir, _make(cfg))
    msg = _one_line(err)
    assert "symlink" in msg and JOURNAL in msg, msg
    if target_exists:
        assert victim.read_bytes() == b"", "Optuna wrote through the planted link"
    else:
        assert not victim.exists() and not victim.is_symlink(), "Optuna created the link's target"
    assert (cell_dir / JOURNAL).is_symlink(), "the planted link is left for a person to look at"


def test_a_journal_that_is_not_a_regular_file_is_one_line(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    (tmp_path / JOURNAL).mkdir()
    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    assert "not a regular file" in _one_line(err)


def test_a_symlinked_cell_dir_is_refused_and_nothing_written_through_it(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import Search

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cell_dir = tmp_path / "cell"
    cell_dir.symlink_to(elsewhere, target_is_directory=True)
    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train, tiny.y_train, cell_dir, _make(cfg))
    assert "symlink" in _one_line(err)
    assert not any(elsewhere.iterdir()), "the journal was written through the symlinked cell dir"


def _ctx(tmp_path):
    """What the cell entry point hands open(): one process, no ranks."""
    from bench.core.study import RunContext

    return RunContext(out=tmp_path, cell_dir=tmp_path, data_dir=None, run_id="test")


# ---- 3. an interrupted trial does not use up the budget ---------------------------------------


@pytest.mark.parametrize("how", ["killed", "ctrl-c"])
def test_an_interrupted_trial_does_not_use_up_the_budget(study, tiny, tmp_path, how):
    optuna = pytest.importorskip("optuna")
    from bench.studies.cifar_opt.protocol import CellRun
    from bench.studies.cifar_opt.search import JOURNAL, Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    first = Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    if how == "killed":  # kill -9 mid-trial: the trial stays RUNNING in the journal
        t = first.study.ask()
        t.suggest_categorical("batch_size", first.batches)
    else:  # Ctrl-C inside the trial: Optuna marks it FAIL and re-raises

        def interrupted(*a, **kw):
            raise KeyboardInterrupt

        first.make = interrupted
        with pytest.raises(KeyboardInterrupt):
            first.trial(0)
    assert len(first.study.get_trials(deepcopy=False)) == 1

    again = Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    run = CellRun(cfg, _ctx(tmp_path), _split(tiny), {}, 1, 1, _make(cfg), search=again)
    rows = run.step(0)  # the one trial step: runs a trial, lists the interrupted one, picks
    trial_rows = [r for r in rows if r.get("phase") == "trial"]
    ran = [r for r in trial_rows if r["trial"] != 0]
    assert len(ran) == 1 and ran[0]["trial_state"] in ("complete", "pruned"), rows
    listed = [r for r in trial_rows if r["trial"] == 0]
    assert len(listed) == 1 and "not counted" in listed[0]["trial_state"], rows
    states = [t.state for t in optuna.load_study(study_name=_name(cfg), storage=_storage(tmp_path / JOURNAL)).trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1, "the journal keeps the interrupted trial (audit trail)"
    counted = [s for s in states if s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(counted) == cfg.trials
    if ran[0]["trial_state"] == "complete":
        pick = next(r for r in rows if r.get("phase") == "search")
        assert pick["picked_trial"] == ran[0]["trial"]


# ---- 4. an epoch of zero steps ---------------------------------------------------------------


@pytest.mark.parametrize("pipeline", ["resident", "loader", "synthetic-gpu"])
def test_a_trainer_epoch_of_zero_steps_is_one_line(study, tiny, pipeline):
    from bench.studies.cifar_opt.trainer import Trainer

    cfg = _cfg(study, model="mobilenet_v2", pipeline=pipeline)
    with pytest.raises(KitError) as err:
        t = Trainer(cfg, _split(tiny), 400, 0.01, seed=0)  # 400 > 300 images: drop_last leaves no batch
        t.train_epoch()
    assert "0 steps" in _one_line(err)


def test_the_protocol_refuses_an_epoch_of_zero_steps(study, tiny, tmp_path):
    """Whatever a backend's trainer does: an epoch that ran no step is never an ok row."""
    from bench.studies.cifar_opt.protocol import CellRun

    stub = types.SimpleNamespace(
        batch=2000,
        opt=types.SimpleNamespace(param_groups=[{"lr": 0.1}]),
        pipe=types.SimpleNamespace(workers=0),
        reset_peak=lambda: None,
        sync_device=lambda: None,
        train_epoch=lambda: {"steps": 0, "samples": 0, "train_loss": 0.0},
        evaluate=lambda: 0.1,
        memory=lambda: {},
    )
    run = CellRun(_cfg(study), _ctx(tmp_path), _split(tiny), {}, 1, 0, _make(_cfg(study)), trainer=stub)  # type: ignore[arg-type]
    with pytest.raises(KitError) as err:
        run.step(0)
    assert "0 steps" in _one_line(err)


@pytest.mark.parametrize(
    "backend,params,match",
    [
        ("torch-cpu", {"n_train": 10, "batch_size": 8}, "trial"),  # one image per class, each held out: none to train
        ("torch-cuda", {"n_train": 20, "batch_size": 16}, "trial"),  # 10 images left to train a trial; CUDA's batches start at 16
    ],
)
def test_validation_refuses_a_search_no_batch_fits(study, backend, params, match):
    with pytest.raises(KitError, match=match) as err:
        study.validate(study.cell(backend, "optuna", **params))
    _one_line(err)


def test_a_search_no_batch_fits_is_one_line_before_any_trial(study, tiny, tmp_path):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt.search import JOURNAL, Search

    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1, n_train=10)
    with pytest.raises(KitError) as err:
        Search(cfg, tiny.x_train[:10], tiny.y_train[:10], tmp_path, _make(cfg))
    assert "batch" in _one_line(err)
    assert not (tmp_path / JOURNAL).exists()


# ---- 5. batch_size 1 --------------------------------------------------------------------------


@pytest.mark.parametrize("bs", [1, 0])
def test_batch_size_below_2_is_refused_by_validation(study, bs):
    with pytest.raises(KitError, match="batch_size must be >= 2") as err:
        study.validate(study.cell("torch-cpu", "default", batch_size=bs))
    _one_line(err)


def test_a_trainer_of_batch_1_is_one_line(study, tiny):
    from bench.studies.cifar_opt.trainer import Trainer

    with pytest.raises(KitError, match="batch") as err:
        Trainer(_cfg(study, model="mobilenet_v2"), _split(tiny), 1, 0.01, seed=0)
    _one_line(err)


def test_optuna_batch_choices_stay_at_least_2(study, tiny, tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    from bench.studies.cifar_opt import search

    monkeypatch.setattr(search, "SEED_BATCHES", {**search.SEED_BATCHES, "cpu": (1, 2, 8)})
    cfg = _cfg(study, model="mobilenet_v2", variant="optuna", trials=1)
    s = search.Search(cfg, tiny.x_train, tiny.y_train, tmp_path, _make(cfg))
    assert s.batches == [2, 8]
