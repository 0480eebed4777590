"""What a study is to the core: a `Study` subclass with its config, backends, matrix,
protocol and report section. The core calls only what is declared here.

    @register_study
    class MyStudy(Study):
        name = "my-study"; title = "..."; seed_doc = "005"
        Config = MyConfig                       # frozen dataclass: defaults, units in names
        backends = {"numpy": BackendSpec("my_pkg.backends.numpy", platform="cpu")}
        def matrix(self, platform, profile): return [Cell(self.name, "numpy", params=...)]
        def open(self, cell, ctx): return MyRun(...)     # a StepRun
        def report_section(self, cells, out): return ["## my-study", ...]

A backend is one module plus one `BackendSpec` in the study's `backends`: the spec says
everything the core and the study need to know without importing it (platform, family,
pipelines, variants, what it needs, how many devices it can use); the module has
`available() -> str | None` and `create(cell, data) -> trainer` (the study's trainer
Protocol), and may have `validate(cell)` for rules of its own (e.g. '+'-combined variants).
It is imported only when a cell asks for it, and imports only what it needs when called.
Nothing in the kit dispatches on a backend's name.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from bench.core import machine
from bench.core.cell import Cell
from bench.core.claims import Claim
from bench.core.errors import KitError
from bench.core.request import PLATFORMS  # noqa: F401 - studies take it from here

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell

PROFILES = ("smoke", "default", "full")
AUTO = "auto"  # a requested profile that each study maps per platform (Study.profile_for)
# The answer profile: per study, the cells its comparisons pair on every platform of the run, at one
# work amount (images, epochs, trials, batch) that is the same on every platform, sized for the
# slowest side (a CPU). A study that declares no answer matrix runs its default there.
ANSWER = "answer"
ANSWER_PROFILES = (*PROFILES, ANSWER)


# How much work a cell does is marked where each study declares its params, on its Config's fields:
#     epochs: int = field(default=10, metadata={"work": "trained"})
#     latency_calls: int = field(default=1000, metadata={"work": "amount"})
# "trained": the work it trains (epochs, steps, training images, search trials): two sides pair only
# where it agrees (Study.trained_work), and no quality metric (an accuracy, a loss) lets it differ;
# "amount": how long or how much is measured (warm-up, latency calls, profiler windows, sweep sizes,
# held-out images). A rate does not depend on either, so a claim's `free` takes the study's work
# (Study.work_amount: a Level by default, a speed claim with the dataset's name). A field marked
# {"free": False} as well is work that no claim lets differ (mnist-cnn's limit_train, a smoke run's
# cut of the training set).
WORK_KINDS = ("amount", "trained")
# A field marked {"named": True} is named in every answer's label whose workload holds it, even where
# all of a claim's answers share it (the data pipeline: a ratio through a loader of synthetic JPEGs is
# the loader's as much as the model's, one on a fixed batch on the device the model's alone).


def work_params(config: type, kind: str | None = None) -> tuple[str, ...]:
    """The fields of the Config dataclass CONFIG marked as work of KIND (None: either kind), in
    their declaration order; ValueError for a mark that is no WORK_KINDS."""
    out = []
    for f in dataclasses.fields(config):
        got = f.metadata.get("work")
        if got is None:
            continue
        if got not in WORK_KINDS:
            raise ValueError(f"{config.__name__}.{f.name}: work mark {got!r}; choose {', '.join(WORK_KINDS)}")
        if kind is None or got == kind:
            out.append(f.name)
    return tuple(out)


def free_work(config: type) -> tuple[str, ...]:
    """CONFIG's work params that a claim lets differ (Level's default; a speed claim's `free` with
    "dataset"): every one marked as work but those marked {"free": False} too."""
    free = {f.name for f in dataclasses.fields(config) if f.metadata.get("free", True)}
    return tuple(k for k in work_params(config) if k in free)


class Speed(NamedTuple):
    """One speed figure of one repeat, as verify's speed baselines and the run history hold it."""

    value: float
    unit: str
    higher_is_better: bool = True  # throughput: True; a latency or an energy per sample: False


@dataclass(frozen=True)
class BackendSpec:
    module: str  # import path of the backend module (imported only when asked for)
    platform: str  # cpu | cuda | mps: which platform's matrix and image it belongs to
    variants: tuple = ("default",)  # labels the backend accepts (its module's validate() may accept more, e.g. '+' combinations)
    about: str = ""  # one line for `bench list`
    family: str = ""  # torch | numba | numpy | cupy (machine.FAMILIES): whose threads and seed the core sets
    pipelines: tuple = ()  # input pipelines it takes, for studies with a `pipeline` parameter (first = its default)
    needs: tuple = ()  # modules it imports; a missing one is the skip reason before available() is asked
    max_devices: int = 1  # devices one cell may name (Cell.devices); > 1: ranks or DataParallel

    def __post_init__(self) -> None:
        if self.family and self.family not in machine.FAMILIES:
            raise ValueError(f"BackendSpec family {self.family!r}: choose {', '.join(machine.FAMILIES)}")


@dataclass(frozen=True)
class Estimate:
    """What a cell will take, known before it starts (Study.estimate): the run's ETA is the sum
    over its cells, scaled by the run's own pace (bench.run.eta). Seconds are on the reference
    machine, the 2-core AMD EPYC of the README's measurements (a GPU step: on the H100)."""

    steps: int  # step() calls it will take
    open_s: float  # process start, imports, data, model, warm-up
    step_s: float  # one step, on average
    # of open_s + steps x step_s, the seconds more cores do not shorten (a compile: one host's 16 cores
    # compiled cifar-opt's CPU forms no faster than the reference's 2): the ETA scales the rest only
    serial_s: float = 0.0


@dataclass
class RunContext:
    """What the cell entry point hands a study's `open()`."""

    out: Path  # the results root (the cell writes under cell.dir(out))
    cell_dir: Path
    data_dir: str | None  # --data-dir as given (None: $KIT_DATA_DIR or ./data)
    run_id: str
    echo: Any = print  # progress lines for a person (stderr when scheduled)
    dist: Any = None  # bench.core.dist.Dist: this rank of a many-device cell (None: one process)


class StepRun(Protocol):
    """An opened cell: the scheduler steps it (an epoch, a repeat, a phase) and closes it.
    Every member is required."""

    steps: int  # how many step() calls the cell takes
    warmup_s: float  # set-up + warm-up time before step 0 (compile, JIT, checks)
    dataset: dict  # the data actually loaded: name, real (bool), sha256, sizes, source

    def step(self, i: int) -> list[dict]:
        """Run step i (0-based) and return its rows (study keys only; common keys are added)."""
        ...

    def close(self) -> list[dict]:
        """Finish: return any final rows (may be [])."""
        ...

    def system_extra(self) -> dict:
        """Study facts for system.json (resolved config is added by the entry point)."""
        ...


class Study:
    """Base class: subclass, set the ClassVars, implement matrix / open / report_section."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    seed_doc: ClassVar[str] = ""
    Config: ClassVar[type]  # frozen dataclass of params with defaults
    backends: ClassVar[dict[str, BackendSpec]] = {}
    # the runtime_checkable Protocol every backend's create() returns (the conformance test checks it)
    trainer_protocol: ClassVar[type | None] = None
    profiles: ClassVar[tuple[str, ...]] = PROFILES
    timing_key: ClassVar[str | None] = None  # the row key holding a timed step's seconds (noise flags look at it)
    timing_unit: ClassVar[str] = "step"  # what one such row is ("epoch", "run"), for the flags' wording
    # what `--profile auto` (the CLIs' default) runs per platform; unnamed platforms get "default".
    # A study whose default matrix takes hours on some platform maps that one to "smoke".
    auto_profiles: ClassVar[dict[str, str]] = {}
    # True where the study takes its own idle baseline and energy readings before it touches the
    # device (profile's sampler): the cell entry point then neither initialises the device before
    # open() nor runs its own energy meter (bench/run/cell.py before_open)
    own_energy: ClassVar[bool] = False

    # ---- config and cells
    def config_defaults(self) -> dict:
        out = {}
        for f in dataclasses.fields(self.Config):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                raise TypeError(f"{self.name}: config field {f.name} needs a default")
        return out

    def config_types(self) -> dict[str, Any]:
        return {k: type(v) for k, v in self.config_defaults().items()}

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        raise NotImplementedError

    def profile_for(self, platform: str, requested: str) -> str:
        """The profile this study runs on PLATFORM when REQUESTED ('auto' resolves per study; 'answer'
        is its default where the study declares no answer matrix)."""
        if requested == AUTO:
            return self.auto_profiles.get(platform, "default")
        if requested == ANSWER and ANSWER not in self.profiles:
            return "default"
        return requested

    def cell(
        self,
        backend: str,
        variant: str = "default",
        seed: int = 0,
        repeat: int = 0,
        name: str = "",
        devices: tuple = (),
        **params: Any,
    ) -> Cell:
        """A cell with every config key resolved (defaults filled in)."""
        full = {**self.config_defaults(), **params}
        unknown = set(params) - set(self.config_defaults())
        if unknown:
            raise KitError(f"{self.name}: unknown parameter(s) {', '.join(sorted(unknown))}")
        return Cell(self.name, backend, variant, full, devices=devices, seed=seed, repeat=repeat, name=name)

    def validate(self, cell: Cell) -> None:
        """Raise KitError (one line) when the cell cannot be run as specified. The default
        checks what the backend's spec declares (variants, pipelines, devices), then the
        backend module's own validate(cell) when it has one, then the Config's types.
        Studies extend it with super().validate(cell)."""
        spec = self.backend_spec(cell.backend)
        mod = self.load_backend(cell.backend)
        own = getattr(mod, "validate", None)
        if own is not None:
            own(cell)
        elif cell.variant not in spec.variants:
            raise KitError(f"{self.name} {cell.backend} has no variant {cell.variant!r}: choose {', '.join(spec.variants)}")
        pipe = cell.params.get("pipeline")
        if spec.pipelines and pipe is not None and pipe not in spec.pipelines:
            raise KitError(f"{cell.backend} has no pipeline {pipe!r}: choose {', '.join(spec.pipelines)}")
        self.validate_devices(cell)
        fields = dataclasses.fields(self.Config)
        missing = [f.name for f in fields if f.name not in cell.params]
        if missing:
            raise KitError(f"{self.name} cell lacks parameter {missing[0]!r}")
        try:
            self.Config(**{f.name: cell.params[f.name] for f in fields})
        except (TypeError, ValueError) as err:
            raise KitError(f"{self.name}: {err}") from None

    def validate_devices(self, cell: Cell) -> None:
        """Cell.devices against the backend: GPU ids on a GPU backend, 'cpu' ranks on a CPU one,
        no more than the backend's max_devices (which GPUs this host has is cell_unavailable's)."""
        spec = self.backend_spec(cell.backend)
        devs = cell.devices
        if cell.nodes > 1 and not self.world_size(cell):
            raise KitError(f"nodes={cell.nodes}: only a cell that runs as ranks (devices=..., DDP) spans several nodes")
        if not devs:
            return
        if len(devs) > spec.max_devices:
            raise KitError(
                f"{cell.backend} runs on at most {spec.max_devices} device{'s' if spec.max_devices > 1 else ''} "
                f"(devices={','.join(devs)})"
            )
        if spec.platform == "cpu" and set(devs) != {"cpu"}:
            raise KitError(f"{cell.backend} runs on the CPU: devices may only be cpu ranks, e.g. cpu,cpu (got {','.join(devs)})")
        if spec.platform != "cpu" and "cpu" in devs:
            raise KitError(f"{cell.backend} runs on {spec.platform}: devices are GPU indices, e.g. 0,1 (got {','.join(devs)})")

    def runtime_setup(self, cell: Cell, threads: int, seed: int | None = None) -> int:
        """Before create(): pin the backend family's threads to thread_count(THREADS, the ranks
        on this host: torchrun's LOCAL_WORLD_SIZE) and, given a SEED, seed its global
        generator; returns the thread count."""
        family = self.backend_spec(cell.backend).family
        n = machine.pin_threads(threads, family, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        if seed is not None:
            machine.seed_family(family, seed)
        return n

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        """The cell with its data identity fixed (e.g. dataset name + checksum in params);
        called once per matrix, before any cell runs. Default: unchanged."""
        return cell

    def label(self, cell: Cell) -> str:
        return f"{cell.backend} {cell.variant}"

    def timed_values(self, rows: list[dict]) -> dict[str, list[float]]:
        """The timed steps' seconds per row backend (one cell may hold several backends' rows),
        for the noise flags (bench.core.noise). Default: `timing_key` of every ok row."""
        out: dict[str, list[float]] = {}
        if self.timing_key:
            for r in rows:
                v = r.get(self.timing_key)
                if r.get("status") == "ok" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.setdefault(str(r.get("backend")), []).append(float(v))
        return out

    # ---- what compare and verify read from a cell's rows (host side: rows only, no torch)
    throughput_unit: ClassVar[str] = "steps/s"
    # True where a repeat also changes the training seed (cell.seed + cell.repeat: the seeds'
    # "3 seeds"): then each repeat has a loss curve of its own, and a baseline keeps them apart
    repeat_is_seed: ClassVar[bool] = False
    # the --set values a reference of this study runs with (`orchestrate.py reference`: real data
    # where the study has a real set the kit can read, e.g. ("dataset=mnist",)); () = its defaults
    reference_sets: ClassVar[tuple[str, ...]] = ()
    # KEY=VALUE the one-GPU reference (`reference gpu`) sets on top: a smaller amount than the seed's where
    # the study's first round would leave that run's budget no rounds (both sides the same; rows record it)
    gpu_reference_sets: ClassVar[tuple[str, ...]] = ()
    # every claim its seed makes that a measurement can check (bench.core.claims), judged by
    # bench.core.answers; those marked `headline` open the report
    claims: ClassVar[tuple[Claim, ...]] = ()

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        """Row backend -> this repeat's throughput in `throughput_unit` (larger = faster).
        Default: 1 / the median of the timed steps' seconds (timed_values)."""
        return {
            part: 1.0 / statistics.median(v)
            for part, secs in self.timed_values(rows).items()
            if (v := [s for s in secs if s > 0])
        }

    def samples_per_unit(self, rows: list[dict], part: str) -> float | None:
        """Training samples in one unit of `throughput` (samples/s: 1; an MLP iteration over its whole
        training set: that set's size), for the break-even work (bench.core.worth). Default 1."""
        return 1.0

    def param_count(self, rows: list[dict], part: str) -> int | None:
        """The model's parameters (all of them, trainable or not) for row backend PART, as the run
        summary prints them beside the speed (timm's benchmark.py does). Default: the rows'
        `n_params` or `params_total`; a study with one fixed net returns its count."""
        for r in ok_rows(rows, part):
            for k in ("n_params", "params_total"):
                if (v := number(r.get(k))) and v > 0:
                    return int(v)
        return None

    def epoch_samples(self, cell: ResultCell) -> int | None:
        """Samples in one epoch of the dataset the cell trained on (its training set as system.json
        records it), or None: the break-even work is also given in epochs of it."""
        ds = cell.system.get("dataset")
        n = number(ds.get("n_train")) if isinstance(ds, dict) else None
        return int(n) if n and n > 0 else None

    def speed(self, rows: list[dict], part: str) -> dict[str, Speed]:
        """Metric name -> PART's speed figures in this repeat, as speed baselines and the run
        history hold them. Default: the throughput; a study adds what else it measures (a latency,
        an energy per sample)."""
        v = self.throughput(rows).get(part)
        return {"throughput": Speed(v, self.throughput_unit)} if v and v > 0 else {}

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        """(metric, value) of the cell's final accuracy for row backend PART, or None (the study
        trains nothing it scores)."""
        return None

    def loss_curve(self, rows: list[dict], part: str) -> tuple[str, str, list[tuple[float, float]]] | None:
        """(x key, y key, [(x, loss)]) of PART's training-loss curve, or None."""
        return None

    def equivalence(self, rows: list[dict]) -> tuple[list[str], list[str]]:
        """(failures, what passed) of the checks a cell made against a reference (a GPU kernel
        against torch, CuPy against NumPy). Default: any ok row whose `equiv_ok` or
        `agrees_with_numpy` is False fails."""
        bad = [
            f"{k} is false for {b}"
            for k in ("equiv_ok", "agrees_with_numpy")
            for b in sorted({str(r.get("backend")) for r in rows if r.get("status") == "ok" and r.get(k) is False})
        ]
        return bad, []

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        """(name, why it does not hold or None) of what must hold in any honest run of this
        study (e.g. an achieved FLOP/s below the roof); verify fails a cell on any that does not.
        CELL_DIR: the cell's folder, for invariants over its files. Default: none."""
        return []

    def row_flags(self, rows: list[dict]) -> list[str]:
        """Validity flags of the study's own (e.g. a diverged loss), added to the noise flags
        that every row of the cell carries. Default: none."""
        return []

    def progress_line(self, rows: list[dict]) -> str:
        """A few words on one step's rows, for progress output (e.g. "1.23 s, acc 0.9712")."""
        return ""

    def platform_of(self, cell: Cell) -> str:
        return self.backend_spec(cell.backend).platform

    # ---- backends
    def backend_spec(self, backend: str) -> BackendSpec:
        if backend not in self.backends:
            raise KitError(f"unknown backend {backend!r} for {self.name}: choose one of {', '.join(self.backends)}")
        return self.backends[backend]

    def load_backend(self, backend: str) -> ModuleType:
        return importlib.import_module(self.backend_spec(backend).module)

    def why_unavailable(self, backend: str) -> str | None:
        """None when BACKEND can run here, else the reason (a missing module it needs or a failed
        import is a reason, not a crash)."""
        absent = [m for m in self.backend_spec(backend).needs if importlib.util.find_spec(m) is None]
        if absent:
            return f"{', '.join(absent)} not installed"
        try:
            mod = self.load_backend(backend)
        except KitError:
            raise
        except Exception as err:  # noqa: BLE001
            return f"cannot import: {type(err).__name__}: {err}"
        try:
            return mod.available()
        except Exception as err:  # noqa: BLE001
            return f"availability check failed: {type(err).__name__}: {err}"

    def takes_devices(self, cell: Cell) -> bool:
        """Whether CELL can run on devices a user names (`--set devices=...` reaches only those:
        a cell that runs on one device only keeps running so). Default: its backend takes
        several (BackendSpec.max_devices > 1); studies narrow it by variant or scenario."""
        return self.backend_spec(cell.backend).max_devices > 1

    def world_size(self, cell: Cell) -> int:
        """Ranks the cell runs as (bench/run/ranks.py: one process per device under torchrun), or
        0: one process. Default: one rank per device the cell names, where its backend takes
        several (BackendSpec.max_devices > 1)."""
        return len(cell.devices) if cell.devices and self.backend_spec(cell.backend).max_devices > 1 else 0

    def cell_unavailable(self, cell: Cell) -> str | None:
        """Why this cell cannot run here (None: it can): its backend, or GPUs it names that
        this host does not show. Studies whose cell spans several backends override this."""
        return self.why_unavailable(cell.backend) or devices_missing(cell)

    # ---- running
    def open(self, cell: Cell, ctx: RunContext) -> StepRun:
        raise NotImplementedError

    def work_amount(self) -> tuple[str, ...]:
        """The params that set how much work a cell does and that a claim lets differ: its Config's
        fields marked as work (free_work). A Level's default `free`; a pair whose sides differ in
        one says so (bench.core.answers)."""
        config = getattr(self, "Config", None)
        return free_work(config) if config is not None else ()

    def named_params(self) -> tuple[str, ...]:
        """The params every answer's label names (its Config's fields marked {"named": True})."""
        config = getattr(self, "Config", None)
        if config is None or not dataclasses.is_dataclass(config):
            return ()
        return tuple(f.name for f in dataclasses.fields(config) if f.metadata.get("named") is True)

    def trained_params(self) -> tuple[str, ...]:
        """The params of the work a cell trains: its Config's fields marked {"work": "trained"}."""
        config = getattr(self, "Config", None)
        return work_params(config, "trained") if config is not None else ()

    def trained_work(self, facets: dict) -> dict:
        """The work a cell with FACETS (its params, backend, variant) trains: the values of its
        trained_params it has. Two sides pair only where these agree (bench/core/answers.py); a
        study drops a param its variant does not use (a search's trials on a cell that runs none)."""
        return {k: facets[k] for k in self.trained_params() if k in facets}

    def deferred(self, cell: Cell) -> bool:
        """Whether CELL pays a one-time cost (a compile, a graph capture) that the answer's first round
        leaves for after its first report: such cells run after the others' first repeat."""
        return False

    def estimate(self, cell: Cell) -> Estimate:
        """Its steps and seconds before it starts (the ETA's prior). Studies override with what
        their config says; the default is a short cell of a few steps."""
        return Estimate(steps=3, open_s=5.0, step_s=5.0)

    # ---- reporting (host side: only the standard library, numpy and matplotlib)
    def check_rows(self, rows: list[dict]) -> str | None:
        """Why this cell's rows cannot be reported (a metric the report needs is missing or of
        the wrong type), or None. The common keys are checked before this."""
        return None

    def report_section(self, cells: list[ResultCell], out: Path) -> list[str]:
        """Markdown lines for REPORT.md (tables, figure links); files go under OUT."""
        return [f"{len(cells)} cell(s); no report section defined."]

    def summary(self, cells: list[ResultCell]) -> tuple[list[str], dict]:
        """Text lines printed after a matrix run, and a dict saved as <out>/summaries/<study>.json."""
        return [], {}


def numbers_missing(rows: list[dict], need: dict[str, tuple[str, ...]]) -> str | None:
    """For check_rows: the first ok row of a phase in NEED (phase -> keys) whose key is not a
    measurement the report can divide by (bench.core.schema.measured_problem: a number, and a
    time or rate above 0), as one line ("epoch row: 'epoch_s' is missing, expected a number"),
    or None."""
    from bench.core.schema import measured_problem

    for r in rows:
        if r.get("status") != "ok":
            continue
        for k in need.get(str(r.get("phase")), ()):
            why = measured_problem(k, r.get(k))
            if why:
                return f"{r.get('phase')} row: {why}"
    return None


def devices_missing(cell: Cell) -> str | None:
    """Why the GPUs CELL names are not all here (None: they are, or it names none)."""
    need = machine.allocated_gpus([d for d in cell.devices if d != "cpu"])
    if not need:
        return None
    have = machine.visible_gpus()
    if any(d not in have for d in need):
        return f"needs GPUs {','.join(need)}; this host shows {len(have)} ({','.join(have) or 'none'})"
    return None


# ---- helpers for the row readers above (host side)
def number(v: Any) -> float | None:
    """V as a float when it is a real, finite number (not a bool), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def ok_rows(rows: list[dict], part: str | None = None) -> list[dict]:
    """The ok rows (of row backend PART)."""
    return [r for r in rows if r.get("status") == "ok" and (part is None or str(r.get("backend")) == part)]


def medians(rows: list[dict], key: str, keep: Any = lambda r: True) -> dict[str, float]:
    """Row backend -> the median of KEY over the ok rows KEEP accepts (numbers only)."""
    by: dict[str, list[float]] = {}
    for r in ok_rows(rows):
        v = number(r.get(key))
        if v is not None and keep(r):
            by.setdefault(str(r.get("backend")), []).append(v)
    return {p: statistics.median(v) for p, v in by.items()}


def curve(rows: list[dict], x: str, y: str) -> tuple[str, str, list[tuple[float, float]]] | None:
    """(X, Y, [(x, y)] sorted by x) over ROWS whose X and Y are numbers, or None."""
    pts = sorted((xv, yv) for r in rows if (xv := number(r.get(x))) is not None and (yv := number(r.get(y))) is not None)
    return (x, y, pts) if pts else None


def last(rows: list[dict], by: str, key: str) -> tuple[str, float] | None:
    """(KEY, its value in the row with the largest BY), over ROWS where both are numbers."""
    have = [(number(r.get(by)), number(r.get(key))) for r in rows]
    got = [(b, v) for b, v in have if b is not None and v is not None]
    return (key, max(got)[1]) if got else None
