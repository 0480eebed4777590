"""Figures a reader can trust: what they were made from is on them."""

from __future__ import annotations


def test_figures_from_the_embedded_default_say_not_mnist(tmp_path):
    from bench.core.resultset import ResultCell
    from bench.studies.mnist_cnn.plots import data_note

    def cell(dataset):
        rows = [{"status": "ok", "epoch": 1, "dataset": dataset, "samples_per_s": 1.0, "epoch_s": 1.0, "test_acc": 0.5}]
        return ResultCell(tmp_path, rows)

    assert data_note([cell("mnist")]) is None
    assert data_note([cell("mnist"), cell("digits")]).startswith("NOT MNIST: digits")
