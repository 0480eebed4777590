"""`--set key=value` and `--only key=value`: reach every study parameter from the command line.

    --set epochs=3                 every selected study that has `epochs`
    --set my-study.batch_size=256 only that study
    --set seed=1                   the Cell fields seed / repeat are settable too
    --set devices=0,1              and devices: GPU ids for the GPU cells, cpu,cpu (ranks) for the CPU ones
    --only backend=numba-cpu       keep the cells whose backend / variant / param matches

A value is parsed by the type of the key's default (int, float, bool, str; tuples take
a comma list). A key no selected study has, or a value of the wrong type, is one line.
"""

from __future__ import annotations

from typing import Any

from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.study import Study

CELL_SETTABLE = {"seed": int, "repeat": int, "devices": tuple}
CELL_FILTERS = ("backend", "variant", "seed", "repeat", "study")


def split_pair(text: str, flag: str) -> tuple[str | None, str, str]:
    """'study.key=value' -> (study, key, value); 'key=value' -> (None, key, value)."""
    if "=" not in text:
        raise KitError(f"{flag} {text!r}: expected key=value")
    key, value = text.split("=", 1)
    key = key.strip()
    scope = None
    if "." in key:
        scope, key = key.split(".", 1)
    if not key:
        raise KitError(f"{flag} {text!r}: empty key")
    return scope, key.replace("-", "_"), value.strip()


def parse_value(value: str, typ: type, what: str) -> Any:
    try:
        if typ is bool:
            low = value.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if typ is int:
            return int(value)
        if typ is float:
            return float(value)
        if typ in (tuple, list):
            return tuple(v for v in value.split(",") if v)
        if value.lower() in ("none", "null") and typ is type(None):
            return None
        return value
    except ValueError:
        raise KitError(f"{what}={value!r}: expected {typ.__name__}") from None


def overrides_for(study: Study, pairs: list[str], all_studies: list[Study]) -> tuple[dict, dict]:
    """(param overrides, cell-field overrides) for STUDY from --set PAIRS; every pair must
    reach at least one selected study."""
    params: dict = {}
    fields: dict = {}
    for text in pairs:
        scope, key, value = split_pair(text, "--set")
        if scope is not None and scope not in {s.name for s in all_studies}:
            raise KitError(f"--set {text}: {scope!r} is not a selected study ({', '.join(s.name for s in all_studies)})")
        targets = [s for s in all_studies if scope in (None, s.name)]
        reach = [s for s in targets if key in s.config_types() or key in CELL_SETTABLE]
        if not reach:
            keys = sorted({k for s in targets for k in s.config_types()} | set(CELL_SETTABLE))
            raise KitError(
                f"--set {text}: no parameter {key!r} in {', '.join(s.name for s in targets)}; settable: {', '.join(keys)}"
            )
        if study not in reach:
            continue
        if key in CELL_SETTABLE:
            fields[key] = parse_value(value, CELL_SETTABLE[key], f"--set {key}")
        else:
            default = study.config_defaults()[key]
            typ = type(default) if default is not None else str
            params[key] = parse_value(value, typ, f"--set {key}")
    return params, fields


def apply(study: Study, cells: list[Cell], pairs: list[str], all_studies: list[Study]) -> list[Cell]:
    params, fields = overrides_for(study, pairs, all_studies)
    if not params and not fields:
        return cells
    devices = fields.pop("devices", None)
    out = []
    for c in cells:
        c = c.replace(params={**c.params, **params}, **fields)
        # cpu ranks go to the CPU cells, GPU ids to the GPU cells, and only to cells that run on
        # several devices (Study.takes_devices); the others keep theirs
        if devices is not None and (set(devices) == {"cpu"}) == (study.platform_of(c) == "cpu") and study.takes_devices(c):
            c = c.replace(devices=devices)
        out.append(c)
    return out


def matches(cell: Cell, pairs: list[str]) -> bool:
    """True when CELL satisfies every --only key=value (cell fields or params; values compared as text)."""
    for text in pairs:
        scope, key, value = split_pair(text, "--only")
        if scope is not None and scope != cell.study:
            continue
        have = getattr(cell, key) if key in CELL_FILTERS else cell.params.get(key, _MISSING)
        if have is _MISSING or str(have) not in value.split("|"):
            return False
    return True


def check_only(pairs: list[str], all_studies: list[Study]) -> None:
    for text in pairs:
        _, key, _ = split_pair(text, "--only")
        if key not in CELL_FILTERS and not any(key in s.config_types() for s in all_studies):
            raise KitError(f"--only {text}: {key!r} is neither a cell field ({', '.join(CELL_FILTERS)}) nor a parameter")


_MISSING = object()
