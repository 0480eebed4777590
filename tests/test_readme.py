"""Every README command runs: each line of every bash block is classified in HOW, and the
test for its class runs it as written (placeholders such as results/hostA made by the test),
natively, in containers where an engine answers, or says why it cannot here (the internet, a
GPU, hours of CPU). The quick-start pair by shape and the main job for real; the reproduction
commands against real MNIST where it is available."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.rows import read_rows

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)
PY_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
LINES = [ln.split("  #")[0].strip() for b in BLOCKS for ln in b.splitlines() if ln.strip()]

# how each README command line is run by the tests (every line must be here, and only those)
HOW = {
    "bash scripts/setup.sh && .venv/bin/python orchestrate.py all": "main",
    "bash scripts/setup.sh && .venv/bin/python -m pytest -q": "ci: .ci/run runs it (with --all)",
    ".venv/bin/python orchestrate.py data fetch mnist": "network: tests/test_fetch.py fetches from a 127.0.0.1 mirror",
    ".venv/bin/python orchestrate.py all": "main",
    ".venv/bin/python orchestrate.py reference gpu --data-dir /path/to/datasets --stop-after 8m": (
        "gpu: needs an NVIDIA GPU; scripts/gpu_reference.sh runs it on a lent one (results/reference/H200/call*.log)"
    ),
    ".venv/bin/python -m bench list": "run",
    ".venv/bin/python -m bench matrix mnist-cnn --only backend=numba-cpu --set epochs=10 --out results/mine": "run",
    ".venv/bin/python -m bench matrix --platform cpu --profile smoke --schedule interleaved": "run",
    ".venv/bin/python orchestrate.py report results/mine results/reference/* --out results/merged": "run",
    ".venv/bin/python orchestrate.py compare results/hostA results/hostB --fail-on-regression 5%": "run",
    ".venv/bin/python orchestrate.py verify results/mine --allow-unbaselined": "run",
    ".venv/bin/python orchestrate.py verify results/mine --claims": "run",
    ".venv/bin/python orchestrate.py worth results/mine results/reference/* --samples 1e6 --prices docs/prices-example.toml": "run",
    ".venv/bin/python orchestrate.py reference cpu --data-dir /path/to/datasets": "long: hours on 2 cores, a clean tree only",
    ".venv/bin/python orchestrate.py verify results/mine --allow-unbaselined --speed off": "run",
    ".venv/bin/python orchestrate.py history add results/reference/* results/mine": "run",
    ".venv/bin/python orchestrate.py history show": "run",
    ".venv/bin/python orchestrate.py history report --out results/history/report": "run",
    ".venv/bin/python orchestrate.py compare --against-history results/next": (
        "history: needs past runs of the same configurations; tests/test_history.py::"
        "test_compare_against_history_flags_a_slower_run runs it on a history of 6 runs"
    ),
    ".venv/bin/python orchestrate.py doctor": "run",
    ".venv/bin/python orchestrate.py base": "engine",
    ".venv/bin/python orchestrate.py build cpu --ca-cert /etc/ssl/certs/ca-certificates.crt": "engine",
    ".venv/bin/python orchestrate.py run cpu --runtime docker --profile smoke --study mnist-cnn --data-dir data": "engine",
    "docker compose run --rm cpu-bench matrix mnist-cnn --platform cpu --profile smoke": "compose",
    "docker-compose run --rm cpu-bench matrix mnist-cnn --platform cpu --profile smoke": "compose",
    ".venv/bin/python orchestrate.py data fetch cifar10": "network: tests/test_cifar10_data.py fetches from a 127.0.0.1 mirror",
    ".venv/bin/python orchestrate.py data synth cifar10": "run",
    ".venv/bin/python -m bench matrix cifar-opt --profile default --only model=resnet18 --out results/mine": (
        "long: ~8 min on 2 cores for ResNet-18's 9 cells (the smoke of the same cells: tests/test_cifar_opt.py)"
    ),
    # Run on a cluster: against the local Slurm (.ci/slurm.sh), the image this checkout builds as TAG
    ".venv/bin/python orchestrate.py plan results/job cpu --study mnist-cnn --profile smoke": "slurm",
    ".venv/bin/python orchestrate.py slurm results/job --submit --partition debug --cpus-per-task 1": "slurm",
    "docker save cnn-bench/cpu:TAG -o cpu.tar && apptainer build cpu.sif docker-archive://cpu.tar": (
        "apptainer: not installable here (no Debian package); its `apptainer exec` line in the scripts runs below"
    ),
    ".venv/bin/python orchestrate.py plan results/job-sif cpu --study mnist-cnn --profile smoke --image cnn-bench/cpu:TAG": (
        "slurm-image"
    ),
    ".venv/bin/python orchestrate.py slurm results/job-sif --submit --sif cpu.sif": "slurm-image",
    ".venv/bin/python orchestrate.py plan results/job-k8s cpu --study mnist-cnn --profile smoke --image cnn-bench/cpu:TAG": "k8s",
    ".venv/bin/python orchestrate.py k8s results/job-k8s --image cnn-bench/cpu:TAG --results-pvc my-results": "k8s",
    "kubectl apply -f results/job-k8s/k8s/job-k8s.yaml": (
        "kubernetes: no cluster here; the file it applies is written below, schema-checked, and its pod run by docker "
        "(tests/test_cluster.py::test_pod_contract_each_completion_index_runs_its_cell)"
    ),
}


def test_every_readme_command_is_run_by_a_test_or_says_why_not():
    assert sorted(LINES) == sorted(HOW), set(LINES) ^ set(HOW)
    # the compose lines run exactly what tests/test_compose.py runs in a fresh copy
    compose = (ROOT / "tests" / "test_compose.py").read_text()
    for line in (ln for ln in LINES if HOW[ln] == "compose"):
        args = line.split("cpu-bench", 1)[1].split()
        assert f"_run(root, {args!r})".replace("'", '"') in compose, line


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    main_cmd, test_cmd = BLOCKS[0].strip(), BLOCKS[1].strip()
    assert main_cmd == "bash scripts/setup.sh && .venv/bin/python orchestrate.py all"
    assert test_cmd == "bash scripts/setup.sh && .venv/bin/python -m pytest -q"
    # CI runs the same command with the slow, Docker and GPU tests turned on (tests/conftest.py),
    # in two passes that together select every test: on two workers without the `quiet` tests,
    # then the `quiet` ones alone
    runs = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in ln]
    assert len(runs) == 2 and runs[0].startswith(test_cmd + " --all "), runs
    assert '-m "not quiet"' in runs[0] and "-n 2" in runs[0], runs[0]
    assert runs[1].startswith(".venv/bin/python -m pytest -q --all -m quiet"), runs[1]


@pytest.mark.slow
def test_main_command_on_the_embedded_default(tmp_path):
    """`orchestrate.py all` as the README runs it, in a clean copy of the repo with no data."""
    work = _copy_checkout(tmp_path, {".venv", "results", "data", ".git", ".whl"})
    # where no Docker engine answers (a laptop, the GPU hosts), `all` runs natively: that path here,
    # with the engine hidden (test_the_readme_container_commands_run_as_written runs the images),
    # so this test never shares the engine with the Docker tests on the other worker
    env = {k: v for k, v in __import__("os").environ.items() if k != "KIT_DATA_DIR"} | {"DOCKER_HOST": NO_ENGINE}
    cmd = BLOCKS[0].strip().split("&& ", 1)[1].replace(".venv/bin/python", sys.executable)
    r = subprocess.run(cmd, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "the studies use their embedded defaults" in r.stdout and "runtime: " in r.stdout  # containers or native
    report = work / "results" / "report"
    for name in ("REPORT.md", "table1.csv", "epoch_time.png", "throughput.png", "test_accuracy.png", "avg_throughput.png"):
        assert (report / name).is_file(), name
    md = (report / "REPORT.md").read_text()
    assert "numba-cpu resident" in md and "torch-cpu seed" in md and "torch-cpu resident" in md
    assert "platform cuda" in md and "platform mps" in md  # skipped platforms, with reasons
    assert "## mlp-scratch (seed 001)" in md and (report / "mlp_convergence.png").is_file()
    assert "## cifar-opt (seed 002)" in md and "NOT CIFAR-10" in md and (report / "cifar-opt_fig4_latency.png").is_file()
    # the headline names this machine and answers for it: never this CPU on the embedded digits against a
    # reference GPU on real MNIST (the old first row, 132x "holds"), but what to run to get that pair
    head = md.split("\n## ")[1]
    assert "**This machine** is " in head and "headline comparisons" in head, head[:3000]
    assert "need a GPU beside this CPU" in head, head[:3000]
    # a pair is the same data on both sides: this CPU's digits meet a reference's digits (the H200 main
    # job, results/reference/H200-main) or no reference at all, and then the row says what to fetch
    import json

    claims = json.loads((report / "report.json").read_text())["claims"]
    pairs = [f for c in claims if c.get("headline") for f in c.get("findings") or [] if len(f.get("sides") or []) == 2]
    for f in pairs:
        a, b = f["sides"]
        assert (a["data"], a["real_data"]) == (b["data"], b["real_data"]), f
    digits = [f for f in pairs if any(s["data"].startswith("digits") and not s["this_machine"] for s in f["sides"])]
    assert digits or "`orchestrate.py data fetch mnist`" in head, head[:3000]
    assert "digits-embedded" not in head.split("</div>")[0]  # no headline row pairs the digits with anything real
    ran = [p for p in (work / "results").rglob("rows.jsonl") if "reference" not in p.relative_to(work / "results").parts]
    rows = [r for p in ran for r in read_rows(p) if r["study"] == "mnist-cnn"]
    # 3 configurations x 3 repeats (the default) x 10 epochs
    assert len(rows) == 90 and all(r["status"] == "ok" and r["dataset"] == "digits-embedded" for r in rows)
    assert sorted({r["repeat"] for r in rows}) == [0, 1, 2]


@pytest.mark.slow
def test_acceptance_numba_cpu_three_epochs_reaches_97_percent_on_real_mnist(real_mnist_dir, tmp_path):
    """The issue's acceptance command: numba-cpu, full backprop, 3 epochs, real MNIST."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "matrix",
            "mnist-cnn",
            "--only",
            "backend=numba-cpu",
            "--set",
            "epochs=3",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "KIT_DATA_DIR": str(real_mnist_dir)},
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = read_rows(next((tmp_path / "mnist-cnn").iterdir()) / "rows.jsonl")
    assert all(row["dataset"] == "mnist" and row["dataset_real_mnist"] for row in rows)
    assert rows[-1]["test_acc"] >= 0.97, [row["test_acc"] for row in rows]


def test_every_readme_command_exists_with_its_options():
    """Each `.venv/bin/python ...` line of the README parses: the command exists and takes
    the options shown (typer rejects unknown options before doing any work with --help)."""
    import shlex

    lines = [line.split("#")[0].strip() for block in BLOCKS for line in block.splitlines()]
    cmds = [shlex.split(line) for line in lines if line.startswith(".venv/bin/python") and "&&" not in line]
    assert len(cmds) >= 7
    for argv in cmds:
        argv = [sys.executable] + argv[1:]
        if argv[1] == "-m":  # python -m bench CMD ...: check the command and its options
            probe = argv[:4] + ["--help"]
        else:  # orchestrate.py CMD [SUB]: --help on the (sub)command
            probe = argv[:3] + ([argv[3]] if argv[2] in ("data", "history") else []) + ["--help"]
        r = subprocess.run(probe, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, (argv, r.stderr[-500:])
        for opt in [a.split("=")[0] for a in argv if a.startswith("--")]:
            assert opt in r.stdout, f"{' '.join(argv[1:4])}: README uses {opt}, which the command does not take"


NO_ENGINE = "unix:///nonexistent/docker.sock"  # DOCKER_HOST where no engine answers


# what a checkout holds that a clone does not, and that another test process may be writing
# (tests run on two workers in CI): tool caches at the top, build ids and bytecode anywhere
CACHES = {".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def _copy_checkout(tmp_path: Path, top: set[str]) -> Path:
    """The checkout copied to TMP_PATH/clone without TOP's entries, tool caches, build ids and
    bytecode, plus the committed references (a clone has them)."""
    work = tmp_path / "clone"
    skip = top | CACHES

    def ignore(d: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or n.startswith(".iid-") or (Path(d) == ROOT and n in skip)]

    shutil.copytree(ROOT, work, ignore=ignore)
    shutil.copytree(ROOT / "results" / "reference", work / "results" / "reference")
    return work


def _clone(tmp_path: Path) -> Path:
    """A copy of the checkout as a user's clone holds it (its .git too: rows record the sha):
    no venv, no results but the committed references, data/ with its README only."""
    work = _copy_checkout(tmp_path, {".venv", ".whl", ".data", "results", "data"})
    (work / "data").mkdir()
    shutil.copy2(ROOT / "data" / "README.md", work / "data" / "README.md")
    return work


def _sh(line: str, work: Path, timeout: int = 1200, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in __import__("os").environ.items() if k != "KIT_DATA_DIR"} | (env_extra or {})
    cmd = line.replace(".venv/bin/python", sys.executable)
    return subprocess.run(cmd, shell=True, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.quiet  # its `verify` judges speed: on a machine loaded by the other test worker it fails
def test_the_readme_commands_run_as_written(tmp_path):
    """Every line HOW marks `run`, verbatim, in a fresh copy, in the README's order (the report
    merges what the matrices before it wrote); then the README's pandas snippet on its table."""
    work = _clone(tmp_path)
    from bench.core.provenance import host_label

    for line in (ln for ln in LINES if HOW[ln] == "run"):
        if "results/hostA" in line:  # the placeholders: two hosts' results (here, this run twice)
            for side in ("hostA", "hostB"):
                shutil.copytree(work / "results" / host_label(), work / "results" / side)
        r = _sh(line, work)
        fails = [ln for ln in r.stdout.splitlines() if "FAIL" in ln]  # verify's verdicts: the tail cuts them
        assert r.returncode == 0, (line, fails[:20], r.stdout[-1500:], r.stderr[-1500:])
        if "report results/mine results/reference/*" in line:
            assert "skipped: results/reference/README.md is not a directory" in r.stderr
    assert (work / "results" / "merged" / "tidy.parquet").is_file()
    shutil.copytree(work / "results" / "merged", work / "results" / "report")  # what the main job's report holds
    for snippet in PY_BLOCKS:  # reads results/report/tidy.parquet
        subprocess.run([sys.executable, "-c", snippet], cwd=work, check=True, capture_output=True, text=True, timeout=120)


@pytest.mark.docker
def test_the_readme_container_commands_run_as_written(tmp_path):
    """doctor, base, build and the container run, verbatim, in a fresh copy whose data/ holds
    no dataset: mnist-cnn's smoke runs on its embedded default in the image and says so. (Every
    study's smoke runs in the image in .ci/run's container smoke, before the tests: the README
    line names one study so that CI does not run the whole smoke in containers twice.)"""
    from host import engine

    if engine.engine_ok():
        pytest.skip(f"no Docker engine: {engine.engine_ok()}")
    work = _clone(tmp_path)
    for line in (ln for ln in LINES if HOW[ln] == "engine"):
        r = _sh(line, work, timeout=2400)
        assert r.returncode == 0, (line, r.stdout[-1500:], r.stderr[-1500:])
    rows = [r for p in (work / "results").rglob("rows.jsonl") if "reference" not in p.parts for r in read_rows(p)]
    assert rows and {r["status"] for r in rows} <= {"ok", "skipped"}
    assert {r["study"] for r in rows} == {"mnist-cnn"}
    assert all(r["image_id"] != "native" for r in rows) and not any(r["dataset_real"] for r in rows)


# ---- Run on a cluster ---------------------------------------------------------------------
def _lines(how: str, tag: str = "") -> list[str]:
    return [ln.replace("cnn-bench/cpu:TAG", tag) for ln in LINES if HOW[ln] == how]


@pytest.mark.slow
def test_the_readme_slurm_commands_run_as_written(slurm_cluster, tmp_path):
    """plan + slurm --submit, verbatim in a fresh copy, against the local Slurm: every cell
    runs as an array task and records its job, task and node; the report is written."""
    work = _clone(tmp_path)
    for line in _lines("slurm"):
        r = _sh(line, work)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
    job = work / "results" / "job"
    rows = [r for p in job.glob("task-*/mnist-cnn/*/rows.jsonl") for r in read_rows(p)]
    assert len({r["cell"] for r in rows}) == 3 and {r["status"] for r in rows} == {"ok"}
    assert {r["scheduler"] for r in rows} == {"slurm"} and all(r["scheduler_task"] for r in rows)
    assert (job / "report" / "REPORT.md").is_file() and (job / "slurm" / "cpu.sbatch").is_file()


def _image_or_build() -> str:
    from bench.core.errors import KitError
    from host import engine, images

    if engine.engine_ok():
        pytest.skip(f"no Docker engine: {engine.engine_ok()}")
    try:
        return engine.find_image("cpu")[0]
    except KitError:
        ca = Path("/etc/ssl/certs/ca-certificates.crt")
        images.build("cpu", ca_cert=ca if ca.is_file() else None, tag_latest=False, prune=False)
        return engine.find_image("cpu")[0]


@pytest.mark.docker
@pytest.mark.slow
def test_the_readme_apptainer_commands_run_as_far_as_this_host_allows(slurm_cluster, tmp_path):
    """plan --image and slurm --sif, verbatim (TAG: this checkout's cpu image) against the local
    Slurm. There is no Apptainer here to build or run a SIF: each task runs its script up to
    `apptainer exec`, fails there, and becomes an error row with Slurm's FAILED."""
    tag = _image_or_build()
    work = _clone(tmp_path)
    (work / "cpu.sif").write_bytes(b"not a SIF: no apptainer here to build one")
    plan_line, slurm_line = _lines("slurm-image", tag)
    r = _sh(plan_line, work)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _sh(slurm_line, work, env_extra={"KIT_SLURM_CPUS": "1"})  # the local nodes have one core each
    assert r.returncode == 1, (r.stdout[-2000:], r.stderr[-2000:])
    job = work / "results" / "job-sif"
    rows = [r for p in job.glob("task-*/mnist-cnn/*/rows.jsonl") for r in read_rows(p)]
    assert rows and all(r["status"] == "error" and "FAILED" in r["reason"] for r in rows)
    logs = " ".join(p.read_text() for p in (job / "slurm" / "logs").glob("*.out"))
    assert "exec: apptainer: not found" in logs
    assert "apptainer exec --cleanenv --bind" in (job / "slurm" / "cpu.sbatch").read_text()


@pytest.mark.docker
def test_the_readme_kubernetes_commands_run_as_written(tmp_path):
    """plan --image and k8s, verbatim (TAG: this checkout's cpu image): the file `kubectl apply`
    names is written and every object in it passes Kubernetes' own schema."""
    kv = pytest.importorskip("kubernetes_validate")
    import yaml

    tag = _image_or_build()
    work = _clone(tmp_path)
    for line in _lines("k8s", tag):
        r = _sh(line, work)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
    applied = next(ln for ln in LINES if ln.startswith("kubectl apply -f ")).split()[-1]
    docs = list(yaml.safe_load_all((work / applied).read_text()))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job"]
    assert docs[1]["spec"]["template"]["spec"]["volumes"][2]["persistentVolumeClaim"]["claimName"] == "my-results"
    for d in docs:
        kv.validate(d, kv.latest_version(), strict=True)
