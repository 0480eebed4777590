"""The one entry point that runs a cell: `python -m bench cell SPEC [--out DIR] [--data-dir DIR] [--gate]`.

SPEC is a path to a cell.json, `-` for stdin, or the JSON itself. Order of work:
  1. validate the spec (bad input: one line, exit 2, nothing written);
  2. the GPUs the cell names (Cell.devices) become CUDA_VISIBLE_DEVICES; an unavailable
     backend or a GPU this host lacks finishes at once as one `skipped` row with the reason;
  3. `study.open()` (data, model, warm-up), then `step(i)` for every step, then `close()`;
     each step's rows are appended to rows.partial.jsonl as they come;
  4. system.json, rows.csv and rows.jsonl (the completion marker), each atomically, each
     written as its reader reads it (bench.core.rows: a value the reader's schema would refuse,
     such as an energy counter's jump to 3e12 J or a load average past its bound, is written as
     null with a note naming it; rows.jsonl is read back before rows.partial.jsonl goes), so a
     cell never refuses its own rows.
A crash or Ctrl-C inside a step leaves rows.jsonl with the finished steps' rows marked
`incomplete` and one `error` row with the reason; a kill -9 is settled by the scheduler.

With --gate the cell speaks the scheduler's protocol (and nothing else does). Its stdout
carries only these lines; everything else a study or library prints goes to stderr:
    child:  KIT READY {"steps": N, "warmup_s": S}     after open()
    parent: go                                        run the next step ("stop" or EOF: end now)
    child:  KIT STEP {"i": I, "rows": [...]}          after each step
    parent: (closes the pipe)                         after the last step: close() and write now
    child:  KIT DONE {"status": "ok"}                 after the files are written
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from bench.core import noise, provenance
from bench.core import rows as R
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.machine import allocated_gpus
from bench.core.registry import get_study
from bench.core.request import Paths
from bench.core.study import RunContext, devices_missing
from bench.core.text import one_line
from bench.measure import energy, fixedcost
from bench.measure.telemetry import Telemetry
from bench.run.ranks import open_ranks

READY, STEP, DONE = "KIT READY ", "KIT STEP ", "KIT DONE "


def reproduce_command(cell: Cell, paths: Paths) -> str:
    """The command that reruns exactly this cell (self-contained: the spec is inline)."""
    argv = ["python", "-m", "bench", "cell", cell.to_json(), "--out", str(paths.out)]
    if paths.data_dir:
        argv += ["--data-dir", str(paths.data_dir)]
    return shlex.join(argv)


def common_fields(cell: Cell, run_id: str, command: str, device: str | None, dataset: dict | None) -> dict:
    rt = provenance.runtime_info()
    ds = dataset or {}
    return {
        "schema": R.SCHEMA_VERSION,
        "study": cell.study,
        "cell": cell.id,
        "backend": cell.backend,
        "variant": cell.variant,
        "seed": cell.seed,
        "repeat": cell.repeat,
        "run_id": run_id,
        "status": "ok",
        "reason": "",
        "host": provenance.host_label(),
        "device": device,
        "image_id": rt["image_id"],
        "lock_hash": rt["lock_hash"],
        "dataset": ds.get("name"),
        "dataset_real": ds.get("real"),
        "command": command,
        **provenance.scheduler_row_fields(),  # under Slurm or Kubernetes: the job, task and node
    }


def disk_full_message(out: Path, cell: Cell) -> str:
    return (
        f"disk full writing results under {out}: finished cells are intact, {cell.id} is partial "
        "(the report lists it as interrupted); free space and run the same command again to resume"
    )


def error_row(cell: Cell, reason: str, paths: Paths, status: str = "error", extra: dict | None = None) -> dict:
    """The row a cell that could not finish leaves (also written by the scheduler after a kill,
    and by `orchestrate.py slurm` for a task Slurm cancelled: EXTRA holds that task's scheduler keys)."""
    row = common_fields(cell, R.new_run_id(), reproduce_command(cell, paths), None, None)
    return R.ordered({**row, **(extra or {}), "status": status, "reason": reason, "created": time.time()})


def settle_failure(
    cell_dir: Path, cell: Cell, reason: str, paths: Paths, status: str = "error", extra: dict | None = None
) -> None:
    """rows.jsonl after a failure: finished steps kept (marked incomplete) + one row with
    STATUS (error, or interrupted for Ctrl-C and a stop) and the reason, as one line (its last
    meaningful line: a log's tail, Slurm's words). The steps are read within the rows' caps; a
    line cut by the kill, or one the schema refuses, is left out."""
    partial = cell_dir / "rows.partial.jsonl"
    done = []
    if os.path.lexists(partial):
        good, _problems = R.read_rows_checked(partial)
        done = [{**r, "status": "incomplete"} for r in good]
    R.write_rows(cell_dir, done + [error_row(cell, one_line(reason), paths, status, extra)])


def _follow_parent() -> None:
    """A scheduled cell lives only as long as its scheduler: Ctrl-C is the scheduler's to handle
    (it stops every cell and settles them), and the kernel kills this process when the
    scheduler dies (Linux PR_SET_PDEATHSIG), so no orphan trains on into a rerun."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    parent = os.environ.get("KIT_PARENT_PID")
    if parent and os.getppid() != int(parent):  # the scheduler died before we got here
        raise SystemExit(3)


class _Protocol:
    """stdout reserved for protocol lines; fd 1 and sys.stdout now go to stderr."""

    def __init__(self, gated: bool):
        self.gated = gated
        self.out: IO[str] | None = None
        if gated:
            _follow_parent()
            sys.stdout.flush()
            self.out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
            os.dup2(2, 1)
            sys.stdout = sys.stderr

    def send(self, tag: str, obj: Any) -> None:
        if self.out:
            self.out.write(tag + json.dumps(obj, default=R.jsonable) + "\n")
            self.out.flush()

    def wait_go(self) -> bool:
        if not self.gated:
            return True
        line = sys.stdin.readline()
        return line.strip() == "go"

    def wait_close(self) -> None:
        """After the last step, close when the scheduler says (a line, or the pipe's end): no
        step of another cell is timed while this one closes and writes (the interleaved
        schedule settles its cells one at a time after the last round)."""
        if self.gated:
            sys.stdin.readline()


def load_spec(spec: str) -> Cell:
    if spec == "-":
        return Cell.from_json(sys.stdin.read())
    if spec.lstrip().startswith("{"):
        return Cell.from_json(spec)
    return Cell.load(Path(spec))


def run_cell(cell: Cell, paths: Paths, gated: bool = False, progress: Any = None) -> int:
    """Run CELL under PATHS.out, its data in PATHS.data_dir; returns the process exit code (0 ok or skipped, 1 error, 3 stopped).
    Raises KitError before anything is written when the cell is invalid."""
    proto = _Protocol(gated)
    study = get_study(cell.study)
    study.validate(cell)
    here = provenance.environment_label()
    if cell.env and cell.env != here:
        raise KitError(
            f"cell {cell.id} was resolved for environment {cell.env}; this process runs in {here} "
            "(another runtime, image or library version is other work): run the matrix here to resolve it"
        )
    out, data_dir = Path(paths.out), paths.data_dir
    cell_dir = cell.dir(out)
    run_id = R.new_run_id()
    command = reproduce_command(cell, paths)
    platform = study.platform_of(cell)

    reason = devices_missing(cell)  # before binding: the ids are the scheduler's (the host's) view
    gpus = allocated_gpus([d for d in cell.devices if d != "cpu"])  # under a cluster scheduler: of its allocation
    if gpus and not reason:  # the cell's GPUs become this process's devices 0..N-1, before any CUDA call
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    reason = reason or study.cell_unavailable(cell)
    if reason:
        clear_results(cell_dir)
        R.atomic_write_text(cell_dir / "cell.json", cell.to_json(indent=2) + "\n")
        row = common_fields(cell, run_id, command, provenance.device_name("cpu"), None)
        R.write_checked_json(
            cell_dir / "system.json",
            provenance.system_info(cell.params, None, run_id, {"cell": json.loads(cell.to_json())}),
            "system",
        )
        R.write_rows(cell_dir, [R.ordered({**row, "status": "skipped", "reason": reason})])
        proto.send(DONE, {"status": "skipped", "reason": reason})
        return 0

    ctx = RunContext(
        out=out, cell_dir=cell_dir, data_dir=data_dir, run_id=run_id, echo=lambda s: print(s, file=sys.stderr, flush=True)
    )
    world = study.world_size(cell)
    pre, fixed_notes = before_open(study, cell, platform, world)
    t0 = time.perf_counter()
    try:
        run = open_ranks(study, cell, ctx, world) if world else study.open(cell, ctx)  # KitError propagates: nothing written
    except BaseException:
        energy.use(None)
        raise
    open_s = time.perf_counter() - t0
    clear_results(cell_dir)
    R.atomic_write_text(cell_dir / "cell.json", cell.to_json(indent=2) + "\n")
    base = common_fields(cell, run_id, command, provenance.device_name(platform), run.dataset)
    proto.send(READY, {"steps": run.steps, "warmup_s": run.warmup_s, "open_s": open_s})
    all_rows: list[dict] = []
    task = progress.add_task(study.label(cell), total=run.steps) if progress else None
    # the run whose CPU is not "others'": the scheduler and every cell it started, or this cell alone
    telemetry = Telemetry(gpu=platform == "cuda", run_root=os.getppid() if gated else os.getpid()).start()
    try:
        for i in range(run.steps):
            if not proto.wait_go():
                why = f"stopped by the scheduler before step {i + 1} of {run.steps}"
                settle_failure(cell_dir, cell, why, paths, "interrupted")
                return 3
            rows = [R.ordered({**base, **r}) for r in rss_peaks_said(run.step(i))]
            for r in rows:
                R.append_partial(cell_dir, r)
            all_rows += rows
            proto.send(STEP, {"i": i, "rows": rows})
            if progress:
                progress.update(task, advance=1, description=f"{study.label(cell)} {study.progress_line(rows)}")
        telemetry.stop()  # close() evaluates and summarises: not the timed window
        proto.wait_close()
        all_rows += [R.ordered({**base, **r}) for r in rss_peaks_said(run.close())]
        sampled = telemetry.summary()
        flags = ";".join(
            f
            for f in [noise.cell_flags(study.timed_values(all_rows), sampled, study.timing_unit), *study.row_flags(all_rows)]
            if f
        )
        all_rows = [{**r, "flags": flags} for r in all_rows]
        extra = {
            "telemetry": sampled,
            "flags": flags,
            "cell": json.loads(cell.to_json()),
            "cell_id": cell.id,
            "command": command,
            "open_s": open_s,
            "warmup_s": run.warmup_s,
            "fixed_costs": fixedcost.assemble(pre, open_s, run.warmup_s, fixed_notes),
            "energy": pre["energy"],
            **run.system_extra(),
        }
        R.write_checked_json(cell_dir / "system.json", provenance.system_info(cell.params, run.dataset, run_id, extra), "system")
        R.write_rows(cell_dir, all_rows)
    except KitError as err:
        settle_failure(cell_dir, cell, one_line(err), paths)
        raise
    except KeyboardInterrupt:
        settle_failure(cell_dir, cell, "interrupted (Ctrl-C)", paths, "interrupted")
        raise
    except OSError as err:
        if err.errno != errno.ENOSPC:
            settle_failure(cell_dir, cell, one_line(f"{type(err).__name__}: {err}"), paths)
            raise
        with contextlib.suppress(OSError):  # no room for the error row either, most likely
            settle_failure(cell_dir, cell, one_line(f"disk full: {err}"), paths)
        raise KitError(disk_full_message(out, cell)) from None
    except Exception as err:  # the reason is one line: the last meaningful line of the exception text
        settle_failure(cell_dir, cell, one_line(f"{type(err).__name__}: {err}"), paths)
        raise
    finally:
        telemetry.stop()
        energy.use(None)
    written, problems = R.read_rows_checked(cell_dir / "rows.jsonl")
    status = None if problems else R.status_of(written)
    if status is None:  # write_rows read its file back, so this is a file changed under us: say so
        print(f"error: {(problems or [f'{cell_dir}: no rows'])[0]}: the report lists the cell as corrupt", file=sys.stderr)
    elif status == "error":  # a row the study refused (a required measurement not kept): the log says which
        print(f"error: {one_line(next(r.get('reason') for r in written if r.get('status') == 'error'))}", file=sys.stderr)
    status = status or "error"
    proto.send(DONE, {"status": status})
    return 0 if status in ("ok", "skipped") else 1


def rss_peaks_said(rows: list[dict]) -> list[dict]:
    """ROWS (one step's, or close()'s) with what the RSS peaks measured since the last step rest
    on (bench.measure.memory.take_regions): `rss_peak_readings`, the fewest readings of any of
    them, in each row that reports an RSS peak; `rss_note`, why a sampler did not read its whole
    region (its process died: the peak is the larger of the entry and exit readings), in those
    rows (in every row of the step where none reports a peak). No rows: kept for the next step."""
    if not rows:
        return rows
    from bench.measure.memory import take_regions

    fewest, notes = take_regions()
    if fewest is None:
        return rows
    peaks = [i for i, r in enumerate(rows) if any(str(k).endswith("rss_peak_mb") for k in r)]
    out = [dict(r) for r in rows]
    for i in peaks:
        out[i].setdefault("rss_peak_readings", fewest)
    for i in peaks or range(len(out)):
        if notes:
            said = out[i].get("rss_note")
            out[i]["rss_note"] = "; ".join([said, *notes] if isinstance(said, str) and said else notes)
    return out


def before_open(study: Any, cell: Cell, platform: str, world: int) -> tuple[dict, dict[str, str]]:
    """What the cell pays before open(), timed (bench.measure.fixedcost), and the energy meter of its
    device with its idle baseline (bench.measure.energy), taken first: nothing of this process on the
    device yet. Returns (the phases and the meter's description for system.json, notes)."""
    pre: dict[str, Any] = {"start_s": fixedcost.since_process_start()}
    notes: dict[str, str] = {}
    fixedcost.reset()
    families = [study.backends[p].family for p in cell.backend.split("+") if p in study.backends]
    if world:
        why = "a cell of ranks: each rank imports and initialises its device inside its own open()"
        notes.update(imports_s=why, device_init_s=why)
        pre["energy"] = {"missing": {"cell": energy.NO_METER}}
        return pre, notes
    if getattr(study, "own_energy", False):  # it takes its idle baseline before touching the device itself
        notes["device_init_s"] = "inside open(): the study measures its idle baseline before it touches the device"
        pre["imports_s"] = fixedcost.import_families(families)
        pre["energy"] = {"missing": {"cell": "the study measures energy itself (its rows' energy_source)"}}
        return pre, notes
    gpus: list[int] = []
    if platform == "cuda":
        from bench.measure.sampler import nvml_indices_for_visible

        try:
            found = nvml_indices_for_visible()
            gpus = found if cell.devices else found[:1]
        except RuntimeError as err:
            notes["energy"] = one_line(err)
    t0 = time.perf_counter()
    meter = energy.Meter(energy.Counters(platform, gpus))
    meter.measure_idle(energy.idle_seconds())
    energy.use(meter)
    pre["idle_baseline_s"] = time.perf_counter() - t0
    pre["energy"] = meter.describe()
    pre["imports_s"] = fixedcost.import_families(families)
    pre["device_init_s"], failed = fixedcost.init_device(platform, families)
    if failed:
        notes["device_init_s"] = failed
    return pre, notes


def clear_results(cell_dir: Path) -> None:
    """A (re)run starts clean: no rows from an earlier run of this cell may mix with its own."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("rows.jsonl", "rows.csv", "rows.partial.jsonl", "system.json"):
        (cell_dir / stale).unlink(missing_ok=True)
