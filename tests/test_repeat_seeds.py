"""Repeats train from their own seeds where the claims are about accuracy (issue 55, item 9): a
mnist-cnn repeat r trains from cell.seed + r, so its repeats' accuracies have a spread; a finished
cell made before a fix that changes its numbers (bench.core.fixes) is never reused by a run."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

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


@hsettings(max_examples=120, deadline=None)
@given(
    a=st.floats(0.05, 5.0),
    gap=st.floats(0.0, 0.2),
    where=st.floats(-0.5, 1.5),
)
def test_two_runs_of_one_seed_hold_a_cell_to_their_range(a, gap, where):
    """An entry made from two runs of one seed on one class (an H200 reference and a user's H200:
    the same seed's GPU loss 2-3 % apart by epoch 2) keeps both curves ("0" and "0#1"), and a cell of
    that seed passes anywhere in their range widened by the tolerance, and fails beyond it."""
    from types import SimpleNamespace

    import host.baselines as B

    b = a * (1 + gap)
    v = a + where * (b - a)
    e = {"set": "t", "curve_x": "epoch", "curve_y": "train_loss", "loss_rtol": 0.02, "curve": [[1.0, (a + b) / 2]]}
    e["curves"] = {"0": [[1.0, a]], "0#1": [[1.0, b]]}
    cell = SimpleNamespace(study="profile", repeat=0, system={}, ok_rows=[])
    real = B.loss_curve
    B.loss_curve = lambda c, p: ("epoch", "train_loss", [(1.0, v)])  # the cell's curve
    try:
        why, _ = B.check_accuracy(cell, "torch-cuda", e)  # type: ignore[arg-type]
    finally:
        B.loss_curve = real
    inside = a * (1 - 0.02) - 1e-12 <= v <= b * (1 + 0.02) + 1e-12
    assert (not why) == inside, (a, b, v, why)


def test_the_committed_h200_set_holds_both_h200_runs_of_each_seed():
    """The H200 set is made from two H200 machines' runs (results/reference/H200 and H200-main):
    where both ran a configuration, the entry keeps each run's curve of seed 0."""
    import json as _json

    root = Path(__file__).resolve().parent.parent / "results" / "reference" / "baselines"
    entries = _json.loads((root / "profile.json").read_text())["sets"]["H200"]["entries"]
    gpu = [e for e in entries if e["label"].startswith("torch-cuda finetune loader b64")]
    assert gpu and set(gpu[0]["curves"]) == {"0", "0#1"} and gpu[0]["repeats"] == 2
