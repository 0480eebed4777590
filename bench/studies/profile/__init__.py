"""profile (seed 004): DenseNet-121 transfer learning (cats vs dogs) under torch.profiler, with
GPU telemetry from NVML (utilisation, memory, temperature, power, energy against an idle
baseline) and CPU telemetry (psutil, RAPL where readable), on the CPU, one GPU, and two GPUs
the seed's way (nn.DataParallel) and the right way (DDP under torchrun).

    config.py     defaults, variants (frozen | finetune, +bf16-cl on CUDA), the matrix
    trainer.py    model + weights (hash-checked), data (loader | synthetic-gpu), Adam step, epoch
    protocol.py   one cell: idle baseline, timed epochs with telemetry, sampler cost, profiler
    seed.py       what the seed reported, transcribed
    backends/     torch-cpu, torch-cuda
    readout.py    the one place a cell's rows become numbers: epochs by their number, the projection to the
                  seed's run, energy per source, the report's and the many-GPU section's figures, the
                  claims' metrics and what the Study hooks below read
    claims.py     every claim of the seed as data (the answer engine judges them: bench.core.answers)
    report.py     CPU vs GPU (projected), telemetry time series, energy, operator and step-time
                  breakdowns, DataParallel vs DDP (numbers only)

Importing this package imports no torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.core import bounded
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import register_study
from bench.core.study import (
    ANSWER_PROFILES,
    PLATFORMS,
    BackendSpec,
    Estimate,
    RunContext,
    Speed,
    Study,
)
from bench.measure.profiling import dropped
from bench.measure.torchdev import TORCHVISION
from bench.studies.profile import readout
from bench.studies.profile.backends import Trainer
from bench.studies.profile.claims import CLAIMS
from bench.studies.profile.config import (
    AUX_OUTPUTS,
    DATASETS,
    FIXED_SIZE,
    MIN_SIZE,
    NO_LINEAR_HEAD,
    PARALLEL,
    PIPELINES,
    TORCHVISION_MODELS,
    TRANSFERS,
    WEIGHTS,
    ProfileConfig,
    devices_of,
    matrix_spec,
    variants,
)

MAX_RANKS = 16  # devices one cell may name: GPUs of one host, or gloo ranks on a CPU
_B = "bench.studies.profile.backends."
BACKEND_OF = {"cpu": "torch-cpu", "cuda": "torch-cuda"}


@register_study
class Profile(Study):
    name = "profile"
    profiles = ANSWER_PROFILES  # smoke, default, full and answer (the same work on every platform)
    title = "profile (seed 004)"
    seed_doc = "004"
    timing_key = readout.EPOCH_S  # noise flags: CV and outliers over the timed epochs
    timing_unit = readout.EPOCH_PHASE  # one timed epoch (a row)
    auto_profiles = {"cpu": "smoke"}  # DenseNet-121 at 224 px on a laptop CPU takes long
    own_energy = True  # its idle baseline and NVML/RAPL sampler (protocol.energy_fields), before it touches a GPU
    Config = ProfileConfig
    trainer_protocol = Trainer  # backends/__init__.py
    backends = {
        "torch-cpu": BackendSpec(
            _B + "torch_cpu",
            "cpu",
            variants("cpu"),
            family="torch",
            needs=TORCHVISION,
            max_devices=MAX_RANKS,
            about="frozen | finetune; ddp over gloo ranks (devices=cpu,cpu)",
        ),
        "torch-cuda": BackendSpec(
            _B + "torch_cuda",
            "cuda",
            variants("cuda"),
            family="torch",
            needs=TORCHVISION,
            max_devices=MAX_RANKS,
            about="frozen | finetune, +bf16-cl; one GPU, dp, ddp (devices=0,1)",
        ),
    }

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        if platform not in PLATFORMS:
            raise KitError(f"unknown platform {platform!r}: choose {', '.join(PLATFORMS)}")
        if profile not in ANSWER_PROFILES:
            raise KitError(f"unknown profile {profile!r}: choose {', '.join(ANSWER_PROFILES)}")
        if platform not in BACKEND_OF:
            return []
        backend = BACKEND_OF[platform]
        cells = []
        for variant, p in matrix_spec(platform, profile):
            par = p.get("parallel", "none")
            tail = f"{p['pipeline']}_b{p.get('batch_size', 64)}" + (f"_{par}" if par != "none" else "")
            tail += "_nobench" if p.get("cudnn_benchmark") is False else ""
            tail += "_ranks1" if par == "none" and p.get("devices") else ""
            cells.append(self.cell(backend, variant, name=f"{backend}_{variant}_{tail}", **p))  # p may hold devices
        return cells

    def validate(self, cell: Cell) -> None:
        super().validate(cell)
        p = cell.params
        for key, allowed in (("pipeline", PIPELINES), ("dataset", DATASETS), ("weights", WEIGHTS), ("parallel", PARALLEL)):
            if p[key] not in allowed:
                raise KitError(f"unknown {key} {p[key]!r}: choose {', '.join(allowed)}")
        model = p["model"]
        if model not in TORCHVISION_MODELS:  # a static list: validate runs on the host too, without torchvision
            near = sorted(m for m in TORCHVISION_MODELS if m[:4] == str(model)[:4]) or ["densenet121", "resnet50"]
            raise KitError(
                f"unknown model {model!r}: not one of torchvision's {len(TORCHVISION_MODELS)} classification "
                f"models (e.g. {', '.join(near[:4])}; the list: bench/studies/profile/config.py)"
            )
        if model in NO_LINEAR_HEAD:
            raise KitError(f"model {model!r} ends in a conv classifier, not a Linear one to replace: choose another model")
        if model in AUX_OUTPUTS:
            raise KitError(
                f"model {model!r} returns auxiliary logits while training, which this study's trainer does not take: "
                "choose another model"
            )
        size = p["image_size"]
        if model in FIXED_SIZE and size != FIXED_SIZE[model]:
            need = FIXED_SIZE[model]
            raise KitError(f"model {model!r} takes {need} px images only (image_size={size}): set image_size={need}")
        if model in MIN_SIZE and isinstance(size, int) and size < MIN_SIZE[model]:
            raise KitError(f"model {model!r} needs image_size >= {MIN_SIZE[model]} px (got {size})")
        if cell.variant.split("+")[0] not in TRANSFERS:
            raise KitError(f"unknown transfer {cell.variant!r}: choose {', '.join(TRANSFERS)}")
        checks = [
            ("batch_size", p["batch_size"] >= 1, ">= 1"),
            ("lr", isinstance(p["lr"], float) and math.isfinite(p["lr"]) and p["lr"] > 0, "finite and > 0"),
            ("epochs", p["epochs"] >= 1, ">= 1"),
            ("max_steps", p["max_steps"] >= 0, ">= 0 (0: the whole split)"),
            ("max_eval_batches", p["max_eval_batches"] >= 0, ">= 0 (0: the whole split)"),
            ("image_size", p["image_size"] >= 32, ">= 32 px (DenseNet's pooling needs it)"),
            ("num_workers", p["num_workers"] >= 0, ">= 0"),
            ("threads", p["threads"] >= 0, ">= 0"),
            ("warmup_steps", p["warmup_steps"] >= 0, ">= 0"),
            ("telemetry_hz", 0 < p["telemetry_hz"] <= 100, "in (0, 100]"),
            ("idle_s", p["idle_s"] >= 0, ">= 0"),
            ("prof_active", p["prof_active"] >= 1, ">= 1"),
            ("prof_repeat", p["prof_repeat"] >= 1, ">= 1"),
            ("overhead_blocks", p["overhead_blocks"] >= 1, ">= 1"),
            ("overhead_steps", p["overhead_steps"] >= 1, ">= 1"),
            ("collective_timeout_s", p["collective_timeout_s"] > 0, "> 0"),
        ]
        for key, ok, want in checks:
            if not ok:
                raise KitError(f"{key} must be {want} (got {p[key]!r})")
        devs = cell.devices
        if p["parallel"] != "none" and len(devs) < 2:
            raise KitError(
                f"parallel={p['parallel']} needs two or more devices, e.g. devices=0,1 (got {','.join(devs) or 'none'})"
            )

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        from bench.data import imagefolder

        return cell.with_params(**imagefolder.resolve(cell.params, data_dir))

    def world_size(self, cell: Cell) -> int:
        """One rank per device under the core's torchrun wherever the cell names devices (ddp;
        parallel=none with devices is ddp too); dp: one process over all of them."""
        return 0 if cell.params.get("parallel") == "dp" else len(devices_of(cell))

    def estimate(self, cell: Cell) -> Estimate:
        from bench.studies.profile.config import cost, settings

        per_class = cell.params["synthetic_train_per_class"]  # the real tree: about 4,000 (the seed's)
        real = cell.params.get("dataset") == "catsdogs"
        return Estimate(*cost(settings(cell), 2 * (4000 if real else per_class)))

    # ---- what compare and verify read
    # seed 004: 20 epochs took 13 h on the CPU, 2 h on the GPUs at batch 64, 1 h 15 min at 128
    claims = CLAIMS  # claims.py: every claim of seed 004 that a measurement can check
    throughput_unit = "img/s"
    repeat_is_seed = True  # Settings.seed = cell.seed + cell.repeat

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        return readout.throughput(rows)  # row backend -> the median img/s over its timed epochs

    def speed(self, rows: list[dict], part: str) -> dict[str, Speed]:
        """The training throughput and, where an energy counter was read, the net energy per image."""
        out = super().speed(rows, part)
        jpi = readout.energy_per_image(rows, part)
        if jpi is not None:
            out["energy_per_image"] = Speed(jpi, "J", higher_is_better=False)
        return out

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        return readout.accuracy(rows, part)  # the highest epoch's

    def loss_curve(self, rows: list[dict], part: str):
        return readout.loss_curve(rows, part)

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        """Energy is never negative and the idle baseline lies below the power under load (net
        energy >= 0) wherever measured; a one-process cell measured its sampler's cost and left
        a readable trace of every profiled step."""
        neg, net = readout.energy_below_zero(rows)
        out: list[tuple[str, str | None]] = [
            ("energy >= 0", f"epoch {neg[0]}: it is negative" if neg else None),
            ("idle baseline below the power under load", f"epoch {net[0]}: net energy < 0" if net else None),
        ]
        if readout.one_process(rows):
            measured = readout.sampler_cost_measured(rows)
            out.append(("the sampler's cost measured", None if measured else "no overhead row with a sampler_cost"))
            out.append(("a readable trace of the profiled steps", _unreadable(cell_dir, readout.traces(rows))))
        return out

    def label(self, cell: Cell) -> str:
        p = cell.params
        par = p.get("parallel", "none")
        return f"{cell.backend} {cell.variant} {p.get('pipeline')} b{p.get('batch_size')}" + (
            f" {par} x{len(devices_of(cell))}" if par != "none" else ""
        )

    def progress_line(self, rows: list[dict]) -> str:
        p = readout.progress(rows[0] if rows else {})  # this row's figures as written (a live line)
        acc, jpi, ov = p["acc"], p["jpi"], p["overhead"]
        if p["phase"] == readout.EPOCH_PHASE:
            return (
                f"epoch {p['number']}: {p['seconds']:.2f} s, {p['ips'] or 0:,.0f} img/s"
                + (f", acc {acc:.3f}" if isinstance(acc, float) else "")
                + (f", {jpi:.3f} J/img" if isinstance(jpi, float) else "")
            )
        if p["phase"] == readout.OVERHEAD_PHASE:
            return f"sampler cost {p['cost']:+.2%} of step time"
        if p["phase"] == readout.PROFILE_PHASE:
            return f"profiled {p['profiled']} steps" + (f", profiler overhead {ov:+.1%}" if isinstance(ov, float) else "")
        return ""

    def open(self, cell: Cell, ctx: RunContext):
        from bench.studies.profile.config import settings
        from bench.studies.profile.protocol import open_single  # also one rank of ddp (ctx.dist)

        return open_single(self, settings(cell), cell, ctx)

    def row_flags(self, rows: list[dict]) -> list[str]:
        from bench.studies.profile.protocol import validity_flags

        return validity_flags(rows)

    def check_rows(self, rows: list[dict]) -> str | None:
        from bench.core.study import numbers_missing

        return numbers_missing(rows, readout.NEEDS)

    def report_section(self, cells, out: Path) -> list[str]:
        from bench.studies.profile.report import section

        return section(cells, out)

    def summary(self, cells) -> tuple[list[str], dict[str, Any]]:
        from bench.studies.profile.report import summary

        return summary(cells)


# a trace is read whole to check it is JSON: the references' largest is 3 MB gzip'd, 47 MB unpacked
TRACE_CAPS = bounded.Caps(file_bytes=256 << 20, out_bytes=256 << 20)


def _unreadable(cell_dir: Path | None, traces: list) -> str | None:
    """Why the profile step's traces are not all there and readable gzip JSON (within
    TRACE_CAPS), or None. A trace a committed reference dropped counts where its record
    (`dropped`) is there instead."""
    import json
    import zlib

    if not traces:
        return "the profile row names no trace"
    if cell_dir is None:
        return None  # rows only: the files cannot be looked at
    for name in traces:
        path = Path(cell_dir) / "trace" / Path(str(name)).name
        if not path.exists() and dropped(path) is not None:
            continue  # a committed reference keeps the trace's digest, not the trace
        try:
            json.loads(bounded.read_bytes(path, TRACE_CAPS).decode("utf-8"))
        except KitError as err:
            return f"{path.name}: {str(err).removeprefix(str(path) + ': ')}"
        except (OSError, ValueError, EOFError, RecursionError, zlib.error) as err:
            return f"{path.name}: {type(err).__name__}"
    return None
