"""Where a result came from: the kit's source tree, the runtime or image, the libraries,
the CPU and GPU, the threads in use. `system_info()` is what each cell's system.json holds.

Nothing here imports torch or numba: it reads them from sys.modules when a cell already
loaded them, so the host side can use this module too.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import bench
from bench.core.errors import KitError
from bench.core.machine import cpu_arch, cpu_model, nvidia_smi_gpus, usable_cores

LIBS = (
    "torch",
    "torchvision",
    "numpy",
    "numba",
    "numba-cuda",
    "llvmlite",
    "scipy",
    "scikit-learn",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "psutil",
    "rich",
    "typer",
    "pillow",
    "pooch",  # the one download path (bench/data/archive.py)
)
KIT_ROOT = Path(bench.__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def source_state() -> dict:
    """{"sha", "dirty", "changes"}: the kit checkout this process runs from.

    dirty when tracked files differ from HEAD *or* untracked files exist under bench/
    (a new module there changes what runs). KIT_GIT_SHA (set by the host for containers,
    which hold no .git) wins; else, in a container, KIT_IMAGE_GIT_SHA, the commit the image
    was built from (baked in by `orchestrate.py build`; what compose runs get). A '-dirty'
    suffix marks the tree unclean. Empty and 'unknown' count as unset."""
    for var in ("KIT_GIT_SHA", "KIT_IMAGE_GIT_SHA"):
        env = known_sha(os.environ.get(var))
        if env:
            return {"sha": env.removesuffix("-dirty"), "dirty": env.endswith("-dirty"), "changes": [], "from": var}
    git = ["git", "-C", str(KIT_ROOT)]
    try:
        head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return {"sha": None, "dirty": None, "changes": [], "from": "no git checkout"}
        tracked = subprocess.run(
            git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
        untracked = subprocess.run(
            git + ["ls-files", "--others", "--exclude-standard", "--", "bench"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None, "changes": [], "from": "git not runnable"}
    changes = [line[3:] for line in tracked] + [f"?? {p}" for p in untracked]
    return {"sha": head.stdout.strip(), "dirty": bool(changes), "changes": changes[:50], "from": "git"}


def known_sha(value: str | None) -> str | None:
    """VALUE unless it is empty or 'unknown' (what compose passes for an unset variable, git_sha()
    outside git, the Dockerfile's default): the one rule for a commit that says nothing."""
    return value if value and value != "unknown" else None


def git_sha() -> str | None:
    """HEAD's sha, '-dirty' appended when source_state() says the tree is unclean."""
    s = source_state()
    if not s["sha"]:
        return None
    return s["sha"] + ("-dirty" if s["dirty"] else "")


def host_label() -> str:
    """The short host name, safe as a directory name: results/<host-label>/ is the default results dir."""
    name = os.environ.get("KIT_HOST_NAME") or socket.gethostname() or "host"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.split(".")[0]) or "host"


MACHINE_ENV = "KIT_MACHINE_ID"  # the host runner passes its own: a container sees neither source
# where a machine's identity is read, most stable first: the board's UUID (the firmware's, root
# only), then the OS install's id (a VM cloned from one image may share it: the boot id tells two
# boots apart, recorded beside it)
MACHINE_SOURCES = (("product_uuid", "/sys/class/dmi/id/product_uuid"), ("machine-id", "/etc/machine-id"))
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def gpu_uuids() -> list[str]:
    """The NVIDIA GPUs' UUIDs (nvidia-smi), sorted; [] without nvidia-smi or a GPU. A GPU's UUID is
    its board's serial: the machine's where neither the board's nor the OS install's id is readable."""
    try:
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if q.returncode != 0:
        return []
    return sorted(u for line in q.stdout.splitlines() if re.fullmatch(r"GPU-[0-9A-Fa-f-]{8,64}", u := line.strip()))


def _hashed(text: str, n: int = 12) -> str:
    import hashlib

    return hashlib.sha256(("cnn-bench machine " + text.strip()).encode()).hexdigest()[:n]


def machine_identity() -> dict:
    """{"machine_id", "machine_id_source", "boot_id"}: which machine and which boot of it made a
    result, hashed (no serial leaves the machine), so two machines of one class are told apart and
    "the same host" means the same machine. KIT_MACHINE_ID (the host runner's, for a container) wins;
    a value that cannot be read is None with the source "unknown"."""
    out: dict = {"machine_id": None, "machine_id_source": "unknown", "boot_id": None}
    given = known_sha(os.environ.get(MACHINE_ENV))
    if given:  # ours already (12 hex digits), else a raw id a job script passed: hashed here
        mine = re.fullmatch(r"[0-9a-f]{12}", given) is not None
        out.update(machine_id=given if mine else _hashed(given), machine_id_source="host runner")
    else:
        for name, path in MACHINE_SOURCES:
            try:
                text = Path(path).read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                out.update(machine_id=_hashed(text), machine_id_source=name)
                break
        else:  # neither readable (a container, a lent GPU host): the GPUs' own serial UUIDs, if any
            uuids = gpu_uuids()
            if uuids:
                out.update(machine_id=_hashed(" ".join(uuids)), machine_id_source="gpu-uuid")
    try:
        boot = Path(BOOT_ID).read_text().strip()
        out["boot_id"] = _hashed(boot, 8) if boot else None
    except OSError:
        pass
    return out


def library_versions() -> dict[str, str]:
    out = {}
    for name in LIBS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def scheduler_info() -> dict:
    """The cluster scheduler this process runs under, from its environment ({} for none): Slurm
    (SLURM_JOB_ID: the job, the array task, the node) or a Kubernetes Indexed Job
    (JOB_COMPLETION_INDEX; the kit's Jobs add the job, node and pod names). system.json holds it
    all; rows carry SCHEDULER_ROW_KEYS of it (`orchestrate.py slurm` and `k8s` write such tasks)."""
    e = os.environ
    if e.get("SLURM_JOB_ID"):
        array, task = e.get("SLURM_ARRAY_JOB_ID"), e.get("SLURM_ARRAY_TASK_ID")
        return {
            "scheduler": "slurm",
            "job": e["SLURM_JOB_ID"],
            "task": f"{array}_{task}" if array and task else e["SLURM_JOB_ID"],  # as squeue and sacct name it
            "node": e.get("SLURMD_NODENAME") or socket.gethostname(),
            "array_job_id": array,
            "array_task_id": task,
            "partition": e.get("SLURM_JOB_PARTITION"),
            "cluster": e.get("SLURM_CLUSTER_NAME"),
            "nodelist": e.get("SLURM_JOB_NODELIST"),
            "cpus_on_node": e.get("SLURM_CPUS_ON_NODE"),
            "gpus": e.get("SLURM_JOB_GPUS") or e.get("SLURM_STEP_GPUS"),
        }
    if e.get("JOB_COMPLETION_INDEX") is not None:
        job = e.get("KIT_K8S_JOB") or "?"
        return {
            "scheduler": "kubernetes",
            "job": job,
            "task": f"{job}/{e['JOB_COMPLETION_INDEX']}",
            "node": e.get("KIT_K8S_NODE") or socket.gethostname(),
            "completion_index": e["JOB_COMPLETION_INDEX"],
            "pod": e.get("KIT_K8S_POD") or e.get("HOSTNAME"),
        }
    return {}


# what every row of a cell run under a scheduler carries (scheduler_info's keys, prefixed)
SCHEDULER_ROW_KEYS = ("scheduler", "job", "task", "node")


def scheduler_row_fields(info: dict | None = None) -> dict:
    """{scheduler, scheduler_job, scheduler_task, scheduler_node} for a row ({} outside a scheduler)."""
    info = scheduler_info() if info is None else info
    if not info:
        return {}
    return {("scheduler" if k == "scheduler" else f"scheduler_{k}"): info.get(k) for k in SCHEDULER_ROW_KEYS}


def thread_settings() -> dict:
    t: dict = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}
    torch = sys.modules.get("torch")
    if torch is not None:
        t["torch_threads"] = torch.get_num_threads()
        t["torch_interop_threads"] = torch.get_num_interop_threads()
    numba = sys.modules.get("numba")
    if numba is not None:
        try:
            t["numba_threads"] = numba.get_num_threads()
            t["numba_threading_layer"] = numba.config.THREADING_LAYER
        except Exception:  # noqa: BLE001 - threading layer not initialised yet
            pass
    return t


def gpu_info() -> dict | None:
    """The GPU this process uses (torch's view when torch is loaded, else nvidia-smi's first)."""
    info: dict = {}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(
            name=p.name,
            memory_mb=round(p.total_memory / 1e6),
            sm_count=p.multi_processor_count,
            capability=f"{p.major}.{p.minor}",
            torch_cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
        )
    elif torch is not None and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        info.update(name="Apple MPS", torch_mps=True)
    smi = nvidia_smi_gpus()
    if smi:
        g = smi[0]
        info.update(
            name=info.get("name", g["name"]), driver=g["driver"], power_limit=g["power_limit"], max_sm_clock=g["max_sm_clock"]
        )
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None and info:
        info["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return info or None


def device_name(platform_name: str) -> str:
    """What a cell of PLATFORM ran on: the GPU's name for cuda/mps, else the CPU model and cores."""
    if platform_name in ("cuda", "mps"):
        gpu = gpu_info()
        if gpu and gpu.get("name"):
            return str(gpu["name"])
    return f"{cpu_model()}, {usable_cores()} cores"


def runtime_info() -> dict:
    """Native, or the container image this ran in (the host runner passes KIT_* env vars).

    A container cannot know its own image id: orchestrate.py passes KIT_IMAGE_ID; without it
    (compose, a bare docker run) image_id is the content tag baked into the image
    (KIT_IMAGE_CONTENT_REF, cnn-bench/cpu:<lock[:12]>-<sources[:12]>), which names exactly
    one build of the kit's inputs, and image_ref falls back to it as well."""
    runtime = os.environ.get("KIT_RUNTIME", "native")
    content = known_sha(os.environ.get("KIT_IMAGE_CONTENT_REF"))
    image_id = known_sha(os.environ.get("KIT_IMAGE_ID"))
    if image_id is None:
        image_id = (content or "unknown") if runtime == "container" else "native"
    return {
        "runtime": runtime,
        "image_id": image_id,
        "image_ref": known_sha(os.environ.get("KIT_IMAGE_REF")) or content,
        "lock_hash": known_sha(os.environ.get("KIT_LOCK_HASH")) or (_image_lock_hash() if runtime == "container" else "native"),
    }


# the libraries whose versions time the work: a result made under other versions is other work
TIMING_LIBS = ("torch", "torchvision", "numba", "numba-cuda", "numpy", "cupy-cuda12x", "cupy-cuda13x")


def environment() -> dict:
    """What a result's numbers depend on besides the work itself: the runtime, the image (its
    content tag, which names one build of the lock and the kit's sources) or, natively, the
    Python, and the versions of TIMING_LIBS."""
    rt = runtime_info()
    libs = {k: v for k, v in library_versions().items() if k in TIMING_LIBS}
    python = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    image = known_sha(os.environ.get("KIT_IMAGE_CONTENT_REF")) or rt["image_ref"] or rt["image_id"]  # compose = orchestrate
    where = image if rt["runtime"] == "container" else python
    return {"runtime": rt["runtime"], "image": where, "libs": libs}


def environment_label(env: dict | None = None) -> str:
    """A short label of environment() for Cell.env: `native-torch2.14.1-3f2a9c1b`,
    `container-torch2.10.0-5d2e8f10` (the hash covers all of it; the torch version is there
    for a reader)."""
    import hashlib
    import json

    env = env or environment()
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:8]
    torch = env["libs"].get("torch")
    return f"{env['runtime']}-" + (f"torch{torch}-" if torch else "") + digest


def _image_lock_hash() -> str:
    """sha256 of the lock file the image holds (an image built without LOCK_HASH, e.g. by compose)."""
    import hashlib

    try:
        return hashlib.sha256((KIT_ROOT / "requirements.lock.txt").read_bytes()).hexdigest()
    except OSError:
        return "unknown"


RUN_LABEL_ENV = "KIT_RUN_LABEL"  # `bench matrix --label` sets it for its cells; system.json's run_label


def check_run_label(label: str) -> str:
    """A run label as tables and plots print it: 1-60 printable characters, no line breaks."""
    text = label.strip()
    if not text or len(text) > 60 or not text.isprintable():
        raise KitError(f"--label {label[:80]!r}: give 1-60 printable characters (it names this run in every table)")
    return text


def load_average() -> dict[str, float] | None:
    """The system load averages (runnable and waiting tasks) over 1, 5 and 15 minutes when this is
    written, or None where the OS has none; beside cpu_logical_cores, a load above it is a busy machine."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return None
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2)}


def system_info(config: dict, dataset: dict | None, run_id: str, extra: dict | None = None) -> dict:
    import psutil

    info = {
        "run_id": run_id,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "kit_version": bench.__version__,
        "kit_git_sha": git_sha(),
        "kit_source": source_state(),
        **runtime_info(),
        "hostname": os.environ.get("KIT_HOST_NAME") or socket.gethostname(),
        **machine_identity(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "libraries": library_versions(),
        "cpu_model": cpu_model(),
        "cpu_arch": cpu_arch(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_affinity": usable_cores(),
        "memory_total_mb": round(psutil.virtual_memory().total / 1e6),
        "load_avg": load_average(),
        "threads": thread_settings(),
        "gpu": gpu_info(),
        "dataset": dataset,
        "config": config,
    }
    sched = scheduler_info()
    if sched:
        info["scheduler"] = sched
    if os.environ.get(RUN_LABEL_ENV):
        try:  # the one rule `--label` is held to; a bad value from the environment records no label
            info["run_label"] = check_run_label(os.environ[RUN_LABEL_ENV])
        except KitError:
            pass
    if extra:
        info.update(extra)
    return info
