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


def test_the_gpu_preset_is_the_main_jobs_answer_on_both_platforms_within_a_budget():
    """`reference gpu` is what `all` runs on a GPU host (auto -> answer), on both platforms, the first
    round one cell after another (a call can end between any two), then rounds within a budget."""
    from bench.core.request import effective_profile

    g = PRESETS["gpu"]
    assert set(g.platforms) == {"cpu", "cuda"} and effective_profile(g.profile, g.platforms) == "answer"
    assert g.schedule == "sequential" and g.repeats == 1 and g.until_decided and g.budget and g.max_repeats
    assert PRESETS["gpu-full"].profile == "full"


def _made_here(dest, tmp_path, env: str | None = None, cpu: str | None = None, machine: str | None = None):
    """A reference dir holding one finished cell of this machine and environment (ENV, CPU: another's)."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    made = tmp_path / "_made"  # one run, copied for each variant (a smoke cell takes minutes on a busy 2-core VM)
    if not made.is_dir():
        r = subprocess.run(
            [sys.executable, "-m", "bench", "matrix", "mlp-scratch", "--profile", "smoke", "--out", str(made)],
            cwd=root, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
    shutil.copytree(made, dest)
    [cj] = list(dest.glob("mlp-scratch/*/cell.json"))
    if env is not None:
        spec = json.loads(cj.read_text())
        spec["env"] = env
        cj.write_text(json.dumps(spec))
    if cpu is not None or machine is not None:
        sj = cj.parent / "system.json"
        system = json.loads(sj.read_text())
        if cpu is not None:
            system["cpu_model"] = cpu
        if machine is not None:
            system["machine_id"] = machine
        sj.write_text(json.dumps(system))


def test_a_resume_refuses_a_dir_of_another_environment_or_machine_in_one_line(tmp_path):
    import pytest

    from bench.core.errors import KitError
    from host.reference import check_resume

    same = tmp_path / "same"
    _made_here(same, tmp_path)
    check_resume(same)  # this machine, this environment: resumed
    check_resume(tmp_path / "none")  # nothing there yet
    for name, kw, says in (
        ("env", {"env": "native-torch0.0-00000000"}, "another environment"),
        ("cpu", {"cpu": "Other CPU 9000"}, "another machine"),
        ("id", {"machine": "0123456789ab"}, "another machine of this class"),  # one class, another lent machine
    ):
        d = tmp_path / name
        _made_here(d, tmp_path, **kw)
        with pytest.raises(KitError) as err:
            check_resume(d)
        assert says in str(err.value) and "\n" not in str(err.value)


def test_a_part_of_a_preset_keeps_its_studies_sets_only_and_gets_its_own_dir():
    """`reference gpu --study S`: the preset's own amounts for S, none of another study's --set
    values, into results/reference/<label>-<S> (another reference, never the whole one's dir)."""
    import pytest
    from hypothesis import given
    from hypothesis import strategies as st

    from bench.core.errors import KitError
    from host import reference

    names = sorted(studies())

    @given(st.sampled_from(list(PRESETS)), st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    def check(preset: str, chosen: list[str]) -> None:
        whole = PRESETS[preset]
        known = whole.studies if whole.studies is not None else tuple(names)
        if not set(chosen) <= set(known):
            with pytest.raises(KitError, match="this preset runs"):
                reference.part(whole, chosen)
            return
        got = reference.part(whole, chosen)
        assert set(got.studies or ()) == set(chosen)
        assert all(kv.split(".", 1)[0] in chosen for kv in got.all_sets)
        assert {kv for kv in whole.all_sets if kv.split(".", 1)[0] in chosen} == set(got.all_sets)
        assert (got.platforms, got.profile, got.budget, got.max_repeats) == (
            whole.platforms,
            whole.profile,
            whole.budget,
            whole.max_repeats,
        )

    check()
    assert reference.part(PRESETS["gpu"], None) is PRESETS["gpu"]
    here = reference.out_dir("cpu", None, ["profile", "cifar-opt"])
    assert here.name == reference.label("cpu") + "-cifar-opt-profile"
    assert reference.out_dir("cpu", None).name == reference.label("cpu")
