"""mnist-cnn (seed 000): the 8c3-pool-16c3-pool-128-10 CNN on MNIST, 10 epochs, batch 512,
SGD 0.01 momentum 0.9, on torch (cpu, cuda, mps) and hand-written Numba kernels (cpu, cuda).

    config.py     defaults, platform matrix, profiles
    protocol.py   one cell: data, weights, warm-up, then one step per epoch
    net.py        the parameter layout every backend shares (and the analytic FLOP count)
    backends/     one thin module per backend (available, create); Trainer protocol
    kernels/      the hand-written Numba kernels (numbered variants, NumPy references)
    readout.py    where its rows become numbers: epoch rows by epoch number, Table I's figures
    report.py     Table I, the seed's numbers, the same-session ratios; plots.py: Fig. 1
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
    Study,
    curve,
    number,
    ok_rows,
)
from bench.studies.mnist_cnn import readout
from bench.studies.mnist_cnn.backends import Trainer
from bench.studies.mnist_cnn.claims import CLAIMS
from bench.studies.mnist_cnn.config import (
    ANSWER_EXTRA,
    DATASET_SIZES,
    DATASETS,
    FULL_EXTRA,
    GPU_STEP_COST,
    INITS,
    INPUT_SCALES,
    PLATFORM_CELLS,
    PROFILE_PARAMS,
    SGD_FORMS,
    STEP_COST,
    VARIANT_PARAMS,
    MnistCnnConfig,
)

_B = "bench.studies.mnist_cnn.backends."
CUDA_VARIANTS = ("default", "tuned", "graphs", "graphs+bf16", "graphs+bf16+cl", "compile", "compile+graphs", "bf16", "cl")
BOTH = ("seed", "resident")
MAX_RANKS = 16  # devices one torch cell may name: GPUs of one host, or gloo ranks on a CPU  # pipelines: per-sample transforms through a DataLoader | one normalised tensor


# a seed setup is its settings too (its Numba code: its own init, input scaling and SGD; its
# PyTorch: torch's), run over 3 or 10 epochs: the seed-setup comparisons let those differ


@register_study
class MnistCnn(Study):
    name = "mnist-cnn"
    profiles = ANSWER_PROFILES  # smoke, default, full and answer (the same work on every platform)
    reference_sets = ("dataset=mnist",)  # a reference trains on real MNIST
    # real MNIST at the seed's 10 epochs made this study's first round 4.5 min on an H200 host (the seed
    # pipeline: 91 s a CPU cell, 79 s a GPU one), a fifth of the one-GPU reference's budget: 2 epochs there
    gpu_reference_sets = ("epochs=2",)
    title = "mnist-cnn (seed 000)"
    seed_doc = "000"
    timing_key = "epoch_s"  # noise flags: CV and outliers over the timed epochs
    timing_unit = "epoch"
    Config = MnistCnnConfig
    trainer_protocol = Trainer  # backends/__init__.py
    backends = {
        "torch-cpu": BackendSpec(
            _B + "torch_cpu",
            "cpu",
            family="torch",
            pipelines=BOTH,
            max_devices=MAX_RANKS,
            about="nn.Module + autograd + torch.optim.SGD on the CPU; devices=cpu,cpu: DDP over gloo ranks",
        ),
        "numba-cpu": BackendSpec(
            _B + "numba_cpu",
            "cpu",
            ("default", "seed"),
            family="numba",
            pipelines=("resident",),
            about="hand-written @njit(parallel=True) kernels, full backprop (seed: dense layers only, as seed 000)",
        ),
        "torch-cuda": BackendSpec(
            _B + "torch_cuda",
            "cuda",
            CUDA_VARIANTS,
            family="torch",
            pipelines=BOTH,
            max_devices=MAX_RANKS,
            about="eager, or any '+' of graphs, bf16, fp16, cl, compile; tuned = compile+graphs; devices=0,1: DDP (default)",
        ),
        "numba-cuda": BackendSpec(
            _B + "numba_cuda",
            "cuda",
            ("default", "naive", "graph", "seed"),
            family="numba",
            pipelines=("resident",),
            about="hand-written numba.cuda kernels, 3 launches a step (naive: 30; graph: 6, batched dense layers, "
            "an epoch as one CUDA graph; seed: GPU forward, dense backprop on the CPU)",
        ),
        "torch-mps": BackendSpec(
            _B + "torch_mps", "mps", family="torch", pipelines=BOTH, about="Apple GPUs, natively (docker/mps/run.sh)"
        ),
    }

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        if platform not in PLATFORMS:
            raise KitError(f"unknown platform {platform!r}: choose {', '.join(PLATFORMS)}")
        if profile not in PROFILE_PARAMS:
            raise KitError(f"unknown profile {profile!r}: choose {', '.join(PROFILE_PARAMS)}")
        spec = PLATFORM_CELLS[platform] + (FULL_EXTRA.get(platform, []) if profile == "full" else [])
        spec += ANSWER_EXTRA.get(platform, []) if profile == "answer" else []
        listed = {b for b, _, _ in spec}
        # a backend added by its registry entry alone runs its default variant on each of its pipelines
        spec += [
            (b, p, "default")
            for b, s in self.backends.items()
            if s.platform == platform and b not in listed
            for p in s.pipelines or ("resident",)
        ]
        cells = []
        for b, p, v in spec:
            params: dict[str, Any] = {"pipeline": p, **VARIANT_PARAMS.get((b, v), {}), **PROFILE_PARAMS[profile]}
            cells.append(self.cell(b, v, name=f"{b}_{p}_{v}", **params))
        return cells

    def deferred(self, cell: Cell) -> bool:
        """The compiled and graph-captured variants (tuned, graphs, compile): their warm-up compiles first."""
        return any(k in cell.variant for k in ("tuned", "graph", "compile"))

    def takes_devices(self, cell: Cell) -> bool:
        return super().takes_devices(cell) and cell.variant == "default"  # graphs, compile: one device

    def validate(self, cell: Cell) -> None:
        super().validate(cell)  # the backend's variants, pipelines and own rules; every parameter present
        spec, p = self.backend_spec(cell.backend), cell.params
        checks = [
            ("epochs", p["epochs"] > 0, "> 0"),
            ("batch_size", p["batch_size"] > 0, "> 0"),
            ("lr", math.isfinite(p["lr"]) and p["lr"] > 0, "finite and > 0"),
            ("threads", p["threads"] >= 0, ">= 0"),
            ("limit_train", p["limit_train"] >= 0, ">= 0"),
            ("momentum", 0 <= p["momentum"] < 1, "in [0, 1)"),
        ]
        for key, ok, want in checks:
            if not ok:
                raise KitError(f"{key} must be {want} (got {p[key]})")
        if p["last_batch"] not in ("pad", "drop"):
            raise KitError(f"last_batch must be pad or drop (got {p['last_batch']!r})")
        if p["dataset"] not in DATASETS:
            raise KitError(f"unknown dataset {p['dataset']!r}: choose {', '.join(DATASETS)}")
        if p["init"] not in INITS:
            raise KitError(f"unknown init {p['init']!r}: choose {', '.join(INITS)}")
        if p["input_scale"] not in INPUT_SCALES:
            raise KitError(f"unknown input_scale {p['input_scale']!r}: choose {', '.join(INPUT_SCALES)}")
        if p["sgd"] not in SGD_FORMS:
            raise KitError(f"unknown sgd {p['sgd']!r}: choose {', '.join(SGD_FORMS)}")
        if p["sgd"] == "seed" and not (cell.variant == "seed" and "seed" in spec.variants):
            raise KitError(
                f"sgd=seed (seed 000's update) is implemented by the seed variants only "
                f"({', '.join(b for b, s in self.backends.items() if 'seed' in s.variants)}), not {cell.backend} {cell.variant}"
            )
        if spec.family == "torch" and p["input_scale"] != "normalize":
            raise KitError(
                f"{cell.backend} scales its input one way only (input_scale=normalize, as seed 000's PyTorch runs); "
                f"input_scale={p['input_scale']} is for the hand-written backends"
            )

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        from bench.data.digits import load_cached, resolve_params

        ds = load_cached(data_dir, cell.params["dataset"])
        # the cell records the samples it really trains on: a limit above the set is the whole set (0)
        limit = cell.params["limit_train"] if cell.params["limit_train"] < len(ds.y_train) else 0
        n = limit or len(ds.y_train)
        if cell.params["batch_size"] > n:
            raise KitError(f"batch_size {cell.params['batch_size']} is larger than the training set ({n} samples of {ds.name})")
        return cell.with_params(limit_train=limit, **resolve_params(cell.params, data_dir))

    def estimate(self, cell: Cell) -> Estimate:
        p = cell.params
        train, test = DATASET_SIZES.get(str(p.get("dataset")), DATASET_SIZES["mnist"])
        n = min(p["limit_train"] or train, train)
        n = -(-n // p["batch_size"]) * p["batch_size"]  # padded to whole batches
        gpu = self.backend_spec(cell.backend).platform != "cpu"
        per_sample, per_test, open_s = GPU_STEP_COST if gpu else STEP_COST.get((cell.backend, p["pipeline"]), (60e-6, 55e-6, 4.0))
        return Estimate(steps=p["epochs"], open_s=open_s, step_s=n * per_sample + test * per_test)

    # Seed 000's objectives as throughput ratios (its Table I: 71,758 / 30,501 / 6,948 / 6,645 /
    # 5,340 samples/s); "seed setup" = its own Numba (dense-layer backprop) and PyTorch
    # (per-sample DataLoader) setups, "kit setup" = every layer trained on resident data
    claims = CLAIMS  # claims.py: every claim of seed 000 that a measurement can check
    repeat_is_seed = True  # Settings.seed = cell.seed + cell.repeat (config.settings)

    # ---- what compare and verify read
    throughput_unit = "samples/s"

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        return readout.throughput(rows)  # row backend -> the median over its epochs

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        acc = readout.accuracy(rows, part)  # the highest epoch's
        return None if acc is None else (readout.ACC, acc)

    def param_count(self, rows: list[dict], part: str) -> int | None:
        from bench.studies.mnist_cnn.net import n_params  # numpy only: every backend trains this one net

        return n_params()

    def loss_curve(self, rows: list[dict], part: str):
        return curve(readout.epoch_rows(rows, part), readout.EPOCH, "train_loss")

    def equivalence(self, rows: list[dict]) -> tuple[list[str], list[str]]:
        """A hand-written GPU kernel (a numba backend on cuda) records its check against torch
        (equiv_ok) in every epoch row; it must be there and true."""
        why, info = super().equivalence(rows)
        kernels = {b for b, s in self.backends.items() if s.family == "numba" and s.platform == "cuda"}
        gpu = [r for r in ok_rows(rows) if r.get("backend") in kernels and r.get("epoch") is not None]
        if gpu and any("equiv_ok" not in r for r in gpu):
            why.append(f"{gpu[0]['backend']} rows carry no equivalence check (equiv_ok)")
        elif gpu:
            info.append(f"equivalence ok (max rel err {max(number(r.get('equiv_max_rel_err')) or 0.0 for r in gpu):.1e})")
        return why, info

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        """Each epoch's throughput is its samples over its time (a throughput that is only a label fails)."""
        bad = [
            r["epoch"]
            for r in ok_rows(rows)
            if r.get("epoch") is not None
            and (s := number(r.get("samples")))
            and (t := number(r.get("epoch_s")))
            and (v := number(r.get("samples_per_s")))
            and abs(v - s / t) > 1e-6 * v
        ]
        return [("samples_per_s = samples / epoch_s", f"epoch {bad[0]}: it is not" if bad else None)]

    def label(self, cell: Cell) -> str:
        return f"{cell.backend} {cell.params.get('pipeline')} {cell.variant}"

    def progress_line(self, rows: list[dict]) -> str:
        r = next((r for r in rows if r.get("epoch") is not None), None)
        if not r:
            return ""
        # this epoch's row as it is (a live line, no figure of the cell: those are readout.py's)
        return f"epoch {r['epoch']}: {r['epoch_s']:8.3f} s {r['samples_per_s']:>12,.0f} samples/s  acc {r[readout.ACC]:.4f}"

    def open(self, cell: Cell, ctx: RunContext):
        from bench.studies.mnist_cnn.protocol import open_cell

        return open_cell(self, cell, ctx)

    def check_rows(self, rows: list[dict]) -> str | None:
        from bench.core.schema import measured_problem

        need = readout.TABLE1_NEEDS  # what Table I reads (and divides by)
        for r in rows:
            if r.get("status") not in ("ok", "incomplete") or r.get("epoch") is None:
                continue
            for k in need:
                why = measured_problem(k, r.get(k))
                if why:
                    return f"epoch {r.get('epoch')}: {why}"
        return None

    def report_section(self, cells, out: Path) -> list[str]:
        from bench.studies.mnist_cnn.report import section

        return section(cells, out)

    def summary(self, cells):
        from bench.studies.mnist_cnn.report import summary

        return summary(cells)
