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
   package importing its own submodule is its structure, not a cycle).

Where today's tree breaks a rule it is listed in KNOWN with the reason; a listed one that is
gone fails too, so the list stays true. tests at the bottom plant each kind of fault in a copy
and see the checker name it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = "bench/core/registry.py"

# (file, rule, what) that today's tree holds, each with why it is not fixed here
KNOWN: set[tuple[str, str, str]] = set()


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


def imports(path: Path, name: str, known: set[str], runtime_only: bool, tree: ast.Module | None = None) -> set[str]:
    """What PATH (module NAME) imports: every import anywhere, or with RUNTIME_ONLY the ones that
    run when it is imported (module level, not under `if TYPE_CHECKING:`, not inside functions)."""
    tree = tree or ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    if runtime_only:
        nodes: list[ast.AST] = []
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            nodes += list(ast.walk(node)) if isinstance(node, (ast.If, ast.Try)) else [node]
    else:
        nodes = list(ast.walk(tree))
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.ImportFrom):
            base = _absolute(n, name, is_pkg)
            subs = {f"{base}.{a.name}" for a in n.names} & known  # `from pkg import submodule`
            out |= subs
            if len(subs) < len(n.names):
                out.add(base)
        elif isinstance(n, ast.Import):
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
        deps = imports(path, name, set(mods), runtime_only=False, tree=tree)
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


def cycles(root: Path) -> list[list[str]]:
    """Runtime import cycles among the modules at ROOT (each as the path that closes it)."""
    mods = sources(root)
    graph = {m: {d for d in imports(p, m, set(mods), runtime_only=True) if d in mods and d != m} for m, p in mods.items()}
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

    for m in sorted(mods):
        if m not in seen:
            visit(m)
    return found


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


def test_the_claims_engine_imports_no_study_and_no_report():
    mods = sources(ROOT)
    for name in ("bench.core.claims", "bench.core.answers"):
        deps = imports(mods[name], name, set(mods), runtime_only=False)
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


def _plant(tree: Path, rel: str, text: str) -> set[tuple[str, str, str]]:
    (tree / rel).write_text(text)
    return violations(tree, study_names()) - KNOWN


@pytest.mark.parametrize(
    ("rel", "text", "rule"),
    [
        ("bench/core/planted.py", "from bench.studies.mnist_cnn import config\n", "a study imported below bench/studies"),
        ("bench/run/planted.py", "def f():\n    import bench.studies.roofline.report\n", "a study imported below bench/studies"),
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
    assert cycles(tree) == [["bench.core.plant_a", "bench.core.plant_b", "bench.core.plant_a"]]
    (tree / "bench" / "core" / "plant_b.py").write_text("def f():\n    import bench.core.plant_a\n")  # at call time: fine
    assert cycles(tree) == []
