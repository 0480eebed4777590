"""`orchestrate.py k8s JOBDIR --image IMG`: Kubernetes manifests for a job dir planned with
`--image` (host/cluster/jobdir.py), written to JOB/k8s/<job>.yaml for `kubectl apply -f`:

  - a ConfigMap of the specs (key NNNN.json = specs/NNNN.json);
  - one Indexed Job per resource shape (`completionMode: Indexed`): the pod of completion index
    k runs the shape's k-th task i (KIT_TASKS lists them) as
        python -m bench cell /specs/i.json --out /results/task-i --data-dir /data
    in the kit's image, as its non-root user, read-only root, every capability dropped;
    GPUs through `nvidia.com/gpu`; the results on a PersistentVolumeClaim (subPath: the job's
    name), the data on another, read-only; /dev/shm a memory emptyDir (DataLoader workers);
    requests = limits (Guaranteed QoS: no co-tenant takes the cell's cores while it is timed).

Copy the results volume's <job> folder back into the job dir and `orchestrate.py report` it.
Cells of several nodes need Slurm (or a JobSet): they are refused here. The manifests are
checked against Kubernetes' own schema in tests (kubernetes-validate) and the pod's command
run by `docker run -e JOB_COMPLETION_INDEX=k` on the cpu image.
"""

from __future__ import annotations

from pathlib import Path

import yaml

import bench
from bench.core import rows as R
from bench.core.errors import KitError
from host.cluster.jobdir import Job, Shape, dns_name, task_name

CONFIGMAP_MAX_BYTES = 1 << 20  # the API server's limit for one ConfigMap
# the pod's command: its completion index picks the shape's task, whose spec and results dir follow
POD_SCRIPT = (
    'set -eu; set -- $KIT_TASKS; shift "$JOB_COMPLETION_INDEX"; i="$1"; mkdir -p "/results/task-$i"; '
    'exec python -m bench cell "/specs/$i.json" --out "/results/task-$i" --data-dir /data'
)


def names(job: Job) -> tuple[str, dict[str, str]]:
    """(ConfigMap name, shape -> Job name): DNS-1123 labels short enough for pod hostnames."""
    base = "cnn-bench-" + dns_name(job.name, 30)
    return base + "-specs", {s: f"{base}-{dns_name(s, 12)}" for s in job.shapes}


def _labels(job: Job, shape: str | None = None) -> dict[str, str]:
    out = {"app.kubernetes.io/name": "cnn-bench", "app.kubernetes.io/version": bench.__version__}
    out["cnn-bench/job"] = dns_name(job.name, 63)
    if shape:
        out["cnn-bench/shape"] = dns_name(shape, 63)
    return out


def configmap(job: Job, name: str) -> dict:
    data = {f"{task_name(i)}.json": c.to_json(indent=2) + "\n" for i, c in enumerate(job.cells)}
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise KitError(
            f"the specs of {job.dir} take {size / 2**20:.1f} MiB, over a ConfigMap's 1 MiB: plan fewer cells per job dir"
        )
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": _labels(job)}, "data": data}


def indexed_job(
    job: Job,
    shape: Shape,
    name: str,
    cm_name: str,
    image: str,
    cpus: str,
    memory: str,
    results_pvc: str,
    data_pvc: str,
    shm: str,
    parallelism: int | None,
    namespace: str | None,
) -> dict:
    if shape.nodes > 1:
        raise KitError(
            f"the {shape.name} cells span {shape.nodes} nodes: an Indexed Job runs one pod per cell; "
            "run them on Slurm (`orchestrate.py slurm`), or plan without --nodes"
        )
    res: dict[str, str | int] = {"cpu": cpus, "memory": memory}
    if shape.gpus:
        res["nvidia.com/gpu"] = shape.gpus
    env: list[dict] = [
        {"name": "KIT_TASKS", "value": " ".join(task_name(t) for t in shape.tasks)},
        {"name": "KIT_K8S_JOB", "value": name},
        {"name": "KIT_K8S_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "KIT_K8S_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "KIT_GPU_ALLOCATION", "value": "1"},
        {"name": "KIT_IMAGE_REF", "value": image},
    ]
    meta: dict = {"name": name, "labels": _labels(job, shape.name)}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "completionMode": "Indexed",
            "completions": len(shape.tasks),
            "parallelism": min(parallelism or len(shape.tasks), len(shape.tasks)),
            "backoffLimitPerIndex": 1,  # a failed cell is retried once, on its own; the rest go on
            "maxFailedIndexes": len(shape.tasks),
            "template": {
                "metadata": {"labels": _labels(job, shape.name)},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001},
                    "containers": [
                        {
                            "name": "cell",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", POD_SCRIPT],
                            "env": env,
                            "resources": {"requests": dict(res), "limits": dict(res)},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "specs", "mountPath": "/specs", "readOnly": True},
                                {"name": "data", "mountPath": "/data", "readOnly": True},
                                {"name": "results", "mountPath": "/results", "subPath": dns_name(job.name, 63)},
                                {"name": "shm", "mountPath": "/dev/shm"},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "specs", "configMap": {"name": cm_name}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": data_pvc, "readOnly": True}},
                        {"name": "results", "persistentVolumeClaim": {"claimName": results_pvc}},
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def manifests(
    job: Job,
    image: str,
    cpus: str = "4",
    memory: str = "16Gi",
    results_pvc: str = "cnn-bench-results",
    data_pvc: str = "cnn-bench-data",
    shm: str = "1Gi",
    parallelism: int | None = None,
    namespace: str | None = None,
) -> list[dict]:
    """The ConfigMap and one Indexed Job per shape. KitError (one line) for a job dir not
    planned for IMAGE (its cells would refuse to run in it) or one Kubernetes cannot run."""
    env = job.environment
    planned = (env.get("image") or {}).get("ref") if env["runtime"] == "container" else None
    if planned is None:
        raise KitError(
            f"{job.dir} was planned for this venv, not an image: plan it with --image {image} (the pods run the image's environment)"
        )
    if image != planned:
        from host.cluster.jobdir import image_environment

        label = image_environment(image)["label"]  # a tag that is not there: one line
        if label != env["label"]:
            raise KitError(
                f"image {image} runs environment {label}, but {job.dir} was planned for {planned} ({env['label']}): "
                f"plan again with --image {image}"
            )
    cm_name, job_names = names(job)
    docs = [configmap(job, cm_name)]
    if namespace:
        docs[0]["metadata"]["namespace"] = namespace
    for shape_name, shape in job.shapes.items():
        docs.append(
            indexed_job(
                job,
                shape,
                job_names[shape_name],
                cm_name,
                image,
                cpus,
                memory,
                results_pvc,
                data_pvc,
                shm,
                parallelism,
                namespace,
            )
        )
    return docs


def write(job: Job, docs: list[dict]) -> Path:
    path = job.file("k8s", f"{dns_name(job.name, 63)}.yaml", make=True)
    header = f"# cnn-bench {bench.__version__}: job dir {job.dir} (orchestrate.py k8s); kubectl apply -f {path.name}\n"
    R.atomic_write_text(path, header + yaml.safe_dump_all(docs, sort_keys=False, width=1000))
    return path
