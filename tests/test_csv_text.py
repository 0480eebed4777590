"""host.tidy.csv_text writes what pandas' to_csv writes, byte for byte, for every kind of column
the tidy table holds."""

import numpy as np
import pandas as pd

from host.tidy import csv_frame, csv_text


def test_csv_text_matches_to_csv_on_every_column_kind():
    floats = [0.1, 1e-05, 1e16, 123456789012.0, -0.0, 2.5e-320, np.nan, 1 / 3, 1e300, 7.0]
    df = pd.DataFrame(
        {
            "f": floats,
            "i": pd.array([1, None, -3, 2**62, 0, 5, None, 7, 8, 9], dtype="Int64"),
            "b": pd.array([True, False, None, True, True, False, None, True, False, True], dtype="boolean"),
            "s": ["a", 'say "hi"', "x,y", "two\nlines", "", None, "é", " lead", "trail ", "\r"],
        }
    )
    assert csv_text(df) == df.to_csv(index=False)


def test_csv_text_matches_to_csv_on_the_tidy_frame():
    from pathlib import Path

    from bench.core.resultset import collect_set, holding_results
    from host.tidy import tidy_frame

    refs = sorted((Path(__file__).resolve().parent.parent / "results" / "reference").iterdir())
    keep, _ = holding_results(refs)
    frame = csv_frame(tidy_frame(collect_set(keep).cells))
    assert len(frame) > 100
    assert csv_text(frame) == frame.to_csv(index=False)
