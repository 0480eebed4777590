"""Numbers in text never in scientific notation (issue 57: ratios printed as `1e+02x`; `{:.3g}` prints
999.7 as '1e+03' and 1.2e-5 as '1.2e-05'). One formatter, `text.sig`, writes a figure in a line of
text; the interval printers and every line that states a ratio go through it."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bench.core.stats import Summary
from bench.core.text import short, sig
from host.answer_lines import line

SCI = re.compile(r"\d[eE][+-]?\d")
figures = st.floats(min_value=1e-7, max_value=1e12, allow_nan=False, allow_infinity=False)


@given(figures, st.sampled_from([-1.0, 1.0]), st.integers(min_value=2, max_value=4), st.sampled_from([sig, short]))
def test_sig_never_writes_scientific_notation_and_keeps_its_digits(v, sign, digits, write):
    text = write(sign * v, digits)
    assert not SCI.search(text), text
    assert write is sig or not re.search(r"\.\d*0$", text), text  # short: no trailing zeros
    # rounded to DIGITS significant digits: within half a unit of the last one kept
    assert abs(float(text.replace(",", "")) - sign * v) <= 0.5 * v * 10 ** (1 - digits) * (1 + 1e-9)


@given(st.lists(figures, min_size=3, max_size=3), st.sampled_from(["range", "ci", "cs"]))
def test_intervals_and_bracketed_ratios_never_in_scientific_notation(vals, kind):
    lo, mid, hi = sorted(vals)
    s = Summary(median=mid, lo=lo, hi=hi, q1=lo, q3=hi, min=lo, max=hi, n=3, kind=kind)
    for text in (s.bracket(), s.interval(sig), s.interval(short), s.interval()):
        assert not SCI.search(text), text


@given(figures, figures, figures)
def test_the_answer_line_states_its_ratio_without_an_exponent(a, b, c):
    lo, v, hi = sorted((a, b, c))
    got = line({"study": "s", "text": "GPU over CPU", "value": v, "lo": lo, "hi": hi, "verdict": "holds", "scope": "here"})
    assert not SCI.search(got), got


@given(st.lists(st.integers(2, 12), min_size=1, max_size=2))
def test_a_range_s_printed_coverage_never_overstates_it(ns):
    """'range of 3: 75%' and 'unpaired ranges of 3 / 10: at least 74%': the percent printed is at
    most the range's coverage (an unpaired 3 / 10 is 74.85 %, which read 'at least 75%')."""
    s = Summary(1.0, 0.9, 1.1, 0.95, 1.05, 0.9, 1.1, ns[0], "range", sides_n=tuple(ns) if len(ns) > 1 else ())
    pct = int(re.search(r"(\d+)%", s.tag).group(1))
    assert pct <= (s.coverage or 0) * 100 + 1e-9
    assert pct >= (s.coverage or 0) * 100 - 1


@given(st.lists(st.integers(2, 12), min_size=2, max_size=2))
def test_an_unpaired_range_never_reads_as_a_range_of_paired_repeats(ns):
    """A ratio of two sides' ranges says so wherever it is printed (the worth table said 'range of
    3' for unpaired ranges of 3 / 10)."""
    s = Summary(1.0, 0.9, 1.1, 0.95, 1.05, 0.9, 1.1, min(ns), "range", sides_n=tuple(ns))
    for text in (s.bracket(), s.interval("{:.2f}"), s.tag):
        assert "unpaired ranges of" in text and f"range of {min(ns)}]" not in text
