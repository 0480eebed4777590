"""`orchestrate.py slurm JOBDIR`: one sbatch array script per resource shape of a job dir
(host/cluster/jobdir.py), each array task running one cell; `--submit` submits them and
follows the jobs to the end.

    JOB/slurm/<shape>.sbatch             #SBATCH --array=<tasks>%K, --gres=gpu:G, --cpus-per-task ...
    JOB/slurm/logs/<shape>-<job>_<i>.out a task's stdout and stderr (the cell's own log)
    JOB/slurm/submissions.jsonl          every submission: its Slurm job id, shape and tasks

Array task i runs `python -m bench cell specs/i.json --out task-i` (the array index is the task
number, so a rerun's array names only the cells without a finished result), natively with the
Python that runs this command and this kit's own code (PYTHONPATH: its root; both on the shared
filesystem; its environment must be the one the plan resolved the cells for), or, for a plan
made with --image, in the Apptainer image built from it (`--sif`). Nothing in the job dir
chooses the program: a manifest's `python` and `kit_root` say where the plan was made, and are
never run; the values of it the script holds (the job dir's path, the data dir, the image's
name) pass the one rule for spliced values first (host/cluster/splice.py): the data dir is one
quoted argument, or a bind's source without `,` or `:`, so the bind list is always these three.

    apptainer exec --cleanenv [--nv] --bind DATA:/data:ro,JOB/specs:/specs:ro,JOB/task-i:/results \\
        IMAGE.sif python -m bench cell /specs/i.json --out /results --data-dir /data

A cell of several nodes (plan --nodes) runs its cell process on the first node of the task's
allocation and, through `srun`, torchrun's ranks on the others (`python -m bench.run.ranks
--node`), joined by torchrun's c10d rendezvous on the first node (KIT_RDZV_ENDPOINT).

Following: squeue (`-t all`: ended tasks stay listed for the cluster's MinJobAge), else sacct,
every few seconds; one line per change. A task that ended without a finished result (cancelled,
failed, out of time or memory, a node lost) becomes an error row in its cell dir with Slurm's
state and reason, so `report` and `verify` list it, and the next `--submit` runs it again.
Nothing is submitted unless every script passes `sbatch --test-only` (a partition that does
not exist, an account, a GPU request the cluster cannot meet: one line, nothing queued).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import bench
from bench.core import bounded, schema
from bench.core import rows as R
from bench.core.errors import KitError
from bench.core.request import Paths
from host.cluster import splice
from host.cluster.jobdir import KIT_ROOT, Job, Shape, dns_name, task_name

Echo = Callable[[str], None]
# Slurm's job states after which a task runs no more (sacct may add words: "CANCELLED by 0")
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "SPECIAL_EXIT",
}
# what the task's environment hands an Apptainer container (--cleanenv passes APPTAINERENV_* only)
PASS_INTO_CONTAINER = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURMD_NODENAME",
    "SLURM_JOB_PARTITION",
    "SLURM_CLUSTER_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_CPUS_ON_NODE",
    "SLURM_JOB_GPUS",
    "CUDA_VISIBLE_DEVICES",
)


@dataclass
class Options:
    """What the sbatch scripts ask of the cluster (orchestrate.py slurm's options, or KIT_SLURM_*)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None  # Slurm's time format, e.g. 01:00:00
    cpus_per_task: int = 4  # per node of a task (a cell of cpu ranks gets at least one per rank)
    mem: str | None = None  # per node, e.g. 16G
    exclusive: bool = False  # whole nodes: nothing else runs beside a timed cell
    max_running: int | None = None  # array throttle: %K
    sif: Path | None = None  # Apptainer image for a plan made with --image
    extra: list[str] = field(default_factory=list)  # more #SBATCH lines, verbatim (e.g. --qos=high)


def compress(tasks: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8' (sbatch --array's list)."""
    out: list[str] = []
    run: list[int] = []
    for t in sorted(set(tasks)):
        if run and t == run[-1] + 1:
            run.append(t)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [t]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _q(v: object) -> str:
    return shlex.quote(str(v))


def script(job: Job, shape: Shape, tasks: list[int], opts: Options) -> str:
    """The sbatch script that runs TASKS of SHAPE (one array task each)."""
    env = job.environment
    container = env["runtime"] == "container"
    if container and opts.sif is None:
        raise KitError(
            f"{job.dir} was planned for image {env['image']['ref']}: run it with --sif IMAGE.sif (built from that image: "
            "docker save + apptainer build, README), or plan again without --image for a venv"
        )
    if not container and opts.sif is not None:
        raise KitError(f"{job.dir} was planned for a venv, not an image: drop --sif, or plan with --image")
    if not container:
        from bench.core.provenance import environment_label

        here = environment_label()
        if here != env["label"]:
            raise KitError(
                f"{job.dir} was planned for environment {env['label']}; this Python ({sys.executable}) is {here}: "
                "submit from the venv that made the plan, or plan again from this one"
            )
    # every value of the job dir this script holds passes the one rule for spliced values (splice.py):
    # the job dir's path is in #SBATCH lines (split at white space) and, in a container, a bind list;
    # the data dir is one argument natively and a bind's source in a container (no `,` or `:`: no
    # other mount), the image's name an env value
    splice.check(str(job.dir), "the job dir", "sbatch")
    data = job.data_dir
    if container:
        splice.check(str(job.dir), "the job dir", "bind")
        img = env["image"]
        splice.check(img["ref"], f"{job.dir / 'manifest.json'}: environment.image.ref", "image")
    if data is not None:
        data = splice.check(data, f"{job.dir / 'manifest.json'}: data.dir", "bind" if container else "arg")
    logs = job.path("slurm", "logs")
    cpus = max(opts.cpus_per_task, shape.ranks)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=cnn-bench-{dns_name(job.name, 40)}-{shape.name}",
        f"#SBATCH --array={compress(tasks)}" + (f"%{opts.max_running}" if opts.max_running else ""),
        f"#SBATCH --output={logs}/{shape.name}-%A_%a.out",
        f"#SBATCH --nodes={shape.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={cpus}",
    ]
    if shape.gpus:
        lines.append(f"#SBATCH --gres=gpu:{shape.gpus}")
    for flag, v in (("partition", opts.partition), ("account", opts.account), ("time", opts.time), ("mem", opts.mem)):
        if v:
            lines.append(f"#SBATCH --{flag}={v}")
    if opts.exclusive:
        lines.append("#SBATCH --exclusive")
    lines += [f"#SBATCH {x}" for x in opts.extra]
    lines += [
        f"# cnn-bench {bench.__version__}: the {shape.name} cells of job dir {job.dir} (written by `orchestrate.py slurm`;",
        "# the plan: manifest.json). Array task N runs one cell: specs/N.json, its results in task-N/.",
        "set -euo pipefail",
        f"JOB={_q(job.dir)}",
        'i=$(printf %04d "$SLURM_ARRAY_TASK_ID")',
        # the task dir, and every dir and file under it, is the job dir's own: a link at any level (task-N, or
        # task-N/<study> one below it) would make the cell write outside the job dir (find -P never follows one)
        'link=$(find "$JOB/task-$i" -type l -print -quit 2>/dev/null || true)',
        'if [ -n "$link" ]; then echo "$link is a symlink: a job dir\'s paths stay inside it" >&2; exit 1; fi',
        'mkdir -p "$JOB/task-$i"',
        "unset KIT_RDZV_ENDPOINT KIT_NNODES KIT_RDZV_ID",
        "export KIT_GPU_ALLOCATION=1  # a cell's GPU ids are positions in this task's allocation",
    ]
    if container:
        # the bind list from its parts: the checked data dir (one shell word), then the job dir's
        # own specs and task dir ($JOB: checked above; $i: the array index, digits)
        binds = ([_q(f"{data}:/data:ro")] if data else []) + ['"$JOB/specs:/specs:ro"', '"$JOB/task-$i:/results"']
        lines += [
            f"for v in {' '.join(PASS_INTO_CONTAINER)} KIT_GPU_ALLOCATION; do",
            '  if [ -n "${!v:-}" ]; then export "APPTAINERENV_$v=${!v}"; fi',
            "done",
            f"export APPTAINERENV_KIT_IMAGE_ID={_q(img.get('id') or '')} APPTAINERENV_KIT_IMAGE_REF={_q(img['ref'])}",
            'export APPTAINERENV_KIT_HOST_NAME="$(hostname -s)"',
            'export APPTAINERENV_KIT_MACHINE_ID="$(cat /etc/machine-id 2>/dev/null)"',  # hashed by the cell
            f"cell=(apptainer exec --cleanenv{' --nv' if shape.gpus else ''} --bind {','.join(binds)} {_q(opts.sif)} python)",
            'spec="/specs/$i.json"; out=/results' + ("; data=(--data-dir /data)" if data else "; data=()"),
        ]
    else:
        lines += [  # this kit and this Python: never a path the job dir names
            f"export PYTHONPATH={_q(KIT_ROOT)}" + "${PYTHONPATH:+:$PYTHONPATH}",
            f"cell=({_q(sys.executable)})",
            'spec="$JOB/specs/$i.json"; out="$JOB/task-$i"' + (f"; data=(--data-dir {_q(data)})" if data else "; data=()"),
        ]
    if shape.nodes == 1:
        lines.append('exec "${cell[@]}" -m bench cell "$spec" --out "$out" "${data[@]}"')
    else:
        lines += [
            "# a cell of several nodes: the cell process here, on the allocation's first node; torchrun's",
            "# ranks on the others (srun), all meeting at the c10d rendezvous on this node",
            'export KIT_RDZV_ENDPOINT="$(hostname):$((20000 + SLURM_JOB_ID % 20000))" KIT_RDZV_ID="cnn-bench-$SLURM_JOB_ID"',
            'export APPTAINERENV_KIT_RDZV_ENDPOINT="$KIT_RDZV_ENDPOINT" APPTAINERENV_KIT_RDZV_ID="$KIT_RDZV_ID"',
            "others=$((SLURM_JOB_NUM_NODES - 1))",
            'srun --relative=1 --nodes="$others" --ntasks="$others" --ntasks-per-node=1 \\',
            '  "${cell[@]}" -m bench.run.ranks --node "$spec" --out "$out" "${data[@]}" &',
            "ranks=$!",
            'rc=0; "${cell[@]}" -m bench cell "$spec" --out "$out" "${data[@]}" || rc=$?',
            'kill "$ranks" 2>/dev/null || true; wait "$ranks" 2>/dev/null || true',
            'exit "$rc"',
        ]
    return "\n".join(lines) + "\n"


def write_scripts(job: Job, opts: Options, todo: list[int] | None = None) -> dict[str, Path]:
    """One script per shape with tasks in TODO (default: every task); shape -> path."""
    todo = list(range(len(job.cells))) if todo is None else todo
    for t in todo:  # every level of a task's cell dir is a dir of the job dir itself (a link: one line, no script)
        job.cell_dir(t)
    texts = {
        name: script(job, shape, mine, opts)
        for name, shape in job.shapes.items()
        if (mine := [t for t in shape.tasks if t in set(todo)])
    }
    job.path("slurm", "logs", make=True)
    out = {}
    for name, text in texts.items():
        path = job.file("slurm", f"{name}.sbatch")
        R.atomic_write_text(path, text)
        path.chmod(0o755)
        out[name] = path
    return out


# ---------------------------------------------------------------------------- talking to Slurm
def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise KitError(
            f"{argv[0]} not found on PATH: run this on a Slurm login node (Debian: apt-get install slurm-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise KitError(f"{argv[0]} did not answer in {timeout:.0f} s: is slurmctld up? (`sinfo`)") from None


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    err = [ln for ln in lines if "error" in ln.lower() or "failure" in ln.lower()]
    return (err or lines or ["no message"])[0][:300]


def check_sbatch() -> None:
    if shutil.which("sbatch") is None:
        raise KitError("sbatch not found on PATH: submit from a Slurm login node (Debian: apt-get install slurm-client)")


def test_only(path: Path, shape: str) -> None:
    """KitError (one line, nothing queued) when sbatch would refuse the script."""
    r = _run(["sbatch", "--test-only", str(path)])
    if r.returncode != 0:
        raise KitError(f"sbatch refuses the {shape} array ({path}): {_first_error(r.stderr + r.stdout)}; nothing was submitted")


def sbatch(path: Path) -> str:
    r = _run(["sbatch", "--parsable", str(path)])
    job_id = r.stdout.strip().split(";")[0]
    if r.returncode != 0 or not job_id.isdigit():
        raise KitError(f"sbatch {path} failed: {_first_error(r.stderr + r.stdout)}")
    return job_id


@dataclass
class TaskState:
    state: str  # Slurm's job state (first word), or UNKNOWN
    reason: str = ""
    node: str = ""
    job_id: str = ""  # the task's own Slurm job id (SLURM_JOB_ID)
    task: str = ""  # <array job>_<array task>

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == "UNKNOWN"


def _clean(v: str) -> str:
    v = v.strip()
    return "" if v in ("None", "(null)", "n/a", "Unknown") else v


def squeue_states(array_job: str) -> dict[int, TaskState] | None:
    """Array task -> state of every task of ARRAY_JOB squeue still lists (ended ones stay for
    the cluster's MinJobAge); None when squeue knows the job no more."""
    r = _run(["squeue", "-h", "-r", "-t", "all", "-j", array_job, "-o", "%F|%K|%A|%T|%r|%N"])
    if r.returncode != 0:
        return None
    out: dict[int, TaskState] = {}
    for line in r.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 6 or parts[0] != array_job or not parts[1].isdigit():
            continue
        out[int(parts[1])] = TaskState(
            parts[3].split()[0], _clean(parts[4]), _clean(parts[5]), parts[2], f"{array_job}_{parts[1]}"
        )
    return out or None


def sacct_states(array_job: str) -> dict[int, TaskState]:
    """The same from Slurm's accounting ({} where the cluster keeps none)."""
    r = _run(["sacct", "-n", "-P", "-X", "-j", array_job, "-o", "JobID,JobIDRaw,State,NodeList,Reason"])
    out: dict[int, TaskState] = {}
    if r.returncode != 0:
        return out
    for line in r.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 5 or "_" not in parts[0]:
            continue
        arr, _, k = parts[0].partition("_")
        if arr == array_job and k.isdigit():
            out[int(k)] = TaskState(parts[2].split()[0], _clean(parts[4]), _clean(parts[3]), parts[1], parts[0])
    return out


# ---------------------------------------------------------------------------- submissions
SUBMISSIONS_CAPS = bounded.Caps(file_bytes=16 << 20, line_bytes=1 << 20, lines=10_000)


def _submissions_path(job: Job) -> Path:
    return job.file("slurm", "submissions.jsonl")


def submissions(job: Job) -> list[dict]:
    """Every submission recorded in the job dir, the latest 1,000 (read as untrusted, within
    SUBMISSIONS_CAPS: lines that do not fit the submission schema, or name a task the plan has
    not, are skipped)."""
    path = _submissions_path(job)
    out: list[dict] = []
    if not R.is_regular(path):
        return out
    try:
        for _n, raw in bounded.lines(path, SUBMISSIONS_CAPS):
            try:
                s = json.loads(raw.decode("utf-8", errors="replace")) if raw else None
            except (ValueError, RecursionError):
                continue
            if isinstance(s, dict) and schema.check("submission", s) is None and all(t < len(job.cells) for t in s["tasks"]):
                out.append(s)
    except KitError as err:
        raise KitError(f"{err}: move {path} away to start the submissions over") from None
    return out[-1000:]


def latest(job: Job) -> list[dict]:
    """The submissions of the latest `--submit` (one per shape)."""
    subs = submissions(job)
    if not subs:
        return []
    last = subs[-1].get("submit")
    return [s for s in subs if s.get("submit") == last]


def active(job: Job) -> list[str]:
    """Slurm job ids of this job dir still pending or running."""
    out = []
    for s in submissions(job):
        st = squeue_states(str(s["job_id"]))
        if st and any(not t.ended for t in st.values()):
            out.append(str(s["job_id"]))
    return out


def submit(job: Job, opts: Options, echo: Echo) -> list[dict]:
    """Submit an array per shape for every cell without a finished result; returns the new
    submissions ([] when every cell has finished). Nothing is submitted unless every script
    passes sbatch --test-only."""
    check_sbatch()
    running = active(job)
    if running:
        raise KitError(
            f"{job.dir} still has Slurm job(s) {', '.join(running)} queued or running: "
            f"follow them (`orchestrate.py slurm {job.dir} --follow`) or cancel them (scancel {' '.join(running)})"
        )
    todo = [i for i in range(len(job.cells)) if not job.finished(i)]
    done = len(job.cells) - len(todo)
    if not todo:
        echo(f"slurm: all {len(job.cells)} cells of {job.dir} have a finished result: nothing to submit")
        return []
    scripts = write_scripts(job, opts, todo)
    for shape, path in scripts.items():
        test_only(path, shape)
    from bench.run.cell import clear_results

    for i in todo:  # no stale error row of an earlier try may stand for this one
        d = job.cell_dir(i)
        if d.is_dir():
            clear_results(d)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    new = []
    for shape, path in scripts.items():
        tasks = [t for t in job.shapes[shape].tasks if t in set(todo)]
        job_id = sbatch(path)
        sub = {"submit": stamp, "job_id": job_id, "shape": shape, "tasks": tasks, "script": str(path)}
        with R.open_nofollow(_submissions_path(job), "a") as fh:
            fh.write(json.dumps(sub) + "\n")
        new.append(sub)
        echo(f"slurm: submitted job {job_id}: {len(tasks)} {shape} task(s), array {compress(tasks)} ({path.name})")
    if done:
        echo(f"slurm: {done} of {len(job.cells)} cells already finished: not submitted again")
    return new


# ---------------------------------------------------------------------------- following
def _label(job: Job, i: int) -> str:
    from bench.core.registry import get_study

    c = job.cells[i]
    return f"task {task_name(i)} {c.study} {get_study(c.study).label(c)}" + (f" r{c.repeat}" if c.repeat else "")


def settle(job: Job, i: int, st: TaskState, log: Path) -> str:
    """Task I ended as ST: its cell's status; an error row with Slurm's state and reason when
    the task left no finished result (cancelled, out of time, a node lost, ...)."""
    from bench.run.cell import settle_failure

    d = job.cell_dir(i)
    have = R.cell_status(d)
    if have is not None:
        return have  # the cell wrote its own rows (ok, skipped, or its own error and reason)
    d = job.cell_dir(i, make=True)
    why = f"slurm task {st.task or '?'} (job {st.job_id or '?'}) ended {st.state}"
    why += (f": {st.reason}" if st.reason else "") + (f" on {st.node}" if st.node else "")
    why += f" without a result (log: {log}); `orchestrate.py slurm {job.dir} --submit` runs it again"
    if not R.is_regular(d / "cell.json"):
        R.atomic_write_text(d / "cell.json", job.cells[i].to_json(indent=2) + "\n")
    extra = {"scheduler": "slurm", "scheduler_job": st.job_id or None, "scheduler_task": st.task or None}
    extra["scheduler_node"] = st.node or None
    settle_failure(d, job.cells[i], why, Paths(job.task_dir(i), job.data_dir), "error", extra)
    return "error"


def follow(job: Job, subs: list[dict], echo: Echo, poll_s: float = 3.0) -> dict[int, str]:
    """Follow SUBS until every task ended; settle each; returns task -> cell status."""
    if not subs:
        return {}
    want = {(str(s["job_id"]), t): s for s in subs for t in s["tasks"]}
    states: dict[tuple[str, int], TaskState] = {}
    result: dict[int, str] = {}
    last_counts = ""
    t0 = time.monotonic()
    while True:
        for job_id in dict.fromkeys(j for j, _ in want):
            got = squeue_states(job_id) or {}
            missing = [t for (j, t) in want if j == job_id and t not in got]
            if missing:
                got = {**sacct_states(job_id), **got}
            for (j, t), s in want.items():
                if j != job_id:
                    continue
                new = got.get(t)
                if new is None:  # neither squeue nor sacct lists it (a cluster without accounting)
                    seen = states.get((j, t))
                    if seen is None and time.monotonic() - t0 < 30:
                        continue  # just submitted: squeue may not list it yet
                    was = seen.state if seen else "submitted"
                    why = f"it left the queue while {was} (scancel?), and this cluster keeps no accounting (sacct) to say how"
                    new = TaskState("UNKNOWN", why, seen.node if seen else "", seen.job_id if seen else "", f"{j}_{t}")
                old = states.get((j, t))
                if old is None or old.state != new.state:
                    states[(j, t)] = new
                    if new.state == "RUNNING":
                        echo(f"slurm: {_label(job, t)}: running on {new.node or '?'} ({new.task})")
                    if new.ended and t not in result:
                        log = job.dir / "slurm" / "logs" / f"{s['shape']}-{j}_{t}.out"
                        result[t] = settle(job, t, new, log)
                        echo(
                            f"slurm: {_label(job, t)}: {new.state}" + (f" on {new.node}" if new.node else "") + f" -> {result[t]}"
                        )
        counts: dict[str, int] = {}
        for st in states.values():
            counts[st.state] = counts.get(st.state, 0) + 1
        line = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        if line != last_counts:
            echo(f"slurm: {len(want)} tasks: {line} ({time.monotonic() - t0:.0f} s)")
            last_counts = line
        if len(result) == len(want):
            return result
        time.sleep(poll_s)


__all__ = ["Options", "active", "compress", "follow", "latest", "script", "submit", "submissions", "write_scripts"]
