"""parallel=ddp: DistributedDataParallel, one process per device, launched with torchrun.

The cell process (open_ddp) measures the idle baseline, starts the telemetry sampler over every
GPU of the run and launches

    python -m torch.distributed.run --standalone --nproc_per_node N -m bench.studies.profile.ddp SPEC

over the cell's devices (the cell process sees only those: NCCL), or N CPU ranks (gloo). Every rank
builds the same model (same seed; DDP broadcasts rank 0's weights anyway), trains its shard
(DistributedSampler) at `batch_size` images a step, and meets the others at a barrier before
and after each timed epoch; rank 0 evaluates and appends one JSON line per epoch to
ddp_rows.jsonl, which the cell's steps read. Collectives time out after
`collective_timeout_s`, and torchrun ends the other ranks when one dies: a failed rank ends
the cell with one line (the rank's last error from ddp.log), never a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.machine import pin_threads
from bench.core.study import RunContext
from bench.studies.profile.config import Settings
from bench.studies.profile.protocol import Common, prepare, read_rows

ROWS = "ddp_rows.jsonl"
LOG = "ddp.log"
SPEC = "ddp_spec.json"
READY_TIMEOUT_S = 900.0  # model build + data + warm-up on every rank


def _last_error(log: Path) -> str:
    """The most telling line of a failed run's log: the last exception line, else the last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    for ln in reversed(lines):
        if ("Error" in ln or "error" in ln or "Exception" in ln) and not ln.startswith(("File ", "Traceback", "raise ")):
            return ln[-300:]
    return lines[-1][-300:] if lines else "empty log"


@dataclass
class DdpRun(Common):
    proc: Any = None
    rows_path: Path | None = None
    log_path: Path | None = None

    @property
    def steps(self) -> int:
        return self.cfg.epochs

    def _wait_rows(self, n: int, timeout_s: float) -> list[dict]:
        """The worker's first N rows; KitError when it dies (or is silent for TIMEOUT_S) first."""
        assert self.rows_path is not None and self.log_path is not None
        t_end = time.monotonic() + timeout_s
        while True:
            rows = read_rows(self.rows_path)
            if len(rows) >= n:
                return rows
            rc = self.proc.poll()
            if rc is not None:
                rows = read_rows(self.rows_path)
                if len(rows) >= n:
                    return rows
                raise KitError(
                    f"the ddp run ended (torchrun exit {rc}) after {max(len(rows) - 1, 0)} epoch(s): {_last_error(self.log_path)}"
                )
            if time.monotonic() > t_end:
                self.proc.kill()
                raise KitError(f"the ddp run gave no row in {timeout_s:.0f} s; killed it (log: {self.log_path})")
            time.sleep(0.05)

    def step(self, i: int) -> list[dict]:
        rows = self._wait_rows(i + 2, self.cfg.collective_timeout_s * 2 + 600)  # row 0 is 'ready'
        r = rows[i + 1]
        if r.get("phase") != "epoch":
            raise KitError(f"the ddp run's row {i + 1} is {r.get('phase')!r}, expected an epoch")
        stats = {
            k: r[k]
            for k in ("epoch_s", "steps", "samples", "samples_per_s", "train_loss", "loss_finite", "t_start_mono", "t_end_mono")
        }
        row = self.epoch_row(
            i + 1, stats, r.get("test_acc"), int(r.get("n_test") or 0), float(r.get("eval_s") or 0.0), r.get("mem") or {}
        )
        row["backend_dist"] = r.get("backend_dist")
        self.epoch_rows.append(row)
        if i + 1 == self.cfg.epochs:
            self.finish()
        return [row]

    def finish(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=self.cfg.collective_timeout_s + 60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.finish_sampler()
        if self.proc is not None and self.proc.returncode not in (0, None, -9):
            raise KitError(f"the ddp run ended with torchrun exit {self.proc.returncode}: {_last_error(self.log_path)}")  # type: ignore[arg-type]

    def close(self) -> list[dict]:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.finish_sampler()
        return []

    def system_extra(self) -> dict:
        out = self.system_common()
        rows = read_rows(self.rows_path) if self.rows_path else []
        ready = rows[0] if rows else {}
        out.update({k: ready.get(k) for k in ("backend_dist", "nccl_version", "world_size", "warmup_s")})
        out["launcher"] = "torchrun (python -m torch.distributed.run --standalone)"
        return out


def open_ddp(cfg: Settings, cell: Cell, ctx: RunContext) -> DdpRun:
    from bench.measure.sampler import TelemetrySampler

    world = cfg.world_size
    if world < 2:
        raise KitError("parallel=ddp needs two or more devices: set devices, e.g. devices=0,1")
    _index, dataset, gpus, idle = prepare(cfg, cell, ctx)
    d = ctx.cell_dir
    rows_path, log_path = d / ROWS, d / LOG
    for p in (rows_path, log_path):
        p.unlink(missing_ok=True)
    spec = {"settings": asdict(cfg), "params": dict(cell.params), "data_dir": ctx.data_dir, "rows": str(rows_path)}
    (d / SPEC).write_text(json.dumps(spec))
    env = dict(os.environ)  # GPUs: the cell process already sees only its devices (bench.run.cell)
    if cfg.device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={world}",
        "--max_restarts=0",
        "-m",
        "bench.studies.profile.ddp",
        str(d / SPEC),
    ]
    log = open(log_path, "ab")  # noqa: SIM115 - the child writes it for as long as it runs
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    run = DdpRun(cfg, ctx, dataset, gpus, idle, proc=proc, rows_path=rows_path, log_path=log_path)
    run.sampler = TelemetrySampler(gpus, hz=cfg.telemetry_hz).start()
    try:
        ready = run._wait_rows(1, READY_TIMEOUT_S)[0]
    except BaseException:
        run.close()
        raise
    run.warmup_s = float(ready.get("warmup_s") or 0.0)
    run.threads = int(ready.get("threads") or 0)
    run.facts = {k: ready.get(k) for k in ("weights", "weights_sha256", "params_total", "params_trainable")}
    return run


# ---- the worker (one per rank, under torchrun) ----------------------------------------------------


def _append(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def worker(spec_path: str) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from bench.data import imagefolder
    from bench.studies.profile.trainer import Batches, Trainer, build_model, train_epoch

    spec = json.loads(Path(spec_path).read_text())
    cfg = Settings(**spec["settings"])
    rows = Path(spec["rows"])
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    cuda = cfg.device == "cuda"
    backend = "nccl" if cuda else "gloo"
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
        pin_threads(cfg.threads, "torch", share=world)  # the host's cores split over the ranks
    dist.init_process_group(backend, timeout=timedelta(seconds=cfg.collective_timeout_s))
    try:
        fault = os.environ.get("KIT_FAULT_DDP_RANK_EXIT")  # tests: "RANK:EPOCH" makes that rank die there
        torch.manual_seed(cfg.seed)
        torch.backends.cudnn.benchmark = True
        index = imagefolder.load_for_cell(spec["params"], spec["data_dir"])
        model, facts = build_model(cfg, len(index.classes), spec["data_dir"])
        batches = Batches(cfg, index, device, cfg.batch_size, rank=rank, world=world)
        ddp = torch.nn.parallel.DistributedDataParallel

        trainer = Trainer(cfg, model, device, wrap=lambda m: ddp(m, device_ids=[local] if cuda else None), facts=facts)
        warm = trainer.warmup(batches)
        dist.barrier()
        if rank == 0:
            nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else None
            _append(
                rows,
                {
                    "phase": "ready",
                    "warmup_s": warm,
                    "world_size": world,
                    "backend_dist": backend,
                    "nccl_version": nccl,
                    "threads": torch.get_num_threads(),
                    **facts,
                },
            )
        for e in range(1, cfg.epochs + 1):
            if fault and fault == f"{rank}:{e}":
                os._exit(17)
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            stats = train_epoch(trainer, batches, barrier=dist.barrier)
            mem = {"gpu_alloc_peak_mb": torch.cuda.max_memory_allocated(device) / 1e6} if cuda else {}
            acc, n, ev = None, 0, 0.0
            if rank == 0:
                t0 = time.perf_counter()
                acc, n = trainer.evaluate(batches)
                ev = time.perf_counter() - t0
            dist.barrier()
            if rank == 0:
                _append(
                    rows,
                    {
                        "phase": "epoch",
                        "epoch": e,
                        **stats,
                        "test_acc": acc,
                        "n_test": n,
                        "eval_s": ev,
                        "mem": mem,
                        "backend_dist": backend,
                    },
                )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    worker(sys.argv[1])
