"""What profile's report, many-GPU section, claims and Study hooks read from result cells: the one
place its rows become numbers (host side: standard library only; every value checked before use
through bench.core.tables' real/num/quotient, intervals through bench.core.stats, as result dirs
come from other hosts).

A cell is one repeat (a fresh process) of one configuration. Its ok rows: one per timed epoch
(phase `epoch`, numbered by its `epoch` field), then one `overhead` row (the sampler's cost) and
one `profile` row (the profiled steps) where the cell ran in one process; beside them its
profile.json (operator tables, step breakdown), system.json (idle baseline, telemetry GPUs,
cores, interconnect) and telemetry.csv (the sampler's series). Every selection below orders the
epoch rows by their own number, never by where they stand in the file, so a cell's rows in any
order read the same figures (tests/test_profile_readout.py).

    rows(c, phase) / epochs(c) / epoch_rows(rs, part) / one_row(c, phase)
                        the ok rows of a phase (epochs by number), the cell's one overhead or
                        profile row
    num, med, label, gpus, param, profile_doc, is_backend, logical_cores, gpu_count
                        values checked, medians over epochs, the cell's parameters
    projection(c) / seed_hours(ep)
                        the cell's time per image projected to the seed's 20 epochs x 8,005
                        images (a projection, labelled so wherever shown)
    energy(c) / energy_per_image(rs, part)
                        per epoch, the GPU's and the CPU's energy, each on its own with its reason
    cpu_gpu_pairs / cpu_vs_gpu(cpu, gpu)
                        the CPU cells and the GPU cells they compare with; the time and energy
                        ratios of a pair
    training(c) / telemetry(c) / share_of_cores / measuring_cost(c) / breakdown(c) / ips(c) /
    summary_figures(c)  the report's per-cell tables: training time (the last epoch: the highest
                        number), telemetry medians, what measuring costs (sampler, profiler), the
                        step-time breakdown, throughput; the matrix's end lines
    op_level / op_rows / op_chart
                        the operator and kernel tables of profile.json (one level each)
    series(c) / process_share
                        the telemetry time series (telemetry.csv)
    gpu_median / step_ms / breakdown_figure / busbw / images_a_step / over_repeats /
    median_over / paired / efficiency / ratio_of
                        the many-GPU section's figures (multigpu.py): per repeat, over repeats,
                        scaling efficiency = (N-GPU / 1-GPU) / N paired by repeat
    of / seed_runs_per_hour / eval_img_per_s / final_acc_pct / gpu / gpu0_over_gpu1 /
    gpu_mem_total_mb / profile_pct / copy_over_kernels
                        the claims' metrics (claims.py declares the claims)
    throughput / accuracy / loss_curve / energy_below_zero / one_process / sampler_cost_measured /
    traces / progress / NEEDS
                        the Study hooks (compare, verify, invariants, the live line, check_rows)
"""

from __future__ import annotations

import csv
import io
import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.core import bounded
from bench.core.claims import Metric, quality
from bench.core.errors import KitError
from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import json_file
from bench.core.stats import Summary, ratio, summarize
from bench.core.study import curve, last, number
from bench.core.tables import quotient, real
from bench.measure import energy as E
from bench.studies.profile.config import SEED_EPOCHS, SEED_TRAIN_IMAGES

PLATFORM = {"torch-cpu": "CPU", "torch-cuda": "GPU"}
SEED_IMAGE_SIZE = 224  # px: the only size a projection to the seed's run is made at
NO_RAPL = "not available (no RAPL)"
GPU_SOURCES = (  # how a window's GPU energy was read (TelemetrySampler._gpu_summary), in a few words
    ("counter", "NVML energy counter"),
    ("trapezoid", "integral of NVML power samples"),
    ("mean of", "NVML mean power x window (no reading after the window's end)"),
)

# ---- the row fields read here (protocol.py writes them) -------------------------------------------
EPOCH_PHASE, OVERHEAD_PHASE, PROFILE_PHASE = "epoch", "overhead", "profile"
EPOCH = "epoch"  # an epoch row's own number
EPOCH_S, IPS, SAMPLES, STEPS = "epoch_s", "samples_per_s", "samples", "steps"  # the timed epoch (training only)
FIRST_BATCH = "first_batch_s"  # the loader's start within the epoch
TEST_ACC, TRAIN_LOSS, N_TEST, EVAL_S, WARMUP = "test_acc", "train_loss", "n_test", "eval_s", "warmup_s"
J_PER_IMG, ENERGY_NET = "j_per_img", "energy_net_j"  # the cell's own device's net energy
CPU_SYSTEM, CPU_PROCESS, CPU_MHZ = "cpu_system_pct_mean", "cpu_process_pct_mean", "cpu_mhz_median"
RSS_MAX, THREADS_MAX, PROCESSES_MAX, TELEMETRY_HZ = "rss_mb_max", "threads_max", "processes_system_max", "telemetry_hz"
# per GPU i, the row's gpu<i>_<suffix>
# GPU_MEM is the cell's own memory on GPU i (own_gpu_mem): never NVML's mem_used_mb_max, which counts
# every process on the GPU (the other cells of an interleaved round wait there, alive, holding theirs)
GPU_UTIL, GPU_MEM_UTIL, GPU_MEM = "util_pct_mean", "mem_util_pct_mean", "mem_own_mb_max"
# NVML's memory in use on GPU i, every process (what nvidia-smi shows): only the seed's own readings,
# which were nvidia-smi's, are judged on it (a cell alone on its GPU reads its own there)
GPU_MEM_IN_USE = "mem_used_mb_max"
GPU_TEMP, GPU_POWER, GPU_POWER_MAX, GPU_J_PER_IMG = "temp_c_max", "power_w_mean", "power_w_max", "j_per_img"
GPU_KEY = re.compile(r"gpu(\d+)_(?:util_pct_mean|mem_used_mb_max|mem_own_mb_max)")
# torch's peak allocated memory: per GPU position k (multi-GPU cells), else of the cell's one GPU
TORCH_PEAK_POS, TORCH_PEAK_ONE = "gpu{}_alloc_peak_mb_torch", "gpu_alloc_peak_mb"
OWN_MEM_MEANING = (
    "GPU memory is the cell's own: torch's peak allocated memory on that GPU during the epoch "
    "(torch.cuda.max_memory_allocated), not NVML's memory in use, which counts every process on the GPU"
)
# the overhead row: the sampler's cost
SAMPLER_COST, SAMPLER_PAIRS = "sampler_cost", "sampler_cost_pairs"
STEP_ON, STEP_OFF = "step_ms_sampler_on", "step_ms_sampler_off"
# the profile row (and profile.json's breakdown, which it copies)
UNPROFILED_MS, PROFILED_MS, PROFILER_OVERHEAD = "unprofiled_step_ms", "mean_step_ms", "profiler_overhead"
PROFILED_STEPS, TRACES = "profiled_steps", "traces"
LOADING_SHARE, COMPUTE_SHARE = "dataloader_share", "compute_share"  # a CPU step's split
MEMCPY_SHARE, KERNEL_SHARE, IDLE_SHARE = "memcpy_share", "kernel_share", "idle_share"  # a GPU step's
KERNEL_COUNT = "mean_kernel_count"  # CUDA kernels a profiled step (every GPU's)
# profile.json's operator tables
DEVICE_MS, CPU_MS = "self_device_ms", "self_cpu_ms"

# what check_rows holds every ok row of a phase to (a number above 0 where a time or a rate)
NEEDS: dict[str, tuple[str, ...]] = {
    EPOCH_PHASE: (EPOCH_S, IPS, TRAIN_LOSS),
    OVERHEAD_PHASE: (SAMPLER_COST, STEP_ON, STEP_OFF),
    PROFILE_PHASE: (PROFILED_MS,),
}


# ---- the rows --------------------------------------------------------------------------------
def num(v: Any) -> float | None:
    """V where it is a real, finite number (bench.core.tables.real: the one rule), else None."""
    return real(v)


def _get(r: Any, key: str) -> float | None:
    """R's KEY where a number (as written: an int stays an int), else None."""
    return num(r.get(key)) if isinstance(r, dict) else None


def _float(r: Any, key: str) -> float | None:
    """R's KEY as a float where a number (bench.core.study.number), else None."""
    return number(r.get(key)) if isinstance(r, dict) else None


def own_gpu_mem(r: dict) -> dict:
    """Epoch row R with gpu<i>_mem_own_mb_max: the cell's own peak memory on each GPU it names, from
    torch's allocator (per GPU position where the row has them, else the one GPU's figure). A row that
    already carries the key keeps it; a row without torch's figures gets none (never NVML's
    device-wide reading: an interleaved round keeps its other cells alive on the same GPU)."""
    ids = _gpu_ids([r])
    if not ids and r.get("backend") == "torch-cuda":  # one GPU and no NVML: CUDA's device 0
        ids = ["0"]
    add: dict[str, float] = {}
    for pos, i in enumerate(ids):
        key = f"gpu{i}_{GPU_MEM}"
        if _float(r, key) is not None:
            continue
        v = _float(r, TORCH_PEAK_POS.format(pos))
        if v is None and len(ids) == 1:
            v = _float(r, TORCH_PEAK_ONE)
        if v is not None:
            add[key] = v
    return {**r, **add} if add else r


def _by_epoch(rs: Iterable[dict]) -> list[dict]:
    """RS ordered by their epoch number (none last; stable where two share one), each with the
    cell's own GPU memory (own_gpu_mem): every reader of epoch rows comes through here."""

    def key(r: dict) -> tuple:
        e = _get(r, EPOCH)
        return (e is None, e or 0)

    return sorted((own_gpu_mem(r) for r in rs), key=key)


def rows(c: Cell, phase: str) -> list[dict]:
    """Cell C's ok rows of PHASE; epoch rows ordered by their epoch number, never file order."""
    got = [r for r in c.rows if isinstance(r, dict) and r.get("phase") == phase and r.get("status") == "ok"]
    return _by_epoch(got) if phase == EPOCH_PHASE else got


def epochs(c: Cell) -> list[dict]:
    """Cell C's timed epochs, by epoch number."""
    return rows(c, EPOCH_PHASE)


def one_row(c: Cell, phase: str) -> dict:
    """Cell C's one ok row of PHASE (overhead, profile: a cell writes one), {} where none."""
    return next(iter(rows(c, phase)), {})


def epoch_rows(rs: Iterable[dict], part: str | None = None) -> list[dict]:
    """The ok epoch rows among RS (of row backend PART where given), by epoch number."""
    return _by_epoch(
        r
        for r in rs
        if isinstance(r, dict)
        and r.get("phase") == EPOCH_PHASE
        and r.get("status") == "ok"
        and (part is None or str(r.get("backend")) == part)
    )


def med(rs: list[dict], key: str) -> float | None:
    """The median of KEY over RS where a number."""
    vals = [v for v in (_get(r, key) for r in rs) if v is not None]
    return statistics.median(vals) if vals else None


def label(c: Cell) -> str:
    r = c.first
    par = r.get("parallel") or "none"
    return (
        f"{PLATFORM.get(str(r.get('backend')), '?')} {r.get('variant')}, {r.get('pipeline')}, b{r.get('batch_size')}"
        + (f", {par} x{r.get('world_size')}" if par != "none" else "")
        + (", cudnn.benchmark off" if r.get("cudnn_benchmark") is False else "")
    )


def gpus(c: Cell) -> list[int]:
    got = (c.system.get("telemetry") or {}).get("gpus") if isinstance(c.system.get("telemetry"), dict) else None
    return [g for g in got if isinstance(g, int) and not isinstance(g, bool)] if isinstance(got, list) else []


def param(c: Cell, key: str) -> Any:
    """A cell parameter: cell.json's (the spec), else what its first row says."""
    p = c.spec.get("params")
    return p[key] if isinstance(p, dict) and key in p else c.first.get(key)


def profile_doc(c: Cell) -> dict:
    """The cell's profile.json (operator tables, breakdown), {} where missing or unreadable."""
    return json_file(c.dir / "profile.json")


def is_backend(c: Cell, backend: str) -> bool:
    return c.first.get("backend") == backend


def logical_cores(c: Cell) -> int | None:
    n = num(c.system.get("cpu_logical_cores"))
    return int(n) if n is not None and 1 <= n <= 1 << 16 else None


def gpu_count(c: Cell) -> int:
    """The devices cell C trained on (its world_size; 1 where it names none)."""
    n = _get(c.first, "world_size")
    return int(n) if n and n >= 1 else 1


def images_a_step(c: Cell) -> float | None:
    """The images one step of cell C trains, over every device (its global batch)."""
    return _get(c.first, "global_batch")


# ---- the projection to the seed's run ---------------------------------------------------------
def _per_image(ep: list[dict]) -> tuple[list[float], list[float]]:
    """(seconds per image after the loader's start, the loader's start) of each timed epoch in EP
    that has both a time and an image count; a start only where every epoch measured one."""
    per_img, starts = [], []
    for r in ep:
        e, n = _get(r, EPOCH_S), _get(r, SAMPLES)
        if not e or not n or e <= 0 or n < 1:  # a count of images is at least one
            continue
        f = _get(r, FIRST_BATCH)
        if f is not None and 0 <= f < e:
            per_img.append((e - f) / n)
            starts.append(f)
        else:
            per_img.append(e / n)
    return per_img, starts if len(starts) == len(per_img) else []


def _seed_epoch_s(per_img: list[float], starts: list[float]) -> float:
    return (statistics.median(starts) if starts else 0.0) + SEED_TRAIN_IMAGES * statistics.median(per_img)


def seed_hours(ep: list[dict]) -> float | None:
    """The seed's 20 epochs x 8,005 images in hours, projected from the timed epoch rows EP (one
    repeat's): per epoch the loader's start (the median first_batch_s) plus 8,005 x the median
    seconds per image after it; training only. None without a timed epoch."""
    per_img, starts = _per_image(ep)
    return SEED_EPOCHS * _seed_epoch_s(per_img, starts) / 3600 if per_img else None


def projection(c: Cell) -> dict | None:
    """The seed's 20 epochs x 8,005 training images, projected from the cell's timed epochs as
    seed_hours does, with how it was measured. None without a timed epoch. `seed_protocol` is
    False away from 224 px: then not comparable."""
    ep = epochs(c)
    per_img, starts = _per_image(ep)
    if not per_img:
        return None
    epoch_s = _seed_epoch_s(per_img, starts)
    steps = med(ep, STEPS)
    max_steps = num(param(c, "max_steps"))
    size = num(param(c, "image_size"))
    reduced = bool(max_steps and steps is not None and steps >= max_steps)  # the cap cut the epoch short
    how = f"{steps:.0f} steps x {len(per_img)} epochs" if steps is not None else f"{len(per_img)} epochs"
    return {
        "t_img_s": statistics.median(per_img),
        "start_s": statistics.median(starts) if starts else None,
        "epoch_s": epoch_s,
        "hours": SEED_EPOCHS * epoch_s / 3600,
        "reduced": reduced,
        "protocol": f"reduced: {how} (max_steps {max_steps:.0f})" if reduced and max_steps else f"whole split: {how}",
        "start_note": "loader start measured" if starts else "loader start spread over the measured steps",
        "image_size": size,
        "seed_protocol": size == SEED_IMAGE_SIZE,
    }


# ---- energy ------------------------------------------------------------------------------------
def _window_energy(r: dict, g: list[int]) -> dict:
    """The sampler's summary as an epoch row kept it, a GPU's energy recovered where the row has
    none but has its window's power samples: their mean x the window (rows made before
    TelemetrySampler.settle() ended a window with no reading after it, and the sampler's own
    fallback now)."""
    s: dict[str, Any] = {
        "window_s": _get(r, "telemetry_window_s"),
        "cpu_energy_j": _get(r, "cpu_energy_j"),
        "cpu_energy_note": r.get("cpu_energy_note"),
    }
    for i in g:
        e, src = _get(r, f"gpu{i}_energy_j"), r.get(f"gpu{i}_energy_source")
        pw, n, w = _get(r, f"gpu{i}_{GPU_POWER}"), _get(r, "telemetry_samples"), s["window_s"]
        if e is None and pw is not None and w:
            e = pw * w
            src = f"mean of the window's {n or 0:.0f} power samples x its {w:.2f} s (no reading after its end)"
        s[f"gpu{i}_energy_j"], s[f"gpu{i}_energy_source"] = e, src
    return s


def energy(c: Cell) -> dict:
    """Per epoch (medians), each source on its own: {'gpu': {...}, 'cpu': {...}}, each with
    gross J, net J (idle baseline subtracted), J/img, the source or the reason it is missing."""
    from bench.studies.profile.protocol import energy_fields

    g = gpus(c)
    got = c.system.get("idle_baseline")
    idle: dict = got if isinstance(got, dict) else {}
    per: list[dict] = []
    srcs: list[str] = []
    limit = E.power_limit_w(c.system)
    short: list[str] = []
    withheld: list[E.RowEnergy] = []  # the epochs whose GPU J / image is no figure, with why
    for r in epochs(c):
        s = _window_energy(r, g)
        n = _get(r, SAMPLES) or 0
        n = n if n >= 1 else 0  # a count of images is at least one: none divides nothing
        f = energy_fields(s, idle, g, int(n))
        f["cpu_j_per_img"] = f["cpu_energy_net_j"] / n if f["cpu_energy_net_j"] and n and f["cpu_energy_net_j"] > 0 else None
        f["gpu_j_per_img"] = f["gpu_energy_net_j"] / n if f["gpu_energy_net_j"] and n and f["gpu_energy_net_j"] > 0 else None
        # the one rule for a window's energy (bench.measure.energy.window_check): no figure from a
        # window under a second or above the boards' power limit, the reason instead
        for side, joules, lim in (
            ("gpu", f["gpu_energy_j"], limit * len(g) if limit and g else None),
            ("cpu", f["cpu_energy_j"], None),
        ):
            why = E.window_check(s["window_s"], joules, lim) if joules is not None else None
            if why:
                f[f"{side}_j_per_img"] = None
                f[f"{side}_energy_j"] = f[f"{side}_energy_net_j"] = None
                short.append(why)
                withheld += [E.RowEnergy(None, why, window_s=_get(s, "window_s"), carried=True)] if side == "gpu" else []
        epoch_srcs = [str(s.get(f"gpu{i}_energy_source") or "") for i in g]
        polled = [x for x in epoch_srcs if x and not x.startswith("counter")]
        if polled and f["gpu_j_per_img"] is not None:  # energy per image only from the counter (E.row_energy)
            how = next((name for start, name in GPU_SOURCES if polled[0].startswith(start)), polled[0][:80])
            f["gpu_j_per_img"] = None
            withheld.append(E.RowEnergy(None, f"not from the energy counter ({how}): polled power under-counts a burst"))
        per.append(f)
        srcs += epoch_srcs
    kinds: dict[str, int] = {}
    for x in srcs:
        if x and not x.startswith("none"):
            k = next((name for start, name in GPU_SOURCES if x.startswith(start)), x)
            kinds[k] = kinds.get(k, 0) + 1
    gsrc = [f"{k} ({n} of {len(srcs)} epoch windows)" if len(kinds) > 1 else k for k, n in kinds.items()]
    gnote = next((f["gpu_energy_note"] for f in per if f.get("gpu_energy_note")), None)
    if short and med(per, "gpu_energy_j") is None:
        gnote = f"no figure: {short[0]}" + (f" ({len(short)} windows)" if len(short) > 1 else "")
    cnote = next((f["cpu_energy_note"] for f in per if f.get("cpu_energy_note")), None)
    cpu_j = med(per, "cpu_energy_j")
    return {
        "gpu": {
            "j": med(per, "gpu_energy_j"),
            "net": med(per, "gpu_energy_net_j"),
            "idle_w": med(per, "gpu_idle_w"),
            "jpi": med(per, "gpu_j_per_img"),
            "jpi_note": _withheld_note(withheld, len(per)) if med(per, "gpu_j_per_img") is None else None,
            "source": "; ".join(gsrc) if gsrc else None,
            "note": gnote,
        }
        if g
        else None,
        "cpu": {
            "j": cpu_j,
            "net": med(per, "cpu_energy_net_j"),
            "jpi": med(per, "cpu_j_per_img"),
            "source": "RAPL package counter" if cpu_j is not None else None,
            "note": (NO_RAPL if "no RAPL" in str(cnote) else f"not available: {cnote or 'no reading'}")
            if cpu_j is None
            else None,
        },
    }


def _withheld_note(withheld: list[E.RowEnergy], epochs: int) -> str | None:
    """Why a cell's GPU J / image is no figure: its epochs' reasons in one line (E.why_none: the too-short
    windows as one clause with their lengths); None where no epoch had one."""
    if not withheld:
        return None
    return f"no figure: {E.why_none(withheld)} ({len(withheld)} of {epochs} epoch windows)"


def energy_per_image(rs: list[dict], part: str) -> float | None:
    """The median over PART's timed epochs of the net energy (the cell's own device's, idle
    baseline subtracted) per image trained; None where none was read or it is not above 0."""
    per = [e / n for r in epoch_rows(rs, part) if (e := _float(r, ENERGY_NET)) is not None and (n := _float(r, SAMPLES))]
    return statistics.median(per) if per and statistics.median(per) > 0 else None


# ---- CPU against GPU ----------------------------------------------------------------------------
def cpu_gpu_pairs(cells: list[Cell]) -> list[tuple[Cell, Cell]]:
    """(CPU cell, GPU cell) at the seed's 224 px, the same transfer (the GPU's fp32 variant) and
    global batch, one device each; per CPU cell and GPU model, the GPU's loader cell first (the
    seed's pipeline), else its synthetic-gpu one."""
    out = []

    def key(c: Cell) -> tuple:
        return (c.first.get("variant"), num(c.first.get("global_batch")) or num(c.first.get("batch_size")))

    def one_device(c: Cell) -> bool:
        return (c.first.get("parallel") or "none") == "none" and (num(c.first.get("world_size")) or 1) == 1

    def hours(c: Cell) -> float:
        return (projection(c) or {}).get("hours") or math.inf

    def median_repeat(group: list[Cell]) -> Cell:
        """A configuration's repeats in one run stand as one: the repeat of median projected hours
        (H200-mlp-scratch-profile's three CPU repeats printed three rows of one label: 75.2x, 67.3x, 54.8x)."""
        ranked = sorted(group, key=lambda c: (hours(c), str(c.dir)))
        return ranked[(len(ranked) - 1) // 2]

    def by_config(cs: list[Cell]) -> list[Cell]:
        groups: dict[tuple, list[Cell]] = {}
        for c in cs:
            groups.setdefault((c.run_label, c.device, key(c), c.first.get("pipeline")), []).append(c)
        return [median_repeat(g) for g in groups.values()]

    ran = [c for c in cells if epochs(c) and one_device(c) and num(param(c, "image_size")) == SEED_IMAGE_SIZE]
    gpus = by_config([c for c in ran if is_backend(c, "torch-cuda")])
    for cpu in by_config([c for c in ran if is_backend(c, "torch-cpu")]):
        by_device: dict[str, list[Cell]] = {}
        for g in (c for c in gpus if key(c) == key(cpu)):
            by_device.setdefault(g.device, []).append(g)
        for found in by_device.values():
            # the CPU's own run first (one host, one environment), then the seed's pipeline
            found.sort(key=lambda g: (g.run_label != cpu.run_label, g.first.get("pipeline") != "loader", str(g.dir)))
            out.append((cpu, found[0]))
    return out


def cpu_vs_gpu(cpu: Cell, gpu: Cell) -> dict | None:
    """A CPU/GPU pair's figures: each side's projection, the CPU's and the GPU's energy (energy()),
    CPU hours over GPU hours and CPU J/image over GPU J/image (None where a side lacks one). None
    where a side has no projection or the GPU's is not above 0 hours."""
    a, b = projection(cpu), projection(gpu)
    if not a or not b or b["hours"] <= 0:
        return None
    ea, eb = energy(cpu)["cpu"], (energy(gpu)["gpu"] or {})
    cj, gj = ea.get("jpi"), eb.get("jpi")
    return {
        "cpu": a,
        "gpu": b,
        "cpu_energy": ea,
        "gpu_energy": eb,
        "cpu_j": cj,
        "gpu_j": gj,
        "hours": quotient(a["hours"], b["hours"]),
        "joules": quotient(cj, gj) if cj and gj else None,
    }


# ---- the report's per-cell tables ------------------------------------------------------------------
def ips(c: Cell) -> float | None:
    """Cell C's training throughput: the median img/s over its timed epochs (one repeat's figure)."""
    return med(epochs(c), IPS)


def training(c: Cell) -> dict | None:
    """The training table's figures of cell C (None without a timed epoch): epochs, medians over
    them (steps, epoch s, first batch s, img/s), and the last epoch's (the highest number) test
    accuracy, training loss, warm-up and the weights and image size it ran."""
    ep = epochs(c)
    if not ep:
        return None
    top = ep[-1]  # the highest epoch (epochs(): by number)
    return {
        "weights": top.get("weights"),
        "px": top.get("image_size"),
        "epochs": len(ep),
        "steps_per_epoch": med(ep, STEPS),
        "epoch_time": med(ep, EPOCH_S),
        "first": med(ep, FIRST_BATCH),
        "ips": med(ep, IPS),
        "acc": _get(top, TEST_ACC),
        "loss": _get(top, TRAIN_LOSS),
        "warm": _get(top, WARMUP),
    }


def share_of_cores(pct: float | None, cores: int | None) -> float | str | None:
    """psutil's process % (100 = one core) as a share of every logical CPU (100 = all busy); a
    reading above 100 % x the cores is impossible and said so, never shown as a share."""
    if pct is None or not cores:
        return None
    if pct > 100 * cores * 1.02:  # tick rounding aside
        return f"impossible ({pct:,.0f} % > 100 % x {cores} cores)"
    return min(pct / cores, 100.0)


def telemetry(c: Cell) -> tuple[dict, list[tuple[int | None, dict]]] | None:
    """Cell C's telemetry medians over its timed epochs (None without one): the CPU's (system %,
    the process's share of every core and its cores busy, RSS, threads, processes, samples/s) and
    per GPU it used (None: a CPU cell, one slot) its utilisation, memory, temperature, power and
    the power field the driver gave."""
    ep = epochs(c)
    if not ep:
        return None
    tel = c.system.get("telemetry")
    pf = tel.get("power_fields") if isinstance(tel, dict) else None
    pf = pf if isinstance(pf, dict) else {}
    proc = med(ep, CPU_PROCESS)
    cpu = {
        "cpu": med(ep, CPU_SYSTEM),
        "proc": share_of_cores(proc, logical_cores(c)),
        "cores": proc / 100 if proc is not None else None,
        "rss": med(ep, RSS_MAX),
        "thr": med(ep, THREADS_MAX),
        "procs": med(ep, PROCESSES_MAX),
        "hz": med(ep, TELEMETRY_HZ),
    }
    per: list[tuple[int | None, dict]] = []
    slots: list[int | None] = list(gpus(c)) or [None]
    for i in slots:
        if i is None:
            per.append((None, {"util": None, "memu": None, "mem": None, "temp": None, "pw": None, "pwmax": None, "field": ""}))
            continue
        g = f"gpu{i}_"
        per.append(
            (
                i,
                {
                    "util": med(ep, g + GPU_UTIL),
                    "memu": med(ep, g + GPU_MEM_UTIL),
                    "mem": med(ep, g + GPU_MEM),
                    "temp": med(ep, g + GPU_TEMP),
                    "pw": med(ep, g + GPU_POWER),
                    "pwmax": med(ep, g + GPU_POWER_MAX),
                    "field": pf.get(f"gpu{i}_power_field", ""),
                },
            )
        )
    return cpu, per


def _pairs(r: dict) -> list[float]:
    got = r.get(SAMPLER_PAIRS)
    return [x for x in got if num(x) is not None] if isinstance(got, list) else []


def measuring_cost(c: Cell) -> dict | None:
    """What measuring cost in cell C (None where it has neither an overhead nor a profile row):
    the sampler's (step ms with it on and off, its cost = on / off - 1 and per block pair, its
    Hz) and the profiler's (unprofiled and profiled step ms, profiled / unprofiled - 1)."""
    o, p = one_row(c, OVERHEAD_PHASE), one_row(c, PROFILE_PHASE)
    if not o and not p:
        return None
    return {
        "on": _get(o, STEP_ON),
        "off": _get(o, STEP_OFF),
        "cost": _get(o, SAMPLER_COST),
        "pairs": _pairs(o),
        "hz": _get(o, TELEMETRY_HZ),
        "unprof": _get(p, UNPROFILED_MS),
        "prof": _get(p, PROFILED_MS),
        "overhead": _get(p, PROFILER_OVERHEAD),
    }


def breakdown(c: Cell) -> dict | None:
    """Cell C's step-time breakdown (profile.json's, None where it has none): how it was computed,
    the profiled steps, the unprofiled step ms and the profiler's slowdown (the profile row's),
    and each figure in the breakdown's order: (key, value, 'ms' | 'count' | 'share')."""
    br = profile_doc(c).get("breakdown") or {}
    if not isinstance(br, dict) or not br:
        return None
    p = one_row(c, PROFILE_PHASE)
    figs: list[tuple[str, float, str]] = []
    for k, v in br.items():
        if num(v) is None:
            continue
        if k.startswith("mean_"):
            figs.append((k, v, "count" if k == KERNEL_COUNT else "ms"))
        if k.endswith("_share"):
            figs.append((k, v, "share"))
    return {
        "method": br.get("method"),
        "profiled": br.get("n_steps"),
        "unprof": _get(p, UNPROFILED_MS),
        "overhead": _get(p, PROFILER_OVERHEAD),
        "figures": figs,
    }


def summary_figures(c: Cell) -> dict | None:
    """The matrix's end line of cell C (None without a timed epoch): its img/s and net J/image
    (medians over epochs), the sampler's cost and its per-pair figures."""
    ep = epochs(c)
    if not ep:
        return None
    o = one_row(c, OVERHEAD_PHASE)
    return {"ips": med(ep, IPS), "jpi": med(ep, J_PER_IMG), "cost": _get(o, SAMPLER_COST), "pairs": _pairs(o)}


# ---- profile.json's operator tables -----------------------------------------------------------------
def _annotation(name: str) -> bool:
    """A user annotation (a range, not an operator): ProfilerStep#N, Optimizer.step#Adam.step,
    enumerate(DataLoader)#...; profile.json files made before op_table's levels hold them."""
    return name.startswith("ProfilerStep") or "#" in name


def op_level(prof: dict, level: str, k: int | None = None) -> tuple[list[dict], str]:
    """One level of a cell's profile.json, sorted, and the time key it is sorted by.

    `op`: the CPU-side rows (aten operators, runtime calls; annotations left out) by self device
    time where the cell recorded device time, else by self CPU time; `op-cpu`: the same rows by
    self CPU time; `kernel`: the device-side rows (kernels, memcpy, memset) by self device time.
    An operator's self device time is its kernels' time, so the levels are never mixed."""

    def rows_of(key: str) -> list[dict]:
        got = prof.get(key)
        return [o for o in got if isinstance(o, dict)] if isinstance(got, list) else []

    def cpu_side(o: dict) -> bool:
        return o.get("device_type", "cpu") == "cpu" and not _annotation(str(o.get("name", "")))

    if level == "kernel":
        ops = rows_of("kernels_self_device") or [o for o in rows_of("ops_self_device") if o.get("device_type", "cpu") != "cpu"]
        key = DEVICE_MS
    elif level == "op-cpu":
        ops, key = [o for o in rows_of("ops_self_cpu") if cpu_side(o)], CPU_MS
    else:
        ops = [o for o in rows_of("ops_self_device") if cpu_side(o)]
        key = DEVICE_MS if any(_get(o, DEVICE_MS) for o in ops) else CPU_MS
        if key == CPU_MS:  # a CPU cell: no device time anywhere
            ops = [o for o in rows_of("ops_self_cpu") if cpu_side(o)] or ops
    ops = sorted(ops, key=lambda o: _get(o, key) or 0.0, reverse=True)
    return (ops[:k] if k else ops), key


def op_rows(prof: dict, level: str, k: int) -> list[dict]:
    """The top K operators of LEVEL (op_level) as figures: name, calls, self device ms and its
    share of device time, self CPU ms and its share, device and CPU memory MB; [] where the level
    has no rows or, for the device levels, no device time."""
    ops, key = op_level(prof, level, k)
    if not ops or (level in ("op", "kernel") and key != DEVICE_MS):
        return []
    if level in ("op", "kernel") and not any(_get(o, DEVICE_MS) for o in ops):
        return []
    return [
        {
            "name": str(o.get("name")),
            "n_calls": _get(o, "calls"),
            "device_ms": _get(o, DEVICE_MS),
            "device_share": _get(o, "self_device_share"),
            "cpu_ms": _get(o, CPU_MS),
            "cpu_share": _get(o, "self_cpu_share"),
            "device_mem_mb": _get(o, "device_memory_mb"),
            "cpu_mem_mb": _get(o, "cpu_memory_mb"),
        }
        for o in ops
    ]


def op_chart(prof: dict, k: int) -> tuple[list[str], list[float], str]:
    """The operators' chart (level `op`): names and self times, largest first, and the time's key."""
    ops, key = op_level(prof, "op", k)
    return [str(o.get("name")) for o in ops], [_get(o, key) or 0.0 for o in ops], key


# ---- the telemetry time series (telemetry.csv) ------------------------------------------------------
TELEMETRY_CAPS = bounded.Caps(file_bytes=64 << 20)  # a 20-epoch H100 cell's telemetry.csv: 1.5 MB


def _csv(c: Cell) -> list[dict]:
    """The cell's telemetry.csv as rows ([] where missing, unreadable or over TELEMETRY_CAPS)."""
    p = c.dir / "telemetry.csv"
    if not p.is_file() or p.is_symlink():
        return []
    try:
        with bounded.open_stream(p, TELEMETRY_CAPS) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error, KitError):
        return []


def _column(rs: list[dict], k: str) -> list[float | None]:
    """Column K of telemetry.csv's rows as floats; blank, unreadable and non-finite values None."""
    vals: list[float | None] = []
    for r in rs:
        try:
            v = float(r[k]) if r.get(k) not in (None, "") else None
        except (ValueError, TypeError):
            v = None
        vals.append(v if v is None or v == v and abs(v) != float("inf") else None)
    return vals


@dataclass(frozen=True)
class Series:
    """A cell's telemetry.csv, its columns read as numbers (the sampler's order: by time)."""

    rows: list[dict]

    @property
    def t(self) -> list[float]:
        """Seconds since the sampler started (a blank read as 0)."""
        return [v or 0.0 for v in _column(self.rows, "t_s")]

    def column(self, k: str) -> list[float | None]:
        return _column(self.rows, k)

    def gpu(self, i: int, k: str) -> list[float | None]:
        return _column(self.rows, f"gpu{i}_{k}")


def series(c: Cell) -> Series | None:
    """Cell C's telemetry series, None with fewer than two samples."""
    got = _csv(c)
    return Series(got) if len(got) >= 2 else None


def process_share(proc: list[float | None], cores: int | None) -> tuple[list[float | None], int]:
    """The process's CPU samples (psutil's 100 % = one core) as a share of every core, and how
    many read above 100 % of them (impossible: None); as read where the cores are unknown."""
    if not cores:
        return proc, 0
    share: list[float | None] = []
    impossible = 0
    for v in proc:
        if v is not None and v > 100 * cores * 1.02:
            impossible += 1
            share.append(None)
        else:
            share.append(None if v is None else min(v / cores, 100.0))
    return share, impossible


# ---- the many-GPU section (multigpu.py) ----------------------------------------------------------
def gpu_median(c: Cell, i: int, key: str) -> float | None:
    """gpu<I>_KEY of cell C: the median over its timed epochs."""
    return med(epochs(c), f"gpu{i}_{key}")


def step_ms(c: Cell) -> float | None:
    """A timed epoch's seconds per step, in ms (median over the cell's epochs)."""
    per = [e / n * 1e3 for r in epochs(c) if (e := _get(r, EPOCH_S)) and (n := _get(r, STEPS))]
    return statistics.median(per) if per else None


def breakdown_figure(c: Cell, key: str) -> float | None:
    """KEY of cell C's step-time breakdown (profile.json), None where it has none."""
    br = profile_doc(c).get("breakdown")
    return _get(br, key) if isinstance(br, dict) else None


def busbw(c: Cell) -> float | None:
    """The all-reduce bus bandwidth (GB/s) cell C's ranks measured after their steps (system.json),
    where a plausible figure."""
    ic = c.system.get("interconnect")
    bw = _get(ic, "allreduce_busbw_gb_per_s") if isinstance(ic, dict) else None
    return bw if bw is not None and 0 < bw < 1e6 else None


def median_over(values: Iterable[float]) -> float | None:
    """The median of per-repeat figures, None where there are none."""
    got = list(values)
    return statistics.median(got) if got else None


def over_repeats(per: dict[int, float]) -> Summary:
    """A configuration's figure over its repeats (repeat -> figure): the median with its interval."""
    return summarize(list(per.values()))


def paired(a: dict[int, float], b: dict[int, float]) -> Summary:
    """median(A) / median(B) with its interval, paired by repeat where both ran the same repeats."""
    return ratio(a, b)


def efficiency(ips_n: dict[int, float], ips_one: dict[int, float], n: int) -> Summary:
    """Scaling efficiency over N devices: (N-device img/s / one device's) / N, paired by repeat."""
    return ratio(ips_n, {k: n * v for k, v in ips_one.items()})


def ratio_of(a: float | None, b: float | None) -> float | None:
    """A / B where both are figures and B is not 0 (bench.core.tables.quotient)."""
    return quotient(a, b)


# ---- the claims' metrics (claims.py) --------------------------------------------------------------
def claim_epochs(rs: list[dict], part: str) -> list[dict]:
    """PART's timed epochs as the claims read them (by number); none for one device run as a world
    of one rank under torchrun (the full profile's harness check), not a plain run."""
    ep = epoch_rows(rs, part)
    if ep and (ep[0].get("parallel") or "none") == "none" and str(ep[0].get("devices") or ""):
        return []
    return ep


def of(key: str, agg: Callable[[list[float]], float] = statistics.median, scale: float = 1.0) -> Metric:
    """KEY over the repeat's timed epochs (AGG), x SCALE."""

    def metric(rs: list[dict], part: str) -> float | None:
        vals = [v for r in claim_epochs(rs, part) if (v := _float(r, key)) is not None]
        return scale * agg(vals) if vals else None

    metric.__name__ = f"of_{key}"  # what it reads, for a reader and for the quality check's test
    return quality(metric) if any(w in key for w in ("acc", "loss")) else metric


def seed_runs_per_hour(rs: list[dict], part: str) -> float | None:
    """1 / the seed's 20 epochs x 8,005 images in hours, projected (seed_hours)."""
    h = seed_hours(claim_epochs(rs, part))
    return 1 / h if h else None


def eval_img_per_s(rs: list[dict], part: str) -> float | None:
    """Test images per second of evaluation (batched), the median over the timed epochs."""
    vals = [n / e for r in claim_epochs(rs, part) if (n := _float(r, N_TEST)) and (e := _float(r, EVAL_S))]
    return statistics.median(vals) if vals else None


@quality
def final_acc_pct(rs: list[dict], part: str) -> float | None:
    """The last epoch's test accuracy, %; None where real images trained from random weights. The
    last epoch is the highest number (at one epoch twice, the larger accuracy)."""
    ep = claim_epochs(rs, part)
    if not ep:
        return None
    top = max(_get(r, EPOCH) or 0.0 for r in ep)
    at_top = [r for r in ep if (_get(r, EPOCH) or 0.0) == top]
    last_row = max(at_top, key=lambda r: (_get(r, TEST_ACC) is not None, _get(r, TEST_ACC) or 0.0))
    if last_row.get("dataset_real") is True and last_row.get("weights") != "imagenet":
        return None
    acc = _get(last_row, TEST_ACC)
    return 100 * acc if acc is not None else None


def _gpu_ids(ep: list[dict]) -> list[str]:
    named = [d.strip() for d in str(ep[0].get("devices") or "").split(",") if d.strip().isdigit()]
    if named:
        return named
    return sorted({m.group(1) for r in ep for k in r if (m := GPU_KEY.fullmatch(k))}, key=int)


def gpu(key: str, pos: int, agg: Callable[[list[float]], float] = statistics.median, scale: float = 1.0) -> Metric:
    """gpu{i}_KEY of the cell's POS-th GPU (0: the first it names) over the timed epochs (AGG)."""

    def metric(rs: list[dict], part: str) -> float | None:
        ep = claim_epochs(rs, part)
        ids = _gpu_ids(ep) if ep else []
        if len(ids) <= pos:
            return None
        vals = [v for r in ep if (v := _float(r, f"gpu{ids[pos]}_{key}")) is not None]
        return scale * agg(vals) if vals else None

    return metric


def gpu0_over_gpu1(key: str, agg: Callable[[list[float]], float]) -> Metric:
    """The first GPU's figure over the second's."""

    def metric(rs: list[dict], part: str) -> float | None:
        a, b = gpu(key, 0, agg)(rs, part), gpu(key, 1, agg)(rs, part)
        return a / b if a is not None and b else None

    return metric


def gpu_mem_total_mb(rs: list[dict], part: str) -> float | None:
    """Every GPU of the cell: the sum of the cell's own peak memory on each (own_gpu_mem)."""
    ep = claim_epochs(rs, part)
    got = [gpu(GPU_MEM, i, max)(rs, part) for i in range(len(_gpu_ids(ep)))] if ep else []
    return sum(v for v in got if v is not None) if got and None not in got else None


def _profiled(rs: list[dict], part: str) -> dict:
    """The profile row (the step-time breakdown of the profiled steps), {} where none."""
    if not claim_epochs(rs, part):
        return {}
    return next(
        (
            r
            for r in rs
            if isinstance(r, dict) and r.get("phase") == PROFILE_PHASE and r.get("status") == "ok" and r.get("backend") == part
        ),
        {},
    )


def profile_pct(key: str) -> Metric:
    """KEY (a share) of the profiled step, in %."""

    def metric(rs: list[dict], part: str) -> float | None:
        v = _float(_profiled(rs, part), key)
        return 100 * v if v is not None else None

    return metric


def copy_over_kernels(rs: list[dict], part: str) -> float | None:
    """Host-device copies' share of a profiled step over the kernels' share."""
    r = _profiled(rs, part)
    mc, k = _float(r, MEMCPY_SHARE), _float(r, KERNEL_SHARE)
    return mc / k if mc is not None and k else None


# ---- the Study hooks ---------------------------------------------------------------------------------
def throughput(rs: list[dict]) -> dict[str, float]:
    """Row backend -> the median img/s over its timed epochs."""
    by: dict[str, list[float]] = {}
    for r in epoch_rows(rs):
        if (v := _float(r, IPS)) is not None:
            by.setdefault(str(r.get("backend")), []).append(v)
    return {p: statistics.median(v) for p, v in by.items()}


def accuracy(rs: list[dict], part: str) -> tuple[str, float] | None:
    """(its name, the test accuracy of PART's highest epoch) (bench.core.study.last)."""
    return last(epoch_rows(rs, part), EPOCH, TEST_ACC)


def loss_curve(rs: list[dict], part: str):
    """PART's training loss per epoch (bench.core.study.curve)."""
    return curve(epoch_rows(rs, part), EPOCH, TRAIN_LOSS)


def energy_below_zero(rs: list[dict]) -> tuple[list[Any], list[Any]]:
    """(the epochs whose gross energy is below 0, those whose net energy is), by epoch number: any
    ok row's GPU or CPU figure."""
    ok = _by_epoch(r for r in rs if isinstance(r, dict) and r.get("status") == "ok")
    neg = [r.get(EPOCH) for r in ok for k in ("gpu_energy_j", "cpu_energy_j") if (v := _get(r, k)) is not None and v < 0]
    net = [r.get(EPOCH) for r in ok for k in ("gpu_energy_net_j", "cpu_energy_net_j") if (v := _get(r, k)) is not None and v < 0]
    return neg, net


def one_process(rs: list[dict]) -> bool:
    """Whether the cell trained in one process (one device, or nn.DataParallel): then it measured
    its sampler's cost and profiled steps."""
    return any(r.get("parallel") in ("none", "dp") for r in epoch_rows(rs))


def sampler_cost_measured(rs: list[dict]) -> bool:
    """Whether an ok overhead row holds the sampler's cost."""
    return any(
        _get(r, SAMPLER_COST) is not None
        for r in rs
        if isinstance(r, dict) and r.get("status") == "ok" and r.get("phase") == OVERHEAD_PHASE
    )


def traces(rs: list[dict]) -> list:
    """The trace files the ok profile rows name."""
    return [
        t
        for r in rs
        if isinstance(r, dict) and r.get("status") == "ok" and r.get("phase") == PROFILE_PHASE
        for t in (r.get(TRACES) or [])
    ]


def progress(r: dict) -> dict:
    """The live line's figures of one fresh row R: its phase and, as written, an epoch's number,
    time, img/s, test accuracy and J/image, the overhead row's sampler cost, the profile row's
    profiled steps and profiler overhead."""
    return {
        "phase": r.get("phase"),
        "number": r.get(EPOCH),
        "seconds": r.get(EPOCH_S),
        "ips": r.get(IPS),
        "acc": r.get(TEST_ACC),
        "jpi": r.get(J_PER_IMG),
        "cost": r.get(SAMPLER_COST),
        "profiled": r.get(PROFILED_STEPS),
        "overhead": r.get(PROFILER_OVERHEAD),
    }
