"""How .ci/run's two test workers share the suite (tests/conftest.py): a group goes whole to one
worker; each module is a group, except every test of the Docker engine ("docker") and every
test of the local Slurm ("slurm"), which must never run beside another of their kind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import DOCKER_FILES, ENGINE_FREE, SLURM_TESTS, group_of
from hypothesis import given
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent
name = st.from_regex(r"[a-z][a-z0-9_]{0,30}", fullmatch=True)
param = st.one_of(st.just(""), st.from_regex(r"\[[A-Za-z0-9_.:\-/ ]{0,20}\]", fullmatch=True))


@given(module=name, cls=st.one_of(st.none(), name), func=name, p=param)
def test_a_test_outside_the_engine_files_is_grouped_with_its_module(module, cls, func, p):
    path = f"tests/test_{module}.py"
    nodeid = f"{path}::{cls + '::' if cls else ''}test_{func}{p}"
    want = "docker" if Path(path).name in DOCKER_FILES and f"test_{func}" not in ENGINE_FREE else path
    if f"test_{func}" in SLURM_TESTS:
        want = "slurm"
    assert group_of(nodeid) == want


@given(f=st.sampled_from(sorted(DOCKER_FILES)), func=name, p=param)
def test_every_test_of_an_engine_file_is_docker_unless_it_takes_the_slurm(f, func, p):
    want = "slurm" if f"test_{func}" in SLURM_TESTS else f"tests/{f}" if f"test_{func}" in ENGINE_FREE else "docker"
    assert group_of(f"tests/{f}::test_{func}{p}") == want


def test_the_readme_main_command_hides_the_engine_and_leaves_the_docker_group():
    """It runs `all` with DOCKER_HOST at no socket (the native path), so it may run beside Docker tests."""
    import test_readme

    assert "test_main_command_on_the_embedded_default" in ENGINE_FREE
    assert group_of("tests/test_readme.py::test_main_command_on_the_embedded_default") == "tests/test_readme.py"
    assert group_of("tests/test_readme.py::test_the_readme_container_commands_run_as_written") == "docker"
    assert test_readme.NO_ENGINE.startswith("unix:///nonexistent/")


@given(func=st.sampled_from(sorted(SLURM_TESTS)), p=param)
def test_a_slurm_test_is_in_the_slurm_group_whatever_its_parameters(func, p):
    assert group_of(f"tests/test_cluster.py::{func}{p}") == "slurm"


def test_the_slurm_list_names_exactly_the_tests_that_take_the_slurm_fixture():
    """Read from the sources: a new test taking `slurm_cluster` must join SLURM_TESTS (collection
    refuses a stale list too, but only for the tests it collects)."""
    takers = set()
    for path in TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(a.arg == "slurm_cluster" for a in node.args.args):
                takers.add(node.name)
    assert takers == SLURM_TESTS


def test_every_file_with_a_docker_test_is_in_the_docker_group():
    """Read from the sources: a `pytest.mark.docker` anywhere outside DOCKER_FILES would put a
    Docker test beside the Docker group (collection refuses it too, for what it collects)."""
    used = re.compile(r"^\s*@pytest\.mark\.docker\b|^pytestmark\s*=.*\bmark\.docker\b", re.M)
    marked = {p.name for p in TESTS.glob("test_*.py") if used.search(p.read_text())}
    assert marked <= DOCKER_FILES, marked - DOCKER_FILES
