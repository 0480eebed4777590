"""bench.core.columnar.read_rows_many gives every rows file exactly what rows.read_rows_checked
gives it: the same good rows and the same problems, hostile lines among good ones included."""

import json
from pathlib import Path

import pytest

from bench.core.columnar import read_rows_many
from bench.core.rows import read_rows_checked

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"schema": 2, "study": "mnist-cnn", "status": "ok", "seed": 0, "repeat": 1, "run_id": "r", "epoch_time_s": 1.5}
KEYS = [
    "schema",
    "study",
    "status",
    "seed",
    "repeat",
    "run_id",
    "epoch_time_s",
    "samples_per_s",
    "loss",
    "traces",
    "dataset_real",
]
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
    | st.sampled_from(["ok", "error", "", "x" * 70000]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=6,
)
RAW = st.sampled_from(
    [
        "",
        "   ",
        "not json",
        "[1, 2]",
        "{}",
        '{"study": "mnist-cnn", "status": "ok", "loss": NaN}',
        '{"study": "mnist-cnn", "status": "ok", "loss": Infinity}',
        '{"study": "mnist-cnn", "status": "ok", "x": 1, "x": -1e300}',
        '{"study": "mnist-cnn", "status": "ok", "x": 1e400}',
        '{"study": "mnist-cnn", "status": "ok", "x": 9007199254740993}',
        '{"study": "mnist-cnn", "status": "ok", "x": 9007199254740993.0}',
        '{"study": "mnist-cnn", "status": "ok", "run_id": "2024-01-01"}',
        '{"study": "mnist-cnn", "status": "ok", "n": {"k": 1, "k": 1e300}}',
        '{"study": "mnist-cnn", "status": "ok"} {"study": "x", "status": "ok"}',
        '{"study": "mnist-cnn", "status": "ok"}\r{"study": "x", "status": "ok"}',
        '{"study": "mnist-cnn", "status": "o\\u006b", "seed": 1.0}',
        '{"study": "mnist-cnn", "status": "ok", "seed": true}',
    ]
)


def _line(edit: tuple[str, object] | None) -> str:
    row = dict(GOOD)
    if edit is not None:
        row[edit[0]] = edit[1]
    return json.dumps(row)


LINES = st.lists(st.none().map(_line) | st.tuples(st.sampled_from(KEYS), VALUES).map(_line) | RAW, max_size=5)


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(files=st.lists(LINES, min_size=1, max_size=3))
def test_read_rows_many_gives_what_read_rows_checked_gives(tmp_path_factory, files):
    base = tmp_path_factory.mktemp("set")
    paths = []
    for i, lines in enumerate(files):
        cell = base / "mnist-cnn" / f"cell{i}"  # one study folder: the files are read as one batch
        cell.mkdir(parents=True)
        (cell / "rows.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(cell / "rows.jsonl")
    got = read_rows_many(paths)
    assert got == {p: read_rows_checked(p) for p in paths}


def test_read_rows_many_on_the_references():
    paths = sorted((ROOT / "results" / "reference").rglob("rows.jsonl"))
    assert len(paths) > 50
    got = read_rows_many(paths)
    assert got == {p: read_rows_checked(p) for p in paths}
    assert sum(len(rows) for rows, _ in got.values()) > 200
