import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# generated tests on a shared 2-core VM: an example's time says how busy the machine is, not whether
# the code is right, so no per-example deadline and no "too slow" health check (a test's own
# @settings still sets what it names)
settings.register_profile("kit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kit")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def mnist_dir() -> Path | None:
    d = os.environ.get("KIT_DATA_DIR")
    if d and (Path(d) / "mnist").is_dir():
        return Path(d)
    shared = ROOT.parent / "shared" / "datasets"
    return shared if (shared / "mnist").is_dir() else None


@pytest.fixture
def real_mnist_dir() -> Path:
    d = mnist_dir()
    if d is None:
        pytest.skip("real MNIST not found (set KIT_DATA_DIR to a dir holding mnist/; CI uses ../shared/datasets)")
    return d


# ---- a Slurm to submit to (tests/test_cluster.py, the README's cluster commands) ---------
def _slurm_answers() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="session")
def slurm_cluster():
    """A Slurm that answers: the one here, else the two-node one .ci/slurm.sh brings up (and
    stops again). Skipped only where none can be installed (not root, or apt fails)."""
    if _slurm_answers():
        yield "running"
        return
    if os.geteuid() != 0:
        pytest.skip("no Slurm answers here, and bringing one up (.ci/slurm.sh) needs root")
    r = subprocess.run(["bash", str(ROOT / ".ci" / "slurm.sh"), "up"], capture_output=True, text=True, timeout=600)
    if r.returncode == 2 and "apt-get install" in r.stderr:
        pytest.skip(f"slurm is not installable here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    yield "started"
    subprocess.run(["bash", str(ROOT / ".ci" / "slurm.sh"), "down"], capture_output=True, timeout=120)


# ---- the merged report of every committed reference, built once per test run --------------
@pytest.fixture(scope="session")
def merged_references(tmp_path_factory) -> Path:
    """The README's merge of the committed references, `orchestrate.py report results/reference/*
    --out DIR --prices docs/prices-example.toml`, built once per test run: under pytest-xdist the
    first worker to ask builds it (into a scratch dir, renamed when whole) while the other waits on
    a lock. Tests read it; none may write into it."""
    import fcntl
    import shutil

    ref = ROOT / "results" / "reference"
    if not ref.is_dir():
        pytest.skip("no committed references here")
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = root / "merged-references"
    with open(root / "merged-references.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "report.json").is_file():
            part = root / "merged-references.part"
            shutil.rmtree(part, ignore_errors=True)
            # exactly the README's command (with the example prices): the glob names README.md,
            # baselines/ and report folders too
            cmd = [sys.executable, "orchestrate.py", "report", *sorted(map(str, ref.glob("*"))), "--out", str(part)]
            r = subprocess.run([*cmd, "--prices", "docs/prices-example.toml"], capture_output=True, text=True, cwd=ROOT)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            part.rename(out)
    return out


@pytest.fixture
def golden():
    import numpy as np

    return np.load(Path(__file__).parent / "golden" / "mnist_cnn_torch.npz")


# ---- what the README's test command runs, and what CI adds -----------------------------
# `pytest -q` (the README's test command) runs the fast tests: no Docker, no GPU, nothing
# that trains for long, and nothing that builds, tags or removes an image. `--all` (what
# .ci/run passes; or KIT_TESTS=all) runs the slow, Docker and GPU tests too.
GATED = {
    "slow": "trains or runs whole matrices for tens of seconds",
    "docker": "needs the Docker engine and may build images",
    "gpu": "needs an NVIDIA GPU",
}


def pytest_addoption(parser):
    parser.addoption(
        "--all", action="store_true", default=False, help="also run the slow, Docker and GPU tests (what .ci/run does)"
    )


# ---- two workers (.ci/run: pytest -n 2 --dist loadgroup -m "not quiet", then -m quiet) ----
# Under pytest-xdist a worker takes a whole group: each test module is one (its module fixtures
# are built once), except the tests of the one Docker engine (group "docker": orphan reaping,
# image tags and the build cache are shared) and those of the one Slurm (group "slurm": its
# daemons and its queue). The groups come from the node id (`group_of`, through the scheduler
# below): xdist's own `xdist_group` marks rename node ids, which pytest 9 ignores (Node.nodeid is
# derived from Node._id now), so under pytest 9.2 + xdist 3.8 they group nothing. Tests marked
# `quiet` time things or read the load: CI runs them in a second, serial pass, since a group
# does not keep the other worker's load away.
DOCKER_FILES = {"test_docker.py", "test_compose.py", "test_container_signals.py", "test_cluster.py", "test_readme.py"}
# the tests that take the session's `slurm_cluster` (checked at collection: the list stays true)
SLURM_TESTS = {
    "test_a_partition_that_does_not_exist_is_one_line_and_nothing_submitted",
    "test_a_job_array_records_its_job_task_and_node_and_a_rerun_submits_nothing",
    "test_a_task_cancelled_before_it_ran_becomes_an_error_row_and_the_rerun_runs_only_it",
    "test_a_cell_of_two_nodes_runs_its_ranks_on_both",
    "test_the_readme_slurm_commands_run_as_written",
    "test_the_readme_apptainer_commands_run_as_far_as_this_host_allows",
}
# tests of an engine file that hide the engine (DOCKER_HOST to no socket): grouped with their module
ENGINE_FREE = {"test_main_command_on_the_embedded_default"}
FIRST = ("test_numba_cuda_sim_fresh.py",)  # one long test (about 11 min here): start it first, so it is not the tail


def group_of(nodeid: str) -> str:
    """The worker group of a test: 'slurm', 'docker', or its module's path."""
    path = nodeid.split("::", 1)[0]
    func = nodeid.split("[", 1)[0].split("::")[-1]  # parameters may hold '::' themselves
    if func in SLURM_TESTS:
        return "slurm"
    if func in ENGINE_FREE:
        return path
    if Path(path).name in DOCKER_FILES:
        return "docker"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup, grouped by `group_of` (whole groups to a worker, in collection order)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # keep the collection's order of groups (the longest two first, see the sort below): xdist's
    # default reorders scopes by their number of tests, which sent the one-test simulator file last
    config.option.loadscopereorder = False

    class KitGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return KitGroups(config, log)


def pytest_configure(config):
    for name, why in GATED.items():
        config.addinivalue_line("markers", f"{name}: {why}; runs only with --all")
    config.addinivalue_line(
        "markers", "quiet: asserts timings or reads the load average; .ci/run runs these in a serial pass (-m quiet)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Around every other plugin's hook: the docker marks and the order are in place before any
    other plugin reads them."""
    for item in items:  # tests that run a built image need the engine (and its images): Docker tests
        if item.fspath.basename == "test_docker.py" and "image" in item.name:
            item.add_marker(pytest.mark.docker)
    slurm = {getattr(item, "originalname", item.name) for item in items if "slurm_cluster" in getattr(item, "fixturenames", ())}
    listed = {getattr(item, "originalname", item.name) for item in items} & SLURM_TESTS
    if slurm != listed:
        raise pytest.UsageError(
            f"tests/conftest.py SLURM_TESTS is out of date: uses slurm_cluster {sorted(slurm)}, listed {sorted(listed)}"
        )
    strays = sorted({item.fspath.basename for item in items if item.get_closest_marker("docker")} - DOCKER_FILES)
    if strays:  # the scheduler sees node ids only: a Docker test outside DOCKER_FILES would run beside the others
        raise pytest.UsageError(f"tests/conftest.py DOCKER_FILES is out of date: Docker tests in {strays}")
    # the two longest groups first (the simulator's file, then the Docker group), so the two workers
    # start on them together and the other groups fill in around them; stable: the rest keep their order
    items.sort(key=lambda item: 0 if item.fspath.basename in FIRST else 1 if group_of(item.nodeid) == "docker" else 2)
    if not (config.getoption("--all") or os.environ.get("KIT_TESTS") == "all"):
        for item in items:
            gated = [m for m in GATED if item.get_closest_marker(m)]
            if gated:
                item.add_marker(pytest.mark.skip(reason=f"{'/'.join(gated)} test: runs with `pytest --all` (CI does)"))
    return (yield)
