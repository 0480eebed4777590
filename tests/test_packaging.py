"""`pip install .` gives the console commands; pyproject agrees with requirements/*.in; one
Python floor everywhere (pyproject, scripts/setup.sh, docker/mps/run.sh, the README).

The wheel test builds from a copy of the sources (the checkout gets no build/ dir) without
build isolation (no index needed: setuptools comes from the running venv), installs it with
--no-deps into a fresh venv that sees the running venv's packages through a .pth file (the
host lock is what those are), and runs the commands from outside the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def floor() -> tuple[int, int]:
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", PROJECT["requires-python"])
    assert m, f"requires-python should be a plain floor, got {PROJECT['requires-python']!r}"
    return int(m.group(1)), int(m.group(2))


def in_requirements(name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Requirement lines of requirements/NAME.in, -r includes expanded, comments dropped."""
    out: list[str] = []
    for line in (REPO / "requirements" / f"{name}.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            inc = Path(line[3:].strip()).stem
            assert inc not in seen, f"include cycle through {inc}.in"
            out += in_requirements(inc, seen | {name})
        elif not line.startswith("-"):
            out.append(line)
    return out


def norm(reqs: list[str]) -> set[str]:
    return {re.sub(r"\s+", "", r).lower() for r in reqs}


# ---- one Python floor -----------------------------------------------------------------


def test_floor_is_what_the_locks_need() -> None:
    """3.11: the dev and host locks pin packages that need it (typer 0.29 among them)."""
    assert floor() == (3, 11)
    assert sys.version_info[:2] >= floor()


def test_setup_sh_checks_the_floor() -> None:
    text = (REPO / "scripts" / "setup.sh").read_text()
    major, minor = floor()
    assert f"sys.version_info >= ({major}, {minor})" in text
    assert f"needs Python >= {major}.{minor}" in text
    assert not re.search(r"\(3, 10\)|>= 3\.10", text), "setup.sh still names 3.10"


def test_mps_wrapper_knows_the_floor() -> None:
    text = (REPO / "docker" / "mps" / "run.sh").read_text()
    major, minor = floor()
    assert f'MIN_PY="{major}.{minor}"' in text


def test_readme_states_the_floor() -> None:
    text = (REPO / "README.md").read_text()
    stated = set(re.findall(r"Python\s*>=\s*(\d+\.\d+)", text))
    assert stated == {"{}.{}".format(*floor())}, f"README states Python >= {sorted(stated)}; pyproject says {floor()}"


# ---- pyproject against requirements/*.in ----------------------------------------------


def test_dependencies_are_the_host_side() -> None:
    assert norm(PROJECT["dependencies"]) == norm(in_requirements("host"))


@pytest.mark.parametrize("extra", ["cpu", "cuda", "mps", "dev"])
def test_extras_match_requirements_in(extra: str) -> None:
    """Each extra is its .in minus what the base dependencies (host.in) already carry."""
    want = norm(in_requirements(extra)) - norm(in_requirements("host"))
    assert norm(PROJECT["optional-dependencies"][extra]) == want


def test_version_is_bench_version() -> None:
    import bench

    assert PROJECT["version"] == bench.__version__


def test_console_scripts() -> None:
    assert PROJECT["scripts"] == {"cnn-bench": "host.console:main", "cnn-bench-native": "bench.cli:main"}


# ---- host.console: the checkout rule --------------------------------------------------


def test_console_in_a_checkout_changes_nothing() -> None:
    from host.console import adapt
    from host.images import checkout

    assert checkout() == REPO
    for argv in (["build", "cpu"], ["run", "cpu", "--runtime", "docker"], ["all"], ["doctor"]):
        assert adapt(argv, REPO) == (argv, None, None)


def test_console_without_a_checkout() -> None:
    from host.console import adapt

    for cmd in ("build", "base", "reference", "export"):
        argv, note, error = adapt([cmd, "x"], None)
        assert error and "needs a checkout" in error and "\n" not in error
    assert adapt(["build", "--help"], None)[2] is None
    argv, note, error = adapt(["run", "cpu", "--profile", "smoke"], None)
    assert argv == ["run", "--runtime", "native", "cpu", "--profile", "smoke"] and note and not error
    assert "needs a checkout" in (adapt(["all", "--runtime=docker"], None)[2] or "")
    assert adapt(["all", "--runtime", "native"], None) == (["all", "--runtime", "native"], None, None)
    assert adapt(["report", "results/x"], None) == (["report", "results/x"], None, None)


def test_in_checkout_entry_points_still_work() -> None:
    for argv in ([sys.executable, "orchestrate.py", "--help"], [sys.executable, "-m", "bench", "--help"]):
        p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr


# ---- the wheel ------------------------------------------------------------------------


def _copy_sources(dest: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    for name in ("pyproject.toml", "README.md", "orchestrate.py"):
        shutil.copy2(REPO / name, dest / name)
    for name in ("bench", "host"):
        shutil.copytree(REPO / name, dest / name, ignore=skip)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel; the running venv's packages visible through a .pth."""
    pytest.importorskip("setuptools", reason="building the wheel offline needs setuptools in this venv (requirements/dev.txt)")
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist, env = tmp / "src", tmp / "dist", tmp / "venv"
    src.mkdir()
    _copy_sources(src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = dist.glob("cnn_bench-*.whl")
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    )
    Path(purelib.stdout.strip(), "_kit_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(py), "install", "--no-deps", str(wheel)], check=True, capture_output=True, timeout=120)
    return env


def _run(env: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KIT_DATA_DIR")}
    return subprocess.run(
        [str(env / "bin" / argv[0]), *argv[1:]], cwd=cwd, env=clean, capture_output=True, text=True, timeout=120
    )


def test_wheel_holds_the_kit(installed: Path) -> None:
    py = installed / "bin" / "python"
    code = "import bench, host, orchestrate, host.console; print(bench.__file__); print(orchestrate.__file__)"
    out = subprocess.run([py, "-c", code], cwd=installed, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    site = Path(out.stdout.splitlines()[0]).parents[1]
    assert site != REPO and str(installed) in str(site), out.stdout  # the wheel's copy, not the checkout
    want = {p.relative_to(REPO) for d in ("bench", "host") for p in (REPO / d).rglob("*.py") if "__pycache__" not in p.parts}
    got = {p.relative_to(site) for d in ("bench", "host") for p in (site / d).rglob("*.py")}
    assert want - got == set(), f"missing from the wheel: {sorted(map(str, want - got))[:10]}"
    assert not (site / "tests").exists() and not (site / "lab").exists()


def test_console_commands(installed: Path, tmp_path: Path) -> None:
    for cmd, expect in (("cnn-bench", "doctor"), ("cnn-bench-native", "matrix")):
        p = _run(installed, cmd, "--help", cwd=tmp_path)
        assert p.returncode == 0 and expect in p.stdout, p.stdout + p.stderr
    p = _run(installed, "cnn-bench", "data", "list", cwd=tmp_path)
    assert p.returncode == 0 and "mnist" in p.stdout, p.stdout + p.stderr


@pytest.mark.slow  # imports torch and numba (about 10 s here)
def test_native_list_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    p = _run(installed, "cnn-bench-native", "list", cwd=tmp_path)
    assert p.returncode == 0 and "mnist-cnn" in p.stdout and "torch-mps" in p.stdout, p.stdout + p.stderr


def test_commands_needing_a_checkout_say_so(installed: Path, tmp_path: Path) -> None:
    p = _run(installed, "cnn-bench", "build", "cpu", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: `cnn-bench build` needs a checkout"), p.stderr
    p = _run(installed, "cnn-bench", "run", "cpu", "--runtime", "docker", cwd=tmp_path)
    assert p.returncode == 2 and "needs a checkout" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_outside_a_checkout_a_missing_package_names_the_extra(monkeypatch):
    """Installed from a wheel, `cnn-bench all` without torch says which extra installs it (there
    is no scripts/setup.sh there); in a checkout it names setup.sh."""
    from bench.core.errors import KitError
    from host import images, plan

    monkeypatch.setattr(plan, "native_missing", lambda: ["torch"])
    from bench.core.request import RunRequest

    req = RunRequest(platforms=("cpu",), profile="smoke", out=Path("out"))
    monkeypatch.setattr(images, "checkout", lambda: None)
    with pytest.raises(KitError, match=r"pip install 'cnn-bench\[cpu\]'"):
        plan.run_native(req)
    monkeypatch.setattr(images, "checkout", lambda: Path("."))
    with pytest.raises(KitError, match="scripts/setup.sh"):
        plan.run_native(req)
