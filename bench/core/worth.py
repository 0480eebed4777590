"""Is the GPU worth it? Time, energy, cost and the break-even work beside every GPU-over-CPU answer.

For each answer of a speed claim (a Ratio of the study's throughput) whose two sides run one on
a CPU and one on a GPU, on the very sides and pair the time ratio used (bench.core.answers), per
repeat of each side:

    rate      samples/s      the study's throughput x Study.samples_per_unit (an MLP iteration is
                             one pass over its training set)
    energy    J/sample       the median over the cell's timed windows of their net J per sample, read
                             by bench.measure.energy.row_energy (every field name rows have used, the
                             profile study's older ones too) under its one rule: a counter window of
                             1 s or more within the board's power limit, else why not (too short to
                             measure, with the windows' lengths)
    fixed     s              every one-off cost before training: the start-up of the side's process
                             (system.json's fixed_costs.total_s, process start to the first timed step,
                             else open_s for results made before it was recorded, said so) plus the
                             one-off work its rows record (ONE_OFF: a hyperparameter search's search_s).
                             A part that shares its cell's process with others (mlp-scratch's NumPy
                             beside CuPy) takes the start-up of its own cell in the same run folder
                             where there is one (the process it would pay for alone), else the shared
                             one, and says which
    price     USD/h          the user's price for the side's device (x the GPUs it uses); no price,
                             no cost: never a default

and from those:

    time ratio    GPU rate / CPU rate                      above 1x: the GPU trains faster
    energy ratio  CPU J/sample / GPU J/sample              above 1x: the GPU spends less per sample
    cost ratio    CPU USD/sample / GPU USD/sample          above 1x: the GPU costs less per sample
    break-even    the work N above which the GPU finishes first once fixed costs count:
                  F_gpu + N / r_gpu < F_cpu + N / r_cpu, so N* = (F_gpu - F_cpu) / (1/r_cpu - 1/r_gpu);
                  and the same for cost (USD per second of each side x those seconds, plus energy
                  x the kWh price where one is given)

Every figure lies in a finite, bounded domain before it is divided by or multiplied out (RATE,
ENERGY, FIXED, SAMPLES_MAX; prices: host.prices): a rate or an energy outside it is "not measured",
with the figure and the bound. A price of 0 is owned or free hardware: its cost per sample is 0, no
ratio divides by it (`free` says which side costs nothing, and the break-even still forms). A ratio
or a break-even whose result is not finite is "not measured" with why, never inf.

Each with its interval as the time ratio has it (bench.core.stats: a 95 % bootstrap interval from
6 repeats, below that the range): the ratios through stats.ratio (paired by repeat when the sides
ran in one run), the break-even over the repeats' pairs (by repeat in one run, else every pair).
Standard library, bench.core and bench.measure.energy (its row reader and rule; no device library is
imported): the host renders it (host/worth.py).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import claims as C
from bench.core import stats
from bench.core.study import number
from bench.core.tables import finite
from bench.measure import energy as E

if TYPE_CHECKING:
    from bench.core.answers import Answer, Side
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

ALWAYS, ABOVE, BELOW, NEVER = "always", "above", "below", "never"
JOULES_PER_KWH = 3.6e6
STARTUP = "start-up"  # the process's: start, imports, device init, open() (bench.measure.fixedcost)
# work a side does once before it trains, beside its start-up: a row of phase KEY carries its seconds in FIELD
ONE_OFF: dict[str, tuple[str, str]] = {"search": ("search_s", "the hyperparameter search")}  # phase -> (field, what)
OLD_FIXED = "open_s (made before the kit recorded process start and imports)"
MAX_SIBLINGS = 4096  # cell dirs looked through in one run folder for a part's own cell
# the domains a side's figures must lie in before they are divided by (every ratio and break-even
# then stays finite): a training rate (samples/s: once in 30 years .. the schema's bound on any
# number), an energy per sample (a picojoule .. a megajoule: a net of 1e6 parameters costs
# microjoules a sample), a fixed cost (s: the schema's bound on a time) and the work asked for
RATE = (1e-9, 1e18)
ENERGY = (1e-12, 1e6)
FIXED = (0.0, 1e7)
SAMPLES_MAX = 1e15  # training samples `orchestrate.py worth --samples` takes: ~10 million ImageNet epochs


# ---- the arithmetic ------------------------------------------------------------------------
@dataclass(frozen=True)
class Line:
    """What finishing N samples takes on one side: FIXED + N x PER (seconds, or USD)."""

    fixed: float
    per: float

    def at(self, n: float) -> float:
        return self.fixed + n * self.per


def crossing(gpu: Line, cpu: Line) -> tuple[str, float]:
    """Where GPU's line goes below CPU's, as (kind, N):

    always  the GPU is below for every N >= 0 (N = 0)
    above   below for N > N* only (its fixed cost is higher, its per-sample lower)
    below   below for N < N* only (its fixed cost is lower, its per-sample higher)
    never   never below (N = inf); equal lines never put the GPU first"""
    dfix = gpu.fixed - cpu.fixed  # what the GPU pays more up front
    dper = cpu.per - gpu.per  # what it saves per sample
    if dper > 0:
        n = dfix / dper
        return (ALWAYS, 0.0) if n <= 0 else (ABOVE, n)
    if dper == 0:
        return (ALWAYS, 0.0) if dfix < 0 else (NEVER, math.inf)
    return (BELOW, dfix / dper) if dfix < 0 else (NEVER, math.inf)


def time_line(rate: float, fixed: float) -> Line:
    """Seconds to finish N samples at RATE samples/s after FIXED s."""
    return Line(fixed, 1.0 / rate)


def cost_line(
    rate: float, fixed: float, usd_per_hour: float, j_per_sample: float | None = None, usd_per_kwh: float | None = None
) -> Line:
    """USD to finish N samples: the device's hourly price over the fixed and the per-sample seconds,
    plus, given a kWh price, the energy per sample at it (the fixed costs' energy is not measured)."""
    per_s = usd_per_hour / 3600.0
    energy = (j_per_sample or 0.0) * (usd_per_kwh or 0.0) / JOULES_PER_KWH
    return Line(per_s * fixed, per_s / rate + energy)


@dataclass(frozen=True)
class Even:
    """A break-even work: its kind (crossing's), N* from the sides' medians, and N*'s interval."""

    kind: str
    n: float
    lo: float | None = None
    hi: float | None = None
    interval: str = "none"  # "range": min-max over the repeat pairs; "none": one pair
    pairs: int = 1
    split: str = ""  # "2 of 3 pairs cross": where the repeats disagree on the kind

    @property
    def decided(self) -> bool:
        return not self.split


def even(pairs: list[tuple[Line, Line]], medians: tuple[Line, Line]) -> Even:
    """The break-even of MEDIANS (gpu, cpu) with its interval over PAIRS (one per repeat pair): the
    range of the pairs' N* (a pair that never crosses counts as inf, one that always does as 0),
    as a ratio's range is the range of its paired per-repeat ratios (bench.core.stats)."""
    kind, n = crossing(*medians)
    got = [crossing(g, c) for g, c in pairs]
    kinds = [k for k, _ in got]
    split = "" if all(k == kind for k in kinds) else f"{sum(k == kind for k in kinds)} of {len(kinds)} repeat pairs {kind}"
    vals = sorted(v for _, v in got)
    if len(vals) < 2:
        return Even(kind, n, split=split)
    return Even(kind, n, vals[0], vals[-1], "range", len(vals), split)


# ---- what each side measured ---------------------------------------------------------------
@dataclass
class Facts:
    """One side of a GPU-over-CPU answer, per repeat."""

    side: Side
    platform: str
    rate: dict[int, float]  # samples/s: Study.throughput x samples_per_unit
    fixed: dict[int, float]  # s of every one-off cost: its process's start-up and any ONE_OFF work
    fixed_what: str  # "total_s" or OLD_FIXED (process start and imports not recorded)
    energy: dict[int, float]  # J/sample, net of idle
    energy_why: str  # why energy is not measured (empty when every repeat has it)
    energy_domain: str
    devices: int  # GPUs it used (1 on a CPU): the price counts each
    epoch: int | None  # samples in one epoch of its dataset
    price: Any = None  # host.prices.Price matched for its device
    price_why: str = ""
    fixed_parts: dict[str, dict[int, float]] = field(default_factory=dict)  # STARTUP / ONE_OFF phase -> repeat -> s
    fixed_shared: str = ""  # how a part sharing its cell's process got its start-up ("" for a cell of its own)
    fixed_why: str = ""  # why a repeat has no fixed costs (start-up or a one-off not recorded)
    rate_why: str = ""  # why a repeat has no rate (outside RATE)

    @property
    def name(self) -> str:
        return device_name(self.side)


def device_name(side: Side) -> str:
    """What a price is matched against: the GPU's name, or '<cores>-core <CPU model>'."""
    return cell_device_name(side.first, str(side.facets.get("platform")))


def cell_device_name(cell: Any, platform: str) -> str:
    s = cell.system
    if platform == "cpu":
        cores = s.get("cpu_logical_cores") or s.get("cpu_affinity")
        cpu = str(s.get("cpu_model") or cell.device or "CPU").replace("(R)", "").replace(" Processor", "")
        return f"{cores}-core {cpu}" if cores else cpu
    return str(cell.device or "GPU")


def startup_of(system: dict) -> tuple[float | None, str]:
    """(s, how) a process took from its start to its first timed step, from its cell's system.json:
    fixed_costs.total_s, else open_s (OLD_FIXED), else (None, "")."""
    fc = system.get("fixed_costs")
    total = number(fc.get("total_s")) if isinstance(fc, dict) else None
    if total is not None and total >= 0:
        return total, "total_s"
    o = number(system.get("open_s"))
    return (o, OLD_FIXED) if o is not None and o >= 0 else (None, "")


def parts_of(c: ResultCell) -> list[str]:
    """The row backends one cell process ran ('numpy+cupy+cupy-tuned': three, one process)."""
    return [p for p in str(c.spec.get("backend") or c.first.get("backend") or "").split("+") if p]


def own_cell(c: ResultCell, part: str) -> ResultCell | None:
    """The cell that ran PART alone, beside C (which runs it with other parts in one process) in C's run
    folder: same study, variant, params, seed, repeat and environment, finished ok. Read from disk with
    the kit's checked reader (bench.core.resultset.load_cell) as any result dir is: untrusted."""
    from bench.core.resultset import checked_json, load_cell

    folder = c.dir.parent
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_SIBLINGS]
    except OSError:
        return None
    keys = ("study", "variant", "params", "seed", "env")
    for e in entries:
        d = Path(e.path)
        if d == c.dir or e.is_symlink() or not e.is_dir(follow_symlinks=False):
            continue
        spec, bad = checked_json(d / "cell.json", "cell_spec")
        if bad or spec.get("backend") != part or any(spec.get(k) != c.spec.get(k) for k in keys):
            continue
        other = load_cell(d)
        if other is not None and other.status == "ok" and other.repeat == c.repeat:
            return other
    return None


def startup(c: ResultCell, part: str) -> tuple[float | None, str, str]:
    """(s, how: startup_of's, shared: "" or how it was chosen) PART's process took to start in cell C:
    C's own, or, where C runs PART beside other parts in one process, the start-up of PART's own cell
    in the same run where there is one (what running it alone costs), else C's, said to be shared."""
    parts = parts_of(c)
    if len(parts) < 2 or part not in parts:
        return (*startup_of(c.system), "")
    with_ = ", ".join(p for p in parts if p != part)
    own = own_cell(c, part)
    if own is not None:
        s, how = startup_of(own.system)
        if s is not None:
            return s, how, f"its own {part} cell's process; in the {'+'.join(parts)} cell it shares one with {with_}"
    s, how = startup_of(c.system)
    return s, how, f"one process shared with {with_} (no {part} cell of its own in this run), so one start-up for them all"


def one_offs(c: ResultCell, part: str) -> tuple[dict[str, float], str]:
    """({ONE_OFF phase: s}, why one is not recorded): the one-off work PART's rows of C record."""
    got: dict[str, float] = {}
    why = ""
    for r in c.ok_rows:
        phase = r.get("phase")
        if str(r.get("backend")) != part or not isinstance(phase, str) or phase not in ONE_OFF:
            continue
        key, what = ONE_OFF[phase]
        v = number(r.get(key))
        if v is None or v < 0:
            why = f"{what}'s time is not recorded (its {phase} row has no {key}: made before the kit recorded it)"
        else:
            got[phase] = got.get(phase, 0.0) + v
    return got, why


def _per_repeats(texts: list[str]) -> str:
    """One text for what each repeat said: where they differ (a part's own cell in some repeats, none in
    others), each with how many repeats it holds for, so two never read as one contradicting the other."""
    said = [t for t in texts if t]
    kinds = list(dict.fromkeys(said))
    if len(kinds) < 2:
        return kinds[0] if kinds else ""
    return "; ".join(f"{k} ({said.count(k)} of {len(texts)} repeats)" for k in kinds)


def facts(study: Study, side: Side) -> Facts:
    rate: dict[int, float] = {}
    fixed: dict[int, float] = {}
    parts: dict[str, dict[int, float]] = {}
    energy: dict[int, float] = {}
    notes: list[str] = []
    fixed_notes: list[str] = []
    notes_rate: list[str] = []
    shared: list[str] = []
    unread: list[E.RowEnergy] = []  # the windows of repeats that gave no energy figure
    what = "total_s"
    domain = ""
    gpus = side.facets.get("gpus")
    devices = gpus if isinstance(gpus, int) and gpus > 0 else 1
    platform = str(side.facets.get("platform"))
    for c in side.cells:
        per_unit = study.samples_per_unit(c.rows, side.part)
        thr = study.throughput(c.rows).get(side.part)  # the study's training rate, whatever the claim's metric
        if thr and per_unit:
            r = thr * per_unit
            if RATE[0] <= r <= RATE[1]:
                rate[c.repeat] = r
            else:
                notes_rate.append(f"{r:g} samples/s is outside {RATE[0]:g}..{RATE[1]:g}")
        start, how, share = startup(c, side.part)
        shared.append(share)
        what = how if how == OLD_FIXED else what
        once, once_why = one_offs(c, side.part)
        if start is None:
            fixed_notes.append("its process's start-up is not recorded")
        elif not FIXED[0] <= start + sum(once.values()) <= FIXED[1]:
            fixed_notes.append(f"its fixed costs, {start + sum(once.values()):g} s, are outside {FIXED[0]:g}..{FIXED[1]:g} s")
        elif once_why:
            fixed_notes.append(once_why)
        else:
            fixed[c.repeat] = start + sum(once.values())
            for k, v in {STARTUP: start, **once}.items():
                parts.setdefault(k, {})[c.repeat] = v
        mine = [r for r in c.ok_rows if str(r.get("backend")) == side.part]
        read = [E.row_energy(r, c.system, devices, platform) for r in mine]
        got = [e for e in read if e.j_per_sample is not None and ENERGY[0] <= e.j_per_sample <= ENERGY[1]]
        odd = [e.j_per_sample for e in read if e.j_per_sample is not None and e.j_per_sample > 0 and e not in got]
        domain = domain or next((e.domain for e in (got or read) if e.domain), "")
        if got:
            energy[c.repeat] = statistics.median(e.j_per_sample for e in got if e.j_per_sample is not None)
        elif odd:
            notes.append(f"{odd[0]:g} J/sample is outside {ENERGY[0]:g}..{ENERGY[1]:g} J: not a measurement")
        elif not any(e.carried for e in read):
            notes.append("its rows carry no energy figure (made before the kit measured energy per sample)")
        else:
            unread += [e for e in read if e.carried]
    if unread:  # every repeat's windows in one clause (four 'too short' lines read as one: 4 windows of 0.61-0.86 s)
        notes.append(E.why_none(unread) or "no figure recorded")
    return Facts(
        side=side,
        platform=platform,
        rate=rate,
        fixed=fixed,
        fixed_what=what,
        energy=energy if len(energy) == len(side.cells) else {},
        energy_why="; ".join(dict.fromkeys(notes)),
        energy_domain=domain,
        devices=devices,
        epoch=study.epoch_samples(side.first),
        fixed_parts=parts,
        fixed_shared=_per_repeats(shared),
        fixed_why="; ".join(dict.fromkeys(fixed_notes)),
        rate_why="; ".join(dict.fromkeys(notes_rate)),
    )


# ---- one answer ----------------------------------------------------------------------------
@dataclass
class Worth:
    """The time, energy and cost answer beside one GPU-over-CPU answer."""

    answer: Answer
    gpu: Facts
    cpu: Facts
    paired: bool
    time: stats.Summary | None = None
    energy: stats.Summary | None = None
    energy_why: str = ""
    cost: stats.Summary | None = None
    cost_why: str = ""
    even_time: Even | None = None
    even_time_why: str = ""
    even_cost: Even | None = None
    even_cost_why: str = ""
    kwh: float | None = None
    free: str = ""  # "GPU", "CPU" or "both": the side(s) whose cost per sample is 0 (a price of 0: owned or free)
    notes: list[str] = field(default_factory=list)

    @property
    def epoch(self) -> int | None:
        return self.gpu.epoch or self.cpu.epoch

    def lines(self, kind: str) -> tuple[Line, Line] | None:
        """(gpu, cpu) time or cost lines at the sides' medians, or None where not formed."""
        return _medians(self, kind)


def is_gpu_over_cpu(answer: Answer) -> bool:
    """A speed claim's answer (a Ratio of the study's throughput, or a headline Ratio: the headline
    holds speed comparisons only) pairing a CPU side with a GPU side."""
    rule = answer.claim.rule
    speed = isinstance(rule, C.Ratio) and (rule.metric is None or answer.claim.headline)
    if not speed or len(answer.findings) != 1:
        return False
    sides = answer.findings[0].sides
    plats = {s.facets.get("platform") for s in sides}
    return len(sides) == 2 and "cpu" in plats and len(plats) == 2


def want_platform(study: Study, want: dict) -> str | None:
    """The platform a claim's side runs on (the `platform` facet it matches): the one it names,
    else its backend's; None where it names neither (any platform)."""
    if "platform" in want:
        return str(want["platform"])
    spec = study.backends.get(str(want["backend"])) if "backend" in want else None
    return spec.platform if spec else None


def claim_is_gpu_over_cpu(study: Study, claim: C.Claim) -> bool:
    """Whether CLAIM's answers are GPU-over-CPU answers (is_gpu_over_cpu) by its declaration alone,
    answered or not: a speed Ratio whose one side runs on a CPU and the other on a GPU."""
    rule = claim.rule
    if not isinstance(rule, C.Ratio) or not (rule.metric is None or claim.headline):
        return False
    plats = {want_platform(study, rule.a), want_platform(study, rule.b)}
    return None not in plats and "cpu" in plats and len(plats) == 2


def worth_of(study: Study, answer: Answer, prices: Any = None) -> Worth:
    """The Worth of ANSWER (is_gpu_over_cpu) at PRICES (host.prices.Prices or None: no cost)."""
    f = answer.findings[0]
    a, b = f.sides
    fa, fb = facts(study, a), facts(study, b)
    gpu, cpu = (fa, fb) if fa.platform != "cpu" else (fb, fa)
    w = Worth(answer, gpu, cpu, paired=f.rank == 0)
    if f.of_ratio and gpu is fa:  # the answer's own figure (the headline's): one figure per comparison
        w.time = finite(f.value)
    elif gpu.rate and cpu.rate:
        w.time = finite(stats.ratio(gpu.rate, cpu.rate, paired=w.paired))
    # energy: both sides need it on every repeat
    lacking = [f"{x.name} ({'GPU' if x is gpu else 'CPU'}): {x.energy_why}" for x in (gpu, cpu) if not x.energy]
    if lacking:
        w.energy_why = "not measured: " + "; ".join(lacking)
    else:
        w.energy = finite(stats.ratio(cpu.energy, gpu.energy, paired=w.paired))
        w.energy_why = "" if w.energy else f"not measured: {NOT_FINITE}"
    # break-even in time
    if gpu.fixed and cpu.fixed and gpu.rate and cpu.rate:
        w.even_time = _even(w, "time")
        w.even_time_why = "" if w.even_time else f"not formed: {NOT_FINITE}"
    else:
        w.even_time_why = "not formed: " + "; ".join(
            f"{x.name} has no fixed costs recorded" + (f" ({x.fixed_why})" if x.fixed_why else "")
            for x in (gpu, cpu)
            if not x.fixed
        )
    # cost
    if prices is None:
        w.cost_why = w.even_cost_why = "no price given"
        return w
    w.kwh = prices.kwh_usd
    for x in (gpu, cpu):
        x.price = prices.for_device(x.name)
        if x.price is None:
            x.price_why = f"no price matches {x.name!r}"
    missing = [x.price_why for x in (gpu, cpu) if x.price is None]
    if w.kwh is not None and lacking:
        missing.append(f"--kwh-price needs energy per sample on both sides ({w.energy_why.removeprefix('not measured: ')})")
    if missing:
        w.cost_why = w.even_cost_why = "not measured: " + "; ".join(missing)
        return w
    gc, cc = _per_sample_cost(w, gpu), _per_sample_cost(w, cpu)
    zero = [role for role, x in (("GPU", gc), ("CPU", cc)) if x and not all(x.values())]
    w.free = "both" if len(zero) == 2 else zero[0] if zero else ""
    if w.free:  # a price of 0 (owned or free hardware): a cost of 0 a sample, which no ratio divides by
        w.cost_why = f"free: {FREE_TEXT[w.free]}"
    elif gc and cc:
        w.cost = finite(stats.ratio(cc, gc, paired=w.paired))
        w.cost_why = "" if w.cost else f"not measured: {NOT_FINITE}"
    else:
        w.cost_why = "not measured: " + "; ".join(
            f"{x.name} has no rate ({x.rate_why or 'no throughput'})" for x in (gpu, cpu) if not x.rate
        )
    if w.free == "both":
        w.even_cost_why = f"not formed: {FREE_TEXT['both']}"
    elif gpu.fixed and cpu.fixed:
        w.even_cost = _even(w, "cost")
        w.even_cost_why = "" if w.even_cost else f"not formed: {NOT_FINITE}"
    else:
        w.even_cost_why = w.even_time_why
    return w


NOT_FINITE = "the result is past arithmetic's reach (a figure near 0 below the line)"
FREE_TEXT = {
    "GPU": "the GPU side costs nothing at the prices given (0 USD/h): it is the cheaper at any work",
    "CPU": "the CPU side costs nothing at the prices given (0 USD/h): it is the cheaper at any work",
    "both": "both sides cost nothing at the prices given (0 USD/h): no cost to compare",
}


def _usd_h(x: Facts) -> float:
    return float(x.price.usd_per_hour) * x.devices


def _per_sample_cost(w: Worth, x: Facts) -> dict[int, float]:
    return {r: cost_line(v, 0.0, _usd_h(x), x.energy.get(r), w.kwh).per for r, v in x.rate.items()}


def _line(w: Worth, x: Facts, kind: str, r: int) -> Line | None:
    rate, fixed = x.rate.get(r), x.fixed.get(r)
    if rate is None or fixed is None or rate <= 0:
        return None
    if kind == "time":
        return time_line(rate, fixed)
    return cost_line(rate, fixed, _usd_h(x), x.energy.get(r), w.kwh)


def _median_facts(x: Facts) -> Facts:
    return replace(
        x,
        rate={0: statistics.median(x.rate.values())},
        fixed={0: statistics.median(x.fixed.values())},
        energy={0: statistics.median(x.energy.values())} if x.energy else {},
    )


def _medians(w: Worth, kind: str) -> tuple[Line, Line] | None:
    if not (w.gpu.rate and w.cpu.rate and w.gpu.fixed and w.cpu.fixed):
        return None
    if kind == "cost" and (w.gpu.price is None or w.cpu.price is None):
        return None
    g, c = _line(w, _median_facts(w.gpu), kind, 0), _line(w, _median_facts(w.cpu), kind, 0)
    return (g, c) if g and c else None


def _even(w: Worth, kind: str) -> Even | None:
    med = _medians(w, kind)
    if med is None:
        return None
    gr = sorted(set(w.gpu.rate) & set(w.gpu.fixed))
    cr = sorted(set(w.cpu.rate) & set(w.cpu.fixed))
    if w.paired and gr == cr:
        keys = [(r, r) for r in gr]
    else:
        keys = [(i, j) for i in gr for j in cr]
    pairs = [(g, c) for i, j in keys if (g := _line(w, w.gpu, kind, i)) and (c := _line(w, w.cpu, kind, j))]
    e = even(pairs, med)
    vals = [e.n if e.kind in (ABOVE, BELOW) else 0.0] + [v for v in (e.lo, e.hi) if v is not None and not math.isinf(v)]
    return e if all(math.isfinite(v) for v in vals) else None  # NEVER's inf is a kind, not a figure


def worth_all(registry: dict[str, Study], answers: list[Answer], prices: Any = None) -> list[Worth]:
    """A Worth for every GPU-over-CPU answer, in the answers' order."""
    return [worth_of(registry[a.study], a, prices) for a in answers if a.study in registry and is_gpu_over_cpu(a)]


__all__ = [
    "ABOVE",
    "ALWAYS",
    "BELOW",
    "NEVER",
    "OLD_FIXED",
    "ONE_OFF",
    "STARTUP",
    "Even",
    "Facts",
    "Line",
    "Worth",
    "cost_line",
    "crossing",
    "cell_device_name",
    "claim_is_gpu_over_cpu",
    "device_name",
    "even",
    "facts",
    "is_gpu_over_cpu",
    "one_offs",
    "own_cell",
    "startup",
    "startup_of",
    "time_line",
    "want_platform",
    "worth_all",
    "worth_of",
]
