"""Figures as data: a report section hands over what a figure shows and the function that draws it.

    figure(out, name, draw, data) -> name     OUT/NAME will hold the PNG that draw(data, path) writes

DRAW is a module-level function `draw(data, path)` that writes one PNG at PATH from DATA alone: it
reads no file, clock or global setting beyond what its module's code says. DATA is plain values
(None, bool, int, float, str, bytes, Path, lists, tuples, dicts and sets of them, enums, dataclass
instances of them). That makes a figure a pure function of (the code that draws it, DATA), so:

- outside a report (a test, a study's own call) `figure` draws at once, here;
- inside `collecting(sink)` (host/report.py) the sink gets the job instead, and may draw it in
  another process or copy the PNG it drew before for exactly these inputs (host/figures.py).

`key(draw, data)` names those inputs: a SHA-256 over DATA's canonical form (`canonical`: every
value with its type, dicts in their order, floats exactly), the draw function's module and name,
the source of that module and of every kit module it imports, directly or through others
(`code_digest`: the `import` statements anywhere in each file, followed into modules whose file is
in the kit's tree or beside the drawing module), and the versions of matplotlib, numpy and Pillow.
Two calls with one key draw the same picture; any other data or code is another key.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import enum
import functools
import hashlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path, PurePath
from typing import Any

Draw = Callable[[Any, Path], None]
Sink = Callable[[Path, str, Draw, Any], None]
_SINK: ContextVar[Sink | None] = ContextVar("figure_sink", default=None)
KIT_ROOT = Path(__file__).resolve().parent.parent.parent  # the folder holding bench/ and host/


def figure(out: Path, name: str, draw: Draw, data: Any) -> str:
    """OUT/NAME as drawn by DRAW from DATA (module docstring): drawn now, or handed to the
    report's sink. Returns NAME, for the markdown that shows it."""
    if not name or "/" in name or name.startswith(".") or not name.endswith(".png"):
        raise ValueError(f"figure name {name!r}: a plain file name ending in .png")
    where(draw)
    sink = _SINK.get()
    if sink is None:
        render(draw, data, Path(out) / name)
    else:
        sink(Path(out), name, draw, data)
    return name


@contextlib.contextmanager
def collecting(sink: Sink) -> Iterator[None]:
    """Every `figure` call in this block goes to SINK instead of being drawn here."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def render(draw: Draw, data: Any, path: Path) -> None:
    """DRAW(DATA) into PATH: written under a temp name beside it and renamed, so PATH is never
    half a PNG; every figure the draw left open is closed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    try:
        draw(data, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None and plt.get_fignums():
            plt.close("all")


def render_named(module: str, qualname: str, data: Any, path: str) -> None:
    """`render` of the draw function MODULE.QUALNAME (what a worker process is sent)."""
    render(resolve(module, qualname), data, Path(path))


def where(draw: Draw) -> tuple[str, str]:
    """(module, qualified name) of DRAW, which must be a module-level function of an importable module."""
    module, qual = getattr(draw, "__module__", None), getattr(draw, "__qualname__", "")
    if not module or module == "__main__" or not qual or "<" in qual or "." in qual:
        raise TypeError(f"figure draw function {draw!r}: a module-level function of an importable module")
    return module, qual


def resolve(module: str, qualname: str) -> Draw:
    return getattr(importlib.import_module(module), qualname)


# ---------------------------------------------------------------------------- the key
def canonical(obj: Any) -> bytes:
    """OBJ written so that two values give the same bytes only when they are the same value of
    the same types: each value tagged with its type, floats by float.hex, dicts in their order,
    sets sorted, dataclasses by class and every field. TypeError for anything else."""
    out: list[bytes] = []
    _enc(obj, out.append)
    return b"".join(out)


def _enc(x: Any, put: Callable[[bytes], None]) -> None:
    t = type(x)
    if x is None or t is bool:
        put(b"N" if x is None else b"T" if x else b"F")
    elif t is int:
        put(b"i%d;" % x)
    elif t is float:
        put(b"f" + x.hex().encode() + b";")
    elif t is str:
        b = x.encode("utf-8", "surrogatepass")
        put(b"s%d:" % len(b) + b)
    elif t is bytes:
        put(b"b%d:" % len(x) + x)
    elif t in (list, tuple):
        put((b"l" if t is list else b"t") + b"%d[" % len(x))
        for v in x:
            _enc(v, put)
    elif t is dict:
        put(b"d%d{" % len(x))
        for k, v in x.items():
            _enc(k, put)
            _enc(v, put)
    elif t in (set, frozenset):
        parts = sorted(canonical(v) for v in x)
        put(b"S%d{" % len(parts) + b"".join(parts))
    elif isinstance(x, PurePath):
        _enc(("path", str(x)), put)
    elif isinstance(x, enum.Enum):
        _enc(("enum", f"{t.__module__}.{t.__qualname__}", x.name), put)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [(f.name, getattr(x, f.name)) for f in dataclasses.fields(x)]
        _enc(("dataclass", f"{t.__module__}.{t.__qualname__}", fields), put)
    elif isinstance(x, (int, float, str)):  # a subclass (numpy's float64 is one): as its plain value, its type named
        base = int if isinstance(x, int) else float if isinstance(x, float) else str
        _enc((f"{t.__module__}.{t.__qualname__}", base(x)), put)
    else:
        raise TypeError(f"figure data holds a {t.__module__}.{t.__qualname__}: plain values and dataclasses only")


def key(draw: Draw, data: Any) -> str:
    """The name of DRAW's picture of DATA (module docstring)."""
    module, qual = where(draw)
    h = hashlib.sha256()
    for part in (code_digest(module), module, qual, _versions()):
        h.update(part.encode() + b"\0")
    h.update(canonical(data))
    return h.hexdigest()


@functools.cache
def _versions() -> str:
    from importlib import metadata

    out = []
    for dist in ("matplotlib", "numpy", "pillow"):
        try:
            out.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist}=none")
    return ";".join(out)


@functools.cache
def code_digest(module: str) -> str:
    """SHA-256 over the sources of MODULE and of every module of the kit it imports, directly or
    through others (module docstring), with their names."""
    files = _closure(module)
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].read_bytes() + b"\0")
    return h.hexdigest()


def _source(name: str, roots: tuple[Path, ...]) -> Path | None:
    """The source file of module NAME under one of ROOTS (a.b -> a/b.py or a/b/__init__.py),
    found without importing anything."""
    parts = name.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def _closure(module: str) -> dict[str, Path]:
    """{module name: source file} for MODULE and the kit modules it reaches by import."""
    mod = sys.modules.get(module)
    first = Path(getattr(mod, "__file__", None) or "")
    if mod is None or first.suffix != ".py":
        raise TypeError(f"figure draw module {module}: no Python source to key its figures by")
    first = first.resolve()
    depth = module.count(".") + (1 if first.name == "__init__.py" else 0)
    roots = (KIT_ROOT, first.parents[depth])  # the kit's tree, and the tree the drawing module is in
    files: dict[str, Path] = {module: first}
    todo = list(_imports(first, module if first.name == "__init__.py" else module.rpartition(".")[0]))
    while todo:
        name = todo.pop()
        if name in files:
            continue
        path = _source(name, roots)
        if path is None:
            continue
        files[name] = path.resolve()
        todo += _imports(path, name if path.name == "__init__.py" else name.rpartition(".")[0])
    return files


@functools.cache
def _imports(path: Path, package: str) -> list[str]:
    """Every module name PATH's import statements may load (relative ones resolved in PACKAGE;
    `from a import b` as both a and a.b)."""
    tree = ast.parse(path.read_bytes(), str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join([*up, base] if base else up)
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
    parents = [n.rsplit(".", k)[0] for n in names for k in range(1, n.count(".") + 1)]  # run before it
    return [n for n in names + parents if n]
