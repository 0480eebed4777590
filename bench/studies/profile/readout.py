"""What the profile report and its claims read from result cells (host side: standard
library only; every value is checked before use, as result dirs come from other hosts).

    rows, num, med, label, gpus, param   the cell's rows and parameters, numbers checked
    profile_doc(c)    its profile.json (operator tables, step breakdown)
    projection(c)     the cell's measured time per image projected to the seed's 20 epochs x 8,005
                      images (a projection, labelled so wherever shown)
    seed_hours(ep)    the same projection from a repeat's epoch rows alone (what claims.py reads)
    energy(c)         per epoch, the GPU's and the CPU's energy, each on its own with its reason
    cpu_gpu_pairs     the CPU cells and the GPU cells they compare with (same transfer and batch)
    logical_cores(c)  the host's logical CPUs (100 % x this = every core busy)
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.core.resultset import ResultCell as Cell
from bench.core.resultset import json_file
from bench.core.tables import real
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


def rows(c: Cell, phase: str) -> list[dict]:
    return [r for r in c.rows if r.get("phase") == phase and r.get("status") == "ok"]


def num(v: Any) -> float | None:
    """V where it is a real, finite number (bench.core.tables.real: the one rule), else None."""
    return real(v)


def med(rs: list[dict], key: str) -> float | None:
    vals = [v for v in (num(r.get(key)) for r in rs) if v is not None]
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


def _per_image(ep: list[dict]) -> tuple[list[float], list[float]]:
    """(seconds per image after the loader's start, the loader's start) of each timed epoch in EP
    that has both a time and an image count; a start only where every epoch measured one."""
    per_img, starts = [], []
    for r in ep:
        e, n = num(r.get("epoch_s")), num(r.get("samples"))
        if not e or not n or e <= 0 or n < 1:  # a count of images is at least one
            continue
        f = num(r.get("first_batch_s"))
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
    ep = rows(c, "epoch")
    per_img, starts = _per_image(ep)
    if not per_img:
        return None
    epoch_s = _seed_epoch_s(per_img, starts)
    steps = med(ep, "steps")
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


def _window_energy(r: dict, g: list[int]) -> dict:
    """The sampler's summary as an epoch row kept it, a GPU's energy recovered where the row has
    none but has its window's power samples: their mean x the window (rows made before
    TelemetrySampler.settle() ended a window with no reading after it, and the sampler's own
    fallback now)."""
    s: dict[str, Any] = {
        "window_s": num(r.get("telemetry_window_s")),
        "cpu_energy_j": num(r.get("cpu_energy_j")),
        "cpu_energy_note": r.get("cpu_energy_note"),
    }
    for i in g:
        e, src = num(r.get(f"gpu{i}_energy_j")), r.get(f"gpu{i}_energy_source")
        pw, n, w = num(r.get(f"gpu{i}_power_w_mean")), num(r.get("telemetry_samples")), s["window_s"]
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
    for r in rows(c, "epoch"):
        s = _window_energy(r, g)
        n = num(r.get("samples")) or 0
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
        per.append(f)
        srcs += [str(s.get(f"gpu{i}_energy_source") or "") for i in g]
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


def cpu_gpu_pairs(cells: list[Cell]) -> list[tuple[Cell, Cell]]:
    """(CPU cell, GPU cell) at the seed's 224 px, the same transfer (the GPU's fp32 variant) and
    global batch, one device each; per CPU cell and GPU model, the GPU's loader cell first (the
    seed's pipeline), else its synthetic-gpu one."""
    out = []

    def key(c: Cell) -> tuple:
        return (c.first.get("variant"), num(c.first.get("global_batch")) or num(c.first.get("batch_size")))

    def one_device(c: Cell) -> bool:
        return (c.first.get("parallel") or "none") == "none" and (num(c.first.get("world_size")) or 1) == 1

    ran = [c for c in cells if rows(c, "epoch") and one_device(c) and num(param(c, "image_size")) == SEED_IMAGE_SIZE]
    for cpu in (c for c in ran if is_backend(c, "torch-cpu")):
        by_device: dict[str, list[Cell]] = {}
        for g in (c for c in ran if is_backend(c, "torch-cuda") and key(c) == key(cpu)):
            by_device.setdefault(g.device, []).append(g)
        for found in by_device.values():
            found.sort(key=lambda g: (g.first.get("pipeline") != "loader", str(g.dir)))
            out.append((cpu, found[0]))
    return out
