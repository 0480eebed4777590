"""The study registry. A study is found, never listed by hand:

  - every package under bench/studies/ whose __init__ registers one (`@register_study`);
  - modules named in $KIT_STUDY_MODULES (comma-separated import paths: a study kept
    outside the kit, e.g. in tests/), imported here and in every cell process, which
    inherits the environment;
  - entry points in the group `cnn_bench.studies` of installed packages.

Importing a study package must stay cheap (no torch, numba or scikit-learn): the host
imports them all to build the report.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from importlib import metadata

from bench.core.errors import KitError
from bench.core.study import Study

_STUDIES: dict[str, Study] = {}
_loaded = False


def register_study(cls: type[Study]) -> type[Study]:
    """Class decorator: instantiate and register the study under its `name`."""
    name = getattr(cls, "name", None)
    if not name:
        raise TypeError(f"{cls.__name__} has no `name`")
    prev = _STUDIES.get(name)
    if prev is not None and type(prev).__qualname__ != cls.__qualname__:
        raise TypeError(f"two studies are named {name!r}: {type(prev).__module__} and {cls.__module__}")
    _STUDIES[name] = cls()
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import bench.studies as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod.ispkg:
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    for path in filter(None, (p.strip() for p in os.environ.get("KIT_STUDY_MODULES", "").split(","))):
        try:
            importlib.import_module(path)
        except ImportError as err:
            raise KitError(f"KIT_STUDY_MODULES names {path!r}, which cannot be imported: {err}") from None
    for ep in metadata.entry_points(group="cnn_bench.studies"):
        ep.load()


def studies() -> dict[str, Study]:
    _load()
    return dict(sorted(_STUDIES.items(), key=lambda kv: (kv[1].seed_doc or "~", kv[0])))


def get_study(name: str) -> Study:
    all_ = studies()
    if name not in all_:
        raise KitError(f"unknown study {name!r}: choose one of {', '.join(all_)}")
    return all_[name]


def select(names: list[str] | None) -> list[Study]:
    """Studies by name; None, [] or ['all'] means every registered study."""
    if not names or names == ["all"]:
        return list(studies().values())
    return [get_study(n) for n in names]
