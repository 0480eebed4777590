"""The reference presets (host/reference.py): what `orchestrate.py reference cpu` runs."""

from __future__ import annotations

from bench.core.registry import studies
from host.reference import PRESETS, studies_with_reference_data


def test_the_cpu_preset_runs_the_studies_that_declare_real_reference_data():
    declared = {name for name, s in studies().items() if s.reference_sets}
    assert declared, "no study declares its reference data (Study.reference_sets)"
    cpu = PRESETS["cpu"]
    assert set(cpu.studies or ()) == declared == set(studies_with_reference_data())
    assert cpu.until_decided and cpu.budget and cpu.max_repeats  # the committed answers are decided or say their budget
    every = {f"{name}.{kv}" for name in declared for kv in studies()[name].reference_sets}
    assert every <= set(cpu.sets)


def test_the_gpu_presets_run_every_study():
    assert PRESETS["gpu"].studies is None and PRESETS["gpu-cuda"].studies is None
