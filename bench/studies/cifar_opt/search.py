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

The journal is untrusted input: it is read only when it is a regular file (never through a
symlink, nor in a symlinked cell dir), holds only this cell's study, and every trial in it
was drawn from this search's space (batch choices, lr range) with this objective's
directions; anything else is one line and the file is left as it is. The budget counts
COMPLETE and PRUNED trials only: a trial a killed run left RUNNING is marked FAIL, and a
FAIL trial (interrupted, or failed) stays in the journal and is listed, but a resumed
search runs its `trials` counted trials all the same.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.core import bounded
from bench.core.errors import KitError
from bench.core.rows import is_regular, open_nofollow
from bench.studies.cifar_opt.config import MIN_BATCH, SEED_BATCHES, Settings, chance_limit
from bench.studies.cifar_opt.trainer import Split, Trainer, zero_steps

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


def check_cell_dir(cell_dir: Path) -> None:
    """KitError (one line) when the cell dir is a symlink or not a directory: the journal is
    never written through one."""
    if cell_dir.is_symlink():
        raise KitError(f"cell dir {cell_dir} is a symlink: results are never written through one; remove it")
    if os.path.lexists(cell_dir) and not cell_dir.is_dir():
        raise KitError(f"cell dir {cell_dir} is not a directory; move it away")


# a journal of 36 trials is 60 kB, its longest line 2 kB: Optuna reads it whole, so it is checked
# within these caps first
JOURNAL_CAPS = bounded.Caps(file_bytes=64 << 20, line_bytes=1 << 20, lines=1_000_000)


def check_journal(path: Path) -> None:
    """KitError (one line) when PATH exists and is not a journal: a symlink, not a regular file,
    over JOURNAL_CAPS, or a line that is not an Optuna journal operation (bench.core.schema's
    journal_line). Optuna would append to it (through a link, to its target) and read it whole;
    this keeps it as it is for a person to look at."""
    if path.is_symlink():
        raise KitError(f"Optuna journal {path} is a symlink: results are never written through one; remove it")
    if not os.path.lexists(path):
        return
    if not is_regular(path):
        raise KitError(f"Optuna journal {path} is not a regular file; move it away to start the search over")
    import json

    from bench.core import schema

    def damaged(where: str) -> KitError:
        return KitError(f"Optuna journal {path} is damaged ({where}); move it away to start the search over")

    try:
        for n, raw in bounded.lines(path, JOURNAL_CAPS):
            if raw is None:
                raise damaged(f"line {n}: longer than {bounded.mib(JOURNAL_CAPS.line_bytes)}")
            try:
                op = json.loads(raw)
            except (ValueError, RecursionError) as err:
                raise damaged(f"line {n}: {type(err).__name__}") from None
            why = schema.check("journal_line", op)
            if why:
                raise damaged(f"line {n}: {why}")
    except bounded.TooBig as err:
        raise damaged(str(err).removeprefix(f"{path}: ")) from None
    except OSError as err:
        raise damaged(f"reading it: {type(err).__name__}") from None


def journal_storage(path: Path):
    """Optuna's JournalStorage over a file (safe for parallel workers, unlike SQLite)."""
    import optuna

    check_journal(path)
    try:  # create it here, refusing a symlink planted since the check; Optuna then opens a regular file
        with open_nofollow(path, "a"):
            pass
    except OSError as err:
        raise KitError(f"Optuna journal {path} cannot be opened: {type(err).__name__}: {err}") from None

    try:
        from optuna.storages.journal import JournalFileBackend
    except ImportError:  # optuna < 4.0
        from optuna.storages import JournalFileStorage as JournalFileBackend
    try:
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    except Exception as err:  # noqa: BLE001 - a locked or unreadable journal: one line
        raise KitError(f"Optuna journal {path} cannot be opened: {type(err).__name__}: {err}") from None


def study_name(cfg: Settings) -> str:
    return f"cifar-opt-{cfg.model}-{cfg.device}-seed{cfg.seed}-{cfg.objective}"


def _describe(dist) -> str:
    """A distribution in a few words: 'choices [8, 16]', 'log range [0.0001, 0.1]'."""
    if hasattr(dist, "choices"):
        return f"choices {list(dist.choices)}"
    if hasattr(dist, "low") and hasattr(dist, "high"):
        return f"{'log ' if getattr(dist, 'log', False) else ''}range [{dist.low:g}, {dist.high:g}]"
    return type(dist).__name__


class Search:
    """One Optuna study for a cell; `trial(i)` runs the i-th counted trial (or reports it when a
    resumed journal already holds it) and returns its row; `uncounted` lists the journal's
    FAIL trials (interrupted or failed), which the budget does not count."""

    def __init__(self, cfg: Settings, x: np.ndarray, y: np.ndarray, cell_dir: Path, make: Callable[..., Trainer]):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.cfg, self.make = cfg, make  # make(split, batch, lr, variant): the backend's create()
        self.train = holdout(x, y, cfg.val_fraction, cfg.seed)
        n = len(self.train.y_train)
        self.batches = [b for b in SEED_BATCHES[cfg.device] if MIN_BATCH <= b <= n]
        if not self.batches:
            raise KitError(
                f"optuna: a trial trains on {n} images (n_train less the val_fraction held out), fewer than "
                f"its smallest batch size ({min(SEED_BATCHES[cfg.device])}): raise n_train"
            )
        self.path = cell_dir / JOURNAL
        check_cell_dir(cell_dir)
        cell_dir.mkdir(parents=True, exist_ok=True)
        sampler = optuna.samplers.TPESampler(seed=cfg.seed, n_startup_trials=min(4, max(1, cfg.trials // 2)))
        storage = journal_storage(self.path)
        name = study_name(cfg)
        pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0) if cfg.objective == "accuracy" else None
        kw: dict = {"study_name": name, "sampler": sampler, "pruner": pruner, "storage": storage}
        directions = ["maximize", "minimize"] if cfg.objective == "pareto" else ["maximize"]
        try:
            held = [st.study_name for st in storage.get_all_studies()]
            others = [h for h in held if h != name]
            if others:  # the cell dir is this cell's alone (its id hashes the spec): this came from elsewhere
                raise KitError(
                    f"Optuna journal {self.path} holds study {others[0]!r}, not this cell's {name!r}; "
                    "move it away to start the search over"
                )
            if held:  # resume: loading writes nothing (create_study(load_if_exists) appends a create op)
                self.study = optuna.load_study(**kw)
            elif cfg.objective == "pareto":
                self.study = optuna.create_study(directions=["maximize", "minimize"], **kw)
            else:
                self.study = optuna.create_study(direction="maximize", **kw)
        except KitError:
            raise
        except Exception as err:  # noqa: BLE001 - a corrupt journal: one line, nothing overwritten
            raise KitError(
                f"Optuna journal {self.path} is unreadable ({type(err).__name__}: {err}); move it away to start over"
            ) from None
        self._check_space([d.name.lower() for d in self.study.directions], directions)
        fail = optuna.trial.TrialState.FAIL
        why: dict[int, str] = {}
        for t in self.study.get_trials(deepcopy=False):  # trials a killed run left RUNNING: failed, not resumed
            if t.state == optuna.trial.TrialState.RUNNING:
                self.study.tell(t.number, state=fail)
                why[t.number] = "interrupted (the run was killed mid-trial)"
        self.uncounted = [  # listed, kept in the journal (the audit trail), never counted against `trials`
            self._row(t, "fail (not counted)", why.get(t.number))
            for t in self.study.get_trials(deepcopy=False)
            if t.state == fail
        ]
        self.t0 = time.perf_counter()

    def space(self) -> dict:
        """The distributions this search suggests now."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        return {"batch_size": CategoricalDistribution(self.batches), "lr": FloatDistribution(*LR_RANGE, log=True)}

    def _check_space(self, have: list[str], want: list[str]) -> None:
        """KitError (one line, nothing written) when the journal's study is another search: other
        objective directions, or a trial whose distributions differ from `space()`."""
        other = f"Optuna journal {self.path} is from another search space"
        if have != want:
            raise KitError(f"{other} (directions {have}, this search's {want}); move it away to start the search over")
        space = self.space()
        for t in self.study.get_trials(deepcopy=False):
            for key, dist in t.distributions.items():
                if space.get(key) != dist:
                    now = f"this search's {_describe(space[key])}" if key in space else f"this search has no {key!r}"
                    raise KitError(
                        f"{other} (trial {t.number}: {key} {_describe(dist)}; {now}); move it away to start the search over"
                    )

    def _objective(self, trial):
        import optuna

        try:
            return self._run(trial)
        except optuna.TrialPruned:
            raise
        except KeyboardInterrupt:  # Optuna marks the trial FAIL: a resumed search does not count it
            self._note(trial, "interrupted (Ctrl-C)")
            raise
        except Exception as err:
            self._note(trial, f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__)
            raise

    @staticmethod
    def _note(trial, why: str) -> None:
        with contextlib.suppress(Exception):  # a note in the journal; the error being raised is what counts
            trial.set_user_attr("failed_why", why)

    def _run(self, trial):
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
            if stats["steps"] < 1:
                raise zero_steps(bs, len(self.train.y_train), f"trial {trial.number} ran")
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

    def counted(self) -> list:
        """The trials the budget counts: COMPLETE and PRUNED, in the journal's order."""
        import optuna

        ok = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        return [t for t in self.study.get_trials(deepcopy=False) if t.state in ok]

    def trial(self, i: int) -> dict:
        import optuna

        counted = self.counted()
        if i < len(counted):
            return self._row(counted[i], counted[i].state.name.lower() + " (from the journal)")
        if self.cfg.trial_budget_s and time.perf_counter() - self.t0 > self.cfg.trial_budget_s:
            return {"phase": "trial", "trial": i, "trial_state": "not run (time budget spent)"}
        self.study.optimize(self._objective, n_trials=1, catch=())
        t = self.study.get_trials(deepcopy=False)[-1]
        fail = t.state == optuna.trial.TrialState.FAIL  # Optuna's own (a non-finite value): listed, not counted
        return self._row(t, "fail (not counted)" if fail else t.state.name.lower())

    @staticmethod
    def _row(t, state: str, why: str | None = None) -> dict:
        values = t.values or []
        return {
            "phase": "trial",
            "trial": t.number,
            "trial_state": state,
            "trial_why": why or t.user_attrs.get("pruned_why") or t.user_attrs.get("failed_why", ""),
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

        trials = self.study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
        if not complete:
            raise KitError("every Optuna trial was pruned or failed: nothing to pick (see the trial rows)")
        front = self.study.best_trials if self.cfg.objective == "pareto" else [self.study.best_trial]
        best = max(front, key=lambda t: (t.values[0], -t.user_attrs.get("epoch_s", 0.0)))
        n_val = len(self.train.y_eval)
        chance = chance_limit(n_val)
        return {
            "phase": "search",
            "picked_trial": best.number,
            "batch_size_picked": best.params["batch_size"],
            "lr_picked": best.params["lr"],
            "pareto_trials": ";".join(str(t.number) for t in sorted(front, key=lambda t: t.number)),
            "trials_complete": len(complete),
            "trials_not_counted": sum(t.state == optuna.trial.TrialState.FAIL for t in trials),
            "objective": self.cfg.objective,
            "journal": self.path.name,
            # the budget, and how far the search got from a random pick
            "search_trials": self.cfg.trials,
            "search_trial_epochs": self.cfg.trial_epochs,
            "search_budget_s": self.cfg.trial_budget_s,
            "search_train_images": len(self.train.y_train),
            "search_val_images": n_val,
            "search_s": time.perf_counter() - self.t0,
            "best_val_acc": float(best.values[0]),
            "chance_val_acc": chance,
            "trials_above_chance": sum(t.values[0] > chance for t in complete),
        }
