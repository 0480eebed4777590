"""mnist-cnn's readout (bench/studies/mnist_cnn/readout.py, issue 58 item 1): the one place the
study's rows become numbers.

- "final test accuracy" is the highest epoch's, whatever order the rows were written in: a real
  cell of the CPU reference with its rows permuted (Hypothesis), and synthetic epochs, read the
  same through the readout and through everything that shows it (the report's Table I and its
  summary, the seed table, the claims' metric, Study.accuracy for compare and verify);
- every per-repeat figure of a cell is a function of its epoch rows in epoch order, so a
  permutation of the rows moves none of them;
- the report, the seed table, the claims and the figures read no row value themselves: the row
  key `test_acc` is read in readout.py alone among the study's modules (a writer may still put it
  in a row), and those modules import no per-value accessor (num, nums, number) to read rows with.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from readout_strategies import shuffled_epochs

from bench.core.registry import get_study
from bench.core.resultset import ResultCell, collect
from bench.studies.mnist_cnn import claims, readout, report, seed_table

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "bench" / "studies" / "mnist_cnn"
REF = ROOT / "results" / "reference" / "cpu-2core-epyc"
FEW = settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])


def _cells() -> list[ResultCell]:
    if not (REF / "mnist-cnn").is_dir():
        pytest.skip(f"no committed mnist-cnn reference under {REF}")
    return [c for c in collect([REF])[0] if c.study == "mnist-cnn" and c.status == "ok" and readout.epochs(c)]


_CELLS: list[ResultCell] = []


def _seed_cell() -> ResultCell:
    """A torch-cpu `seed` pipeline cell (one of seed_table.SETUPS): every consumer shows it."""
    if not _CELLS:
        _CELLS.extend(_cells())
    return next(c for c in _CELLS if c.first.get("backend") == "torch-cpu" and c.first.get("pipeline") == "seed")


def _highest_epochs_acc(rows: list[dict]) -> float:
    top = max(r["epoch"] for r in rows if r.get("status") == "ok")
    [acc] = [r["test_acc"] for r in rows if r.get("status") == "ok" and r["epoch"] == top]
    return acc


def _every_reading(cell: ResultCell) -> dict[str, float]:
    """Final accuracy (a fraction) as each consumer shows it."""
    part = str(cell.first.get("backend"))
    _, summ = report.summary([cell])
    [ours] = seed_table.ours([cell])
    got = get_study("mnist-cnn").accuracy(cell.rows, part)
    assert got is not None and got[0] == "test_acc"
    return {
        "readout": readout.final_acc(readout.epochs(cell)),
        "report Table I": report.table1_row(cell)["final_test_acc_pct"] / 100,
        "report over repeats": report.summary_row([cell])["final_test_acc_pct"] / 100,
        "report summary": next(iter(summ["cells"].values()))["final_test_acc"],
        "seed table": ours["final_test_acc_pct"] / 100,
        "claims": claims.final_acc_pct(cell.rows, part) / 100,
        "Study.accuracy": got[1],
    }


def test_the_reference_cell_can_tell_the_last_row_from_the_highest_epoch():
    """The cell the permutations use has epochs whose accuracies differ: a reading of the last
    row written would differ from the highest epoch's once the rows move."""
    rows = _seed_cell().rows
    assert len({r["test_acc"] for r in rows}) > 1 and [r["epoch"] for r in rows] == sorted(r["epoch"] for r in rows)


@FEW
@given(st.data())
def test_final_accuracy_is_the_highest_epochs_whatever_the_row_order(data):
    cell = _seed_cell()
    shuffled = dataclasses.replace(cell, rows=data.draw(st.permutations(cell.rows)))
    want = _highest_epochs_acc(cell.rows)
    for who, v in _every_reading(shuffled).items():
        assert v == pytest.approx(want, rel=1e-12, abs=0), who
    ep = readout.epochs(shuffled)
    assert [r["epoch"] for r in ep] == sorted(r["epoch"] for r in cell.rows)  # by epoch number, not file order
    assert readout.figures(shuffled) == readout.figures(cell)  # no figure follows the order rows were written in


@FEW
@given(shuffled_epochs(0, 12))
def test_final_accuracy_of_synthetic_epochs_is_the_highest_epochs(case):
    order, accs = case
    rows = [{"status": "ok", "backend": "numba-cpu", "epoch": e, "test_acc": a} for e, a in zip(order, accs)]
    rows.append({"status": "ok", "backend": "numba-cpu", "test_acc": 2.0})  # no epoch: not an epoch row
    rows.append({"status": "error", "backend": "numba-cpu", "epoch": 10**6, "test_acc": 3.0})  # not ok
    top = max(order)
    want = accs[order.index(top)]
    assert readout.final_acc(readout.epoch_rows(rows)) == want
    assert readout.accuracy(rows, "numba-cpu") == want
    assert readout.best_acc(readout.epoch_rows(rows)) == max(accs)
    assert claims.final_acc_pct(rows, "numba-cpu") == 100 * want
    assert claims.final_acc_pct(rows, "torch-cpu") is None  # another row backend's: none


def test_every_consumer_reads_one_final_accuracy_on_the_references():
    """On every ok cell of the CPU reference, the report, the seed table (where the cell is one of
    its setups), the claims and Study.accuracy read the readout's figures."""
    study = get_study("mnist-cnn")
    cells = _cells()
    assert cells
    for c in cells:
        part = str(c.first.get("backend"))
        fig = readout.figures(c)
        row = report.table1_row(c)
        assert fig["final_test_acc_pct"] == row["final_test_acc_pct"] == claims.final_acc_pct(c.rows, part)
        assert fig["max_test_acc_pct"] == row["max_test_acc_pct"] == claims.max_acc_pct(c.rows, part)
        assert fig["avg_epoch_s"] == row["avg_epoch_s"] == claims.avg_epoch_s(c.rows, part)
        assert fig["avg_rss_mb"] == row["avg_rss_mb"] == claims.avg_ram_mb(c.rows, part)
        assert study.accuracy(c.rows, part) == ("test_acc", readout.final_acc(readout.epochs(c)))
        assert study.throughput(c.rows) == {part: fig["median_samples_per_s"]}


# ---- no other module of the study reads these itself ---------------------------------------------
def _modules() -> dict[str, ast.Module]:
    """The study's own modules (not its backends or kernels)."""
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(STUDY_DIR.glob("*.py"))}


def _reads_of(tree: ast.Module, key: str) -> list[int]:
    """Lines where the string KEY is used other than as a key of a dict display (a row a writer
    builds): r["test_acc"], r.get("test_acc"), nums(ep, "test_acc"), ("test_acc", "mean")..."""
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == key and id(n) not in keys]


def test_only_the_readout_reads_test_acc_from_a_row():
    mods = _modules()
    assert "readout.py" in mods and {"report.py", "seed_table.py", "claims.py", "plots.py"} <= set(mods)
    assert _reads_of(mods["readout.py"], "test_acc"), "the readout names the key it reads"
    bad = {name: lines for name, tree in mods.items() if name != "readout.py" and (lines := _reads_of(tree, "test_acc"))}
    assert not bad, f"test_acc read outside readout.py (go through bench.studies.mnist_cnn.readout): {bad}"


def test_the_report_seed_table_claims_and_plots_read_rows_through_the_readout():
    """They import no per-value accessor of rows (bench.core.tables' num/nums, bench.core.study's
    number) and index no list from its end (the `ep[-1]` that read "final" in file order); each
    imports the readout."""
    accessors = {"num", "nums", "real", "number", "last", "medians"}
    mods = _modules()
    for name in ("report.py", "seed_table.py", "claims.py", "plots.py"):
        tree = mods[name]
        imported = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("bench.core")
            for a in n.names
        }
        assert not imported & accessors, f"{name} imports {sorted(imported & accessors)}: read rows through readout.py"
        from_end = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript)
            and isinstance(n.slice, ast.UnaryOp)
            and isinstance(n.slice.op, ast.USub)
            and isinstance(n.slice.operand, ast.Constant)
        ]
        assert not from_end, f"{name} indexes from the end at lines {from_end}: an order-dependent reading"
        uses = any(
            isinstance(n, ast.ImportFrom) and any(a.name == "readout" for a in n.names) and n.module == "bench.studies.mnist_cnn"
            for n in ast.walk(tree)
        )
        assert uses, f"{name} does not import bench.studies.mnist_cnn.readout"


# ---- the throughput-ratio table names the interval it prints (issue 55 items 8, 12) -------------
@settings(max_examples=80)
@given(
    a=st.dictionaries(st.integers(0, 9), st.floats(1.0, 1e6), min_size=1, max_size=7),
    b=st.dictionaries(st.integers(0, 9), st.floats(1.0, 1e6), min_size=1, max_size=7),
)
def test_the_ratio_table_marks_each_interval_as_the_claims_tag_it(a, b):
    """An unpaired range (sides of different repeats) is never marked as the paired range of the
    table's header: the row carries the figure's own tag, as the claims print it."""
    from bench.core import seqstats

    r = seqstats.pair_figure(a, b, False)
    row = {"host": "h", "numerator": "x", "denominator": "y", "ratio": r.median, "ci_lo": r.lo, "ci_hi": r.hi}
    row |= {"ci_kind": r.kind, "ci_tag": r.tag, "unpaired": bool(r.sides_n), "min": r.min, "max": r.max, "repeats": r.n}
    [line] = [ln for ln in report.ratio_lines([row]) if ln.startswith("| h |")]
    if r.lo is None:
        assert "| n=1 |" in line
    elif r.kind == "range":
        assert f"({r.tag})" in line and ("unpaired" in line) == bool(r.sides_n), line
        # the min-max column: per-repeat ratios where the sides pair, never one value posing as a range
        assert (line.split("|")[5].strip() == "– (unpaired)") == bool(r.sides_n), line
    else:
        assert "range" not in line.split("|")[4], line
