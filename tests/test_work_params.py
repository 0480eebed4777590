"""Work-amount params are marks on each study's Config fields, not a list in core (issue 58, item 2):
`field(..., metadata={"work": "trained"})` for the work a cell trains (epochs, steps, training images,
search trials), {"work": "amount"} for how long or how much is measured (warm-up, latency calls,
profiler windows, sweep sizes, held-out images); bench.core.study.work_params reads them.

MARKED pins what each study marks: deleting a mark (or adding one) fails here, and the pairing
properties below read MARKED, not the marks, so a missing mark also changes what they see."""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import studies
from bench.core.study import Study, free_work, work_params

# study -> (trained, amount): the former core lists (claims.TRAINED_WORK, claims.WORK_AMOUNT)
# as each study's Config has them
MARKED: dict[str, tuple[set[str], set[str]]] = {
    "cifar-opt": ({"epochs", "n_train", "trials"}, {"n_test", "latency_calls", "latency_warmup", "calib_batches"}),
    "mlp-scratch": (set(), {"plain_runs", "breakdown_iterations", "check_steps"}),  # the measured amounts (issue 53: verify)
    "mnist-cnn": ({"epochs", "limit_train"}, set()),
    "profile": (
        {"epochs", "max_steps", "synthetic_train_per_class"},
        {
            "max_eval_batches",
            "warmup_steps",
            "idle_s",
            "overhead_blocks",
            "overhead_steps",
            "prof_wait",
            "prof_warmup",
            "prof_active",
            "synthetic_val_per_class",
        },
    ),
    "roofline": (
        {"max_train_batches", "synthetic_train_per_class"},
        {
            "max_val_batches",
            "warmup_batches",
            "roof_sizes",
            "sweep_batches",
            "sweep_max_batch",
            "sweep_min_batch",
            "sweep_mem_fraction",
            "synthetic_val_per_class",
        },
    ),
}
# trained work that no claim lets differ (marked {"free": False} too): a smoke run's cut of MNIST
NOT_FREE = {"mnist-cnn": {"limit_train"}}
# the kit's own studies (other tests register their own, e.g. a toy study, in this process)
STUDIES = {n: s for n, s in studies().items() if type(s).__module__.startswith("bench.studies.")}


def _free(name: str) -> set[str]:
    trained, amount = MARKED[name]
    return (trained | amount) - NOT_FREE.get(name, set())


def test_every_study_marks_its_work_params_on_its_config():
    assert set(STUDIES) == set(MARKED), "a new study: add its marked work params to MARKED"
    for name, study in STUDIES.items():
        trained, amount = MARKED[name]
        assert set(work_params(study.Config, "trained")) == trained, name
        assert set(work_params(study.Config, "amount")) == amount, name
        assert set(study.trained_params()) == trained, name
        assert set(study.work_amount()) == _free(name), name
        assert set(free_work(study.Config)) == _free(name), name


def test_a_mark_of_no_kind_is_refused():
    @dataclass(frozen=True)
    class Odd:
        epochs: int = field(default=1, metadata={"work": "train"})

    with pytest.raises(ValueError, match="Odd.epochs"):
        work_params(Odd)


def _rules(obj: object, seen: set[int]) -> Iterator[C.Ratio | C.Level]:
    """Every Ratio and Level a claim's rule holds: itself, or those inside a Measured claim's function
    (its closures: bench.core.answers.conditions and the studies' own)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (C.Ratio, C.Level)):
        yield obj
    elif isinstance(obj, C.Measured):
        yield from _rules(obj.fn, seen)
    elif isinstance(obj, A.Part):  # a study's derived figure (roofline's gain): the rules its function holds
        yield from _rules(obj.fn, seen)
    elif isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield from _rules(cell.cell_contents, seen)
            except ValueError:  # a cell not yet filled
                continue
    elif isinstance(obj, functools.partial):
        yield from _rules(obj.func, seen)
        for x in (*obj.args, *obj.keywords.values()):
            yield from _rules(x, seen)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _rules(x, seen)


def test_every_claim_treats_exactly_its_studys_marked_work_as_free():
    """Each rule lets differ every param its study marks as free work and no other marked one (a
    claim's own extras, the dataset's name or a batch size, are not work marks); a quality metric
    never lets trained work differ (answers drops it from the rule's free params)."""
    for name, study in STUDIES.items():
        fields = {f.name for f in dataclasses.fields(study.Config)}
        trained, amount = MARKED[name]
        n = 0
        for claim in study.claims:
            for rule in _rules(claim.rule, set()):
                n += 1
                free = set(A.free_of(study, rule))
                assert free & (trained | amount) == _free(name), (name, claim.id)
                assert free <= fields | A.known_facets(study), (name, claim.id, free - fields)
        assert n or not study.claims, name
        assert set(A.free_of(study, C.Level({}, lambda rows, part: 1.0))) == _free(name), name  # a Level's default


def _metric(rows, part):
    return 1.0


@C.quality
def _quality_metric(rows, part):
    return 1.0


def _pool(name: str, marked: bool) -> list[str]:
    """NAME's marked Config fields, or its unmarked ones that are no param every workload skips
    (threads, workers, devices, checksums: ALWAYS_FREE)."""
    trained, amount = MARKED[name]
    if marked:
        return sorted(trained | amount)
    return sorted({f.name for f in dataclasses.fields(STUDIES[name].Config)} - trained - amount - set(C.ALWAYS_FREE))


@st.composite
def _differing(draw, marked: bool) -> tuple[Study, str, int, int]:
    """A study, one of its Config's fields (_pool) and two values of it."""
    name = draw(st.sampled_from([n for n in sorted(MARKED) if _pool(n, marked)]))
    key = draw(st.sampled_from(_pool(name, marked)))
    va = draw(st.integers(0, 9))
    vb = draw(st.integers(0, 9).filter(lambda v: v != va))
    return STUDIES[name], key, va, vb


def _side(study: Study, run: str, backend: str, key: str, value: int) -> A.Side:
    params = {**study.config_defaults(), key: value}
    # variant optuna: cifar-opt counts a search's trials only where the cell searches
    facets = {**params, "backend": backend, "variant": "optuna", "platform": "cpu"}
    return A.Side(run=run, part=backend, workload=params, facets=facets, work=study.work_amount())


@given(case=_differing(marked=True), quality=st.booleans())
def test_sides_apart_in_one_marked_param_pair_exactly_where_it_is_free_work(case, quality):
    """Two sides that differ only in a marked param: a rule that lets its study's work differ
    (every claim's does) finds them alike unless the param is not free or the metric is a quality
    metric and the param trained work; they pair (unlike: nothing keeps them apart) only where the
    param is not trained work; and the pair names the param among what differs where it is free."""
    study, key, va, vb = case
    trained, _ = MARKED[study.name]
    a, b = _side(study, "r1", "x", key, va), _side(study, "r2", "y", key, vb)
    rule = C.Ratio({"backend": "x"}, {"backend": "y"}, metric=_quality_metric if quality else _metric, free=study.work_amount())
    alike = list(A._same_workload(study, rule, [a], [b]))
    assert bool(alike) == (key in _free(study.name) and not (quality and key in trained)), (study.name, key, quality)
    apart = A.unlike(study, a, b)
    assert bool(apart) == (key in trained), (study.name, key, apart)
    if key in trained:
        assert apart == [f"{key} {va} / {vb}"]
    f = A.Finding(value=None, sides=(a, b), rank=0)  # work_differs reads the sides only
    assert f.work_differs == ([key] if key in _free(study.name) and key not in A.ALWAYS_SKIP else [])


@given(case=_differing(marked=False), quality=st.booleans())
def test_sides_apart_in_one_unmarked_param_never_pair(case, quality):
    """A param no mark names is what a cell computes: sides apart in it are different workloads, and
    it is no trained work."""
    study, key, va, vb = case
    a, b = _side(study, "r1", "x", key, va), _side(study, "r2", "y", key, vb)
    rule = C.Ratio({"backend": "x"}, {"backend": "y"}, metric=_quality_metric if quality else _metric, free=study.work_amount())
    assert not list(A._same_workload(study, rule, [a], [b])), (study.name, key)
    assert key not in study.trained_work(a.facets)
    assert not A.unlike(study, a, b)
    assert A.Finding(value=None, sides=(a, b), rank=0).work_differs == []


def test_trained_work_holds_every_trained_mark_and_nothing_else():
    for name, study in STUDIES.items():
        trained, _ = MARKED[name]
        facets = {**study.config_defaults(), "backend": "x", "variant": "optuna"}
        assert set(study.trained_work(facets)) == trained, name
