"""A device's own ceilings, measured once and cached: the roofs of the roofline study.

What is measured (`measure_roofs`; every figure is the median over `repeats` timed repeats
after `warmup` untimed calls, with every repeat kept in `samples_s`):

    gemm_fp32 / gemm_tf32 / gemm_bf16  torch.matmul of two random n x n matrices, 2 n^3 FLOPs
                                       (fp32 with TF32 off; tf32 with it on; CUDA only for tf32)
    conv_fp32 / conv_tf32 / conv_bf16  one 3x3 conv, stride 1, same padding, channels_last,
                                       2 B C_out C_in k^2 H W FLOPs (cuDNN with benchmark on;
                                       CPU: fp32 only, a smaller one)
    copy                               dst.copy_(src): bytes read + written (2 x array bytes)
    triad                              torch.add(b, c, alpha=s, out=a): a = b + s c, 3 x array bytes
    numpy_gemm_fp32 (CPU)              np.matmul at NumPy's BLAS pinned with threadpoolctl to torch's threads
    numpy_triad (CPU)                  a = b + s c in cache-sized chunks, one thread (ufuncs do not thread)

Bytes follow STREAM's convention: the bytes the kernel names, without the write-allocate
read a CPU may add. Random data, not zeros (a GPU runs zeros faster: less switching power).

Timing: CUDA events around each repeat (one sync at the end of it), perf_counter elsewhere;
every duration is checked non-negative (bench.measure.timer.checked_duration).

Cache: `get_roofs(device)` reads `<cache dir>/roofs-<device id>[-<sizes hash>].json` when it
was measured with the same sizes and torch version, else measures and writes it (temp name +
rename); `refresh=True` measures again. Cache dir: $KIT_CACHE_DIR, else
$XDG_CACHE_HOME/cnn-bench, else ~/.cache/cnn-bench; a temp dir when that is not writable.
A corrupt cache file is ignored with a warning.

Measured here (2026-11, torch 2.14.1+cu130, a 2-vCPU "AMD EPYC" KVM guest with AVX-512 and
AVX512-BF16, 2 threads, default CPU sizes; the machine was shared with other jobs): quietest
run gemm_fp32 0.193, gemm_bf16 0.412, conv_fp32 0.225, numpy_gemm_fp32 0.194 TFLOP/s; copy
47.3, triad 56.5, numpy_triad (1 thread) 21.8 GB/s. Under load (1-min load average 2.5-5 on
2 cores) three more runs gave a half to a third of that (gemm_fp32 0.06-0.095 TFLOP/s, triad
~25 GB/s): each cache file records the load average around its measurement (`conditions`).
A roof is a peak, and other work can only hide some of it: a cached measurement made on a busy
machine (a 1-minute load average above its logical CPUs) is measured again when the machine is
quieter than it was, and each roof keeps the higher of the two figures (`conditions.kept`
names the roofs taken from the earlier measurement). A loaded cache left a quiet run's cells
above their roof (roof_fraction 2.5 with gemm_fp32 cached at 0.03 TFLOP/s under load 9).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench.core import machine
from bench.core.cache import cache_dir  # noqa: F401  (re-exported: roofs.cache_dir)
from bench.measure.timer import checked_duration

SCHEMA = 1  # of the cache file; a file of another schema is measured again


@dataclass(frozen=True)
class RoofSizes:
    gemm_n: int  # side of the square matrices of C = A @ B, elements
    conv: tuple[int, int, int, int]  # (batch, channels in = out, height = width, kernel side)
    stream_mib: float  # each array of copy and triad, MiB (2^20 bytes); well above the last-level cache
    repeats: int = 5  # timed repeats; the figure is their median
    warmup: int = 2  # untimed calls first (cuDNN autotuning, page faults, clocks ramping)
    inner: int = 1  # calls per timed repeat (CUDA: several, so launch gaps are amortised)


# CUDA: 8192^3 GEMM (1.1 TFLOP, ~1.4 ms in bf16 on an H100), conv 256x256x56x56 3x3 (3.7 TFLOP),
# 1 GiB arrays (20x an H100's 50 MB L2). CPU: 2048^3 GEMM (17 GFLOP: ~0.1-1 s on a few cores),
# conv 16x64x56x56 3x3 (3.7 GFLOP), 256 MiB arrays.
SIZES = {
    "cuda": RoofSizes(gemm_n=8192, conv=(256, 256, 56, 3), stream_mib=1024, repeats=7, warmup=3, inner=5),
    "cpu": RoofSizes(gemm_n=2048, conv=(16, 64, 56, 3), stream_mib=256, repeats=5, warmup=1, inner=1),
}


@dataclass(frozen=True)
class Roof:
    name: str  # "gemm_bf16", "copy", ...
    value: float  # work / median_s, in `unit`
    unit: str  # "FLOP/s" or "B/s"
    work: float  # FLOPs or bytes per call
    median_s: float  # seconds per call, median over the repeats
    samples_s: list[float]  # seconds per call, one per repeat
    sizes: dict[str, Any]  # shapes, dtype, precision flags, threads: what was measured


@dataclass
class Roofs:
    device_id: str
    device: dict[str, Any]
    torch_version: str
    measured_at: str  # UTC, ISO 8601
    sizes: dict[str, Any]  # the RoofSizes used
    roofs: dict[str, Roof]
    skipped: dict[str, str]  # measurement -> why it was not taken
    datasheet: dict[str, Any] | None = None  # the datasheet peaks for this GPU, when known
    conditions: dict[str, Any] = field(default_factory=dict)  # load average before/after: was the machine quiet?
    cache_path: str | None = None
    from_cache: bool = False

    def compute(self, precision: str = "fp32") -> Roof | None:
        """The compute roof at `precision` ("fp32", "tf32", "bf16"): the better of its GEMM and conv."""
        found = [r for k, r in self.roofs.items() if k in (f"gemm_{precision}", f"conv_{precision}")]
        return max(found, key=lambda r: r.value) if found else None

    def bandwidth(self) -> Roof | None:
        """The memory roof: the better of torch's copy and triad (all threads)."""
        found = [r for k, r in self.roofs.items() if k in ("copy", "triad")]
        return max(found, key=lambda r: r.value) if found else None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = SCHEMA
        d.pop("from_cache")
        d.pop("cache_path")
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Roofs:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"schema {d.get('schema')!r}, expected {SCHEMA}")
        roofs = {k: Roof(**r) for k, r in d["roofs"].items()}
        for r in roofs.values():
            if not (math.isfinite(r.value) and r.value > 0) or r.unit not in ("FLOP/s", "B/s"):
                raise ValueError(f"roof {r.name}: {r.value!r} {r.unit!r} is not a positive finite FLOP/s or B/s")
        return cls(
            device_id=d["device_id"],
            device=dict(d["device"]),
            torch_version=str(d["torch_version"]),
            measured_at=str(d["measured_at"]),
            sizes=dict(d["sizes"]),
            roofs=roofs,
            skipped=dict(d["skipped"]),
            datasheet=d.get("datasheet"),
            conditions=dict(d.get("conditions") or {}),
        )


# ---- datasheet peaks ------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasheetPeaks:
    """Vendor datasheet figures (not measured here): dense, i.e. without 2:4 sparsity, which
    NVIDIA's tables often quote (marked *) at twice these. 10^12 units."""

    product: str
    fp32_tflop_per_s: float  # non-tensor FP32
    tf32_tflop_per_s: float | None  # tensor cores, dense; None: no TF32
    bf16_tflop_per_s: float | None  # tensor cores, dense, FP32 accumulate; None: no BF16
    mem_tb_per_s: float  # DRAM (HBM/GDDR) bandwidth
    source: str


# Matched against torch.cuda.get_device_name(), first hit wins (more specific patterns first).
# Sources: each product's NVIDIA datasheet (nvidia.com/en-us/data-center/<product>/); its
# tensor figures marked * are "with sparsity" and halved here. RTX 4090: the NVIDIA Ada
# Lovelace GPU architecture whitepaper (FP32 82.6, TF32 82.6/165.2, BF16 FP32-acc 165.2/330.4).
_P = DatasheetPeaks
DATASHEET: list[tuple[str, DatasheetPeaks]] = [
    (r"H100.*PCIe", _P("H100 PCIe", 51.0, 378.0, 756.5, 2.0, "H100 datasheet: 51 / 756* / 1513* TFLOPS, 2 TB/s")),
    (r"H100(?!.*NVL)", _P("H100 SXM", 67.0, 494.5, 989.5, 3.35, "H100 datasheet: 67 / 989* / 1979* TFLOPS, 3.35 TB/s")),
    (r"H200(?!.*NVL)", _P("H200 SXM", 67.0, 494.5, 989.5, 4.8, "H200 datasheet: 67 / 989* / 1979* TFLOPS, 4.8 TB/s")),
    (r"A100.*SXM4-80GB", _P("A100 SXM 80GB", 19.5, 156.0, 312.0, 2.039, "A100 datasheet: 19.5 / 156 / 312 TFLOPS, 2039 GB/s")),
    (r"A100.*80GB.*PCIe", _P("A100 PCIe 80GB", 19.5, 156.0, 312.0, 1.935, "A100 datasheet: 19.5 / 156 / 312 TFLOPS, 1935 GB/s")),
    (r"A100", _P("A100 40GB", 19.5, 156.0, 312.0, 1.555, "A100 datasheet: 19.5 / 156 / 312 TFLOPS, 1555 GB/s")),
    (r"V100S", _P("V100S PCIe", 16.4, None, None, 1.134, "V100S datasheet: 16.4 TFLOPS FP32, 1134 GB/s")),
    (r"V100.*SXM2", _P("V100 SXM2", 15.7, None, None, 0.9, "V100 datasheet: 15.7 TFLOPS FP32, 900 GB/s")),
    (r"V100", _P("V100 PCIe", 14.0, None, None, 0.9, "V100 datasheet: 14 TFLOPS FP32, 900 GB/s")),
    (r"\bT4\b", _P("T4", 8.1, None, None, 0.32, "T4 datasheet: 8.1 TFLOPS FP32, 320 GB/s")),
    (r"RTX 4090", _P("GeForce RTX 4090", 82.6, 82.6, 165.2, 1.008, "Ada whitepaper: 82.6 / 82.6 / 165.2 TFLOPS, 1008 GB/s")),
    (r"L40S", _P("L40S", 91.6, 183.0, 362.05, 0.864, "L40S datasheet: 91.6 / 183, 366* / 362.05, 733* TFLOPS, 864 GB/s")),
    (r"\bL4\b", _P("L4", 30.3, 60.0, 121.0, 0.3, "L4 datasheet: 30.3 / 120* / 242* TFLOPS, 300 GB/s")),
    (r"\bA10\b", _P("A10", 31.2, 62.5, 125.0, 0.6, "A10 datasheet: 31.2 / 125* / 250* TFLOPS, 600 GB/s")),
]


def datasheet_peaks(device_name: str) -> DatasheetPeaks | None:
    """The datasheet entry for a GPU name as torch reports it, e.g. "NVIDIA H100 80GB HBM3"."""
    for pattern, peaks in DATASHEET:
        if re.search(pattern, device_name):
            return peaks
    return None


# ---- the device ------------------------------------------------------------------------------


def _nvml_info(index: int, uuid: str) -> dict[str, Any]:
    """Extras from NVML (nvidia-ml-py), when it is there: driver, clocks, power limit. The GPU
    is found by torch's uuid (NVML's indices ignore CUDA_VISIBLE_DEVICES), else by index."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + uuid.removeprefix("GPU-"))
            found_by = "uuid"
        except pynvml.NVMLError:
            h, found_by = pynvml.nvmlDeviceGetHandleByIndex(index), "index (uuid not found: may be another GPU)"
        out: dict[str, Any] = {
            "nvml_found_by": found_by,
            "nvml_uuid": str(pynvml.nvmlDeviceGetUUID(h)),
            "driver": str(pynvml.nvmlSystemGetDriverVersion()),
        }
        for key, fn in (
            ("max_sm_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
            ("max_mem_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
        ):
            try:
                out[key] = fn()
            except pynvml.NVMLError:
                pass
        return out
    except Exception as err:  # noqa: BLE001 - NVML absent or unusable: note it, go on
        return {"nvml": f"unavailable ({type(err).__name__}: {err})"}


def device_info(device: str = "cpu") -> dict[str, Any]:
    """What identifies the device: CUDA name + uuid (+ NVML extras); CPU model + threads."""
    import torch

    d = torch.device(device)
    if d.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA device asked for, but torch.cuda.is_available() is False")
        index = d.index if d.index is not None else torch.cuda.current_device()
        p = torch.cuda.get_device_properties(index)
        info: dict[str, Any] = {
            "type": "cuda",
            "index": index,
            "name": p.name,
            "uuid": str(getattr(p, "uuid", "")),
            "compute_capability": f"{p.major}.{p.minor}",
            "multiprocessors": p.multi_processor_count,
            "memory_bytes": p.total_memory,
            "l2_cache_bytes": getattr(p, "L2_cache_size", None),
            "cuda_runtime": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        }
        info.update(_nvml_info(index, info["uuid"]))
        return info
    if d.type == "cpu":
        return {
            "type": "cpu",
            "name": machine.cpu_model(),
            "threads": torch.get_num_threads(),  # torch's intra-op threads: what the CPU roofs ran at
            "usable_cores": machine.usable_cores(),
            "machine": platform.machine(),
            "host": platform.node(),
        }
    raise ValueError(f"roofs: device {device!r} not supported (cpu or cuda[:i])")


def device_id(info: dict[str, Any]) -> str:
    """A file-name-safe key: cuda-<name>-<uuid prefix> or cpu-<model>-<threads>t."""

    def slug(s: str) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower() or "unknown"

    if info["type"] == "cuda":
        return f"cuda-{slug(info['name'])}-{slug(info.get('uuid') or str(info['index']))[:8]}"
    return f"cpu-{slug(info['name'])}-{info['threads']}t"


# ---- timing ----------------------------------------------------------------------------------


def _seconds_per_call(fn: Callable[[], object], cuda: bool, s: RoofSizes) -> list[float]:
    """Seconds per call of `fn`, one figure per timed repeat, after `s.warmup` calls."""
    import torch

    for _ in range(s.warmup):
        fn()
    out = []
    if cuda:
        torch.cuda.synchronize()  # the warm-up done before the first event
        for _ in range(s.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(s.inner):
                fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            if not ms >= 0:
                raise AssertionError(f"negative or NaN CUDA event time {ms} ms: event pair reversed?")
            out.append(ms / 1e3 / s.inner)
    else:
        for _ in range(s.repeats):
            t0 = time.perf_counter()
            for _ in range(s.inner):
                fn()
            out.append(checked_duration(t0, time.perf_counter()) / s.inner)
    return out


def _roof(name: str, unit: str, work: float, samples: list[float], sizes: dict[str, Any]) -> Roof:
    med = statistics.median(samples)
    if med <= 0:
        raise AssertionError(f"{name}: median time {med} s is not positive (timer resolution?)")
    return Roof(name=name, value=work / med, unit=unit, work=work, median_s=med, samples_s=samples, sizes=sizes)


@contextmanager
def _fp32_precision(mode: str) -> Iterator[None]:
    """TF32 for fp32 matmul and cuDNN conv: mode "ieee" (off) or "tf32" (on); restored after.
    Uses torch's newer fp32_precision flags where they exist (mixing them with the legacy
    allow_tf32 flags is an error in torch >= 2.9), else the legacy ones."""
    import torch

    mm, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)
    if hasattr(mm, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision"):
        old = (mm.fp32_precision, conv.fp32_precision)
        mm.fp32_precision = conv.fp32_precision = mode
        try:
            yield
        finally:
            mm.fp32_precision, conv.fp32_precision = old
    else:
        old_legacy = (mm.allow_tf32, torch.backends.cudnn.allow_tf32)
        mm.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        try:
            yield
        finally:
            mm.allow_tf32, torch.backends.cudnn.allow_tf32 = old_legacy


# ---- the measurements --------------------------------------------------------------------------


def _gemm(dev, dtype_name: str, s: RoofSizes) -> Roof:
    import torch

    n, dtype = s.gemm_n, getattr(torch, dtype_name)
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    c = torch.empty(n, n, device=dev, dtype=dtype)
    samples = _seconds_per_call(lambda: torch.matmul(a, b, out=c), dev.type == "cuda", s)
    return _roof("", "FLOP/s", 2.0 * n**3, samples, {"n": n, "dtype": dtype_name})


def _conv(dev, dtype_name: str, s: RoofSizes) -> Roof:
    import torch
    import torch.nn.functional as F

    batch, ch, hw, k = s.conv
    dtype, cl = getattr(torch, dtype_name), torch.channels_last
    x = torch.randn(batch, ch, hw, hw, device=dev, dtype=dtype).to(memory_format=cl)  # [B, C, H, W]
    w = torch.randn(ch, ch, k, k, device=dev, dtype=dtype).to(memory_format=cl)  # [C_out, C_in, k, k]
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True  # let cuDNN pick its fastest algorithm (chosen during warm-up)
    try:
        samples = _seconds_per_call(lambda: F.conv2d(x, w, padding=k // 2), dev.type == "cuda", s)
    finally:
        torch.backends.cudnn.benchmark = old
    work = 2.0 * batch * ch * ch * k * k * hw * hw
    return _roof(
        "",
        "FLOP/s",
        work,
        samples,
        {"batch": batch, "channels": ch, "hw": hw, "kernel": k, "dtype": dtype_name, "memory_format": "channels_last"},
    )


def _stream_len(s: RoofSizes) -> int:
    return max(1, int(s.stream_mib * 2**20) // 4)  # float32 elements per array


def _copy(dev, s: RoofSizes) -> Roof:
    import torch

    n = _stream_len(s)
    src, dst = torch.full((n,), 1.5, device=dev), torch.empty(n, device=dev)
    samples = _seconds_per_call(lambda: dst.copy_(src), dev.type == "cuda", s)
    return _roof("", "B/s", 2.0 * 4 * n, samples, {"elements": n, "dtype": "float32", "bytes_counted": "read + write"})


def _triad(dev, s: RoofSizes) -> Roof:
    import torch

    n = _stream_len(s)
    a, b, c = torch.empty(n, device=dev), torch.full((n,), 1.5, device=dev), torch.full((n,), 2.5, device=dev)
    samples = _seconds_per_call(lambda: torch.add(b, c, alpha=3.0, out=a), dev.type == "cuda", s)
    return _roof("", "B/s", 3.0 * 4 * n, samples, {"elements": n, "dtype": "float32", "bytes_counted": "read b, c + write a"})


def _numpy_gemm(threads: int, s: RoofSizes) -> Roof:
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(0)
    n = s.gemm_n
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        blas = [
            f"{i.get('internal_api')} {i.get('version')} x{i.get('num_threads')}"
            for i in threadpool_info()
            if i.get("user_api") == "blas"
        ]
        samples = _seconds_per_call(lambda: np.matmul(a, b, out=c), False, s)
    return _roof("", "FLOP/s", 2.0 * n**3, samples, {"n": n, "dtype": "float32", "blas_threads": threads, "blas": blas})


def _numpy_triad(s: RoofSizes) -> Roof:
    import numpy as np

    n = _stream_len(s)
    a, b, c = np.empty(n, np.float32), np.full(n, 1.5, np.float32), np.full(n, 2.5, np.float32)
    chunk = 1 << 16  # 256 KiB of float32: s*c stays in cache between the two ufuncs, so DRAM sees 3 arrays
    tmp = np.empty(chunk, np.float32)

    def triad() -> None:
        for i in range(0, n, chunk):
            j = min(i + chunk, n)
            np.multiply(c[i:j], 3.0, out=tmp[: j - i])
            np.add(tmp[: j - i], b[i:j], out=a[i:j])

    samples = _seconds_per_call(triad, False, s)
    return _roof("", "B/s", 3.0 * 4 * n, samples, {"elements": n, "dtype": "float32", "threads": 1, "chunk_elements": chunk})


def measure_roofs(device: str = "cpu", sizes: RoofSizes | None = None) -> Roofs:
    """Measure every roof this device has (see the module docstring); a measurement that fails
    (out of memory, no kernel for a dtype) is listed in `skipped` with the reason."""
    import torch

    info = device_info(device)
    dev = torch.device(device)
    s = sizes or SIZES[info["type"]]
    cuda = info["type"] == "cuda"
    threads = torch.get_num_threads()
    plan: dict[str, Callable[[], Roof]] = {}
    skipped: dict[str, str] = {}
    if cuda:
        torch.cuda.set_device(dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device()))
        for prec, name in (("ieee", "fp32"), ("tf32", "tf32")):  # fp32 matmul/conv with TF32 off, then on
            plan[f"gemm_{name}"] = partial(_with_precision, prec, partial(_gemm, dev, "float32", s))
            plan[f"conv_{name}"] = partial(_with_precision, prec, partial(_conv, dev, "float32", s))
        plan["gemm_bf16"] = partial(_gemm, dev, "bfloat16", s)
        plan["conv_bf16"] = partial(_conv, dev, "bfloat16", s)
    else:
        plan["gemm_fp32"] = partial(_gemm, dev, "float32", s)
        plan["gemm_bf16"] = partial(_gemm, dev, "bfloat16", s)
        plan["conv_fp32"] = partial(_conv, dev, "float32", s)
        skipped["gemm_tf32"] = skipped["conv_tf32"] = "TF32 is a tensor-core format: none on a CPU"
        skipped["conv_bf16"] = "not measured on CPU (bf16 conv kernels vary widely by ISA; gemm_bf16 stands for bf16)"
    plan["copy"] = partial(_copy, dev, s)
    plan["triad"] = partial(_triad, dev, s)
    if not cuda:
        plan["numpy_gemm_fp32"] = partial(_numpy_gemm, threads, s)
        plan["numpy_triad"] = partial(_numpy_triad, s)

    conditions: dict[str, Any] = {"load_avg_1m_before": _load_avg(), "logical_cpus": os.cpu_count()}
    roofs: dict[str, Roof] = {}
    for name, run in plan.items():
        try:
            r = run()
        except (RuntimeError, ImportError, MemoryError) as err:  # OOM, missing kernel or package: say so
            skipped[name] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            if cuda:
                torch.cuda.empty_cache()
            continue
        sizes_rec = {**r.sizes, "threads": threads} if not cuda and "threads" not in r.sizes else r.sizes
        roofs[name] = Roof(**{**asdict(r), "name": name, "sizes": sizes_rec})
        if cuda:
            torch.cuda.empty_cache()  # free this measurement's arrays before the next one's
    conditions["load_avg_1m_after"] = _load_avg()
    sheet = datasheet_peaks(info["name"]) if cuda else None
    return Roofs(
        device_id=device_id(info),
        device=info,
        torch_version=torch.__version__,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        sizes=json.loads(json.dumps(asdict(s))),
        roofs=roofs,
        skipped=skipped,
        datasheet=asdict(sheet) if sheet else None,
        conditions=conditions,
    )


def _load_avg() -> float | None:
    """The 1-minute load average (runnable processes; None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def _with_precision(mode: str, fn: Callable[[], Roof]) -> Roof:
    with _fp32_precision(mode):
        r = fn()
    return Roof(**{**asdict(r), "sizes": {**r.sizes, "fp32_precision": mode}})


# ---- the cache -------------------------------------------------------------------------------


def cache_path(info: dict[str, Any], sizes: RoofSizes, directory: Path | None = None) -> Path:
    """Default sizes: roofs-<device id>.json; other sizes get a hash of them in the name, so a
    small test measurement never stands in for the real one."""
    tag = ""
    if sizes != SIZES[info["type"]]:
        tag = "-" + hashlib.sha1(json.dumps(asdict(sizes), sort_keys=True).encode()).hexdigest()[:10]
    return (directory or cache_dir()) / f"roofs-{device_id(info)}{tag}.json"


def _read_cache(path: Path, did: str, sizes: RoofSizes) -> Roofs:
    r = Roofs.from_json(json.loads(path.read_text()))
    if r.device_id != did:
        raise ValueError(f"device id {r.device_id!r}, expected {did!r}")
    if r.sizes != json.loads(json.dumps(asdict(sizes))):
        raise ValueError(f"measured with sizes {r.sizes}, not {asdict(sizes)}")
    return r


def _write_cache(path: Path, roofs: Roofs) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(roofs.to_json(), indent=1, sort_keys=True))
    os.replace(tmp, path)


def get_roofs(
    device: str = "cpu", *, refresh: bool = False, sizes: RoofSizes | None = None, directory: Path | None = None
) -> Roofs:
    """This device's roofs: from the cache when measured here before with the same sizes and
    torch version (`from_cache` True), else measured now and cached. `refresh=True` always
    measures (the CLI's --refresh). An unreadable cache file is ignored with a warning."""
    import torch

    info = device_info(device)
    s = sizes or SIZES[info["type"]]
    path = cache_path(info, s, directory)
    earlier: Roofs | None = None
    if not refresh and path.exists():
        try:
            cached = _read_cache(path, device_id(info), s)
        except (OSError, ValueError, KeyError, TypeError) as err:
            warnings.warn(f"ignoring the roofs cache {path} ({type(err).__name__}: {err}); measuring again", stacklevel=2)
        else:
            if cached.torch_version == torch.__version__:
                if not quieter_now(cached.conditions):
                    cached.cache_path, cached.from_cache = str(path), True
                    return cached
                earlier = cached  # measured on a busy machine: again now, keeping the higher figures
    # measured or read from the cache, the roofs leave torch's random state as they found it: what
    # trains after them (dropout masks, a sweep's losses) must not depend on whether they were cached
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if info["type"] == "cuda" else []):
        roofs = measure_roofs(device, s)
    if earlier is not None:
        roofs = higher(roofs, earlier)
    roofs.cache_path = str(path)
    try:
        _write_cache(path, roofs)
    except OSError as err:
        warnings.warn(f"could not write the roofs cache {path} ({err}); the figures are not kept", stacklevel=2)
        roofs.cache_path = None
    return roofs


def busy(conditions: dict[str, Any]) -> bool:
    """Was the machine busy around a measurement: a 1-minute load average above its logical CPUs?"""
    cpus = conditions.get("logical_cpus") or os.cpu_count() or 1
    loads = [
        v for v in (conditions.get("load_avg_1m_before"), conditions.get("load_avg_1m_after")) if isinstance(v, (int, float))
    ]
    return bool(loads) and max(loads) > cpus


def quieter_now(conditions: dict[str, Any]) -> bool:
    """A measurement made on a busy machine, and the machine is now quieter than it was then."""
    if not busy(conditions):
        return False
    now = _load_avg()
    then = conditions.get("load_avg_1m_before")
    return now is not None and isinstance(then, (int, float)) and now < then - 0.5


def higher(new: Roofs, earlier: Roofs) -> Roofs:
    """NEW with each roof the higher of its figure and EARLIER's (a roof is a peak: other work
    can only hide some of it); `conditions.kept` names those taken from EARLIER and when."""
    kept = {k: earlier.measured_at for k, r in earlier.roofs.items() if k in new.roofs and r.value > new.roofs[k].value}
    roofs = {k: (earlier.roofs[k] if k in kept else r) for k, r in new.roofs.items()}
    conditions = {**new.conditions, **({"kept": kept} if kept else {})}
    return Roofs(**{**asdict(new), "roofs": roofs, "conditions": conditions, "cache_path": new.cache_path})


def format_roofs(r: Roofs) -> str:
    """A plain table: each roof in T/G units, its sizes, and the datasheet figures beside."""
    load = r.conditions.get("load_avg_1m_before")
    lines = [
        f"{r.device_id}  torch {r.torch_version}  measured {r.measured_at}{'  (cached)' if r.from_cache else ''}"
        + (f"  load avg {load:.2f} on {r.conditions.get('logical_cpus')} CPUs" if load is not None else "")
    ]
    for name, roof in r.roofs.items():
        scale, unit = (1e12, "TFLOP/s") if roof.unit == "FLOP/s" else (1e9, "GB/s")
        spread = f"{min(roof.samples_s) * 1e3:.3g}-{max(roof.samples_s) * 1e3:.3g} ms"
        lines.append(
            f"  {name:<16}{roof.value / scale:>10.3f} {unit:<8} median {roof.median_s * 1e3:.3g} ms/call ({spread})  {roof.sizes}"
        )
    for name, why in r.skipped.items():
        lines.append(f"  {name:<16}  skipped: {why}")
    if r.datasheet:
        d = r.datasheet
        lines.append(
            f"  datasheet ({d['product']}, not measured): fp32 {d['fp32_tflop_per_s']} / tf32 {d['tf32_tflop_per_s']} / "
            f"bf16 {d['bf16_tflop_per_s']} TFLOP/s dense, {d['mem_tb_per_s']} TB/s  [{d['source']}]"
        )
    return "\n".join(lines)


__all__ = [
    "DATASHEET",
    "SIZES",
    "DatasheetPeaks",
    "Roof",
    "RoofSizes",
    "Roofs",
    "cache_dir",
    "cache_path",
    "datasheet_peaks",
    "device_id",
    "device_info",
    "format_roofs",
    "get_roofs",
    "measure_roofs",
]
