"""A job dir: a matrix resolved for a cluster scheduler (`orchestrate.py plan`), read back by
`orchestrate.py slurm` and `orchestrate.py k8s`.

    JOB/manifest.json     what was planned: the request, the environment the cells were resolved
                          for (this venv, or an image), the data, every cell with its task number
                          and resource shape; written last (a job dir without one is no plan)
    JOB/specs/NNNN.json   one Cell each (Cell.to_json): task NNNN runs exactly this spec
    JOB/task-NNNN/        task NNNN's results dir (`python -m bench cell specs/NNNN.json --out
                          task-NNNN`): one writer per results dir; `report JOB` merges them all
    JOB/slurm/, JOB/k8s/  what `slurm` and `k8s` write

A shape is what a cell asks of a node, and one array (Slurm) or Indexed Job (Kubernetes) runs
all cells of one shape: `cpu` (one process; cpu ranks share its cores), `gpu1`, `gpuN` (a cell
of N GPUs: DDP ranks or DataParallel), with `-Mnodes` for a cell that spans M nodes
(`plan --nodes M`: the cells that run as ranks; Cell.nodes is part of their identity).

The cells of one RunRequest are resolved by the matrix code every run uses (bench.run.matrix.resolve: studies,
--set/--only, validation, the data checksums) in the environment that will run them: this
Python (a venv on the shared filesystem) or, with --image, that image's (read from the image
itself), since a cell refuses to run in another environment than it was resolved for.

A job dir is data, on a filesystem other users may write: everything read back from it is
checked (it may be old, or edited): the manifest against its schema (bench.core.schema:
format, kit version, shape, paths), and every spec against the id the plan gave it. Nothing in
it chooses what runs: the Python, the kit and the image a task runs come from the machine that
submits (host/cluster/slurm.py). Every path the kit reads or writes under it is resolved inside
it (`Job.path`): a symlink or a non-dir where a dir belongs is one line, never followed. A value
of it that a task's command is built from (the data dir, the image's name) passes the one rule
for such values (host/cluster/splice.py) when the plan is written and again when it is read
back: a data dir holding `,` or `:` is never a container's bind list.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import bench
from bench.core import bounded, schema
from bench.core import rows as R
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.request import RunRequest
from bench.core.resultset import MAX_JSON_BYTES
from host.cluster import splice

FORMAT = 1
MANIFEST = "manifest.json"
KIT_ROOT = Path(bench.__file__).resolve().parent.parent
CLUSTER_PLATFORMS = ("cpu", "cuda")  # mps runs on macOS only: no cluster scheduler starts it


def task_name(i: int) -> str:
    return f"{i:04d}"


def shape_name(gpus: int, nodes: int) -> str:
    return ("cpu" if gpus == 0 else f"gpu{gpus}") + (f"-{nodes}nodes" if nodes > 1 else "")


def shape_of(cell: Cell) -> tuple[int, int, int]:
    """(GPUs per node, nodes, ranks per node; 0 = one process) CELL asks for."""
    from bench.core.registry import get_study

    study = get_study(cell.study)
    ranks = study.world_size(cell)
    gpus = 0
    if study.platform_of(cell) == "cuda":
        gpus = len([d for d in cell.devices if d != "cpu"]) or 1
    return gpus, cell.nodes, ranks


@dataclass
class Shape:
    name: str
    gpus: int  # per node
    nodes: int
    ranks: int  # most ranks per node of any of its cells (0: one process each)
    tasks: list[int] = field(default_factory=list)


@dataclass
class Job:
    """A job dir read back and checked."""

    dir: Path
    manifest: dict
    cells: list[Cell]  # by task number
    shapes: dict[str, Shape]

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def environment(self) -> dict:
        return self.manifest["environment"]

    @property
    def data_dir(self) -> str | None:
        d = self.manifest["data"].get("dir")
        return str(d) if d else None

    def path(self, *parts: str, make: bool = False) -> Path:
        """JOB/PARTS..., every part a dir of the job dir itself: KitError (one line) when one is
        a symlink or holds something else than a dir. MAKE: create the missing ones."""
        p = self.dir
        for part in parts:
            if part in ("", ".", "..") or "/" in part:
                raise KitError(f"{self.dir}: {part!r} is not a name inside the job dir")
            p = p / part
            if make and not os.path.lexists(p):
                p.mkdir(exist_ok=True)
            if os.path.islink(p) or (os.path.lexists(p) and not p.is_dir()):
                raise KitError(f"{p} is a symlink or not a directory: a job dir's paths stay inside it; remove it")
        return p

    def file(self, *parts: str, make: bool = False) -> Path:
        """JOB/PARTS..., a file (never a symlink) in dirs of the job dir itself (`path`)."""
        f = self.path(*parts[:-1], make=make) / parts[-1]
        if os.path.islink(f):
            raise KitError(f"{f} is a symlink: a job dir's paths stay inside it; remove it")
        return f

    def task_dir(self, i: int) -> Path:
        return self.path(f"task-{task_name(i)}")

    def spec_path(self, i: int) -> Path:
        return self.file("specs", f"{task_name(i)}.json")

    def cell_dir(self, i: int, make: bool = False) -> Path:
        c = self.cells[i]
        return self.path(f"task-{task_name(i)}", c.study, c.id, make=make)

    def finished(self, i: int) -> bool:
        """Task I has a finished result (ok or skipped): a rerun leaves it alone."""
        return R.cell_status(self.cell_dir(i)) in ("ok", "skipped")


def group_shapes(cells: list[Cell]) -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for i, c in enumerate(cells):
        gpus, nodes, ranks = shape_of(c)
        name = shape_name(gpus, nodes)
        s = shapes.setdefault(name, Shape(name, gpus, nodes, 0))
        s.ranks = max(s.ranks, ranks)
        s.tasks.append(i)
    return shapes


# ---------------------------------------------------------------------------- the environment
def image_environment(image: str) -> dict:
    """{ref, id, label} of a local Docker IMAGE: the environment label its cells run under
    (bench.core.provenance.environment_label, asked of the image itself), so the plan's cells
    are that image's work. KitError (one line) when the image is not there."""
    from host import images

    try:
        import docker
    except ImportError:
        raise KitError("--image needs the docker Python package (requirements/host.txt)") from None
    try:
        client = images.docker_client()
        img = client.images.get(image)
    except docker.errors.ImageNotFound:  # type: ignore[attr-defined]
        raise KitError(
            f"image {image} not found (docker image inspect): build it (`python orchestrate.py build cpu`) or pull it"
        ) from None
    except docker.errors.DockerException as err:  # type: ignore[attr-defined]
        raise KitError(f"cannot ask the Docker engine for image {image}: {str(err).splitlines()[0][:200]}") from None
    probe = "from bench.core.provenance import environment_label as e; print('KIT ENV ' + e())"
    try:
        out = client.containers.run(
            img.id, ["-c", probe], entrypoint=["python"], network_mode="none", remove=True, stderr=False
        ).decode(errors="replace")
    except docker.errors.DockerException as err:  # type: ignore[attr-defined]
        raise KitError(f"image {image} cannot tell its environment: {str(err).splitlines()[0][:200]}") from None
    label = next((ln[len("KIT ENV ") :].strip() for ln in out.splitlines() if ln.startswith("KIT ENV ")), "")
    if not label:
        raise KitError(f"image {image} is not a cnn-bench image (it printed no environment label)")
    return {"ref": image, "id": img.id, "label": label, "labels": dict(img.labels or {})}


# ---------------------------------------------------------------------------- plan
def plan(job: Path, req: RunRequest, image: str | None = None, nodes: int = 1, command: str = "") -> dict:
    """Resolve REQ on its platforms, its data in its data dir, into job dir JOB. Returns
    {"job", "cells", "shapes": {name: task count}, "fresh": False when JOB already held it}."""
    from bench.core.provenance import environment_label, git_sha
    from bench.run.matrix import resolve

    platforms, data_dir = list(req.platforms), Path(req.data_dir) if req.data_dir else None
    for p in platforms:
        if p not in CLUSTER_PLATFORMS:
            raise KitError(f"platform {p!r} cannot run on a cluster: choose {', '.join(CLUSTER_PLATFORMS)}")
    if not 1 <= nodes <= 1024:
        raise KitError(f"--nodes must be from 1 to 1024, got {nodes}")
    data = str(data_dir.resolve()) if data_dir else None
    if data is not None:  # the tasks get it as one argument, or as a container's bind
        splice.check(data, "--data-dir", "bind" if image else "arg")
    if image:
        splice.check(image, "--image", "image")
    env = image_environment(image) if image else None
    cells = resolve(req)
    from bench.core.registry import get_study

    label = env["label"] if env else environment_label()
    cells = [c.replace(env=label, nodes=nodes if nodes > 1 and get_study(c.study).world_size(c) else 1) for c in cells]
    if nodes > 1 and all(c.nodes == 1 for c in cells):
        raise KitError(f"--nodes {nodes}: no cell of this matrix runs as ranks (give them devices: --set devices=0,1)")
    shapes = group_shapes(cells)
    job = Path(job)
    if (job / MANIFEST).exists() or job.is_symlink():
        have = load(job)
        if [c.key for c in have.cells] == [c.key for c in cells]:
            return {"job": str(job), "cells": len(cells), "shapes": {k: len(s.tasks) for k, s in shapes.items()}, "fresh": False}
        raise KitError(f"{job} holds another plan ({len(have.cells)} cells): plan into another dir, or remove it first")
    if job.exists() and (not job.is_dir() or any(job.iterdir())):
        raise KitError(f"{job} exists and is not an empty dir: plan into a new dir")
    datasets = {str(c.params.get("dataset")): str(c.params.get("dataset_sha256", "")) for c in cells if c.params.get("dataset")}
    manifest = {
        "kit": "cnn-bench",
        "format": FORMAT,
        "kit_version": bench.__version__,
        "kit_git_sha": git_sha(),
        "kit_root": str(KIT_ROOT),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "request": {
            "studies": list(req.studies),
            "platforms": list(platforms),
            "profile": req.profile,
            "sets": list(req.sets),
            "only": list(req.only),
            "repeats": req.repeats,
            "nodes": nodes,
        },
        "environment": {
            "label": label,
            "runtime": "container" if env else "native",
            "python": None if env else sys.executable,  # a venv on the shared filesystem runs the tasks
            "image": {k: env[k] for k in ("ref", "id")} if env else None,
        },
        "data": {"dir": data, "datasets": datasets},
        "cells": [
            {"task": task_name(i), "id": c.id, "study": c.study, "shape": shape_name(*shape_of(c)[:2])}
            for i, c in enumerate(cells)
        ],
        "shapes": {k: {"gpus": s.gpus, "nodes": s.nodes, "ranks": s.ranks, "tasks": len(s.tasks)} for k, s in shapes.items()},
    }
    (job / "specs").mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(cells):
        R.atomic_write_text(job / "specs" / f"{task_name(i)}.json", c.to_json(indent=2) + "\n")
    R.write_json(job / MANIFEST, manifest)  # last: the plan is complete
    return {"job": str(job), "cells": len(cells), "shapes": {k: len(s.tasks) for k, s in shapes.items()}, "fresh": True}


# ---------------------------------------------------------------------------- reading it back
def _manifest(job: Path) -> dict:
    path = job / MANIFEST
    if not str(job).isprintable():
        raise KitError(f"job dir {schema.show(str(job), 200)}: a path of printable characters only (it goes into sbatch scripts)")
    if job.is_symlink() or not job.is_dir():
        raise KitError(
            f"job dir {job} {'is a symlink' if job.is_symlink() else 'does not exist'}: make one with `orchestrate.py plan`"
        )
    if not R.is_regular(path):
        raise KitError(f"{job} holds no plan ({MANIFEST} missing or not a regular file): make one with `orchestrate.py plan`")
    try:
        obj = json.loads(bounded.read_bytes(path, bounded.Caps(file_bytes=MAX_JSON_BYTES)).decode("utf-8"))
    except bounded.TooBig as err:
        raise KitError(f"{err}: not a plan the kit wrote") from None
    except (KitError, OSError, ValueError, RecursionError) as err:
        raise KitError(f"{path} cannot be read as JSON ({type(err).__name__}): plan again") from None
    if not isinstance(obj, dict) or obj.get("kit") != "cnn-bench":
        raise KitError(f"{path} is not a cnn-bench plan")
    if obj.get("format") != FORMAT or obj.get("kit_version") != bench.__version__:
        raise KitError(
            f"{job} was planned by cnn-bench {schema.show(obj.get('kit_version'), 40)} (plan format {schema.show(obj.get('format'), 10)}); "
            f"this is {bench.__version__} (format {FORMAT}): plan it again with this kit"
        )
    why = schema.check("manifest", obj)
    if why:
        raise KitError(f"{path}: {why}: plan again")
    container = obj["environment"]["runtime"] == "container"
    if container and not obj["environment"].get("image"):
        raise KitError(f"{path}: a container plan names no image: plan again")
    if obj["data"].get("dir") is not None:  # what a task's command is built from: the one rule (splice.py)
        splice.check(obj["data"]["dir"], f"{path}: data.dir", "bind" if container else "arg")
    if container:
        splice.check(obj["environment"]["image"]["ref"], f"{path}: environment.image.ref", "image")
    return obj


def load(job: Path) -> Job:
    """The job dir JOB, checked: KitError (one line) for one from another kit version, a broken
    manifest, a spec that is missing, edited (its id is not the one the plan gave it) or made for
    another environment than the plan's."""
    job = Path(job).absolute()  # the scripts and manifests name it from any node's working dir
    manifest = _manifest(job)
    label = manifest["environment"]["label"]
    cells: list[Cell] = []
    here = Job(job, manifest, [], {})
    for i, entry in enumerate(manifest["cells"]):
        if entry.get("task") != task_name(i):
            raise KitError(f"{job / MANIFEST}: cell {i} is listed as task {schema.show(entry.get('task'), 20)}: plan again")
        path = here.spec_path(i)
        if not R.is_regular(path):
            raise KitError(f"{path} is missing (or not a regular file): plan again")
        try:
            cell = Cell.load(path)
        except KitError as err:
            raise KitError(f"{path}: {err}") from None
        if cell.id != entry["id"]:
            raise KitError(
                f"{path} was edited: it is cell {cell.id}, the plan made {entry['id'][:100]}: "
                "plan again (`orchestrate.py plan`) rather than editing specs"
            )
        if cell.env != label:
            raise KitError(f"{path} was resolved for environment {cell.env!r}, the plan for {label!r}: plan again")
        cells.append(cell)
    try:
        shapes = group_shapes(cells)
    except KitError as err:
        raise KitError(f"{job}: {err}") from None
    return Job(job, manifest, cells, shapes)


_K8S = re.compile(r"[^a-z0-9-]+")


def dns_name(text: str, limit: int) -> str:
    """TEXT as a DNS-1123 label of at most LIMIT characters (Kubernetes names)."""
    s = _K8S.sub("-", text.lower()).strip("-")
    return (s[:limit].rstrip("-") or "job") if s else "job"
