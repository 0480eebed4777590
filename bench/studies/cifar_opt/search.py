"""The seed's "Tuned" configurations done with Optuna properly: a seeded TPE sampler, a
trial budget in trials and in seconds, a journal file kept in the cell's directory (the
study can be resumed and audited: `optuna.load_study(storage=JournalStorage(...))`), and
trials scored on a held-out part of the training subsample, never the test set.

objective = pareto    two objectives, validation accuracy (max) and epoch seconds (min);
                      the pick is the most accurate trial of the Pareto front (ties: the
                      faster). Optuna's pruners are single-objective only (its docs:
                      "expected to be used only for single-objective optimization"), so
                      here a trial is pruned only when it diverges (non-finite loss).
objective = accuracy  validation accuracy alone, reported after every epoch to a
                      MedianPruner, which stops trials below the median of earlier ones.
A trial that diverges is pruned in both modes. Each step of the cell runs one trial.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.core.errors import KitError
from bench.studies.cifar_opt.config import SEED_BATCHES, Settings
from bench.studies.cifar_opt.trainer import Split, Trainer

LR_RANGE = (1e-4, 1e-1)  # log-uniform
JOURNAL = "optuna-journal.log"


def holdout(x: np.ndarray, y: np.ndarray, fraction: float, seed: int) -> Split:
    """Stratified split of the training subsample: a Split that trains on one part and scores
    on the held-out rest (FRACTION of each class)."""
    rng = np.random.default_rng([seed, 7])
    val = np.concatenate(
        [rng.permutation(np.flatnonzero(y == c))[: max(1, round(fraction * np.sum(y == c)))] for c in np.unique(y)]
    )
    mask = np.zeros(len(y), bool)
    mask[val] = True
    tr = rng.permutation(np.flatnonzero(~mask))
    return Split(x[tr], y[tr], x[mask], y[mask])


def check_journal(path: Path) -> None:
    """KitError (one line) when PATH exists and is not a journal: every line JSON. Optuna would
    append to a damaged file; this keeps it as it is for a person to look at."""
    if not path.exists():
        return
    import json

    n = 0
    try:
        with path.open("rb") as fh:
            for line in fh:
                n += 1
                json.loads(line)
    except (OSError, ValueError) as err:
        where = f"line {n}" if n else "reading it"
        raise KitError(
            f"Optuna journal {path} is damaged ({where}: {type(err).__name__}); move it away to start the search over"
        ) from None


def journal_storage(path: Path):
    """Optuna's JournalStorage over a file (safe for parallel workers, unlike SQLite)."""
    import optuna

    check_journal(path)

    try:
        from optuna.storages.journal import JournalFileBackend
    except ImportError:  # optuna < 4.0
        from optuna.storages import JournalFileStorage as JournalFileBackend
    try:
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    except Exception as err:  # noqa: BLE001 - a locked or unreadable journal: one line
        raise KitError(f"Optuna journal {path} cannot be opened: {type(err).__name__}: {err}") from None


class Search:
    """One Optuna study for a cell; `trial(i)` runs trial i (or reports it when a resumed
    journal already holds it) and returns its row."""

    def __init__(self, cfg: Settings, x: np.ndarray, y: np.ndarray, cell_dir: Path, make: Callable[..., Trainer]):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.cfg, self.make = cfg, make  # make(split, batch, lr, variant): the backend's create()
        self.train = holdout(x, y, cfg.val_fraction, cfg.seed)
        self.batches = [b for b in SEED_BATCHES[cfg.device] if b <= len(self.train.y_train)]
        self.path = cell_dir / JOURNAL
        cell_dir.mkdir(parents=True, exist_ok=True)
        sampler = optuna.samplers.TPESampler(seed=cfg.seed, n_startup_trials=min(4, max(1, cfg.trials // 2)))
        kw: dict = {"sampler": sampler, "storage": journal_storage(self.path), "load_if_exists": True}
        name = f"cifar-opt-{cfg.model}-{cfg.device}-seed{cfg.seed}-{cfg.objective}"
        try:
            if cfg.objective == "pareto":
                self.study = optuna.create_study(study_name=name, directions=["maximize", "minimize"], **kw)
            else:
                pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
                self.study = optuna.create_study(study_name=name, direction="maximize", pruner=pruner, **kw)
        except KitError:
            raise
        except Exception as err:  # noqa: BLE001 - a corrupt journal: one line, nothing overwritten
            raise KitError(
                f"Optuna journal {self.path} is unreadable ({type(err).__name__}: {err}); move it away to start over"
            ) from None
        for t in self.study.get_trials(deepcopy=False):  # trials a killed run left RUNNING: failed, not resumed
            if t.state == optuna.trial.TrialState.RUNNING:
                self.study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        self.t0 = time.perf_counter()

    def _objective(self, trial):
        import optuna

        cfg = self.cfg
        bs = trial.suggest_categorical("batch_size", self.batches)
        lr = trial.suggest_float("lr", *LR_RANGE, log=True)
        tr = self.make(self.train, bs, lr, "default")
        tr.warmup(1)
        times, acc = [], 0.0
        for e in range(cfg.trial_epochs):
            t = time.perf_counter()
            stats = tr.train_epoch()
            times.append(time.perf_counter() - t)
            acc = tr.evaluate()
            trial.set_user_attr("train_loss", stats["train_loss"])
            if not math.isfinite(stats["train_loss"]):
                trial.set_user_attr("pruned_why", "diverged (non-finite loss)")
                raise optuna.TrialPruned()
            if cfg.objective == "accuracy":
                trial.report(acc, e)
                if trial.should_prune():
                    trial.set_user_attr("pruned_why", "MedianPruner")
                    raise optuna.TrialPruned()
        trial.set_user_attr("epoch_s", statistics.median(times))
        return acc if cfg.objective == "accuracy" else (acc, statistics.median(times))

    def trial(self, i: int) -> dict:
        done = [t for t in self.study.get_trials(deepcopy=False) if t.state.is_finished()]
        resumed = i < len(done)
        if not resumed:
            if self.cfg.trial_budget_s and time.perf_counter() - self.t0 > self.cfg.trial_budget_s:
                return {"phase": "trial", "trial": i, "trial_state": "not run (time budget spent)"}
            self.study.optimize(self._objective, n_trials=1, catch=())
            done = [t for t in self.study.get_trials(deepcopy=False) if t.state.is_finished()]
        t = done[i] if i < len(done) else done[-1]
        values = t.values or []
        return {
            "phase": "trial",
            "trial": t.number,
            "trial_state": t.state.name.lower() + (" (from the journal)" if resumed else ""),
            "trial_why": t.user_attrs.get("pruned_why", ""),
            "trial_batch_size": t.params.get("batch_size"),
            "trial_lr": t.params.get("lr"),
            "trial_val_acc": values[0] if values else None,
            "trial_epoch_s": t.user_attrs.get("epoch_s"),
            "trial_s": (t.datetime_complete - t.datetime_start).total_seconds()
            if t.datetime_complete and t.datetime_start
            else None,
        }

    def pick(self) -> dict:
        """The configuration to train: the most accurate trial of the Pareto front (pareto) or the best (accuracy)."""
        import optuna

        complete = [t for t in self.study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
        if not complete:
            raise KitError("every Optuna trial was pruned or failed: nothing to pick (see the trial rows)")
        front = self.study.best_trials if self.cfg.objective == "pareto" else [self.study.best_trial]
        best = max(front, key=lambda t: (t.values[0], -t.user_attrs.get("epoch_s", 0.0)))
        return {
            "phase": "search",
            "picked_trial": best.number,
            "batch_size_picked": best.params["batch_size"],
            "lr_picked": best.params["lr"],
            "pareto_trials": ";".join(str(t.number) for t in sorted(front, key=lambda t: t.number)),
            "trials_complete": len(complete),
            "objective": self.cfg.objective,
            "journal": self.path.name,
        }
