"""The layering of the kit, read from its sources with `ast` (nothing is imported):

1. below bench/studies (bench/core, run, measure, data, bench/cli.py, ...) nothing imports a
   study package, at any depth (module level, inside a function, under TYPE_CHECKING), and no
   string there holds a study's import path: only bench/core/registry.py finds studies, by
   walking the `bench.studies` package;
2. a study imports no other study;
3. bench/ imports neither host/ nor orchestrate.py (it ships in images without them), and
   host/ does not import orchestrate.py (the entry point is the top);
4. host/ and orchestrate.py name no study: no import of one, no study's import path or source
   path in a string, and no string literal outside docstrings that addresses a study (its
   name followed by `.` or `=`: a `--set` or a band for it) or is a study's name compared
   against (`==`, `!=`, `in`) or passed as `study=`. Text for a person (help, messages,
   examples inside a sentence) may mention one;
5. no runtime import cycle among bench/, host/ and orchestrate.py (module-level imports; a
   package importing its own submodule is its structure, not a cycle);
6. no import cycle at any depth either: the imports inside functions and methods count too (a
   lower module that reaches back up at call time is a layer out of place), those under
   `if TYPE_CHECKING:` do not (they never run). A package's function that imports its own
   submodule (a study's `open()` loading its protocol, bench.data's loaders) is its structure.

Rules 1-4 read every import at any depth, TYPE_CHECKING ones included (nothing is exempt: an
annotation that names a study or host/ is the same dependency); rule 5 only the ones that run
when a module is imported; rule 6 every one that can run.

Where today's tree breaks a rule it is listed in KNOWN (rules 1-4) or KNOWN_CYCLE_EDGES (rule
6) with the reason; a listed one that is gone fails too, so the lists stay true. tests at the bottom plant each kind of fault in a copy
and see the checker name it.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = "bench/core/registry.py"

# (file, rule, what) that today's tree holds, each with why it is not fixed here
KNOWN: set[tuple[str, str, str]] = set()

# Rule 6: (importer, imported) function-level or load-time imports that close a cycle today, each
# with why it is not broken here. The check drops these edges and then finds no cycle; an edge
# listed here that no longer closes a cycle (or no longer exists) fails, so the list stays true.
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {
    # bench.cli -> (in main) bench.run.matrix -> schedule -> warm -> (in the forked child)
    # bench.run.preload -> bench.cli: preload imports the cell entry point on purpose (the warm
    # process imports it once, before any fork), and the child reads the figures preload took at
    # its import (COLD_START_S, PID, LOADED). Breaking it means handing those figures over another
    # way (the forkserver's preload list, bench/run/warm.py): not a small change.
    ("bench.run.warm", "bench.run.preload"): "the warm child reads preload's import-time figures",
}

Depth = Literal["load", "run", "all"]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path) -> dict[str, Path]:
    """Every module of bench/, host/ and orchestrate.py, by its dotted name."""
    paths = [*(root / "bench").rglob("*.py"), *(root / "host").rglob("*.py")]
    if (root / "orchestrate.py").is_file():
        paths.append(root / "orchestrate.py")
    return {module_name(root, p): p for p in sorted(paths)}


def _absolute(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def import_nodes(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement in TREE, at any depth, as (node, at_load, typing_only): AT_LOAD when
    it runs as the module is imported (not inside a function or method; a class body runs at
    load), TYPING_ONLY when it sits under `if TYPE_CHECKING:` (its `else:` runs)."""
    out: list[tuple[ast.Import | ast.ImportFrom, bool, bool]] = []

    def visit(node: ast.AST, at_load: bool, typing_only: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, at_load, typing_only))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, at_load, True)
            for child in node.orelse:
                visit(child, at_load, typing_only)
        else:
            inner = at_load and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inner, typing_only)

    visit(tree, True, False)
    return out


def imports(path: Path, name: str, known: set[str], depth: Depth, tree: ast.Module | None = None) -> set[str]:
    """What PATH (module NAME) imports, by DEPTH: "all": every import anywhere, inside functions
    and methods and under `if TYPE_CHECKING:` too (rules 1-4); "run": every one that can run
    (any depth, not under TYPE_CHECKING: rule 6); "load": the ones that run when it is imported
    (module level, not under TYPE_CHECKING: rule 5)."""
    tree = tree or ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for n, at_load, typing_only in import_nodes(tree):
        if (depth != "all" and typing_only) or (depth == "load" and not at_load):
            continue
        if isinstance(n, ast.ImportFrom):
            base = _absolute(n, name, is_pkg)
            subs = {f"{base}.{a.name}" for a in n.names} & known  # `from pkg import submodule`
            out |= subs
            if len(subs) < len(n.names):
                out.add(base)
        else:
            out |= {a.name for a in n.names}
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    holders = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, holders) and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def _named_literals(tree: ast.AST, names: set[str]) -> list[str]:
    """String literals outside docstrings that address a study or are its name in a comparison
    or a `study=` argument."""
    docs = _docstrings(tree)
    got = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            if any(n.value.startswith((f"{s}.", f"{s}=")) for s in names):
                got.append(repr(n.value))
        operands: list[ast.expr] = []
        if isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
        elif isinstance(n, ast.keyword) and n.arg == "study":
            operands = [n.value]
        for op in operands:
            for c in ast.walk(op):
                if isinstance(c, ast.Constant) and c.value in names:
                    got.append(repr(c.value))
    return got


def violations(root: Path, names: set[str]) -> set[tuple[str, str, str]]:
    """(file, rule, what) for every break of rules 1-4 in the tree at ROOT; NAMES: the studies'
    registered names (their packages are read from bench/studies/)."""
    mods = sources(root)
    packages = {p.name for p in (root / "bench" / "studies").iterdir() if (p / "__init__.py").is_file()}
    study_paths = {f"bench.studies.{p}" for p in packages} | {f"bench/studies/{p}" for p in packages}
    found: set[tuple[str, str, str]] = set()
    for name, path in mods.items():
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        deps = imports(path, name, set(mods), depth="all", tree=tree)
        own = name.split(".")[2] if name.startswith("bench.studies.") else None
        to_studies = {d for d in deps if d.startswith("bench.studies.")}
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        paths_named = sorted({p for p in study_paths for s in strings if p in s})
        if name.startswith("bench.") and own is None and rel != REGISTRY:
            found |= {(rel, "a study imported below bench/studies", d) for d in to_studies}
            found |= {(rel, "a study's import path below bench/studies", p) for p in paths_named if "." in p}
        if own is not None:
            found |= {(rel, "a study imports another study", d) for d in to_studies if d.split(".")[2] != own}
        if name.startswith("bench."):
            found |= {
                (rel, "bench imports host or the entry point", d) for d in deps if d.split(".")[0] in ("host", "orchestrate")
            }
        if name.startswith("host."):
            found |= {(rel, "host imports the entry point", d) for d in deps if d.split(".")[0] == "orchestrate"}
        if name.startswith("host.") or name == "orchestrate":
            found |= {(rel, "host names a study", d) for d in to_studies}
            found |= {(rel, "host names a study", p) for p in paths_named}
            found |= {(rel, "host names a study", lit) for lit in _named_literals(tree, names)}
    return found


def import_graph(root: Path, depth: Depth) -> dict[str, set[str]]:
    """Module -> the modules at ROOT it imports at DEPTH ("load" or "run"). At "run" a package's
    import of its own submodule inside a function is left out: the lazy half of the package."""
    mods = sources(root)
    graph = {}
    for m, p in mods.items():
        tree = ast.parse(p.read_text())
        deps = imports(p, m, set(mods), depth, tree)
        if depth == "run":
            deps -= {d for d in deps - imports(p, m, set(mods), "load", tree) if d.startswith(m + ".")}
        graph[m] = {d for d in deps if d in mods and d != m}
    return graph


def cycles(root: Path, depth: Depth = "load", allowed: Iterable[tuple[str, str]] = ()) -> list[list[str]]:
    """Import cycles among the modules at ROOT at DEPTH, the edges ALLOWED left out (each as the
    path that closes it)."""
    graph = import_graph(root, depth)
    for a, b in allowed:
        graph.get(a, set()).discard(b)
    seen: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if seen.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                # a package importing its own submodule at load is the package's structure, not a cycle
                if not all(b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(cycle, cycle[1:])):
                    found.append(cycle)
            elif d not in seen:
                visit(d)
        stack.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    return found


def closes_a_cycle(graph: dict[str, set[str]], edge: tuple[str, str]) -> bool:
    """Whether EDGE (a, b) is in GRAPH and a is reachable again from b."""
    a, b = edge
    if b not in graph.get(a, set()):
        return False
    todo, seen = [b], {b}
    while todo:
        for d in graph[todo.pop()]:
            if d == a:
                return True
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return False


def study_names() -> set[str]:
    from bench.core.registry import studies

    return {n for n, s in studies().items() if type(s).__module__.startswith("bench.studies.")}


@pytest.fixture(scope="module")
def today() -> set[tuple[str, str, str]]:
    return violations(ROOT, study_names())


def test_the_layering_holds(today):
    got = today
    assert not got - KNOWN, "layering broken:\n" + "\n".join(f"{f}: {r}: {w}" for f, r, w in sorted(got - KNOWN))
    assert not KNOWN - got, f"KNOWN lists what is gone now (drop it): {sorted(KNOWN - got)}"


def test_no_runtime_import_cycle():
    found = cycles(ROOT)
    assert not found, "runtime import cycle: " + "; ".join(" -> ".join(c) for c in found)


def test_no_import_cycle_at_any_depth():
    found = cycles(ROOT, "run", KNOWN_CYCLE_EDGES)
    assert not found, "import cycle (imports inside functions count): " + "; ".join(" -> ".join(c) for c in found)
    graph = import_graph(ROOT, "run")
    stale = [e for e in KNOWN_CYCLE_EDGES if not closes_a_cycle(graph, e)]
    assert not stale, f"KNOWN_CYCLE_EDGES lists what closes no cycle now (drop it): {stale}"


def test_the_claims_engine_imports_no_study_and_no_report():
    mods = sources(ROOT)
    for name in ("bench.core.claims", "bench.core.answers"):
        deps = imports(mods[name], name, set(mods), depth="all")
        assert not {d for d in deps if d.startswith(("bench.studies", "host")) or d.endswith("report")}, (name, deps)


# ---- the checker fails on planted faults -------------------------------------------------------
@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of bench/, host/ and orchestrate.py's sources, clean but for what KNOWN lists."""
    for part in ("bench", "host"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "orchestrate.py", tmp_path / "orchestrate.py")
    return tmp_path


def test_a_copy_holds_what_the_tree_holds(tree, today):
    assert violations(tree, study_names()) == today and cycles(tree) == []
    assert cycles(tree, "run", KNOWN_CYCLE_EDGES) == []


def _plant(tree: Path, rel: str, text: str) -> set[tuple[str, str, str]]:
    (tree / rel).write_text(text)
    return violations(tree, study_names()) - KNOWN


@pytest.mark.parametrize(
    ("rel", "text", "rule"),
    [
        ("bench/core/planted.py", "from bench.studies.mnist_cnn import config\n", "a study imported below bench/studies"),
        ("bench/run/planted.py", "def f():\n    import bench.studies.roofline.report\n", "a study imported below bench/studies"),
        (
            "bench/core/planted.py",
            "class C:\n    def m(self):\n        def inner():\n            from ..studies import profile\n",
            "a study imported below bench/studies",
        ),
        (
            "bench/core/planted.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bench.studies.roofline import Roofline\n",
            "a study imported below bench/studies",
        ),
        ("bench/measure/planted.py", "from ..studies.profile import Profile\n", "a study imported below bench/studies"),
        (
            "bench/data/planted.py",
            "import importlib\nM = importlib.import_module('bench.studies.cifar_opt')\n",
            "a study's import path below bench/studies",
        ),
        (
            "bench/studies/mlp_scratch/planted.py",
            "from bench.studies.mnist_cnn.net import init_params\n",
            "a study imports another study",
        ),
        ("bench/core/planted.py", "from host.report import build_report\n", "bench imports host or the entry point"),
        ("bench/run/planted.py", "def f():\n    from host import verify\n", "bench imports host or the entry point"),
        (
            "bench/studies/roofline/planted.py",
            "class R:\n    async def go(self):\n        import bench.studies.mnist_cnn.net\n",
            "a study imports another study",
        ),
        ("host/planted.py", "def main():\n    import orchestrate\n", "host imports the entry point"),
        ("host/planted.py", "SETS = ('cifar-opt.epochs=1',)\n", "host names a study"),
        ("host/planted.py", "def f(c):\n    return c.study == 'roofline'\n", "host names a study"),
        ("host/planted.py", "from bench.studies.profile import multigpu\n", "host names a study"),
        ("host/planted.py", "P = 'bench/studies/mnist_cnn/report.py'\n", "host names a study"),
    ],
)
def test_the_checker_names_a_planted_fault(tree, rel, text, rule):
    got = _plant(tree, rel, text)
    assert [(f, r) for f, r, _ in got] == [(rel, rule)], got


def test_text_for_a_person_may_mention_a_study(tree):
    text = '"""Runs mnist-cnn."""\nHELP = "e.g. --study mnist-cnn --profile smoke"\nK = {"profile": 1}\n'
    assert _plant(tree, "host/planted.py", text) == set()


def test_the_cycle_check_finds_a_planted_cycle(tree):
    (tree / "bench" / "core" / "plant_a.py").write_text("from bench.core import plant_b\n")
    (tree / "bench" / "core" / "plant_b.py").write_text("import bench.core.plant_a\n")
    cycle = [["bench.core.plant_a", "bench.core.plant_b", "bench.core.plant_a"]]
    assert cycles(tree) == cycle and cycles(tree, "run", KNOWN_CYCLE_EDGES) == cycle
    # at call time: no runtime cycle (rule 5), but a cycle all the same (rule 6)
    (tree / "bench" / "core" / "plant_b.py").write_text("def f():\n    import bench.core.plant_a\n")
    assert cycles(tree) == [] and cycles(tree, "run", KNOWN_CYCLE_EDGES) == cycle
    (tree / "bench" / "core" / "plant_b.py").write_text("class B:\n    def m(self):\n        from . import plant_a\n")
    assert cycles(tree) == [] and cycles(tree, "run", KNOWN_CYCLE_EDGES) == cycle
    # under TYPE_CHECKING: it never runs
    (tree / "bench" / "core" / "plant_b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bench.core import plant_a\n"
    )
    assert cycles(tree, "run", KNOWN_CYCLE_EDGES) == []


def test_the_cycle_check_finds_verify_and_baselines_importing_each_other_again(tree):
    """host/baselines.py once imported host/verify.py inside make_baseline while verify imported
    baselines at load: the cycle rule 6 is for."""
    path = tree / "host" / "baselines.py"
    path.write_text(path.read_text() + "\n\ndef planted():\n    from host.verify import verify\n")
    assert cycles(tree) == []
    assert cycles(tree, "run", KNOWN_CYCLE_EDGES) == [["host.baselines", "host.verify", "host.baselines"]]


def test_a_package_loading_its_own_submodule_in_a_function_is_no_cycle(tree):
    pkg = tree / "bench" / "core" / "plantpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("X = 1\ndef load():\n    from bench.core.plantpkg import part\n")
    (pkg / "part.py").write_text("from bench.core.plantpkg import X\n")
    assert cycles(tree, "run", KNOWN_CYCLE_EDGES) == []
    (pkg / "part.py").write_text("from bench.core import plant_c\n")  # but through another module it is one
    (tree / "bench" / "core" / "plant_c.py").write_text("def f():\n    from bench.core.plantpkg import part\n")
    assert cycles(tree, "run", KNOWN_CYCLE_EDGES) == [["bench.core.plant_c", "bench.core.plantpkg.part", "bench.core.plant_c"]]


def test_a_known_cycle_edge_that_closes_no_cycle_is_stale():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set()}
    assert closes_a_cycle(graph, ("a", "b")) and closes_a_cycle(graph, ("b", "a"))
    assert not closes_a_cycle(graph, ("b", "c")) and not closes_a_cycle(graph, ("c", "a"))
    graph["b"].discard("a")  # the cycle broken elsewhere: its listed edge is stale
    assert not closes_a_cycle(graph, ("a", "b"))
