"""cifar-opt (seed 002): ResNet-18 and MobileNetV2 on a CIFAR-10 subsample (5,000/1,000),
CPU dynamic quantisation / int8 / compile / Optuna vs GPU AMP / bf16 / channels_last /
compile / CUDA graphs / Optuna; accuracy, epoch time, latency, memory, size; 3 seeds.

    config.py     defaults, variants (the seed's configurations and the kit's), the matrix
    models.py     the torchvision models as the seed built them; an export-friendly copy
    pipeline.py   loader (the seed's DataLoader) | resident (uint8 on the device) | synthetic-gpu
    trainer.py    one training set-up for every device and variant
    search.py     Optuna (journal file, seeded TPE, trial budget, Pareto front / MedianPruner)
    inference.py  deployment forms: fp32, quantize_dynamic, PT2E int8, CUDA graph; latency, size
    protocol.py   one cell: trials, epochs, inference
    backends/     torch-cpu, torch-cuda, torch-mps (available, create)
    report.py     tables and the seed's Figs. 1-4, the searches (budget, distance from chance), Pareto plots
    crossdevice.py  GPU over CPU: each seed configuration's GPU side beside its CPU side, with intervals
    claims.py     every claim of seed 002 as data, judged by bench.core.answers; claims of several
                  conditions per model
    readout.py    the one place a cell's rows become numbers: what the report, the GPU-over-CPU
                  table, the claims and this class's hooks read (rows by their own epoch, trial
                  or form, never by file order)

Importing this package imports no torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

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
from bench.measure.torchdev import TORCHVISION
from bench.studies.cifar_opt import readout
from bench.studies.cifar_opt.backends import Trainer
from bench.studies.cifar_opt.claims import CLAIMS
from bench.studies.cifar_opt.config import (
    CPU_VARIANTS,
    DATASETS,
    MIN_BATCH,
    MODELS,
    MPS_VARIANTS,
    NAMED,
    OBJECTIVES,
    PIPELINES,
    SEED_BATCHES,
    CifarOptConfig,
    matrix_spec,
    parse_variant,
    trial_train_size,
    variant_kind,
)

_B = "bench.studies.cifar_opt.backends."
MAX_RANKS = 16  # devices one cell may name (DDP ranks: GPUs of one host, or gloo ranks on a CPU)
ONE_DEVICE = ("compile", "graphs")  # options that run on one device only (a compiled or captured step under DDP: not here)
GPU_ONLY = ("fp16", "graphs")
MAX_INFER_BATCH = 4096  # the int8 PT2E export's dynamic batch dimension goes up to this


@register_study
class CifarOpt(Study):
    name = "cifar-opt"
    profiles = ANSWER_PROFILES  # smoke, default, full and answer (the same work on every platform)
    title = "cifar-opt (seed 002)"
    seed_doc = "002"
    timing_key = readout.EPOCH_S  # noise flags: CV and outliers over the timed epochs
    timing_unit = "epoch"
    auto_profiles = {"cpu": "smoke"}  # `all` without --profile: the CPU default takes ~15 min on 2 cores (config.CPU_DEFAULT)
    Config = CifarOptConfig
    trainer_protocol = Trainer  # backends/__init__.py
    backends = {
        "torch-cpu": BackendSpec(
            _B + "torch_cpu",
            "cpu",
            CPU_VARIANTS,
            family="torch",
            needs=TORCHVISION,
            max_devices=MAX_RANKS,
            about="eager fp32; quant-dynamic (the seed's); int8 (PT2E, compiled) vs compiled fp32; compile; optuna",
        ),
        "torch-cuda": BackendSpec(
            _B + "torch_cuda",
            "cuda",
            tuple(v for v in NAMED if v not in ("quant-dynamic", "int8")),
            family="torch",
            needs=TORCHVISION,
            max_devices=MAX_RANKS,
            about="default, amp (fp16, the seed's), optuna, or any '+' of bf16, fp16, cl, compile, graphs; tuned = bf16+cl+compile+graphs",
        ),
        "torch-mps": BackendSpec(
            _B + "torch_mps",
            "mps",
            MPS_VARIANTS,
            family="torch",
            needs=TORCHVISION,
            about="Apple GPUs, natively (docker/mps/run.sh)",
        ),
    }

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        if platform not in PLATFORMS:
            raise KitError(f"unknown platform {platform!r}: choose {', '.join(PLATFORMS)}")
        if profile not in ANSWER_PROFILES:
            raise KitError(f"unknown profile {profile!r}: choose {', '.join(ANSWER_PROFILES)}")
        backend = {"cpu": "torch-cpu", "cuda": "torch-cuda", "mps": "torch-mps"}[platform]
        cells = []
        for model, variant, params in matrix_spec(platform, profile):
            p = {"model": model, **params}
            suffix = "" if p.get("pipeline", "loader") == "loader" else f"_{p['pipeline']}"
            suffix += f"_b{p['batch_size']}" if "batch_size" in p else ""
            cells.append(self.cell(backend, variant, name=f"{backend}_{model}_{variant}{suffix}", **p))
        return cells

    def trained_work(self, facets: dict) -> dict:
        """A search's trials count only where the cell searches (variant optuna)."""
        work = super().trained_work(facets)
        if variant_kind(str(facets.get("variant"))) != "optuna":
            work.pop("trials", None)
        return work

    def deferred(self, cell: Cell) -> bool:
        """Compiled cells (tuned, compile, graphs; the CPU's int8 through inductor): 10-60 s of compile first."""
        try:
            opts = parse_variant(cell.variant)
        except KitError:
            return False
        return cell.variant == "int8" or bool({"compile", "graphs"} & set(opts))

    def takes_devices(self, cell: Cell) -> bool:
        one = set(parse_variant(cell.variant)) & set(ONE_DEVICE) or cell.variant in ("tuned", "optuna", "int8", "quant-dynamic")
        return super().takes_devices(cell) and not one

    def validate(self, cell: Cell) -> None:
        spec = self.backend_spec(cell.backend)
        p = cell.params
        for key in CifarOptConfig.__dataclass_fields__:
            if key not in p:
                raise KitError(f"cifar-opt cell lacks parameter {key!r}")
        opts = parse_variant(cell.variant)
        if spec.platform != "cuda":
            gpu = [o for o in opts if o in GPU_ONLY] or (["amp"] if cell.variant == "amp" else [])
            if gpu or cell.variant == "tuned":
                raise KitError(
                    f"variant {cell.variant!r} is a GPU variant ({', '.join(gpu) or 'graphs'} needs CUDA); "
                    f"{cell.backend} runs {', '.join(spec.variants)} or a '+' of bf16, cl, compile"
                )
            if cell.variant not in spec.variants and cell.variant in NAMED:
                raise KitError(f"{cell.backend} has no variant {cell.variant!r}: choose {', '.join(spec.variants)}")
        elif cell.variant in ("quant-dynamic", "int8"):
            raise KitError(f"variant {cell.variant!r} is a CPU variant (x86 int8 kernels); run it on torch-cpu")
        self.validate_devices(cell)
        if cell.devices and not self.takes_devices(cell):
            raise KitError(
                f"variant {cell.variant!r} runs on one device; devices={','.join(cell.devices)} (DDP) takes "
                "default, amp or a '+' of bf16, fp16, cl"
            )
        checks = [
            ("epochs", p["epochs"] >= 1, ">= 1"),
            ("batch_size", p["batch_size"] >= MIN_BATCH, f">= {MIN_BATCH} (BatchNorm cannot train on one image per batch)"),
            ("lr", isinstance(p["lr"], float) and math.isfinite(p["lr"]) and p["lr"] > 0, "finite and > 0"),
            ("momentum", 0 <= p["momentum"] < 1, "in [0, 1)"),
            ("weight_decay", p["weight_decay"] >= 0, ">= 0"),
            ("n_train", p["n_train"] >= 10, ">= 10 (one image per class)"),
            ("n_test", p["n_test"] >= 10, ">= 10 (one image per class)"),
            ("num_workers", p["num_workers"] >= -1, ">= 0, or -1 for the seed's count"),
            ("threads", p["threads"] >= 0, ">= 0"),
            ("latency_calls", p["latency_calls"] >= 1, ">= 1"),
            ("latency_warmup", p["latency_warmup"] >= 0, ">= 0"),
            (
                "infer_batch",
                1 <= p["infer_batch"] <= MAX_INFER_BATCH,
                f"from 1 to {MAX_INFER_BATCH} (the int8 export's batch range)",
            ),
            ("calib_batches", p["calib_batches"] >= 1, ">= 1"),
            ("trials", p["trials"] >= 1, ">= 1"),
            ("trial_budget_s", p["trial_budget_s"] >= 0, ">= 0 (0: no limit)"),
            ("trial_epochs", p["trial_epochs"] >= 1, ">= 1"),
            ("val_fraction", 0 < p["val_fraction"] <= 0.5, "in (0, 0.5]"),
            ("chance_epochs", p["chance_epochs"] >= 1, ">= 1"),
        ]
        for key, ok, want in checks:
            if not ok:
                raise KitError(f"{key} must be {want} (got {p[key]!r})")
        for key, allowed in (("model", MODELS), ("dataset", DATASETS), ("pipeline", PIPELINES), ("objective", OBJECTIVES)):
            if p[key] not in allowed:
                raise KitError(f"unknown {key} {p[key]!r}: choose {', '.join(allowed)}")
        if p["batch_size"] > p["n_train"]:
            raise KitError(f"batch_size {p['batch_size']} is larger than the training subsample (n_train {p['n_train']})")
        if variant_kind(cell.variant) == "optuna":
            left, tried = trial_train_size(p["n_train"], p["val_fraction"]), SEED_BATCHES[spec.platform]
            if not any(MIN_BATCH <= b <= left for b in tried):
                raise KitError(
                    f"optuna: a trial trains on {left} images (n_train {p['n_train']} less the val_fraction held out), "
                    f"fewer than its smallest batch size ({min(tried)}): raise n_train"
                )
        if variant_kind(cell.variant) == "int8" and p["batch_size"] * p["calib_batches"] > p["n_train"]:
            raise KitError(
                f"int8 calibration wants {p['calib_batches']} batches of {p['batch_size']}, more than n_train {p['n_train']}"
            )

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        from bench.data import cifar10

        return cell.with_params(**cifar10.resolve(cell.params, data_dir))

    def cell_unavailable(self, cell: Cell) -> str | None:
        why = self.why_unavailable(cell.backend)
        if why:
            return why
        need = {"int8": ("torchao", "int8 PT2E needs torchao"), "optuna": ("optuna", "the search needs optuna")}.get(
            variant_kind(cell.variant)
        )
        if self.backend_spec(cell.backend).platform == "cpu" and (
            variant_kind(cell.variant) == "int8" or "compile" in parse_variant(cell.variant)
        ):
            import os
            import shutil

            if not any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++")):
                return "torch.compile on the CPU needs a C++ compiler (g++ or clang++) on PATH; none found"
        if need:
            import importlib.util

            if importlib.util.find_spec(need[0]) is None:
                return f"{need[1]} (pip install {need[0]}; the locks pin it)"
        return None

    def estimate(self, cell: Cell) -> Estimate:
        from bench.studies.cifar_opt.config import cost, settings

        steps, open_s, step_s, serial_s = cost(settings(cell))
        return Estimate(steps, open_s, step_s, serial_s)

    # ---- what compare, verify and the answer engine read
    claims = CLAIMS  # claims.py: every claim of seed 002 that a measurement can check
    throughput_unit = "img/s"
    repeat_is_seed = True  # Settings.seed = cell.seed + cell.repeat

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        """Row backend -> the median training img/s over its epochs (readout.throughput)."""
        return readout.throughput(rows)

    def epoch_samples(self, cell: Any) -> int | None:
        """An epoch is the stratified subsample's training part (n_train), not the whole set."""
        return readout.epoch_images(cell)

    def speed(self, rows: list[dict], part: str) -> dict[str, Speed]:
        """The training throughput and each deployment form's batch-1 latency p50."""
        out = super().speed(rows, part)
        for form, ms in readout.latencies(rows, part).items():
            out[f"latency_p50[{form}]"] = Speed(ms, "ms", higher_is_better=False)
        return out

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        """The test accuracy after the highest epoch (readout.accuracy)."""
        return readout.accuracy(rows, part)

    def loss_curve(self, rows: list[dict], part: str):
        return readout.loss_curve(rows, part)

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        """An int8 form is smaller than the fp32 form it came from (a PT2E model whose weights this
        torch did not fold to int8 is barely smaller: an environment's property, flagged in the
        report, not a broken cell); every form's latency percentiles are ordered p50 <= p90 <= p99."""
        out: list[tuple[str, str | None]] = []
        for f, fp32, a, b in readout.int8_sizes(rows):
            held = a is not None and b is not None and a < b
            out.append((f"{f} smaller than {fp32}", None if held else f"{a} MB vs {b} MB"))
        for f, (p50, p90, p99) in readout.latency_percentiles(rows).items():
            ordered = p50 <= p90 <= p99
            out.append((f"{f} latency p50 <= p90 <= p99", None if ordered else f"{p50:.4g}, {p90:.4g}, {p99:.4g} ms"))
        return out

    def label(self, cell: Cell) -> str:
        p = cell.params
        return f"{cell.backend} {p.get('model')} {cell.variant} {p.get('pipeline')} b{p.get('batch_size')}"

    def progress_line(self, rows: list[dict]) -> str:
        return readout.progress_line(rows)

    def open(self, cell: Cell, ctx: RunContext):
        from bench.studies.cifar_opt.protocol import open_cell

        return open_cell(self, cell, ctx)

    def row_flags(self, rows: list[dict]) -> list[str]:
        from bench.studies.cifar_opt.protocol import validity_flags

        return validity_flags(rows)

    def check_rows(self, rows: list[dict]) -> str | None:
        from bench.core.study import numbers_missing

        return numbers_missing(rows, readout.NEEDS)

    def report_section(self, cells, out: Path) -> list[str]:
        from bench.studies.cifar_opt.report import section

        return section(cells, out)

    def summary(self, cells) -> tuple[list[str], dict[str, Any]]:
        from bench.studies.cifar_opt.report import summary

        return summary(cells)
