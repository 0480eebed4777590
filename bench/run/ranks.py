"""Many-device cells: one process per device under torchrun, launched by the cell process.

A cell whose Study.world_size(cell) is N >= 1 (its Cell.devices: GPU ids, NCCL; or cpu ranks,
gloo) is opened here instead of in process (bench/run/cell.py). The cell process starts

    python -m torch.distributed.run --standalone --nproc_per_node N --max_restarts 0 \\
        -m bench.run.ranks CELL.json --out OUT [--data-dir DIR]

and its RankRun (a StepRun) stands in for the study's: every rank calls the study's own
open() and step() with RunContext.dist set (bench/core/dist.py); rank 0's rows are the cell's.
The scheduler's gate reaches the ranks: before step i the cell process writes `go i` to
ranks.ctl; rank 0 reads it and publishes it in torch.distributed's store, on which the other
ranks wait (no collective timeout spans a wait), so an interleaved schedule times no rank
step while another cell works; `close` the same way. Rank 0 answers in ranks.jsonl: `ready`
(steps, warm-up, dataset), one `step` per step (its rows), `close` (rows, system facts).

A rank that dies (torchrun then ends the others) or a run silent past the cell's collective
timeout ends the cell with one line: the last error line of ranks.log. Across hosts (under a
cluster scheduler), the rendezvous comes from the environment: KIT_NNODES, KIT_RDZV_ENDPOINT
(host:port) and KIT_RDZV_ID replace --standalone with a c10d rendezvous; every host runs the
same cell with its own devices.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.core import rows as R
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.request import Paths
from bench.core.study import RunContext, Study

CTL, ROWS, LOG = "ranks.ctl", "ranks.jsonl", "ranks.log"
READY_TIMEOUT_S = 900.0  # every rank's open (data, model, warm-up) and the rendezvous
DEFAULT_COLLECTIVE_TIMEOUT_S = 300.0


def collective_timeout(cell: Cell) -> float:
    return float(cell.params.get("collective_timeout_s", DEFAULT_COLLECTIVE_TIMEOUT_S))


def torchrun_argv(world: int, spec: Path, paths: Paths, nodes: int = 1) -> list[str]:
    """The launch of this host's ranks: standalone, or the rendezvous the environment names. A
    cell of NODES > 1 hosts needs that rendezvous (a cluster scheduler sets it: orchestrate.py slurm)."""
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}", "--max_restarts=0"]
    if nodes > 1 and not os.environ.get("KIT_RDZV_ENDPOINT"):
        raise KitError(
            f"this cell spans {nodes} nodes: it runs under a cluster scheduler that starts it on each with "
            "KIT_RDZV_ENDPOINT set (orchestrate.py slurm writes such jobs)"
        )
    if os.environ.get("KIT_RDZV_ENDPOINT"):
        argv += [
            f"--nnodes={nodes if nodes > 1 else os.environ.get('KIT_NNODES', '1')}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={os.environ['KIT_RDZV_ENDPOINT']}",
            f"--rdzv-id={os.environ.get('KIT_RDZV_ID', 'cnn-bench')}",
        ]
    else:
        argv.append("--standalone")
    argv += ["-m", "bench.run.ranks", str(spec), "--out", str(paths.out)]
    return argv + (["--data-dir", paths.data_dir] if paths.data_dir else [])


def last_error(log: Path) -> str:
    """The most telling line of a failed run's log: the last exception line, else the last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    for ln in reversed(lines):
        if ("Error" in ln or "error" in ln or "Exception" in ln) and not ln.startswith(("File ", "Traceback", "raise ")):
            return ln[-300:]
    return lines[-1][-300:] if lines else "empty log"


def read_messages(path: Path) -> list[dict]:
    out: list[dict] = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return out


# ---- the cell process's side ----------------------------------------------------------------


@dataclass
class RankRun:
    """The cell's StepRun while its ranks run: the scheduler's gate goes to them, rank 0's rows come back."""

    cell: Cell
    cell_dir: Path
    world: int
    timeout_s: float
    proc: Any = None
    ready: dict = field(default_factory=dict)
    closing: dict = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return int(self.ready["steps"])

    @property
    def warmup_s(self) -> float:
        return float(self.ready.get("warmup_s") or 0.0)

    @property
    def dataset(self) -> dict:
        return dict(self.ready.get("dataset") or {})

    def _say(self, word: str) -> None:
        with open(self.cell_dir / CTL, "a", encoding="utf-8") as f:
            f.write(word + "\n")

    def _wait(self, kind: str, i: int | None, timeout_s: float) -> dict:
        """Rank 0's message KIND (step I); KitError when the ranks end or fall silent first."""
        t_end = time.monotonic() + timeout_s
        while True:
            for m in read_messages(self.cell_dir / ROWS):
                if m.get("kind") == kind and m.get("i") == i:
                    return m
            rc = self.proc.poll()
            if rc is not None:
                for m in read_messages(self.cell_dir / ROWS):  # written just before the exit
                    if m.get("kind") == kind and m.get("i") == i:
                        return m
                raise KitError(f"the ranks ended (torchrun exit {rc}): {last_error(self.cell_dir / LOG)}")
            if time.monotonic() > t_end:
                self.kill()
                raise KitError(f"the ranks gave no {kind} in {timeout_s:.0f} s; ended them (log: {self.cell_dir / LOG})")
            time.sleep(0.002)

    def open(self, study: Study, ctx: RunContext) -> RankRun:
        d = self.cell_dir
        spec = d / "ranks-cell.json"
        argv = torchrun_argv(self.world, spec, Paths(ctx.out, ctx.data_dir), self.cell.nodes)  # before any file: it may refuse
        d.mkdir(parents=True, exist_ok=True)
        for name in (CTL, ROWS, LOG):
            (d / name).unlink(missing_ok=True)
        (d / CTL).touch()
        R.atomic_write_text(spec, self.cell.to_json(indent=2) + "\n")
        gpu = any(x != "cpu" for x in self.cell.devices)
        env = {
            **os.environ,
            "KIT_RANK_DEVICE": "cuda" if gpu else "cpu",
            "KIT_RANK_CELL_DIR": str(d),
            "KIT_CELL_PID": str(os.getpid()),
        }
        if not gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        log = open(d / LOG, "ab")  # noqa: SIM115 - the ranks write it for as long as they run
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            self.ready = self._wait("ready", None, READY_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        return self

    def step(self, i: int) -> list[dict]:
        self._say(f"go {i}")
        return list(self._wait("step", i, self.timeout_s * 2 + 600)["rows"])

    def close(self) -> list[dict]:
        self._say("close")
        self.closing = self._wait("close", None, self.timeout_s + 600)
        try:
            self.proc.wait(timeout=self.timeout_s + 60)
        except subprocess.TimeoutExpired:
            self.kill()
        return list(self.closing.get("rows") or [])

    def system_extra(self) -> dict:
        return {**(self.closing.get("system_extra") or {}), "ranks": self.closing.get("ranks")}

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


def open_ranks(study: Study, cell: Cell, ctx: RunContext, world: int) -> RankRun:
    return RankRun(cell, ctx.cell_dir, world, collective_timeout(cell)).open(study, ctx)


# ---- one rank ---------------------------------------------------------------------------------


def _append(path: Path, msg: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(msg, default=R.jsonable) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _await_word(ctl: Path, word: str) -> None:
    """Rank 0: until the cell process has written WORD (its gate) into CTL; KitError when the
    cell process is gone (torchrun runs in a session of its own: no signal reaches it then)."""
    parent = int(os.environ.get("KIT_CELL_PID", "0"))
    while word not in ctl.read_text(encoding="utf-8").splitlines():
        if parent and not _alive(parent):
            raise KitError(f"the cell process {parent} is gone before {word!r}: these ranks end too")
        time.sleep(0.002)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def rank_facts(dist: Any) -> dict:
    """What the run's system.json says of its ranks: the world, the backend, NCCL's version."""
    import torch

    nccl = ".".join(map(str, torch.cuda.nccl.version())) if dist.comm == "nccl" else None
    return {"world_size": dist.world, "backend_dist": dist.comm, "nccl_version": nccl, "launcher": "torchrun"}


def interconnect(dist: Any) -> dict:
    """What explains scaling, measured after the cell's steps (untimed), on every rank: the
    all-reduce bus bandwidth of a 256 MiB fp32 tensor (16 MiB over gloo) (nccl-tests' busbw: bytes x 2(n-1)/n per
    second, median of 5 after 2 warm-ups), and on rank 0 GPU peer access and `nvidia-smi topo -m`."""
    import statistics

    import torch
    import torch.distributed as tdist

    if dist.world < 2:
        return {}
    n = (64 if dist.comm == "nccl" else 4) * 1024 * 1024  # floats: 256 MiB on GPUs, 16 MiB over gloo
    x = torch.ones(n, device=dist.device)
    times = []
    for k in range(7):
        dist.barrier()
        t0 = time.perf_counter()
        tdist.all_reduce(x)
        if dist.comm == "nccl":
            torch.cuda.synchronize()
        if k >= 2:
            times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    out: dict[str, Any] = {
        "allreduce_bytes": 4 * n,
        "allreduce_s": t,
        "allreduce_busbw_gb_per_s": 4 * n * 2 * (dist.world - 1) / dist.world / t / 1e9,
    }
    if dist.is_main and dist.comm == "nccl":
        k = torch.cuda.device_count()
        out["p2p_access"] = {
            f"{a}->{b}": bool(torch.cuda.can_device_access_peer(a, b)) for a in range(k) for b in range(k) if a != b
        }
        try:
            q = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
            out["topology"] = q.stdout if q.returncode == 0 else f"nvidia-smi topo -m failed: {q.stderr.strip()[:200]}"
        except (OSError, subprocess.SubprocessError) as err:
            out["topology"] = f"nvidia-smi topo -m: {err}"
    return out


def run_rank(cell: Cell, paths: Paths) -> None:
    import torch
    import torch.distributed as tdist

    from bench.core.dist import Dist
    from bench.core.registry import get_study

    study = get_study(cell.study)
    dist = Dist.from_env(cell.params)
    timeout = timedelta(seconds=collective_timeout(cell))
    if dist.comm == "nccl":
        torch.cuda.set_device(dist.local_rank)
    tdist.init_process_group(dist.comm, timeout=timeout)
    store = tdist.distributed_c10d._get_default_store()
    cell_dir = Path(os.environ.get("KIT_RANK_CELL_DIR") or cell.dir(paths.out))
    rows_path, ctl = cell_dir / ROWS, cell_dir / CTL
    wait = timedelta(days=7)  # a gate may wait for other cells' steps: never a collective's timeout

    def gate(word: str) -> None:
        if dist.is_main:
            _await_word(ctl, word)
            store.set(word, "1")
        else:
            store.wait([word], wait)

    try:
        ctx = RunContext(out=paths.out, cell_dir=cell_dir, data_dir=paths.data_dir, run_id=f"rank{dist.rank}", dist=dist)
        ctx.echo = lambda s: print(f"[rank {dist.rank}] {s}", file=sys.stderr, flush=True)
        run = study.open(cell, ctx)
        if dist.is_main:
            _append(rows_path, {"kind": "ready", "steps": run.steps, "warmup_s": run.warmup_s, "dataset": run.dataset})
        fault = os.environ.get("KIT_FAULT_RANK_EXIT")  # tests: "RANK:STEP" makes that rank die before that step
        for i in range(run.steps):
            gate(f"go {i}")
            if fault == f"{dist.rank}:{i}":
                os._exit(17)
            rows = run.step(i)
            if dist.is_main:
                _append(rows_path, {"kind": "step", "i": i, "rows": rows})
        gate("close")
        rows = run.close()
        link = interconnect(dist)
        facts = dist.gather({"rank": dist.rank, "host": os.uname().nodename, "device": str(dist.device)})
        if dist.is_main:
            extra = {**run.system_extra(), **rank_facts(dist), "interconnect": link}
            _append(rows_path, {"kind": "close", "rows": rows, "system_extra": extra, "ranks": facts})
    finally:
        tdist.destroy_process_group()


def join(cell: Cell, paths: Paths) -> int:
    """Another node's share of a cell of several nodes (Cell.nodes > 1): this host's ranks under
    torchrun, joining the rendezvous of the environment (KIT_RDZV_ENDPOINT), while the cell
    process runs on the first node (`python -m bench cell`). PATHS.out is on a filesystem every node
    shares: whichever rank is 0 reads the gate from, and writes rank 0's rows to, the cell's dir
    there. Returns torchrun's exit code."""
    import tempfile

    from bench.core.machine import allocated_gpus
    from bench.core.registry import get_study

    study = get_study(cell.study)
    study.validate(cell)
    world = study.world_size(cell)
    if cell.nodes < 2 or not world:
        raise KitError(f"--node joins a cell of several nodes; {cell.id} runs on one (nodes={cell.nodes})")
    gpus = allocated_gpus([d for d in cell.devices if d != "cpu"])
    env = {**os.environ, "KIT_RANK_DEVICE": "cuda" if gpus else "cpu", "KIT_RANK_CELL_DIR": str(cell.dir(paths.out))}
    env.pop("KIT_CELL_PID", None)  # the cell process runs on another node: no pid of it here to watch
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    with tempfile.TemporaryDirectory(prefix="cnn-bench-node-") as tmp:
        spec = Path(tmp) / "cell.json"
        spec.write_text(cell.to_json(indent=2) + "\n", encoding="utf-8")
        argv = torchrun_argv(world, spec, paths, cell.nodes)
        return subprocess.call(argv, env=env)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.run.ranks", description="one rank of a many-device cell")
    ap.add_argument("spec")
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir")
    ap.add_argument("--node", action="store_true", help="start this node's ranks of a cell of several nodes (not a rank)")
    a = ap.parse_args(argv)
    if a.node:
        try:
            raise SystemExit(join(Cell.load(Path(a.spec)), Paths(Path(a.out), a.data_dir)))
        except KitError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    sys.stdout = sys.stderr  # the log is the ranks'; only ranks.jsonl carries results
    try:
        run_rank(Cell.load(Path(a.spec)), Paths(Path(a.out), a.data_dir))
    except KitError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
