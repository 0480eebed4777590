"""Repeats train from their own seeds where the claims are about accuracy (issue 55, item 9): a
mnist-cnn repeat r trains from cell.seed + r, so its repeats' accuracies have a spread; a finished
cell made before a fix that changes its numbers (bench.core.fixes) is never reused by a run."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core import fixes
from bench.core.cell import Cell
from bench.core.registry import get_study
from bench.run import schedule
from bench.studies.mnist_cnn.config import settings


def test_each_mnist_repeat_trains_from_its_own_seed():
    base = Cell(study="mnist-cnn", backend="torch-cpu", variant="default", params={}, seed=3)
    seeds = {settings(Cell(**{**base.__dict__, "repeat": r})).seed for r in range(4)}  # type: ignore[arg-type]
    assert seeds == {3, 4, 5, 6}
    assert get_study("mnist-cnn").repeat_is_seed  # verify's baselines keep each repeat's own curve


def _finished(tmp_path: Path, repeat: int, made: str) -> tuple[Cell, Path]:
    cell = Cell(study="mnist-cnn", backend="torch-cpu", variant="default", params={}, repeat=repeat)
    d = tmp_path / f"r{repeat}"
    d.mkdir()
    (d / "system.json").write_text(json.dumps({"created_utc": made, "kit_git_sha": None}))
    return cell, d


def test_a_finished_cell_that_predates_a_fix_of_its_repeats_is_never_reused(tmp_path, monkeypatch):
    fix = fixes.Fix("f" * 40, "2026-11-28T00:00:00+00:00", "repeats trained from one seed", ("mnist-cnn",), min_repeat=1)
    monkeypatch.setattr(fixes, "FIXES", (fix,))
    old1, d1 = _finished(tmp_path, 1, "2026-11-27T10:00:00+00:00")
    old0, d0 = _finished(tmp_path, 0, "2026-11-27T10:00:00+00:00")
    new1, n1 = _finished(tmp_path, 2, "2026-11-29T10:00:00+00:00")
    assert schedule.predates(old1, d1) == [fix]
    assert schedule.predates(old0, d0) == []  # the first repeat trained from the same seed as ever
    assert schedule.predates(new1, n1) == []  # made after the fix
    (d1 / "system.json").write_text("not json{")  # unreadable: names no fix, never a crash
    assert schedule.predates(old1, d1) == []


def test_a_repeat_of_its_own_seed_is_held_to_another_seeds_tolerance_only_where_the_baseline_lacks_it():
    from types import SimpleNamespace

    from host.baselines import other_seed

    def cell(repeat: int, made: str):
        return SimpleNamespace(study="mnist-cnn", repeat=repeat, system={"created_utc": made, "kit_git_sha": None})

    old_entry, new_entry = {"curve": [[1, 0.5]]}, {"curve": [[1, 0.5]], "curves": {"0": [[1, 0.5]], "1": [[1, 0.6]]}}
    after, before = "2099-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"
    assert other_seed(cell(1, after), old_entry)  # seed 1 against an entry of seed 0's curves only
    assert not other_seed(cell(1, after), new_entry)  # the entry kept seed 1's own curve
    assert not other_seed(cell(1, before), old_entry)  # made before the fix: it trained from seed 0, as the entry
    assert not other_seed(cell(0, after), old_entry)  # the first repeat's seed never changed
    assert not other_seed(SimpleNamespace(study="mlp-scratch", repeat=1, system={}), old_entry)
