"""roofline (seed 003): ResNet-18/50, MobileNetV2 and SqueezeNet1.1 (torchvision, 200 classes,
64x64) on Tiny-ImageNet, one epoch under a fixed max of batches, on every device present:
train/val throughput, FLOPs counted at the real input, achieved FLOP/s, arithmetic intensity
from counted bytes, the fraction of the device's MEASURED roof, utilisation, peak memory, and
a batch sweep to the first OOM; rooflines per device and per model.

    config.py     defaults, precisions, the matrix (scenario A: one run; B: batch sweep)
    roofmath.py   bytes affine in the batch, attainable roof, roof fraction (no torch)
    trainer.py    model, counts, pipelines (loader | synthetic-gpu), timed passes, OOM test
    protocol.py   one cell: open (count, roofs, warm-up), steps, the sweep's end
    seed.py       the seed's Tables 1-8, transcribed; its epoch (6,400 images, from Tables 3 and 4)
    backends/     torch-cpu, torch-cuda, torch-mps (available, create)
    readout.py    the one place a cell's rows become numbers: what the report, the claims (their per-repeat
                  metrics and the findings they rest on) and the Study hooks read, rows in their own order
    report.py     Table 8 with intervals, the seed's tables beside ours, roofline plots per device and per model
    claims.py     every checkable claim of the seed as data (bench.core.claims), judged by bench.core.answers

Importing this package imports no torch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import register_study
from bench.core.study import ANSWER_PROFILES, PLATFORMS, BackendSpec, Estimate, RunContext, Study
from bench.measure.torchdev import TORCHVISION
from bench.studies.roofline import readout
from bench.studies.roofline.backends import Trainer
from bench.studies.roofline.claims import CLAIMS
from bench.studies.roofline.config import (
    DATASETS,
    MODELS,
    PIPELINES,
    PRECISIONS,
    ROOF_SIZES,
    SCENARIOS,
    STEPS,
    VARIANTS,
    RooflineConfig,
    matrix_spec,
)

_B = "bench.studies.roofline.backends."
MAX_RANKS = 16  # devices one scenario-A cell may name (DDP ranks: GPUs of one host, or gloo ranks on a CPU)
BACKEND_OF = {"cpu": "torch-cpu", "cuda": "torch-cuda", "mps": "torch-mps"}


@register_study
class Roofline(Study):
    name = "roofline"
    profiles = ANSWER_PROFILES  # smoke, default, full and answer (the same work on every platform)
    title = "roofline (seed 003)"
    seed_doc = "003"
    timing_key = readout.PASS_S  # a scenario-A pass's seconds (noise flags)
    timing_unit = "pass"
    auto_profiles = {"cpu": "smoke"}  # `all` without --profile: four models on a laptop CPU take long
    Config = RooflineConfig
    trainer_protocol = Trainer  # backends/__init__.py
    backends = {
        "torch-cpu": BackendSpec(
            _B + "torch_cpu",
            "cpu",
            VARIANTS["cpu"],
            max_devices=MAX_RANKS,
            family="torch",
            needs=TORCHVISION,
            about="fp32, loader | synthetic-gpu, batch sweep",
        ),
        "torch-cuda": BackendSpec(
            _B + "torch_cuda",
            "cuda",
            VARIANTS["cuda"],
            max_devices=MAX_RANKS,
            family="torch",
            needs=TORCHVISION,
            about="fp32 (TF32 off), tf32, bf16-cl (bf16 autocast + channels_last)",
        ),
        "torch-mps": BackendSpec(
            _B + "torch_mps",
            "mps",
            VARIANTS["mps"],
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
        backend = BACKEND_OF[platform]
        cells = []
        for model, precision, p in matrix_spec(platform, profile):
            tail = f"{p['pipeline']}_b{p['batch_size']}" if p["scenario"] == "A" else "sweep"
            cells.append(self.cell(backend, precision, name=f"{backend}_{model}_{precision}_{tail}", model=model, **p))
        return cells

    def takes_devices(self, cell: Cell) -> bool:
        return super().takes_devices(cell) and cell.params.get("scenario") == "A"  # the sweep ends at an OOM: one device

    def validate(self, cell: Cell) -> None:
        spec = self.backend_spec(cell.backend)
        p = cell.params
        for key in RooflineConfig.__dataclass_fields__:
            if key not in p:
                raise KitError(f"roofline cell lacks parameter {key!r}")
        if cell.variant not in PRECISIONS:
            raise KitError(f"unknown roofline precision {cell.variant!r}: choose {', '.join(PRECISIONS)}")
        if cell.variant not in spec.variants:
            raise KitError(f"precision {cell.variant!r} is a CUDA precision; {cell.backend} runs {', '.join(spec.variants)}")
        self.validate_devices(cell)
        if cell.devices and p["scenario"] != "A":
            raise KitError(
                f"scenario {p['scenario']} (the batch sweep, which ends at an out-of-memory error) runs on one device; "
                f"devices={','.join(cell.devices)} (DDP) runs scenario A"
            )
        for key, allowed in (
            ("model", MODELS),
            ("scenario", SCENARIOS),
            ("pipeline", PIPELINES),
            ("step", STEPS),
            ("dataset", DATASETS),
            ("roof_sizes", ROOF_SIZES),
        ):
            if p[key] not in allowed:
                raise KitError(f"unknown {key} {p[key]!r}: choose {', '.join(allowed)}")
        checks = [
            ("batch_size", p["batch_size"] >= 1, ">= 1"),
            ("max_train_batches", p["max_train_batches"] >= 0, ">= 0 (0: the whole split)"),
            ("max_val_batches", p["max_val_batches"] >= 0, ">= 0 (0: the whole split)"),
            ("warmup_batches", p["warmup_batches"] >= 0, ">= 0"),
            ("lr", isinstance(p["lr"], float) and math.isfinite(p["lr"]) and p["lr"] > 0, "finite and > 0"),
            ("momentum", 0 <= p["momentum"] < 1, "in [0, 1)"),
            ("num_workers", p["num_workers"] >= 0, ">= 0"),
            ("threads", p["threads"] >= 0, ">= 0"),
            ("sweep_min_batch", p["sweep_min_batch"] >= 1, ">= 1"),
            ("sweep_max_batch", p["sweep_max_batch"] >= p["sweep_min_batch"], ">= sweep_min_batch"),
            ("sweep_batches", p["sweep_batches"] >= 1, ">= 1"),
            ("sweep_mem_fraction", 0 < p["sweep_mem_fraction"] <= 1, "in (0, 1]"),
            ("synthetic_classes", p["synthetic_classes"] >= 1, ">= 1"),
            ("synthetic_train_per_class", p["synthetic_train_per_class"] >= 1, ">= 1"),
            ("synthetic_val_per_class", p["synthetic_val_per_class"] >= 1, ">= 1"),
        ]
        for key, ok, want in checks:
            if not ok:
                raise KitError(f"{key} must be {want} (got {p[key]!r})")
        if p["scenario"] == "B" and p["pipeline"] != "synthetic-gpu":
            raise KitError("scenario B (the batch sweep) runs on a fixed device batch: set pipeline=synthetic-gpu")
        if p["step"] == "cuda-graph" and spec.platform != "cuda":
            raise KitError(f"step=cuda-graph captures the step as a CUDA graph: it runs on a CUDA backend, not {cell.backend}")
        if p["step"] == "cuda-graph" and cell.devices:
            raise KitError("step=cuda-graph runs on one device; devices=... (DDP) runs step=eager")

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        from bench.data import tinyimagenet

        return cell.with_params(**tinyimagenet.resolve(cell.params, data_dir))

    def estimate(self, cell: Cell) -> Estimate:
        from bench.studies.roofline.config import cost, settings

        return Estimate(*cost(settings(cell)))

    # ---- what compare, verify and the answer engine read
    claims = CLAIMS  # claims.py: every claim of seed 003 that a measurement can check
    throughput_unit = "img/s"
    repeat_is_seed = True  # Settings.seed = cell.seed + cell.repeat

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        """The training pass's img/s (scenario A; a sweep's points are per batch size: none)."""
        return readout.throughput(rows)

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        return readout.accuracy(rows, part)

    def loss_curve(self, rows: list[dict], part: str):
        return readout.loss_curve(rows, part)

    def equivalence(self, rows: list[dict]) -> tuple[list[str], list[str]]:
        """The default check, and a note for each point above a roof measured on a busy machine
        (not held to it: the invariant below holds the others)."""
        bad, info = super().equivalence(rows)
        low = readout.above_roof(rows, busy=True)
        if low:
            info = [*info, f"{low[0][0]} at {low[0][1]:.3f} of a roof measured under load: not held to it"]
        return bad, info

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        """No point above its measured roof (where the roof was measured on a quiet machine: a roof
        measured under load is low, `equivalence` names such a point); achieved FLOP/s = img/s per
        device x FLOPs per image (within 1 %); the FLOPs used are the counter's where the row says
        `counter`."""
        above, off = readout.above_roof(rows), readout.flops_off(rows)
        return [
            ("roof_fraction <= 1", f"{above[0][0]} at {above[0][1]:.3f}" if above else None),
            ("achieved FLOP/s = img/s x FLOPs/img", f"{off[0][0]} b{off[0][1]}: it is not" if off else None),
            ("FLOPs used = the counter's where the row says counter", "they differ" if readout.miscounted(rows) else None),
        ]

    def label(self, cell: Cell) -> str:
        p = cell.params
        what = f"{p.get('pipeline')} b{p.get('batch_size')}" if p.get("scenario") == "A" else "sweep"
        graph = " graph" if p.get("step") == "cuda-graph" else ""
        return f"{cell.backend} {p.get('model')} {cell.variant}{graph} {what}"

    def progress_line(self, rows: list[dict]) -> str:
        got = readout.progress(rows)
        if got is None:
            return ""
        phase, batch, ips, gflops, frac = got
        return f"{phase} b{batch}: {ips:,.0f} img/s, {gflops:,.1f} GFLOP/s" + (
            f", {frac:.1%} of roof" if frac is not None else ""
        )

    def open(self, cell: Cell, ctx: RunContext):
        from bench.studies.roofline.protocol import open_cell

        return open_cell(self, cell, ctx)

    def row_flags(self, rows: list[dict]) -> list[str]:
        from bench.studies.roofline.protocol import validity_flags

        return validity_flags(rows)

    def check_rows(self, rows: list[dict]) -> str | None:
        return readout.missing(rows)

    def report_section(self, cells, out: Path) -> list[str]:
        from bench.studies.roofline.report import section

        return section(cells, out)

    def summary(self, cells) -> tuple[list[str], dict[str, Any]]:
        from bench.studies.roofline.report import summary

        return summary(cells)
