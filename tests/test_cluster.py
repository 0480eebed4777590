"""Clusters (host/cluster/): `orchestrate.py plan` -> job dir; `slurm` -> sbatch arrays, run
against a real Slurm (the two-node cluster .ci/slurm.sh brings up on this host from Debian
packages; skipped only where no Slurm answers and none can be installed); `k8s` -> manifests
checked against Kubernetes' own schemas (kubernetes-validate) and their pod run by Docker.

Bad input is one line on stderr, a non-zero exit, and nothing submitted or written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR" and not k.startswith(("KIT_SLURM_", "SLURM_"))}


def orch(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**CLEAN_ENV, **(env or {})},
        timeout=timeout,
    )


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode != 0, r.stdout[-1000:]
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), r.stderr[-2000:]
    for w in words:
        assert w in err[0], (w, err[0])


def plan(job: Path, *args: str) -> dict:
    """A plan on the embedded default data (cwd without ./data), fast: no dataset to read."""
    job.parent.mkdir(parents=True, exist_ok=True)
    r = orch("plan", str(job), *args, cwd=job.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads((job / "manifest.json").read_text())


# a matrix with every single-node shape: cpu cells, one-GPU cells, and two-GPU cells (DDP ranks)
SHAPES = ("cpu", "cuda", "--study", "mnist-cnn", "--profile", "smoke", "--only", "pipeline=resident", "--set", "devices=0,1")
SMOKE = ("cpu", "--study", "mnist-cnn", "--profile", "smoke")


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict[str, Path]:
    """Plans made once (by the CLI) for the tests that only read them or change a copy."""
    top = tmp_path_factory.mktemp("plans")
    out = {"shapes": top / "shapes", "nodes": top / "nodes", "smoke": top / "smoke"}
    plan(out["shapes"], *SHAPES)
    plan(out["nodes"], *SHAPES, "--nodes", "2")
    plan(out["smoke"], *SMOKE)
    return out


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ---------------------------------------------------------------------------- plan
def test_plan_writes_one_spec_per_cell_grouped_by_shape(planned: dict[str, Path], tmp_path: Path) -> None:
    from bench.core.cell import Cell

    job = copy(planned["shapes"], tmp_path / "job")
    m = json.loads((job / "manifest.json").read_text())
    shapes = {c["shape"] for c in m["cells"]}
    assert shapes == {"cpu", "gpu1", "gpu2"}, m["shapes"]
    assert m["shapes"]["gpu2"]["ranks"] == 2 and m["shapes"]["cpu"]["gpus"] == 0
    assert m["environment"]["runtime"] == "native" and m["environment"]["python"] == sys.executable
    for i, entry in enumerate(m["cells"]):
        cell = Cell.load(job / "specs" / f"{i:04d}.json")
        assert cell.id == entry["id"] and cell.env == m["environment"]["label"]
        assert cell.params["dataset_sha256"] and cell.params["dataset"] == "digits"  # the checksum resolved
    assert m["data"]["datasets"]["digits"] == cell.params["dataset_sha256"]
    # the same plan again: up to date; another one into the same dir: refused, nothing changed
    r = orch("plan", str(job), *SHAPES, cwd=tmp_path)
    assert r.returncode == 0 and "up to date" in r.stdout
    before = (job / "manifest.json").read_text()
    one_line_error(orch("plan", str(job), "cpu", "--study", "mlp-scratch", "--profile", "smoke", cwd=tmp_path), "another plan")
    assert (job / "manifest.json").read_text() == before


def test_plan_nodes_makes_cells_of_ranks_span_nodes_and_other_work(planned: dict[str, Path], tmp_path: Path) -> None:
    one = json.loads((planned["shapes"] / "manifest.json").read_text())
    two = json.loads((planned["nodes"] / "manifest.json").read_text())
    assert {c["shape"] for c in two["cells"]} == {"cpu", "gpu1", "gpu2-2nodes"}
    ids_one = {c["id"] for c in one["cells"] if c["shape"] == "gpu2"}
    ids_two = {c["id"] for c in two["cells"] if c["shape"] == "gpu2-2nodes"}
    assert ids_one and ids_two and not ids_one & ids_two  # nodes are part of the cell's identity
    assert {c["id"] for c in one["cells"] if c["shape"] == "cpu"} == {c["id"] for c in two["cells"] if c["shape"] == "cpu"}
    # --nodes where no cell runs as ranks is a mistake, said in one line
    one_line_error(orch("plan", str(tmp_path / "x"), "cpu", "--study", "mlp-scratch", "--nodes", "2", cwd=tmp_path), "ranks")
    one_line_error(orch("plan", str(tmp_path / "y"), "mps", "--study", "mnist-cnn", cwd=tmp_path), "mps")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


# ---------------------------------------------------------------------------- untrusted job dirs
def _bad_jobs(base: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (job dir, a word its error line must name): copies of BASE, spoilt."""
    out = {}

    def copy(name: str) -> Path:
        d = tmp_path / name
        shutil.copytree(base, d)
        return d

    d = copy("old-kit")
    m = json.loads((d / "manifest.json").read_text())
    m["kit_version"], m["format"] = "0.0.1", 0
    (d / "manifest.json").write_text(json.dumps(m))
    out["another kit version"] = (d, "0.0.1")
    d = copy("edited")
    spec = json.loads((d / "specs" / "0001.json").read_text())
    spec["params"]["lr"] = 0.5  # edited by hand: the cell id no longer matches
    (d / "specs" / "0001.json").write_text(json.dumps(spec))
    out["an edited spec"] = (d, "edited")
    d = copy("not-json")
    (d / "manifest.json").write_text('{"kit": "cnn-bench", "format": ')
    out["a manifest that is not JSON"] = (d, "JSON")
    d = copy("no-manifest")
    (d / "manifest.json").unlink()
    out["no manifest"] = (d, "no plan")
    d = copy("missing-spec")
    (d / "specs" / "0002.json").unlink()
    out["a missing spec"] = (d, "missing")
    d = copy("list")
    (d / "manifest.json").write_text("[1, 2]")
    out["a manifest that is a list"] = (d, "not a cnn-bench plan")
    return out


def test_a_job_dir_that_cannot_be_trusted_is_one_line_and_nothing_is_written(planned: dict[str, Path], tmp_path: Path) -> None:
    for n, (what, (job, word)) in enumerate(_bad_jobs(planned["smoke"], tmp_path).items()):
        other = (["slurm", str(job)], ["k8s", str(job), "--image", "x"])[n % 2]  # the other commands read it the same way
        for cmd in (["slurm", str(job), "--submit"], other):
            r = orch(*cmd)
            one_line_error(r, word)
            assert not (job / "slurm").exists() and not (job / "k8s").exists(), (what, cmd)


def test_no_sbatch_on_path_is_one_line_and_nothing_submitted(planned: dict[str, Path], tmp_path: Path) -> None:
    job = copy(planned["smoke"], tmp_path / "job")
    empty = tmp_path / "bin"
    empty.mkdir()
    r = orch("slurm", str(job), "--submit", env={"PATH": str(empty)})
    one_line_error(r, "sbatch not found on PATH")
    assert not (job / "slurm" / "submissions.jsonl").exists() and not list(job.glob("task-*"))


# ---------------------------------------------------------------------------- sbatch scripts
def test_compress() -> None:
    from host.cluster.slurm import compress

    assert compress([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert compress([3]) == "3" and compress([4, 2, 3, 2]) == "2-4"


def test_one_array_script_per_shape_with_the_clusters_options(planned: dict[str, Path], tmp_path: Path) -> None:
    job = copy(planned["nodes"], tmp_path / "job")
    m = json.loads((job / "manifest.json").read_text())
    env = {"KIT_SLURM_PARTITION": "gpu-a100", "KIT_SLURM_ACCOUNT": "proj42", "KIT_SLURM_TIME": "00:30:00"}
    r = orch("slurm", str(job), "--cpus-per-task", "3", "--max-running", "2", "--exclusive", "--sbatch-arg=--qos=high", env=env)
    assert r.returncode == 0, r.stderr
    scripts = {p.stem: p.read_text() for p in (job / "slurm").glob("*.sbatch")}
    assert set(scripts) == {"cpu", "gpu1", "gpu2-2nodes"}
    for name, text in scripts.items():
        tasks = [int(c["task"]) for c in m["cells"] if c["shape"] == name]
        from host.cluster.slurm import compress

        assert f"#SBATCH --array={compress(tasks)}%2\n" in text
        for line in ("--partition=gpu-a100", "--account=proj42", "--time=00:30:00", "--exclusive", "--qos=high"):
            assert f"#SBATCH {line}\n" in text, (name, line)
        assert "export KIT_GPU_ALLOCATION=1" in text and f"cell=({sys.executable})" in text
        assert subprocess.run(["bash", "-n", str(job / "slurm" / f"{name}.sbatch")]).returncode == 0
    assert "--gres" not in scripts["cpu"] and "#SBATCH --cpus-per-task=3\n" in scripts["cpu"]
    assert "#SBATCH --gres=gpu:1\n" in scripts["gpu1"] and "#SBATCH --nodes=1\n" in scripts["gpu1"]
    multi = scripts["gpu2-2nodes"]
    assert "#SBATCH --gres=gpu:2\n" in multi and "#SBATCH --nodes=2\n" in multi and "#SBATCH --ntasks-per-node=1\n" in multi
    assert "srun --relative=1" in multi and "-m bench.run.ranks --node" in multi and "KIT_RDZV_ENDPOINT=" in multi
    assert 'exec "${cell[@]}" -m bench cell' in scripts["cpu"] and "apptainer" not in scripts["cpu"]


def _container_job(base: Path, tmp_path: Path, image: str = "registry.example/cnn-bench/cpu:t1"):
    """A copy of plan BASE as a plan made for an image, as read back (the planning itself, which
    asks the image for its environment, is tested where a Docker engine is: test_pod_contract...)."""
    from host.cluster.jobdir import load

    j = load(copy(base, tmp_path / "cjob"))
    j.manifest["environment"] = {
        "runtime": "container",
        "label": j.cells[0].env,
        "python": None,
        "image": {"ref": image, "id": "sha256:x"},
    }
    return j


def test_apptainer_scripts_for_a_plan_made_for_an_image(planned: dict[str, Path], tmp_path: Path) -> None:
    from bench.core.errors import KitError
    from host.cluster import slurm as S

    j = _container_job(planned["shapes"], tmp_path)
    sif = tmp_path / "cpu.sif"
    with pytest.raises(KitError, match="--sif"):
        S.script(j, j.shapes["cpu"], j.shapes["cpu"].tasks, S.Options())
    cpu = S.script(j, j.shapes["cpu"], j.shapes["cpu"].tasks, S.Options(sif=sif))
    gpu = S.script(j, j.shapes["gpu1"], j.shapes["gpu1"].tasks, S.Options(sif=sif))
    assert "cell=(apptainer exec --cleanenv --bind " in cpu and f" {sif} python)" in cpu and "--nv" not in cpu
    assert "cell=(apptainer exec --cleanenv --nv --bind " in gpu
    assert '"$JOB/specs:/specs:ro","$JOB/task-$i:/results"' in cpu and 'spec="/specs/$i.json"; out=/results' in cpu
    assert 'export "APPTAINERENV_$v=${!v}"' in cpu and "SLURM_ARRAY_TASK_ID" in cpu  # the task's ids reach the rows
    native = _container_job(planned["shapes"], tmp_path / "n")
    native.manifest["environment"] = {"runtime": "native", "label": "x", "python": sys.executable, "image": None}
    with pytest.raises(KitError, match="drop --sif"):
        S.script(native, native.shapes["cpu"], [0], S.Options(sif=sif))
    path = tmp_path / "s.sbatch"
    path.write_text(gpu)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


# ---------------------------------------------------------------------------- Kubernetes
def _validate(doc: dict) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    for version in ("1.33", kv.latest_version()):
        kv.validate(doc, version, strict=True)


def test_k8s_manifests_validate_against_kubernetes_schemas(planned: dict[str, Path], tmp_path: Path) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    from host.cluster import k8s

    j = _container_job(planned["shapes"], tmp_path)
    docs = k8s.manifests(j, "registry.example/cnn-bench/cpu:t1", cpus="2", memory="6Gi", namespace="bench")
    path = k8s.write(j, docs)
    assert list(yaml.safe_load_all(path.read_text())) == docs
    cm, jobs = docs[0], {d["metadata"]["labels"]["cnn-bench/shape"]: d for d in docs[1:]}
    assert cm["kind"] == "ConfigMap" and sorted(cm["data"]) == [f"{i:04d}.json" for i in range(len(j.cells))]
    assert set(jobs) == {"cpu", "gpu1", "gpu2"}
    for doc in docs:
        _validate(doc)
    for shape, d in jobs.items():
        spec, pod = d["spec"], d["spec"]["template"]["spec"]
        c = pod["containers"][0]
        assert spec["completionMode"] == "Indexed" and spec["completions"] == len(j.shapes[shape].tasks)
        assert c["resources"]["requests"] == c["resources"]["limits"]  # Guaranteed QoS
        assert c["resources"]["limits"].get("nvidia.com/gpu") == (j.shapes[shape].gpus or None)
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["KIT_TASKS"].split() == [f"{t:04d}" for t in j.shapes[shape].tasks]
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols["shm"]["emptyDir"]["medium"] == "Memory" and vols["specs"]["configMap"]["name"] == cm["metadata"]["name"]
        assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/dev/shm", "/specs", "/data", "/results", "/tmp"}
        assert c["securityContext"]["readOnlyRootFilesystem"] and pod["securityContext"]["runAsNonRoot"]
        assert len(d["metadata"]["name"]) <= 50 and d["metadata"]["namespace"] == "bench"
    # the validator is not a rubber stamp: a misspelt field and a wrong type fail
    bad = json.loads(json.dumps(jobs["cpu"]))
    bad["spec"]["completionMod"] = "Indexed"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.33", strict=True)
    bad = json.loads(json.dumps(jobs["cpu"]))
    bad["spec"]["completions"] = "three"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.33", strict=True)


def test_k8s_refuses_what_it_cannot_run(planned: dict[str, Path], tmp_path: Path) -> None:
    from bench.core.errors import KitError
    from host.cluster import k8s

    native = copy(planned["smoke"], tmp_path / "native")
    one_line_error(orch("k8s", str(native), "--image", "cnn-bench/cpu:x"), "not an image", "--image")
    assert not (native / "k8s").exists()
    multi = _container_job(planned["shapes"], tmp_path)
    multi.shapes["gpu2"].nodes = 2
    with pytest.raises(KitError, match="Slurm"):
        k8s.manifests(multi, "registry.example/cnn-bench/cpu:t1")


# ---------------------------------------------------------------------------- a real Slurm
def _queued() -> set[str]:
    r = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%F"], capture_output=True, text=True, timeout=30)
    return set(r.stdout.split())


@pytest.mark.slow
def test_a_partition_that_does_not_exist_is_one_line_and_nothing_submitted(slurm_cluster, planned, tmp_path: Path) -> None:
    job = copy(planned["smoke"], tmp_path / "job")
    before = _queued()
    one_line_error(
        orch("slurm", str(job), "--submit", "--partition", "no-such-partition"), "invalid partition", "nothing was submitted"
    )
    # and a GPU this cluster does not have: refused by sbatch --test-only too, nothing queued
    gpu = tmp_path / "gpu"
    plan(gpu, "cpu", "cuda", "--study", "mnist-cnn", "--profile", "smoke", "--only", "pipeline=resident")
    one_line_error(orch("slurm", str(gpu), "--submit", "--cpus-per-task", "1"), "gpu", "nothing was submitted")
    assert _queued() == before
    assert not (job / "slurm" / "submissions.jsonl").exists() and not (gpu / "slurm" / "submissions.jsonl").exists()


TINY = ("cpu", "--study", "mnist-cnn", "--profile", "smoke", "--only", "backend=torch-cpu", "--only", "pipeline=resident")


@pytest.mark.slow
def test_a_job_array_records_its_job_task_and_node_and_a_rerun_submits_nothing(slurm_cluster, tmp_path: Path) -> None:
    job = tmp_path / "job"
    plan(job, *TINY, "--set", "epochs=1", "--repeats", "2")
    r = orch("slurm", str(job), "--submit", "--cpus-per-task", "1", "--poll-s", "0.5", "--partition", "debug")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "submitted job" in r.stdout and "COMPLETED" in r.stdout and (job / "report" / "REPORT.md").is_file()
    sub = json.loads((job / "slurm" / "submissions.jsonl").read_text().splitlines()[0])
    for i in (0, 1):
        cell_dir = next((job / f"task-{i:04d}" / "mnist-cnn").iterdir())
        rows = read_rows(cell_dir / "rows.jsonl")
        assert rows and {x["status"] for x in rows} == {"ok"}
        assert {x["scheduler"] for x in rows} == {"slurm"} and {x["scheduler_task"] for x in rows} == {f"{sub['job_id']}_{i}"}
        assert {x["scheduler_node"] for x in rows} <= {"n1", "n2"} | {os.uname().nodename.split(".")[0]}
        system = json.loads((cell_dir / "system.json").read_text())
        assert system["scheduler"]["array_job_id"] == sub["job_id"] and system["scheduler"]["array_task_id"] == str(i)
    again = orch("slurm", str(job), "--submit")
    assert again.returncode == 0 and "nothing to submit" in again.stdout
    assert len((job / "slurm" / "submissions.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow
def test_a_task_cancelled_before_it_ran_becomes_an_error_row_and_the_rerun_runs_only_it(slurm_cluster, tmp_path: Path) -> None:
    job = tmp_path / "job"
    plan(job, *TINY, "--set", "epochs=1", "--repeats", "2")
    follower = subprocess.Popen(
        [sys.executable, str(ROOT / "orchestrate.py"), "slurm", str(job), "--submit", "--cpus-per-task", "1", "--poll-s", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**CLEAN_ENV, "KIT_SLURM_MAX_RUNNING": "1"},  # task 1 waits while task 0 runs
    )
    subs = job / "slurm" / "submissions.jsonl"
    for _ in range(300):
        if subs.is_file() and subs.read_text().strip():
            break
        time.sleep(0.1)
    job_id = json.loads(subs.read_text().splitlines()[0])["job_id"]
    subprocess.run(["scancel", f"{job_id}_1"], check=True, timeout=30)
    out, _ = follower.communicate(timeout=300)
    assert follower.returncode == 1, out[-3000:]
    cell_dir = next((job / "task-0001" / "mnist-cnn").iterdir())
    rows = read_rows(cell_dir / "rows.jsonl")
    # a pending array task scancel'd leaves squeue within a moment; without accounting (this
    # cluster) no Slurm command can say more than that it left, unless a poll saw it in that
    # moment as CANCELLED (with its pending reason): the row says whichever was seen
    said = ("left the queue while PENDING", "ended CANCELLED")
    assert rows[-1]["status"] == "error" and any(w in rows[-1]["reason"] for w in said), rows[-1]
    assert rows[-1]["scheduler_task"] == f"{job_id}_1" and (cell_dir / "cell.json").is_file()
    r = orch("verify", str(job), "--allow-unbaselined", "--speed", "off")
    assert r.returncode == 1 and any(w in r.stdout for w in said)
    again = orch("slurm", str(job), "--submit", "--cpus-per-task", "1", "--poll-s", "0.5")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "1 cpu task(s), array 1 " in again.stdout and "1 of 2 cells already finished" in again.stdout
    assert read_rows(cell_dir / "rows.jsonl")[-1]["status"] == "ok"


@pytest.mark.slow
def test_a_cell_of_two_nodes_runs_its_ranks_on_both(slurm_cluster, tmp_path: Path) -> None:
    nodes = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True).stdout.split()
    if sum(map(int, nodes or ["0"])) < 2:
        pytest.skip("this Slurm has one node (.ci/slurm.sh brings up two)")
    job = tmp_path / "job"
    m = plan(job, *TINY, "--set", "epochs=1", "--set", "devices=cpu", "--nodes", "2")
    assert [c["shape"] for c in m["cells"]] == ["cpu-2nodes"]
    r = orch("slurm", str(job), "--submit", "--cpus-per-task", "1", "--poll-s", "0.5")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    cell_dir = next((job / "task-0000" / "mnist-cnn").iterdir())
    rows = read_rows(cell_dir / "rows.jsonl")
    assert {x["status"] for x in rows} == {"ok"} and {x["world_size"] for x in rows} == {2}
    system = json.loads((cell_dir / "system.json").read_text())
    assert system["world_size"] == 2 and len(system["ranks"]) == 2
    assert system["scheduler"]["nodelist"] in ("n[1-2]", "n1,n2")


# ---------------------------------------------------------------------------- Docker: the pod's contract
def _engine_or_skip() -> None:
    from host import engine

    why = engine.engine_ok()
    if why:
        pytest.skip(f"no Docker engine: {why}")


@pytest.fixture(scope="module")
def cpu_image() -> str:
    """This checkout's cpu image (built, keeping every other image, where it is not yet)."""
    _engine_or_skip()
    from bench.core.errors import KitError
    from host import engine, images

    try:
        ref, _ = engine.find_image("cpu")
    except KitError:
        ca = Path("/etc/ssl/certs/ca-certificates.crt")
        images.build("cpu", ca_cert=ca if ca.is_file() else None, tag_latest=False, prune=False)
        ref, _ = engine.find_image("cpu")
    return ref


@pytest.mark.docker
def test_an_image_tag_that_does_not_exist_is_one_line(planned: dict[str, Path], tmp_path: Path) -> None:
    _engine_or_skip()
    one_line_error(orch("plan", str(tmp_path / "j"), "cpu", "--image", "cnn-bench/cpu:no-such-tag", cwd=tmp_path), "not found")
    assert not (tmp_path / "j").exists()
    j = _container_job(planned["shapes"], tmp_path)
    from bench.core.errors import KitError
    from host.cluster import k8s

    with pytest.raises(KitError, match="not found"):
        k8s.manifests(j, "cnn-bench/cpu:no-such-tag")


@pytest.mark.docker
def test_pod_contract_each_completion_index_runs_its_cell(cpu_image: str, tmp_path: Path) -> None:
    """The Indexed Job's container, as the manifest says it (image, command, env, mounts, user,
    read-only root), run by `docker run -e JOB_COMPLETION_INDEX=k` for every k: each writes its
    task's cell, the rows name the Kubernetes job and index, and the job dir verifies."""
    job = tmp_path / "job"
    m = plan(job, "cpu", "--study", "mnist-cnn", "--profile", "smoke", "--only", "pipeline=resident", "--image", cpu_image)
    assert m["environment"]["runtime"] == "container" and m["environment"]["label"].startswith("container-")
    r = orch("k8s", str(job), "--image", cpu_image, "--cpus", "1", "--memory", "2Gi")
    assert r.returncode == 0, r.stderr
    docs = list(yaml.safe_load_all(next((job / "k8s").glob("*.yaml")).read_text()))
    cm, kjob = docs[0], docs[1]
    for doc in docs:
        _validate(doc)
    specs = tmp_path / "configmap"
    specs.mkdir()
    for key, text in cm["data"].items():
        (specs / key).write_text(text)
    data = tmp_path / "data"
    data.mkdir()
    volume = tmp_path / "volume"
    pod = kjob["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sub = next(v["subPath"] for v in c["volumeMounts"] if v["mountPath"] == "/results")
    (volume / sub).mkdir(parents=True)
    os.chown(volume / sub, pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"])
    for k in range(kjob["spec"]["completions"]):
        argv = ["docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL", "--tmpfs", "/tmp"]
        argv += ["--user", f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"]
        argv += ["-v", f"{specs}:/specs:ro", "-v", f"{data}:/data:ro", "-v", f"{volume / sub}:/results", "--shm-size", "1g"]
        for e in c["env"]:
            value = e.get("value", f"{kjob['metadata']['name']}-{k}" if e["name"] == "KIT_K8S_POD" else "node-a")
            argv += ["-e", f"{e['name']}={value}"]
        argv += ["-e", f"JOB_COMPLETION_INDEX={k}", "--entrypoint", c["command"][0], c["image"], *c["command"][1:]]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    for k, t in enumerate(kjob["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"].split()):
        shutil.copytree(volume / sub / f"task-{t}", job / f"task-{t}")
        rows = read_rows(next((job / f"task-{t}" / "mnist-cnn").iterdir()) / "rows.jsonl")
        assert {x["status"] for x in rows} == {"ok"} and {x["scheduler"] for x in rows} == {"kubernetes"}
        assert {x["scheduler_task"] for x in rows} == {f"{kjob['metadata']['name']}/{k}"}
        assert {x["scheduler_node"] for x in rows} == {"node-a"} and rows[0]["image_id"] != "native"
    v = orch("verify", str(job), "--allow-unbaselined", "--speed", "off")
    assert v.returncode == 0, v.stdout[-3000:]
    assert f"{len(m['cells'])} cells" in v.stdout


def test_under_a_scheduler_a_cells_gpu_ids_are_positions_in_its_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm may hand a task physical GPUs 2,3 (CUDA_VISIBLE_DEVICES=2,3): a cell of devices 0,1
    then binds those two, not the host's 0 and 1, and is not skipped for lacking them."""
    from bench.core.cell import Cell
    from bench.core.machine import allocated_gpus
    from bench.core.study import devices_missing

    cell = Cell("mnist-cnn", "torch-cuda", devices=("0", "1"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv("KIT_GPU_ALLOCATION", raising=False)
    assert allocated_gpus(["0", "1"]) == ["0", "1"] and "needs GPUs 0,1" in (devices_missing(cell) or "")
    monkeypatch.setenv("KIT_GPU_ALLOCATION", "1")
    assert allocated_gpus(["0", "1"]) == ["2", "3"] and allocated_gpus(["1"]) == ["3"]
    assert devices_missing(cell) is None
    assert "needs GPUs" in (devices_missing(Cell("mnist-cnn", "torch-cuda", devices=("0", "1", "2"))) or "")


def test_a_cell_of_several_nodes_needs_ranks_and_a_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.core.cell import Cell
    from bench.core.errors import KitError
    from bench.core.registry import get_study
    from bench.core.request import Paths
    from bench.run.ranks import torchrun_argv

    monkeypatch.delenv("KIT_RDZV_ENDPOINT", raising=False)
    with pytest.raises(KitError, match="spans 2 nodes"):
        torchrun_argv(1, Path("cell.json"), Paths(Path("out")), nodes=2)
    monkeypatch.setenv("KIT_RDZV_ENDPOINT", "n1:29400")
    monkeypatch.setenv("KIT_NNODES", "7")  # the cell's own count wins
    argv = torchrun_argv(1, Path("cell.json"), Paths(Path("out")), nodes=2)
    assert "--nnodes=2" in argv and "--rdzv-endpoint=n1:29400" in argv and "--standalone" not in argv
    study = get_study("mnist-cnn")
    one = study.cell("torch-cpu", pipeline="resident")
    with pytest.raises(KitError, match="runs as ranks"):
        study.validate(one.replace(nodes=2))
    study.validate(one.replace(devices=("cpu",), nodes=2))
    assert one.replace(nodes=2).id != one.id and Cell.from_json(one.replace(nodes=2).to_json()).nodes == 2
    assert "nodes" not in json.loads(one.to_json())  # a one-node cell's spec (and id) as before
