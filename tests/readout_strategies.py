"""Hypothesis strategies the readout tests share: epochs in a shuffled order, each with an accuracy."""

from __future__ import annotations

from hypothesis import strategies as st


def shuffled_epochs(first: int = 0, most: int = 12) -> st.SearchStrategy:
    """(epoch numbers in a random order, one accuracy in [0, 1] each)."""
    return st.lists(st.integers(min_value=first, max_value=1000), min_size=1, max_size=most, unique=True).flatmap(
        lambda eps: st.tuples(
            st.permutations(eps),
            st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=len(eps), max_size=len(eps)),
        )
    )
