"""mlp-scratch (seed 001): a 784-10-10 MLP written once against an `xp` array module,
full-batch gradient descent, on NumPy and CuPy (naive, as the seed wrote it, and tuned).

    config.py      defaults, profiles (one cell per dtype)
    protocol.py    one cell: check, interleaved plain runs, op breakdown, memory, convergence
    net.py         the network against `xp` (NumPy or CuPy, one code path)
    tuned_cupy.py  the tuned CuPy variant (CUDA graph, fused kernels)
    runner.py      plain run, op-breakdown run, memory breakdown, convergence (plain dicts
                   out) for any runner.Backend
    backends/      numpy, cupy, cupy-tuned: one module each (available, create)
    readout.py     the one place a cell's rows become numbers: what the report, the claims and the
                   Study hooks below read
    claims.py      every claim of the seed as data (the answer engine judges them: bench.core.answers)
    report.py      Tables 3-5 and the convergence plot (Fig. 3), numbers only

`MlpScratch.backends` is the only list of backends: a platform's cell, the reference and
the validation messages all derive from it, so a backend is one module plus one entry.

Nothing here imports CuPy at import time; a CPU-only host never needs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import register_study
from bench.core.study import ANSWER_PROFILES, PLATFORMS, BackendSpec, Estimate, RunContext, Study, ok_rows
from bench.studies.mlp_scratch import readout
from bench.studies.mlp_scratch.backends import Trainer
from bench.studies.mlp_scratch.claims import CLAIMS
from bench.studies.mlp_scratch.config import (
    FIXED_ITER_S,
    GPU_ITER_S,
    OPEN_S,
    PER_SAMPLE_ITER_S,
    PROFILE_DTYPES,
    PROFILE_PARAMS,
    SPAWN_S,
    TRAIN_SAMPLES,
    MlpConfig,
)

_B = "bench.studies.mlp_scratch.backends."


@register_study
class MlpScratch(Study):
    name = "mlp-scratch"
    profiles = ANSWER_PROFILES  # smoke, default, full and answer (the same work on every platform)
    reference_sets = ("dataset=mnist",)  # a reference trains on real MNIST
    title = "mlp-scratch (seed 001)"
    seed_doc = "001"
    timing_key = readout.TOTAL  # noise flags: CV and outliers over the timed runs
    timing_unit = "run"
    Config = MlpConfig
    trainer_protocol = Trainer  # backends/__init__.py
    backends = {
        "numpy": BackendSpec(_B + "numpy_xp", "cpu", about="net.py on NumPy (the host BLAS)", family="numpy"),
        "cupy": BackendSpec(_B + "cupy_xp", "cuda", about="net.py on CuPy, as the seed wrote it", family="cupy"),
        "cupy-tuned": BackendSpec(_B + "cupy_tuned", "cuda", about="fused kernels + one CUDA graph per step", family="cupy"),
    }

    @classmethod
    def reference(cls) -> str:
        """The backend every check, convergence curve and speedup compares with: the first of
        the numpy family, in registry order."""
        return next(n for n, s in cls.backends.items() if s.family == "numpy")

    def platform_backend(self, platform: str) -> str | None:
        """The backend of PLATFORM's cells: the cpu backends and the platform's own, '+'-joined
        in registry order (cpu: "numpy", cuda: "numpy+cupy+cupy-tuned"); None where the
        platform has none of its own (mps). One cell per platform and dtype: its backends
        run side by side in one process, so Table 3's speedups are ratios of medians from one
        session."""
        if not any(s.platform == platform for s in self.backends.values()):
            return None
        return "+".join(n for n, s in self.backends.items() if s.platform in ("cpu", platform))

    @staticmethod
    def parts(cell: Cell) -> list[str]:
        return cell.backend.split("+")

    def matrix(self, platform: str, profile: str) -> list[Cell]:
        if platform not in PLATFORMS:
            raise KitError(f"unknown platform {platform!r}: choose {', '.join(PLATFORMS)}")
        if profile not in PROFILE_PARAMS:
            raise KitError(f"unknown profile {profile!r}: choose {', '.join(PROFILE_PARAMS)}")
        backend = self.platform_backend(platform)
        if backend is None:
            return []  # no mps backend of this study
        params: dict[str, Any] = dict(PROFILE_PARAMS[profile])
        return [self.cell(backend, name=f"{backend}_{dt}", **{**params, "dtype": dt}) for dt in PROFILE_DTYPES[profile]]

    def validate(self, cell: Cell) -> None:
        from bench.studies.mlp_scratch import net

        parts = self.parts(cell)
        for v in parts:
            if v not in self.backends:
                raise KitError(f"unknown mlp-scratch backend {v!r}: choose {', '.join(self.backends)} (joined with '+')")
        if len(set(parts)) != len(parts):
            raise KitError(f"mlp-scratch backend {cell.backend!r} names a variant twice")
        if cell.variant != "default":
            raise KitError(f"mlp-scratch has no variant {cell.variant!r}: its backends are {', '.join(self.backends)}")
        p = cell.params
        try:
            net.check_iterations(p["iterations"])
            net.check_lr(p["lr"])
            net.resolve_dtype(p["dtype"])
        except net.MLPError as err:
            raise KitError(str(err)) from None
        except KeyError as err:
            raise KitError(f"mlp-scratch cell lacks parameter {err}") from None
        for key in ("plain_runs", "breakdown_iterations", "check_steps"):
            if not isinstance(p.get(key), int) or p[key] <= 0:
                raise KitError(f"{key} must be an integer > 0 (got {p.get(key)!r})")
        threads = p.get("threads", 0)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise KitError(f"threads must be an integer >= 0, 0 = every core this process may use (got {threads!r})")
        from bench.data import DIGIT_DATASETS

        if p["dataset"] not in DIGIT_DATASETS:
            raise KitError(f"unknown dataset {p['dataset']!r}: choose {', '.join(DIGIT_DATASETS)}")

    def resolve(self, cell: Cell, data_dir: str | None) -> Cell:
        from bench.data import digit_params

        return cell.with_params(**digit_params(cell.params, data_dir))

    def platform_of(self, cell: Cell) -> str:
        plats = {self.backends[v].platform for v in self.parts(cell) if v in self.backends}
        return "cuda" if "cuda" in plats else "cpu"

    def cell_unavailable(self, cell: Cell) -> str | None:
        """Unavailable only when none of its variants can run (the others become skipped rows)."""
        reasons = [self.why_unavailable(v) for v in self.parts(cell)]
        if all(reasons):
            return "; ".join(f"{v}: {r}" for v, r in zip(self.parts(cell), reasons))
        return None

    def estimate(self, cell: Cell) -> Estimate:
        """Steps: the check, the plain runs, the op breakdown, the memory step; every backend of
        the cell runs in each."""
        p = cell.params
        n = TRAIN_SAMPLES.get(str(p.get("dataset")), TRAIN_SAMPLES["mnist"])
        per_iter = 0.0
        for b in self.parts(cell):
            gpu = b in self.backends and self.backends[b].platform != "cpu"
            per_iter += GPU_ITER_S if gpu else FIXED_ITER_S + PER_SAMPLE_ITER_S.get(str(p.get("dtype")), 1.2e-6) * n
        iters = p["plain_runs"] * (p["iterations"] + 3) + min(p["breakdown_iterations"], p["iterations"])
        total = iters * per_iter + len(self.parts(cell)) * SPAWN_S
        steps = p["plain_runs"] + 3
        return Estimate(steps=steps, open_s=OPEN_S, step_s=total / steps)

    # ---- what compare and verify read
    # seed 001's Table 3: 500 iterations in 42.3 s (NumPy) and 15.1 s (CuPy); no hardware named
    claims = CLAIMS  # claims.py: every claim of seed 001 that a measurement can check
    throughput_unit = "iterations/s"

    def throughput(self, rows: list[dict]) -> dict[str, float]:
        """Iterations / total_s of each backend's plain runs, the median (readout.throughput)."""
        return readout.throughput(rows)

    def samples_per_unit(self, rows: list[dict], part: str) -> float | None:
        """Full-batch gradient descent: one iteration passes the whole training set (its rows' n_train)."""
        return readout.samples_per_unit(rows, part)

    def param_count(self, rows: list[dict], part: str) -> int | None:
        from bench.studies.mlp_scratch.net import N_HIDDEN, N_IN, N_OUT  # the one 784-10-10 net

        return N_HIDDEN * (N_IN + 1) + N_OUT * (N_HIDDEN + 1)

    def accuracy(self, rows: list[dict], part: str) -> tuple[str, float] | None:
        return readout.accuracy(rows, part)

    def loss_curve(self, rows: list[dict], part: str):
        return readout.loss_curve(rows, part)

    def equivalence(self, rows: list[dict]) -> tuple[list[str], list[str]]:
        """Every backend but the reference checked against it before timing, and its convergence
        curve agreeing with the reference's."""
        why, info = super().equivalence(rows)
        ref = self.reference()
        parts = list(dict.fromkeys(str(r.get("backend")) for r in ok_rows(rows)))
        for p in parts:
            if p == ref:
                continue
            checks = [r for r in rows if r.get("backend") == p and r.get("phase") == "check"]
            if not checks:
                why.append(f"{p}: no check against {ref} recorded")
            elif any(r.get("status") != "ok" for r in checks):
                why.append(f"{p}: check against {ref} failed")
            if ref in parts and readout.curve_agrees(rows, p) is False:
                why.append(f"{p}: convergence curve does not agree with {ref}")
        if len(parts) > 1 and not why:
            info.append(f"equivalence with {ref} ok")
        return why, info

    def invariants(self, rows: list[dict], cell_dir: Path | None = None) -> list[tuple[str, str | None]]:
        bad = readout.out_of_order(rows)
        return [("per-iteration min <= median <= max", f"{bad[0]}: they are out of order" if bad else None)]

    def label(self, cell: Cell) -> str:
        return f"{cell.backend} {cell.params.get('dtype')}"

    def progress_line(self, rows: list[dict]) -> str:
        plain = readout.progress(rows)
        if plain:
            return "  ".join(f"{part} {ms:.4g} ms/iter" for part, ms in plain)
        return ", ".join(sorted({str(r.get("phase")) for r in rows}))

    def open(self, cell: Cell, ctx: RunContext):
        from bench.studies.mlp_scratch.protocol import open_cell

        return open_cell(self, cell, ctx)

    def report_section(self, cells, out: Path) -> list[str]:
        from bench.studies.mlp_scratch.report import section

        return section(cells, out)

    def summary(self, cells) -> tuple[list[str], dict]:
        from bench.studies.mlp_scratch.report import summary

        return summary(cells)
