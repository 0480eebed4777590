"""`orchestrate.py reference cpu|gpu`: remake a committed reference result set the one way
it was made, so a reference is always "the command beside it, from a clean tree".

A preset fixes everything that shapes the numbers: platforms, profile, repeats (3, fresh
processes, in rounds across cells; the cpu preset then adds rounds for each comparison until it
is decided, within a stated budget: `--until-decided`), the interleaved schedule, real data (a reference never
runs on the embedded default), the native runtime (an image runs the same bench/ code; the
host's own packages are what a GPU box has), and the output dir results/reference/<label>
with its report. It refuses an unclean source tree: numbers that no commit can reproduce
do not belong in results/reference/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import KitError
from bench.core.machine import cpu_model, nvidia_smi_gpus, usable_cores


def studies_with_reference_data() -> tuple[str, ...]:
    """The studies that declare their reference data (Study.reference_sets): those whose CPU
    answers a reference can give on real data here."""
    from bench.core.registry import studies

    return tuple(name for name, s in sorted(studies().items()) if s.reference_sets)


def study_reference_sets() -> tuple[str, ...]:
    """Every study's own reference --set values (Study.reference_sets), as STUDY.KEY=VALUE."""
    from bench.core.registry import studies

    return tuple(f"{name}.{kv}" for name, s in sorted(studies().items()) for kv in s.reference_sets)


@dataclass(frozen=True)
class Preset:
    platforms: tuple[str, ...]
    profile: str
    about: str
    repeats: int = 3
    schedule: str = "interleaved"
    sets: tuple[str, ...] = field(default_factory=lambda: study_reference_sets())
    studies: tuple[str, ...] | None = None  # None: every study
    until_decided: bool = False  # add rounds for each comparison until decided (bench/run/sequential.py)
    max_repeats: int | None = None
    budget: str | None = None


PRESETS = {
    # the CPU's comparisons get rounds until decided: a round of mnist-cnn's 3 cells takes about
    # 3.5 min on the 2-core reference machine (real MNIST, 10 epochs) and the sequence needs 10
    # rounds, so 75 min for the added rounds decides a clear ratio and states the budget for one
    # that is not. The studies whose data is synthetic on such a host (cifar-opt, roofline,
    # profile) keep their own CPU references (results/reference/README.md names their commands):
    # their 20 configurations would add an hour to the first rounds alone.
    "cpu": Preset(
        ("cpu",),
        "default",
        "a CPU host: the cpu matrix of every study that declares real reference data, the seeds' setups (mnist-cnn: 10 epochs)",
        studies=studies_with_reference_data(),
        until_decided=True,
        max_repeats=20,
        budget="75m",
    ),
    "gpu": Preset(("cpu", "cuda"), "full", "a GPU host: every cell of both platforms, full profile (extra GPU variants)"),
    "gpu-cuda": Preset(("cuda",), "full", "a GPU host's cuda cells only (when one run must fit a time limit)"),
}


def label(preset: str) -> str:
    """results/reference/<label>: the GPU's name for GPU presets, else cpu-<cores>core-<family>."""
    if preset.startswith("gpu"):
        name = next((g["name"] for g in nvidia_smi_gpus() if g["name"]), "")
        if not name:
            raise KitError(f"reference {preset} needs an NVIDIA GPU (nvidia-smi lists none)")
        return re.sub(r"[^A-Za-z0-9._-]", "-", name.removeprefix("NVIDIA "))
    cores = usable_cores()
    model = cpu_model().lower()
    family = next(
        (f for f in ("epyc", "xeon", "ryzen", "threadripper", "core", "apple", "graviton", "neoverse") if f in model), ""
    )
    family = family or re.sub(r"[^a-z0-9]+", "-", model).strip("-").split("-")[0] or "cpu"
    return f"cpu-{cores}core-{family}"


def check_clean() -> str:
    """The HEAD sha of a clean checkout; KitError naming what is unclean otherwise."""
    from bench.core.provenance import source_state

    st = source_state()
    if st.get("dirty"):
        changed = ", ".join(st.get("changes", [])[:5]) or "uncommitted changes"
        raise KitError(
            f"the source tree is not clean ({changed}): commit or stash first, or pass --allow-dirty "
            "(such a result set is marked unclean in every report and does not belong in results/reference/)"
        )
    return str(st.get("sha"))


def out_dir(preset: str, out: Path | None) -> Path:
    return out or Path("results") / "reference" / label(preset)


__all__ = ["PRESETS", "Preset", "check_clean", "label", "out_dir", "studies_with_reference_data"]
