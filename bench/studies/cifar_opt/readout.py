"""What cifar-opt's report, GPU-over-CPU table, claims and Study hooks read from result cells: the
one place its rows become numbers (host side: standard library only beside bench.core; every
value read through bench.core.tables' num/nums/real/quotient, every summary and ratio through
bench.core.stats, as result dirs come from other hosts).

A group is the repeats of one configuration on one host (bench.core.resultset.group_repeats);
each repeat is one of the seed's 3 seeds, a cell of its own. Values per repeat are a dict
repeat -> value, what bench.core.stats takes. A cell's ok rows, per phase (protocol.py):

    trial      one per Optuna trial (variant optuna), numbered by `trial` (search.py)
    search     one: the search's pick, its budget, its distance from chance
    epoch      one per training epoch, numbered by `epoch`
    inference  one per deployment form, placed by FORMS (inference.forms_for's order)

Every selection below orders them by their own number (or form), never by where they stand in
the file (rows sharing one are put in one order whatever the file's), and every figure is a
median, a max, a sum or the highest-numbered row's: a cell's rows in any order read the same
figures (tests/test_cifar_opt_readout.py).

    rows(src, phase, part)         the ok rows of PHASE (of row backend PART), in their own order
    per_repeat(group, ...)         repeat -> a figure of one row key (median, max, final)
    training(g) / batches(g)       the training table's figures (Training; Figs. 1-3 as numbers)
    inference(g, form) / forms(g)  the inference table's figures per deployment form (Inference;
                                   Fig. 4)
    ratio(a, b)                    A / B over repeats with its interval (the same-host ratios)
    cross_ratios(gg, cg, ...)      GPU over CPU: training img/s and batch-1 latency
    bar(g, what, form)             one bar of the seed's Figs. 1-4 (values over seeds, scaled)
    search(c)                      an Optuna search's budget, distance from chance, trials, pick
                                   (Search)
    sizes(g)                       what a configuration ran: images, epochs, latency calls
    seed_epoch_s ... int8_speedup  the claims' per-repeat metrics (bench.core.claims.Metric)
    throughput / latencies / accuracy / loss_curve / epoch_images / int8_sizes /
    latency_percentiles / progress_line / NEEDS
                                   the Study hooks (compare, verify, speed baselines, invariants,
                                   the live progress line, check_rows)
    platform / param / model / label / where / run_labels / real_data / n_train
                                   what a table row and a figure's bar are named by
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.core import stats
from bench.core.claims import Metric, quality
from bench.core.resultset import ResultCell as Cell
from bench.core.study import curve as _xy_curve
from bench.core.tables import finite, num, nums, quotient, real
from bench.core.text import short

SEED_N_TRAIN = 5000  # the seed's training subsample (images per epoch)
PLATFORM = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}
GPU_PLATFORMS = ("cuda", "mps")
SEED_NAMES = {
    ("cpu", "default"): "CPU Default",
    ("cpu", "quant-dynamic"): "CPU Quantized: the seed's dynamic (Linear only)",
    ("cpu", "optuna"): "CPU Tuned (Optuna)",
    ("cpu", "int8"): "CPU Quantized: int8 PT2E static [kit]",
    ("cpu", "compile"): "CPU compile [kit]",
    ("cuda", "default"): "GPU Default",
    ("cuda", "amp"): "GPU AMP (fp16)",
    ("cuda", "optuna"): "GPU Tuned (Optuna)",
    ("cuda", "tuned"): "GPU tuned: bf16+cl+compile+graphs [kit]",
    ("mps", "default"): "MPS Default",
    ("mps", "optuna"): "MPS Tuned (Optuna)",
}

# ---- the row fields read here (protocol.py, search.py and inference.py write them) ---------------
EPOCH, TRIAL, FORM = "epoch", "trial", "form"  # each phase's own number (an inference row: its form)
EPOCH_S = "epoch_s"  # an epoch's training time (s), evaluation and warm-up apart: the study's timing_key
IMG_S = "samples_per_s"  # training img/s
ACC = "test_acc"  # test accuracy (a fraction): after an epoch, or of a deployment form
LOSS = "train_loss"
N_TRAIN = "n_train"  # images an epoch trained on (this rank's share under DDP)
BATCH = "batch_size"  # the batch the trainer ran (a Tuned cell: its search's pick)
RSS_PEAK, HEAP_PEAK, GPU_PEAK = "rss_peak_mb", "python_heap_peak_mb", "gpu_alloc_peak_mb"
COMPILE_S = "compile_s"  # warm-up/compile before the first timed epoch
P50, P90, P99 = "latency_p50_ms", "latency_p90_ms", "latency_p99_ms"  # batch-1 latency percentiles (ms)
INFER_IMG_S = "infer_samples_per_s"  # batched inference img/s
DROP = "acc_drop_pts"  # test accuracy of the fp32 form the cell trained minus this form's (points)
SIZE = "model_size_mb"
CALLS = "latency_calls"  # batch-1 calls a form's percentiles rest on
# a trial row's figures, and the search row's (search.py)
TRIAL_ACC, TRIAL_EPOCH_S, TRIAL_BATCH, TRIAL_LR = "trial_val_acc", "trial_epoch_s", "trial_batch_size", "trial_lr"
TRIAL_STATE = "trial_state"
# what check_rows holds every ok row of a phase to: a number the report can divide by
NEEDS: dict[str, tuple[str, ...]] = {"epoch": (EPOCH_S, IMG_S), "inference": (P50, SIZE)}
# the deployment forms in the order inference.forms_for makes them on a CPU; a GPU cell has one
# (graph-<dtype> or eager-<dtype>); a form named nowhere here sorts after them, by name
FORMS = ("fp32-eager", "int8-dynamic", "fp32-compiled", "int8-pt2e")
QUANTIZED = {  # variant -> (its int8 form, the fp32 form it came from)
    "int8": ("int8-pt2e", "fp32-compiled"),
    "quant-dynamic": ("int8-dynamic", "fp32-eager"),
}
_NUMBERED = {"epoch": EPOCH, "trial": TRIAL}


# ---- names: what a row of a table and a bar of a figure are called ---------------------------------
def platform(c: Cell) -> str:
    return PLATFORM.get(str(c.first.get("backend")), "?")


def param(c: Cell, key: str, default=None):
    """A parameter of the cell's spec (cell.json), else of its first row, else DEFAULT."""
    v = (c.spec.get("params") or {}).get(key)
    return c.first.get(key, default) if v is None else v


def model(c: Cell) -> str:
    return str(c.first.get("model") or param(c, "model"))


def label(c: Cell) -> str:
    r = c.first
    v = str(r.get("variant"))
    name = SEED_NAMES.get((platform(c), v), f"{platform(c).upper()} {v} [kit]")
    extra = []
    pipe = next((x.get("pipeline") for x in c.rows if x.get("pipeline")), "loader")
    if pipe != "loader":
        extra.append(f"pipeline {pipe}")
    bs = (c.spec.get("params") or {}).get("batch_size")
    if bs and bs != 32 and v != "optuna":
        extra.append(f"batch {bs}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def where(c: Cell) -> str:
    """The run and the device a row is about: a host name alone (every lent machine is "vm") let two
    references' rows of one configuration read the same."""
    host = c.first.get("host")
    run = c.run_label
    return f"{run}{f' ({host})' if host and host != run else ''} · {c.device}"


def real_data(g: list[Cell]) -> bool:
    return all(bool(c.first.get("dataset_real")) for c in g)


def run_labels(g: list[Cell]) -> set[str]:
    return {c.run_label for c in g}


# ---- the rows ----------------------------------------------------------------------------------
def form_place(form: Any) -> tuple:
    """The sort key of a deployment form: its place in FORMS, else after them by name."""
    f = str(form)
    return (FORMS.index(f) if f in FORMS else len(FORMS), f)


def _place(phase: str) -> Callable[[dict], tuple]:
    """The sort key of PHASE's rows: their own number (none last), an inference row its form."""
    if phase == "inference":
        return lambda r: form_place(r.get(FORM))
    key = _NUMBERED.get(phase)
    if key is None:
        return lambda r: ()

    def number(r: dict) -> tuple:
        n = num(r, key)
        return (n is None, n or 0)

    return number


def _whole(r: dict) -> str:
    """A row as one text (its keys sorted): the order of rows that share their own number."""
    return json.dumps(r, sort_keys=True, default=str)


def rows(src: Cell | Iterable[dict], phase: str, part: str | None = None) -> list[dict]:
    """The ok rows of PHASE (of row backend PART where given) of a cell or of a cell's rows,
    ordered by their own number (epoch, trial; an inference row by its form's place in FORMS),
    rows sharing one by their whole text: one order whatever the file's."""
    rs = src.rows if isinstance(src, Cell) else src
    got = [
        r
        for r in rs
        if isinstance(r, dict)
        and r.get("phase") == phase
        and r.get("status") == "ok"
        and (part is None or str(r.get("backend")) == part)
    ]
    place = _place(phase)
    keys = [place(r) for r in got]
    if len(set(keys)) < len(keys):  # two rows at one place: their text decides, not the file
        return sorted(got, key=lambda r: (place(r), _whole(r)))
    return sorted(got, key=place)


def _float(r: dict, key: str) -> float | None:
    """The number at KEY of row R (bench.core.tables.num) as a float, else None."""
    v = num(r, key)
    return None if v is None else float(v)


def _nums(rs: Iterable[dict], key: str) -> list[float]:
    """The numbers at KEY over RS (bench.core.tables.nums), as floats, in RS's order."""
    return [float(v) for v in nums(rs, key)]


def final(vals: list[float]) -> float:
    """per_repeat's AGG for the figure of the highest-numbered row (the last epoch's accuracy;
    at one epoch twice the larger: bench.core.study.last's rule). Given the values alone (rows in
    their own order): the last."""
    return float(vals[-1])


def _figure(rs: Iterable[dict], phase: str, key: str, agg: Callable, form: str | None = None) -> float | None:
    """AGG of KEY over PHASE's rows of one repeat (of FORM), None where none has a number. AGG
    `final`: KEY of the row with the highest own number (rows without one left out); any other
    AGG takes the values in their rows' own order."""
    sel = [r for r in rows(rs, phase) if form is None or r.get(FORM) == form]
    numbered = _NUMBERED.get(phase)
    if agg is final and numbered:
        got = [(n, float(v)) for r in sel if (n := num(r, numbered)) is not None and (v := num(r, key)) is not None]
        return max(got)[1] if got else None
    vals = _nums(sel, key)
    return float(agg(vals)) if vals else None


def per_repeat(
    group: list[Cell], phase: str, key: str, agg: Callable = statistics.median, form: str | None = None
) -> dict[int, float]:
    """Repeat -> AGG (median, max, final) of KEY over that repeat's PHASE rows (of FORM)."""
    out = {}
    for c in group:
        v = _figure(c.rows, phase, key, agg, form)
        if v is not None:
            out[c.repeat] = v
    return out


def med(d: dict[int, float], scale: float = 1.0) -> float | None:
    """The median over repeats (times SCALE), None where there is none."""
    return statistics.median(d.values()) * scale if d else None


def ci(d: dict[int, float], f: str = "{:.2f}", scale: float = 1.0) -> str:
    """The median over repeats with its interval, as text ('' where none)."""
    if not d:
        return ""
    s = stats.summarize([v * scale for v in d.values()])
    return f"{f.format(s.median)} [{s.interval(f)}]" if s.lo is not None else f.format(s.median)


def ratio_text(r: stats.Summary) -> str:
    """'12.3x [11–13.4]' (a 95% CI), '12.3x [11–13.4, range of 3]', or '12.3x (one seed: no interval)': the
    headline's number format (`short`), so one comparison prints one figure wherever it appears."""
    if r.lo is None or r.hi is None:
        return f"{short(r.median)}x (one seed: no interval)"
    return f"{short(r.median)}x{r.bracket(short)}"


def n_train(g: list[Cell]) -> int | None:
    """Images a training epoch of the group saw (the rows' n_train: this rank's share under DDP)."""
    vals = [int(v) for c in g for r in rows(c, "epoch") if (v := num(r, N_TRAIN)) is not None and v == int(v) and v >= 0]
    return max(vals) if vals else None


# ---- the training table (the seed's Figs. 1-3 as numbers) ------------------------------------------
PerRepeat = dict[int, float]  # repeat -> one figure of that repeat


@dataclass(frozen=True)
class Training:
    """A configuration's training figures, per repeat."""

    epoch_s: PerRepeat  # median epoch time (s)
    img_s: PerRepeat  # median img/s
    acc: PerRepeat  # the final test accuracy (a fraction)
    rss: PerRepeat  # peak process RSS over the epochs (MB)
    heap: PerRepeat  # peak tracemalloc (MB)
    gpu: PerRepeat  # peak GPU allocator (MB)
    compile_s: PerRepeat  # warm-up/compile (s)


def training(g: list[Cell]) -> Training:
    """Per repeat: median epoch time and img/s, the final test accuracy, the peaks over the epochs
    (process RSS, tracemalloc, GPU allocator) and the warm-up/compile time."""
    return Training(
        per_repeat(g, "epoch", EPOCH_S),
        per_repeat(g, "epoch", IMG_S),
        per_repeat(g, "epoch", ACC, final),
        per_repeat(g, "epoch", RSS_PEAK, max),
        per_repeat(g, "epoch", HEAP_PEAK, max),
        per_repeat(g, "epoch", GPU_PEAK, max),
        per_repeat(g, "epoch", COMPILE_S, max),
    )


def batches(g: list[Cell]) -> list[Any]:
    """The batch each repeat trained at (its first epoch's), as the rows give it."""
    return [ep[0].get(BATCH) for c in g if (ep := rows(c, "epoch"))]


# ---- the inference table (the seed's Fig. 4 as numbers) --------------------------------------------
@dataclass(frozen=True)
class Inference:
    """A deployment form's figures, per repeat (the median over the form's rows of a repeat)."""

    p50: PerRepeat  # batch-1 latency percentiles (ms)
    p90: PerRepeat
    p99: PerRepeat
    thr: PerRepeat  # batched img/s
    acc: PerRepeat  # test accuracy (a fraction)
    drop: PerRepeat  # accuracy drop from the fp32 form (points)
    size: PerRepeat  # model size (MB)
    calls: PerRepeat  # batch-1 calls the percentiles rest on


def forms(g: list[Cell]) -> list[str]:
    """The deployment forms any repeat measured, in FORMS order."""
    seen = {str(r[FORM]) for c in g for r in rows(c, "inference") if isinstance(r.get(FORM), str)}
    return sorted(seen, key=form_place)


def inference(g: list[Cell], form: str) -> Inference:
    """FORM's figures per repeat."""
    return Inference(
        *(per_repeat(g, "inference", key, form=form) for key in (P50, P90, P99, INFER_IMG_S, ACC, DROP, SIZE, CALLS))
    )


# ---- ratios over repeats -----------------------------------------------------------------------
def ratio(a: dict[int, float], b: dict[int, float]) -> stats.Summary | None:
    """A / B over repeats with its interval (below 1: A is the smaller), of what was measured (A at
    or above 0, B above 0); None where a side has none or the ratio is past arithmetic's reach."""
    a, b = {k: v for k, v in a.items() if v >= 0}, {k: v for k, v in b.items() if v > 0}
    if not a or not b:
        return None
    return finite(stats.ratio(a, b))


def cross_ratios(
    gg: list[Cell], cg: list[Cell], gpu_form: str, cpu_form: str, paired: bool | None
) -> tuple[stats.Summary | None, stats.Summary | None]:
    """GPU group GG over CPU group CG, "how many times faster the GPU is": training img/s GPU / CPU
    and batch-1 p50 latency CPU (CPU_FORM) / GPU (GPU_FORM), each None where a side has no figure
    (PAIRED: bench.core.stats.ratio's)."""
    g_img, c_img = per_repeat(gg, "epoch", IMG_S), per_repeat(cg, "epoch", IMG_S)
    tr = stats.ratio(g_img, c_img, paired=paired) if g_img and c_img else None
    g_lat = per_repeat(gg, "inference", P50, form=gpu_form)
    c_lat = per_repeat(cg, "inference", P50, form=cpu_form)
    lt = stats.ratio(c_lat, g_lat, paired=paired) if g_lat and c_lat else None
    return tr, lt


# ---- the seed's Figs. 1-4: one bar per configuration (and form) -----------------------------------
@dataclass(frozen=True)
class Bar:
    values: list[float]  # one per repeat, scaled
    gpu: bool  # the GPU allocator's figure (a GPU cell's memory), not the process's
    scaled_from: int | None  # the images per epoch an epoch time was scaled from to SEED_N_TRAIN


# what: (phase, key, per-repeat figure, scale, the key GPU cells read instead, scaled to the seed's epoch)
BARS: dict[str, tuple[str, str, Callable, float, str | None, bool]] = {
    "epoch_time": ("epoch", EPOCH_S, statistics.median, 1.0, None, True),  # Fig. 1: per 5,000 images
    "accuracy": ("epoch", ACC, final, 100.0, None, False),  # Fig. 2
    "peak_memory": ("epoch", RSS_PEAK, max, 1.0, GPU_PEAK, False),  # Fig. 3: RSS; the allocator's on a GPU
    "latency": ("inference", P50, statistics.median, 1.0, None, False),  # Fig. 4, per form
}


def bar(g: list[Cell], what: str, form: str | None = None) -> Bar | None:
    """Group G's bar of figure WHAT (BARS; of FORM for Fig. 4): its values over seeds, None where
    it has none."""
    phase, key, agg, scale, gpu_key, per_seed_epoch = BARS[what]
    gpu = bool(gpu_key) and PLATFORM.get(str(g[0].first.get("backend"))) != "cpu"
    factor, scaled = scale, None
    n = n_train(g)
    if per_seed_epoch and n and n != SEED_N_TRAIN:
        factor *= SEED_N_TRAIN / n
        scaled = n
    d = per_repeat(g, phase, gpu_key if gpu and gpu_key else key, agg, form=form)
    return Bar([x * factor for x in d.values()], gpu, scaled) if d else None


# ---- what each side ran --------------------------------------------------------------------------
def sizes(g: list[Cell]) -> tuple[Any, Any, Any, Any]:
    """(training images, test images, epochs, batch-1 latency calls) of the group's first repeat:
    its rows' images per epoch, else its parameters."""
    c = g[0]
    return (n_train(g) or param(c, N_TRAIN), param(c, "n_test"), param(c, "epochs"), param(c, CALLS))


def epoch_images(c: Any) -> int | None:
    """Images in an epoch of cell C: the stratified subsample's training part (its n_train)."""
    n = num(c.spec.get("params") or {}, N_TRAIN)
    return int(n) if n and n > 0 else None


# ---- an Optuna search ------------------------------------------------------------------------------
def _num(v, default=None):
    """V when it is a real, finite number (bench.core.tables.real: the one rule), else DEFAULT:
    the cells are untrusted input."""
    got = real(v)
    return default if got is None else got


@dataclass(frozen=True)
class Point:
    """One trial of a search, as its Pareto plot shows it."""

    epoch_s: float
    acc_pct: float
    on_front: bool
    batch: Any  # the trial's batch (a number), else "?"
    lr: float | None


@dataclass(frozen=True)
class Search:
    """An Optuna search: its budget, how far its best trial got from chance, its trials and pick."""

    trials: Any  # trials asked for
    epochs: Any  # epochs a trial trains
    budget_s: Any  # no trial started after this (0: no limit)
    n_fit: int  # images a trial trains on
    n_val: int  # images it is scored on
    ran: int  # trials with figures
    search_s: Any  # the search's wall time
    best: Any  # the best trial's validation accuracy (a fraction)
    chance: float  # the chance limit (a fraction: config.chance_limit)
    above: Any  # trials above it
    peak_mb: Any  # the search's peak memory: the GPU allocator's, else the process RSS
    peak_what: str
    points: list[Point]  # the trials, in trial order
    front: list[tuple[float, float]]  # the Pareto front: (epoch s, accuracy %) by time
    picked_trial: Any
    picked_batch: Any
    picked_lr: float | None
    objective: Any
    journal: Any


def search(c: Cell) -> Search | None:
    """Cell C's search, None where it has no trial with figures or no pick: its budget and how far
    its best trial got from chance from the pick row (cells made before it said so: from the
    trial rows and the cell's parameters)."""
    from bench.studies.cifar_opt.config import chance_limit

    trials = [r for r in rows(c, "trial") if num(r, TRIAL_ACC) is not None and num(r, TRIAL_EPOCH_S)]
    pick = next(iter(rows(c, "search")), None)
    if not trials or not pick:
        return None
    front = {int(x) for x in str(pick.get("pareto_trials") or "").split(";") if x.strip().isdigit()}
    n_train_ = int(_num(param(c, N_TRAIN), SEED_N_TRAIN))
    frac = float(_num(param(c, "val_fraction"), 0.2))
    n_val = int(_num(pick.get("search_val_images"), 10 * max(1, round(frac * (n_train_ // 10)))))
    accs = [float(r[TRIAL_ACC]) for r in trials]
    chance = float(_num(pick.get("chance_val_acc"), chance_limit(n_val)))
    points = [
        Point(r[TRIAL_EPOCH_S], r[TRIAL_ACC] * 100, num(r, TRIAL) in front, _num(r.get(TRIAL_BATCH), "?"), num(r, TRIAL_LR))
        for r in trials
    ]
    gpu_peak = _num(pick.get("search_gpu_alloc_peak_mb"))
    return Search(
        trials=_num(pick.get("search_trials"), _num(param(c, "trials"))),
        epochs=_num(pick.get("search_trial_epochs"), _num(param(c, "trial_epochs"), 1)),
        budget_s=_num(pick.get("search_budget_s"), _num(param(c, "trial_budget_s"), 0.0)),
        n_fit=int(_num(pick.get("search_train_images"), n_train_ - n_val)),
        n_val=n_val,
        ran=len(trials),
        search_s=_num(pick.get("search_s")),
        best=_num(pick.get("best_val_acc"), max(accs) if accs else None),
        chance=chance,
        above=_num(pick.get("trials_above_chance"), sum(a > chance for a in accs)),
        peak_mb=gpu_peak or _num(pick.get("search_rss_peak_mb")),
        peak_what="GPU allocator" if gpu_peak else "process RSS",
        points=points,
        front=sorted((p.epoch_s, p.acc_pct) for p in points if p.on_front),
        picked_trial=pick.get("picked_trial"),
        picked_batch=pick.get("batch_size_picked"),
        picked_lr=num(pick, "lr_picked"),
        objective=pick.get("objective"),
        journal=pick.get("journal"),
    )


def training_seed(c: Cell) -> Any:
    """The seed cell C trained with: its rows' seed plus its repeat (Settings.seed)."""
    return _num(c.first.get("seed"), 0) + c.repeat


# ---- the claims' per-repeat figures, from one cell's rows (bench.core.claims.Metric) -----------------
def _epoch_max(rs: list[dict], part: str, key: str) -> float | None:
    v = _nums(rows(rs, "epoch", part), key)
    return max(v) if v else None


def seed_epoch_s(rs: list[dict], part: str) -> float | None:
    """Median epoch time per SEED_N_TRAIN images (an epoch of N images scaled by SEED_N_TRAIN / N)."""
    v = []
    for r in rows(rs, "epoch", part):
        s, n = num(r, EPOCH_S), num(r, N_TRAIN)
        s = None if s is None else float(s)
        if s is not None and (n is None or n >= 1):  # an image count below 1 counts nothing to scale by
            v.append(s * SEED_N_TRAIN / n if n else s)
    return statistics.median(v) if v else None


@quality
def final_acc_pct(rs: list[dict], part: str) -> float | None:
    """The test accuracy of the highest epoch (%)."""
    v = _figure(rows(rs, "epoch", part), "epoch", ACC, final)
    return None if v is None else 100 * v


def peak_rss_mb(rs: list[dict], part: str) -> float | None:
    return _epoch_max(rs, part, RSS_PEAK)


def heap_mb(rs: list[dict], part: str) -> float | None:
    return _epoch_max(rs, part, HEAP_PEAK)


def gpu_alloc_mb(rs: list[dict], part: str) -> float | None:
    return _epoch_max(rs, part, GPU_PEAK)


def _form_figure(rs: list[dict], part: str | None, form: str, key: str) -> float | None:
    """KEY of FORM's inference row (the median, should a cell hold the form twice)."""
    v = _nums((r for r in rows(rs, "inference", part) if str(r.get(FORM)) == form), key)
    return statistics.median(v) if v else None


def _form_names(rs: list[dict], part: str | None) -> list[str]:
    return sorted({str(r.get(FORM)) for r in rows(rs, "inference", part)}, key=form_place)


def _p50s(rs: list[dict], part: str) -> list[float]:
    return [v for f in _form_names(rs, part) if (v := _form_figure(rs, part, f, P50)) is not None]


def eager_ms(rs: list[dict], part: str) -> float | None:
    """Batch-1 p50 of the cell's eager form (fp32-eager on a CPU, eager-fp32 or eager-fp16 on a GPU)."""
    return next((_form_figure(rs, part, f, P50) for f in _form_names(rs, part) if "eager" in f), None)


def slowest_ms(rs: list[dict], part: str) -> float | None:
    v = _p50s(rs, part)
    return max(v) if v else None


def fastest_ms(rs: list[dict], part: str) -> float | None:
    v = _p50s(rs, part)
    return min(v) if v else None


def _quant_forms(rs: list[dict], part: str) -> tuple[str, str] | None:
    """(int8 form, fp32 form) of a Quantized cell, else None."""
    have = set(_form_names(rs, part))
    return next((p for p in QUANTIZED.values() if p[0] in have and p[1] in have), None)


def int8_drop_pts(rs: list[dict], part: str) -> float | None:
    """Test accuracy of the fp32 form minus the int8 form's, in points (one trained model, one test set)."""
    got = _quant_forms(rs, part)
    return _form_figure(rs, part, got[0], DROP) if got else None


def int8_size_mb(rs: list[dict], part: str) -> float | None:
    got = _quant_forms(rs, part)
    return _form_figure(rs, part, got[0], SIZE) if got else None


def int8_size_ratio(rs: list[dict], part: str) -> float | None:
    got = _quant_forms(rs, part)
    a, b = (_form_figure(rs, part, got[0], SIZE), _form_figure(rs, part, got[1], SIZE)) if got else (None, None)
    return quotient(a, b) if a and b else None


def int8_speedup(rs: list[dict], part: str) -> float | None:
    """The fp32 form's batch-1 p50 over the int8 form's (above 1: int8 answers sooner)."""
    got = _quant_forms(rs, part)
    a, b = (_form_figure(rs, part, got[0], P50), _form_figure(rs, part, got[1], P50)) if got else (None, None)
    return quotient(b, a) if a and b else None


def quantized(metric: Metric) -> Metric:
    """METRIC on a Quantized cell's rows only (a side {"backend": "torch-cpu"} then matches int8
    and quant-dynamic cells, each a workload of its own)."""

    def only(rs: list[dict], part: str) -> float | None:
        return metric(rs, part) if _quant_forms(rs, part) else None

    return only


# ---- the Study hooks --------------------------------------------------------------------------------
def throughput(rs: list[dict]) -> dict[str, float]:
    """Row backend -> the median training img/s over its epochs (one cell: one repeat)."""
    by: dict[str, list[float]] = {}
    for r in rows(rs, "epoch"):
        if (v := num(r, IMG_S)) is not None:
            by.setdefault(str(r.get("backend")), []).append(float(v))
    return {p: statistics.median(v) for p, v in by.items()}


def latencies(rs: list[dict], part: str) -> dict[str, float]:
    """Form -> PART's batch-1 p50 (ms) where above 0, in FORMS order (the speed baselines)."""
    return {f: v for f in _form_names(rs, part) if (v := _form_figure(rs, part, f, P50)) and v > 0}


def accuracy(rs: list[dict], part: str) -> tuple[str, float] | None:
    """(ACC, PART's test accuracy after its highest epoch)."""
    v = _figure(rows(rs, "epoch", part), "epoch", ACC, final)
    return None if v is None else (ACC, v)


def loss_curve(rs: list[dict], part: str):
    """PART's training loss per epoch (bench.core.study.curve)."""
    return _xy_curve(rows(rs, "epoch", part), EPOCH, LOSS)


def _forms_of(rs: list[dict]) -> dict[str, dict]:
    """Form -> its inference row (any row backend), in FORMS order (at one form twice: the row
    that sorts last)."""
    return {str(r.get(FORM)): r for r in rows(rs, "inference")}


def int8_sizes(rs: list[dict]) -> list[tuple[str, str, float | None, float | None]]:
    """(int8 form, the fp32 form beside it, the int8 size MB, the fp32 size MB) of each int8 form
    the cell measured (fp32-compiled, else fp32-eager, the fp32 form)."""
    fm = _forms_of(rs)
    fp32 = next((f for f in ("fp32-compiled", "fp32-eager") if f in fm), None)
    if fp32 is None:
        return []
    return [(f, fp32, _float(fm[f], SIZE), _float(fm[fp32], SIZE)) for f in ("int8-pt2e", "int8-dynamic") if f in fm]


# A PT2E int8 model whose weights convert_pt2e folded stores its convolutions' and Linear layers'
# weights as int8: about a quarter of the fp32 bytes (0.25x on torch 2.14.1 with torchao 0.18). At or
# above this share they stayed fp32 in the converted model, quantized by ops in its graph (torch 2.10
# with torchao 0.16, the images'; torch 2.11 with torchao 0.18, the H200 host's: 0.998x ResNet-18,
# 0.97x MobileNetV2): the stored size is fp32's, whatever inductor's freezing makes of them when it
# compiles. The seed's quantize_dynamic (Linear only) is not held to it.
PT2E_FOLDED_MAX = 0.5


def unfolded_pt2e(group: list[Cell]) -> float | None:
    """GROUP's median int8-pt2e / fp32 size where at least PT2E_FOLDED_MAX (weights not folded to
    int8), else None."""
    a, b = (per_repeat(group, "inference", SIZE, form=f) for f in ("int8-pt2e", "fp32-compiled"))
    r = ratio(a, b) if a and b else None
    return r.median if r is not None and r.median >= PT2E_FOLDED_MAX else None


def latency_percentiles(rs: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Form -> its batch-1 (p50, p90, p99) ms, the forms with all three."""
    out = {}
    for f, r in _forms_of(rs).items():
        p50, p90, p99 = _float(r, P50), _float(r, P90), _float(r, P99)
        if p50 is not None and p90 is not None and p99 is not None:
            out[f] = (p50, p90, p99)
    return out


def progress_line(rs: list[dict]) -> str:
    """A few words on one step's rows as they were written, for the live progress line: a trial,
    an epoch, or each form's p50."""
    r = rs[0] if rs else {}
    if r.get("phase") == "trial":
        acc = r.get(TRIAL_ACC)
        return f"trial {r.get(TRIAL)}: {r.get(TRIAL_STATE)} b{r.get(TRIAL_BATCH)} lr {r.get(TRIAL_LR) or 0:.2g}" + (
            f" val acc {acc:.3f}" if isinstance(acc, float) else ""
        )
    if r.get("phase") == "epoch":
        acc = r.get(ACC)
        return f"epoch {r[EPOCH]}: {r[EPOCH_S]:.2f} s {r[IMG_S]:,.0f} img/s" + (
            f" acc {acc:.3f}" if isinstance(acc, float) else ""
        )
    return "  ".join(f"{x.get(FORM)} p50 {x.get(P50, 0):.3f} ms" for x in rs if x.get("phase") == "inference")
