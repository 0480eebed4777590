"""Which answer is a claim's primary one does not depend on accident (issue 55's audit): not on the
order the result dirs were given in, and not on a run whose data cannot judge the claim standing
in front of one whose data can."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import studies
from host.compare import load_set

REF = Path(__file__).resolve().parent.parent / "results" / "reference"
RUNS = ("H200", "H200-main", "cpu-2core-epyc", "H100-80GB-HBM3-profile", "H100-80GB-HBM3-seed-setups")


@pytest.fixture(scope="module")
def cells():
    if not all((REF / r).is_dir() for r in RUNS):
        pytest.skip("the committed references are not in this checkout")
    return {r: load_set(REF / r, "report", partial_ok=True).cells for r in RUNS}


def _primary(cs: list) -> dict:
    got = {}
    for a in A.judge_all(studies(), cs):
        if a.primary:
            f = a.findings[0] if a.findings else None
            got[(a.study, a.claim.id, str(a.split))] = (a.verdict, round(f.value.median, 9) if f and f.value else None)
    return got


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_primary_answers_do_not_depend_on_the_order_of_the_result_dirs(cells, seed):
    base = [c for r in RUNS for c in cells[r]]
    order = list(RUNS)
    random.Random(seed).shuffle(order)
    shuffled = [c for r in order for c in reversed(cells[r])]
    assert _primary(shuffled) == _primary(base)


def test_a_real_data_answer_is_primary_over_one_that_needs_real_data(cells):
    """mlp-scratch and mnist-cnn claims about what the data teaches: the H200 main job ran them on
    the embedded digits (needs real data), the H200 reference and the 2-core EPYC on real MNIST."""
    got = A.judge_all(studies(), [c for r in RUNS for c in cells[r]])
    needs_real = {(a.study, a.claim.id) for a in got if a.claim.needs.real_data}
    assert needs_real
    for key in needs_real:
        mine = [a for a in got if (a.study, a.claim.id) == key]
        real = [a for a in mine if a.verdict != C.NEEDS_REAL and a.findings]
        for split in {str(a.split) for a in real}:
            [primary] = [a for a in mine if a.primary and str(a.split) == split]
            assert primary.verdict != C.NEEDS_REAL, (key, split)


def test_a_claim_judged_on_real_data_is_not_counted_as_needing_it(cells):
    """The tally's one verdict per claim: where one workload ran on the embedded digits (needs real
    data) and another on real MNIST (judged), the claim counts as judged."""
    got = A.judge_all(studies(), [c for r in RUNS for c in cells[r]])
    verdicts = A.claim_verdicts(got)
    judged = {
        (a.study, a.claim.id) for a in got if a.primary and not a.claim.kit and a.claim.needs.real_data and a.verdict in C.DECIDED
    }
    assert judged, "the references hold real-data answers"
    for key in judged:
        assert verdicts[key] != C.NEEDS_REAL, key
