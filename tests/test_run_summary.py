"""The lines a matrix prints when it ends: an honest cell count (the smoke studies' cells have one
repeat, the others three), a block for every study that ran, and every figure with its unit and
no more digits than it has."""

from __future__ import annotations

import re

import pytest
from references import kit_studies, reference_or_skip

from bench.core.cell import Cell
from bench.core.registry import get_study
from bench.core.resultset import collect
from bench.core.text import sig
from bench.run.matrix import cell_count


def _cells(n_configs: int, repeats: int, study: str = "mnist-cnn") -> list[Cell]:
    return [
        Cell(study, "numba-cpu", "default", {"lr": 0.01 * (i + 1)}, repeat=r) for i in range(n_configs) for r in range(repeats)
    ]


def test_the_cell_count_says_how_many_repeats_each_configuration_has():
    """`all` on a CPU host: 5 configurations with 3 repeats (mnist-cnn, mlp-scratch) and 8 smoke
    cells with one; not '23 cells (7 x 3 repeats)'."""
    mixed = _cells(5, 3) + _cells(8, 1, "roofline")
    assert len(mixed) == 23 and cell_count(mixed) == "5 configurations x 3 repeats + 8 x 1 repeat"
    assert cell_count(_cells(1, 3)) == "1 configuration x 3 repeats"
    assert cell_count(_cells(3, 1)) == "3 configurations x 1 repeat"
    cells = _cells(2, 5) + _cells(4, 3, "roofline") + _cells(1, 1, "profile")
    text = cell_count(cells)
    assert text == "2 configurations x 5 repeats + 4 x 3 repeats + 1 x 1 repeat"
    total = sum(int(k) * int(n) for k, n in re.findall(r"(\d+)(?: configurations?)? x (\d+) repeat", text))
    assert total == len(cells) == 23


@pytest.mark.parametrize("name", kit_studies())
def test_every_study_has_a_summary_block(name):
    """Each registered study's summary of its committed reference (see tests/references.py)."""
    cells, _, _ = collect([reference_or_skip(name)])
    lines, data = get_study(name).summary([c for c in cells if c.study == name])
    assert lines and data, name


@pytest.mark.parametrize("name", kit_studies())
def test_summary_figures_have_units_and_no_false_precision(name):
    cells, _, _ = collect([reference_or_skip(name)])
    lines, _ = get_study(name).summary([c for c in cells if c.study == name])
    text = "\n".join(lines)
    # no figure with more significant digits than it has (fmt's 1.8020, 1.5728): 3, or 4 for
    # mnist-cnn's accuracies in percent (98.57: verify's bands are that fine)
    limit = 4 if name == "mnist-cnn" else 3
    for tok in re.findall(r"(?<![\w.:=(])\d[\d,]*\.\d+", text):
        assert len(re.sub(r"\D", "", tok).lstrip("0")) <= limit, (tok, text)
    if name == "roofline":
        fracs = re.findall(r"([\d.,]+)% of roof", text)
        assert fracs and all(len(f.replace(".", "").lstrip("0")) <= 2 for f in fracs), fracs
        assert "% of the roof (the most the device's measured peaks allow" in " ".join(text.split())
    if name == "profile":
        assert re.search(r"sampler cost [+-]\d+(\.\d)?% \(pairs [+-][\d.]+% to [+-][\d.]+%", text), text
        assert "step time with it on over off, minus 1" in " ".join(text.split())
    if name == "mnist-cnn":
        assert "The kit's target: PyTorch CPU's resident pipeline at least 2x the seed's per-sample one: holds" in text, text
    if name == "mlp-scratch":
        assert re.search(r"numpy +[\d.]+ s \[[\d.]+–[\d.]+, range of 3\] +[\d.]+ ms/iteration +val acc [\d.]+%", text), text
    if name == "cifar-opt":
        assert "batch-1 inference latency p50 (ms)" in " ".join(text.split()) and " ms" in text


def test_sig_rounds_to_significant_digits():
    assert [sig(v) for v in (1657.3, 0.13513, 59.21, 99.96, 0.0, None)] == ["1,660", "0.135", "59.2", "100", "0", "-"]
    assert sig(9.7459, 2) == "9.7" and sig(45288) == "45,300"
