"""The core's contracts: Cell identity and serialisation, --set/--only, the registry,
provenance (an unclean tree says so), and the host side importing no torch/numba/sklearn."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core import params as P
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import get_study, select, studies

ROOT = Path(__file__).resolve().parent.parent


def test_cell_id_is_stable_and_hashes_the_whole_spec():
    a = Cell("mnist-cnn", "torch-cpu", params={"epochs": 2, "lr": 0.01}, name="x")
    same = Cell("mnist-cnn", "torch-cpu", params={"lr": 0.01, "epochs": 2}, name="another name")
    assert a.key == same.key and a == same, "key order and the readable name do not change the identity"
    assert a.id.startswith("x-") and len(a.id.split("-")[-1]) == 12
    for change in (
        {"params": {"epochs": 3, "lr": 0.01}},
        {"seed": 1},
        {"repeat": 1},
        {"variant": "fast"},
        {"devices": ("0",)},
        {"backend": "numba-cpu"},
        {"study": "other"},
    ):
        assert a.replace(**change).key != a.key, change
    assert Cell.from_json(a.to_json()) == a and Cell.from_json(a.to_json()).name == "x"
    assert a.dir(Path("/r")) == Path("/r/mnist-cnn") / a.id


def test_cell_key_is_pinned():
    """The id of a fixed spec never changes between kit versions (stored results stay findable)."""
    c = Cell("mnist-cnn", "torch-cpu", "default", {"epochs": 10, "batch_size": 512}, (), 0, 0)
    assert c.spec() == {
        "backend": "torch-cpu",
        "devices": [],
        "params": {"batch_size": 512, "epochs": 10},
        "repeat": 0,
        "seed": 0,
        "study": "mnist-cnn",
        "variant": "default",
    }
    # pinned: a change to the hashing would silently orphan every stored result
    assert c.key == "0e9c64ffc267b3bfb135c0d668beb768f3bd8de0dc1617ada4dd770a64bd2065"


@pytest.mark.parametrize(
    "bad,message",
    [
        (dict(study="", backend="b"), "study must be a non-empty string"),
        (dict(study="s", backend="b", seed=-1), "seed must be an integer >= 0"),
        (dict(study="s", backend="b", repeat=True), "repeat must be an integer >= 0"),
        (dict(study="s", backend="b", params=[1]), "params must be an object"),
    ],
)
def test_bad_cell_fields_are_one_line(bad, message):
    with pytest.raises(KitError, match=message):
        Cell(**bad)


def test_set_parses_by_type_and_scopes_by_study():
    mnist, mlp = get_study("mnist-cnn"), get_study("mlp-scratch")
    both = [mnist, mlp]
    assert P.overrides_for(mnist, ["epochs=3", "lr=0.5", "seed=2"], both) == ({"epochs": 3, "lr": 0.5}, {"seed": 2})
    assert P.overrides_for(mlp, ["epochs=3"], both) == ({}, {}), "a key another selected study has"
    assert P.overrides_for(mlp, ["mlp-scratch.lr=0.2", "mnist-cnn.lr=0.5"], both) == ({"lr": 0.2}, {})
    with pytest.raises(KitError, match="no parameter 'colour'"):
        P.overrides_for(mnist, ["colour=red"], both)
    with pytest.raises(KitError, match="expected float"):
        P.overrides_for(mnist, ["lr=fast"], both)
    with pytest.raises(KitError, match="expected key=value"):
        P.overrides_for(mnist, ["epochs"], both)


def test_only_filters_on_cell_fields_and_params():
    s = get_study("mnist-cnn")
    cells = s.matrix("cpu", "default")
    assert [c.backend for c in cells if P.matches(c, ["backend=numba-cpu"])] == ["numba-cpu"]
    assert len([c for c in cells if P.matches(c, ["pipeline=seed|resident", "backend=torch-cpu"])]) == 2
    with pytest.raises(KitError, match="neither a cell field"):
        P.check_only(["flavour=x"], [s])


def test_registry_finds_the_kits_studies_by_listing():
    assert {"mnist-cnn", "mlp-scratch"} <= set(studies())
    assert [s.name for s in select(["all"])] == list(studies())
    with pytest.raises(KitError, match="unknown study 'imagenet'"):
        get_study("imagenet")
    for study in studies().values():
        for profile in ("smoke", "default", "full"):
            for platform in ("cpu", "cuda", "mps"):
                for c in study.matrix(platform, profile):
                    study.validate(c)  # every matrix cell is valid as generated
                    assert c.study == study.name and study.platform_of(c) == platform


@pytest.mark.slow
def test_backends_import_only_what_they_need():
    """numba-cpu never imports torch; opening a torch cell never imports numba."""
    code = (
        "import sys; from bench.core.registry import get_study; s = get_study('mnist-cnn'); "
        "s.why_unavailable('numba-cpu'); s.load_backend('numba-cpu'); "
        "from bench.studies.mnist_cnn.kernels import numba_cpu_cnn; "
        "print('torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    code = (
        "import sys, json; from bench.core.registry import get_study; from bench.core.study import RunContext; "
        "from pathlib import Path; s = get_study('mnist-cnn'); "
        "c = s.resolve(s.cell('torch-cpu', epochs=1, dataset='digits'), None); "
        "r = s.open(c, RunContext(Path('/tmp'), Path('/tmp/x'), None, 'id')); r.step(0); "
        "print('numba' in sys.modules, 'torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "False True", r.stderr


def test_host_side_imports_no_torch_numba_or_sklearn(tmp_path):
    """orchestrate.py, host/ and the report (every study's section) need only requirements/host.txt."""
    ref = ROOT / "results" / "reference"
    code = (
        "import sys, runpy; sys.argv = ['orchestrate.py', '--help']\n"
        "import orchestrate, host.plan, host.images, host.engine, host.docker_cli, host.report\n"
        f"host.report.build_report([__import__('pathlib').Path(r'{ref}')], __import__('pathlib').Path(r'{tmp_path}'))\n"
        "host.plan.native_platforms(); host.plan.check_data_dir(None)\n"
        "print(sorted(m for m in ('torch', 'numba', 'sklearn', 'cupy') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "REPORT.md").is_file()


def test_the_image_holds_bench_only_and_host_edits_leave_it_fresh(tmp_path, monkeypatch):
    import shutil

    from host import images

    text = (ROOT / "docker" / "Dockerfile").read_text()
    copies = [line.split()[1] for line in text.splitlines() if line.startswith("COPY ") and "--from" not in line]
    assert "bench" in copies and not any(c in ("host", "orchestrate.py", "lab", "tests") for c in copies), copies
    # on a copy of the image's inputs and host/, never the checkout (tests run concurrently under xdist)
    skip = shutil.ignore_patterns("__pycache__", ".iid-*")
    for d in ("bench", "docker", "host"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    monkeypatch.setattr(images, "REPO", tmp_path)
    monkeypatch.setattr(images, "DOCKERFILE", tmp_path / "docker" / "Dockerfile")
    h = images.source_hash()
    (tmp_path / "host" / "_probe_edit.py").write_text("# a host-side edit\n")
    assert images.source_hash() == h, "editing host code must not mark images stale"
    (tmp_path / "bench" / "_probe_edit.py").write_text("# an edit to what the image holds\n")
    assert images.source_hash() != h, "editing bench/ must mark images stale"


def test_an_unclean_tree_is_recorded(tmp_path):
    """Untracked files under bench/ make the checkout dirty, as tracked changes do."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "HEAD", "--", "bench"], check=True)
    probe = "import json; from bench.core.provenance import source_state; print(json.dumps(source_state()))"

    def state():
        r = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            cwd=clone,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(clone)},
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    # only bench/ was checked out: the other tracked files count as deleted, hence dirty; restore them first
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "HEAD", "--", "."], check=True)
    assert state()["dirty"] is False
    (clone / "bench" / "new_module.py").write_text("x = 1\n")
    s = state()
    assert s["dirty"] is True and "?? bench/new_module.py" in s["changes"]
