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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.core.errors import KitError
from bench.core.machine import cpu_model, nvidia_smi_gpus, usable_cores
from bench.core.provenance import machine_identity


def studies_with_reference_data() -> tuple[str, ...]:
    """The studies that declare their reference data (Study.reference_sets): those whose CPU
    answers a reference can give on real data here."""
    from bench.core.registry import studies

    return tuple(name for name, s in sorted(studies().items()) if s.reference_sets)


def study_gpu_reference_sets() -> tuple[str, ...]:
    """Every study's smaller amounts for the one-GPU reference (Study.gpu_reference_sets), as STUDY.KEY=VALUE."""
    from bench.core.registry import studies

    return tuple(f"{name}.{kv}" for name, s in sorted(studies().items()) for kv in s.gpu_reference_sets)


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
    # smaller amounts than the seeds' where the first round would not leave the budget any rounds
    # (both sides the same; every row records its amount): STUDY.KEY=VALUE, after `sets`
    smaller: tuple[str, ...] = ()
    gpu_smaller: bool = False  # also each study's own (Study.gpu_reference_sets)
    rounds_first: bool = False  # the answer's compiled cells only in the budget its rounds leave (--rounds-first)

    @property
    def smaller_sets(self) -> tuple[str, ...]:
        return (*self.smaller, *(study_gpu_reference_sets() if self.gpu_smaller else ()))

    @property
    def all_sets(self) -> tuple[str, ...]:
        return (*self.sets, *self.smaller_sets)


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
    # A GPU host: the answer `all` gives there (host/answer_plan.py), on real data: every study's cells
    # that its comparisons pair, this host's GPU against its own CPU cores, the same work on both
    # sides, once each; then rounds to 6 for each comparison (fixed-n 95% bootstrap: answer_plan.ROUNDS),
    # cheapest first, the compiled cells last in what the rounds leave of a 23-minute budget for the whole run (GPU machine time comes 30 minutes
    # at a stretch and 10 minutes a call: `--stop-after` ends a call cleanly and the same command
    # resumes; scripts/gpu_reference.sh carries the results dir between calls). The first round runs
    # one cell after another, so a call can stop between any two.
    "gpu": Preset(
        ("cpu", "cuda"),
        "auto",
        "a GPU host: every study's GPU-vs-CPU comparisons on this host (profile answer: the same work on both sides)",
        repeats=1,
        schedule="sequential",
        until_decided=True,
        max_repeats=6,
        # issue 54: the whole one-GPU reference in 25 minutes of GPU machine time; the budget counts the cells'
        # time, and each call's start (wheels, imports, data check: ~40 s) and the machine's start come on top
        budget="23m",
        gpu_smaller=True,  # mnist-cnn at 2 epochs (its gpu_reference_sets says why)
        # the rounds decide; the compiled cells (tuned, CPU int8) are one repeat each and come only in
        # what the budget leaves: H200-rounds measured them (405 s), a round of every comparison ~330 s
        rounds_first=True,
    ),
    "gpu-full": Preset(("cpu", "cuda"), "full", "a GPU host: every cell of both platforms, full profile (extra GPU variants)"),
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


def check_resume(dest: Path) -> None:
    """A reference is one host in one environment: KitError (one line) when DEST already holds cells
    made on another machine (CPU model, GPU) or in another environment (runtime, library versions:
    the cells' `env`) than this one. The cells are read as untrusted input."""
    from bench.core.provenance import environment_label
    from bench.core.resultset import load_cells

    if not dest.is_dir():
        return
    dirs = sorted({p.parent for p in dest.glob("*/*/cell.json")})
    if not dirs:
        return
    env = environment_label()
    cpu = cpu_model()
    gpus = sorted({str(g["name"]) for g in nvidia_smi_gpus() if g.get("name")})
    me = machine_identity().get("machine_id")
    for c in load_cells(dirs):
        theirs = str(c.spec.get("env") or "")
        if theirs and theirs != env:
            raise KitError(
                f"{dest} holds cells of another environment ({c.dir.name}: {theirs}; here: {env}): a reference is one "
                "environment; resume it where it was made, or pass --out for a new one"
            )
        s_cpu = c.system.get("cpu_model")
        got = c.system.get("gpu")
        s_gpu = str(got.get("name") or "") if isinstance(got, dict) else ""
        if (isinstance(s_cpu, str) and s_cpu != cpu) or (s_gpu and gpus and s_gpu not in gpus):
            raise KitError(
                f"{dest} holds cells of another machine ({c.dir.name}: {s_cpu}, {s_gpu or 'no GPU'}; here: {cpu}, "
                f"{', '.join(gpus) or 'no GPU'}): a reference is one host; pass --out for this one"
            )
        theirs_id = c.system.get("machine_id")
        if me and isinstance(theirs_id, str) and theirs_id and theirs_id != me:
            # one class, two machines (each lent GPU host is another): their numbers differ by a few
            # percent to 1.9x on the CPU side (the three H200 machines of set H200), so one reference is one machine
            raise KitError(
                f"{dest} holds cells of another machine of this class ({c.dir.name}: machine {theirs_id}; here: {me}): "
                "a reference is one host; pass --out for this one"
            )


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


def part(p: Preset, studies: Sequence[str] | None) -> Preset:
    """P limited to STUDIES (its other studies' --set values dropped); P itself for None or none.
    KitError (one line) naming a study P does not run."""
    from bench.core.registry import studies as registry

    if not studies:
        return p
    known = p.studies if p.studies is not None else tuple(sorted(registry()))
    unknown = [s for s in studies if s not in known]
    if unknown:
        raise KitError(f"--study {', '.join(unknown)}: this preset runs {', '.join(known)}")
    chosen = tuple(s for s in known if s in studies)
    keep = tuple(kv for kv in p.sets if kv.split(".", 1)[0] in chosen)
    smaller = tuple(kv for kv in p.smaller_sets if kv.split(".", 1)[0] in chosen)
    return replace(p, studies=chosen, sets=keep, smaller=smaller, gpu_smaller=False)


def out_dir(preset: str, out: Path | None, studies: Sequence[str] | None = None) -> Path:
    """OUT, else results/reference/<label>, with -<study>... for a part of the preset (--study)."""
    if out is not None:
        return out
    tail = "".join(f"-{s}" for s in sorted(set(studies or ())))
    return Path("results") / "reference" / (label(preset) + tail)


__all__ = ["PRESETS", "Preset", "check_clean", "check_resume", "label", "out_dir", "part", "studies_with_reference_data"]
