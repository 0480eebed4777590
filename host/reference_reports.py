"""The committed references' reports, made rather than committed (issue 58 item 3).

`results/reference/reports.toml` names each report (its `out` under results/reference/ and the
reference folders it merges); `render` makes them with today's code, and `tallies.json` (committed)
holds what each one answered: every seed claim's verdict, and a digest of the measurements it read.
`check` compares the two: a verdict that moved while the measurements stayed the same is code
changing an answer, and CI fails on it until `reference-reports --write` records it (the diff of
tallies.json shows each verdict that moved); a report that no longer renders fails too.

Everything read here is a committed file, still checked: a recipe's `out` and `inputs` are plain
relative paths under results/reference/ (no `..`, no absolute path), each input a folder that exists.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bench.core.errors import KitError
from bench.core.resultset import json_file

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "results" / "reference"
RECIPES = "reports.toml"
TALLIES = "tallies.json"
FORMAT = 1


@dataclass(frozen=True)
class Recipe:
    out: str  # relative to the references' root
    inputs: tuple[str, ...]


def _relative(v: Any, where: str) -> str:
    """V as a plain relative path under the references' root, or KitError naming WHERE."""
    if not isinstance(v, str) or not v or "\\" in v or "\x00" in v:
        raise KitError(f"{where}: {v!r} is not a relative path")
    p = PurePosixPath(v)
    if p.is_absolute() or any(part in ("..", ".", "") for part in p.parts) or v != str(p):
        raise KitError(f"{where}: {v!r} is not a plain relative path under results/reference/")
    return v


def recipes(root: Path = REFERENCES) -> tuple[list[Recipe], Path | None]:
    """The recipes of ROOT/reports.toml and the price file they name (relative to the checkout)."""
    path = root / RECIPES
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise KitError(f"{path}: cannot be read ({err.strerror or err})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise KitError(f"{path}: not TOML ({err})") from None
    got, outs = [], set()
    items = raw.get("report")
    if not isinstance(items, list) or not items:
        raise KitError(f"{path}: no [[report]] entries")
    for i, item in enumerate(items, 1):
        where = f"{path}: report {i}"
        if not isinstance(item, dict) or set(item) != {"out", "inputs"}:
            raise KitError(f"{where}: give exactly `out` and `inputs`")
        out = _relative(item["out"], f"{where} out")
        inputs = item["inputs"]
        if not isinstance(inputs, list) or not inputs:
            raise KitError(f"{where}: `inputs` is a list of reference folders")
        ins = tuple(_relative(x, f"{where} inputs") for x in inputs)
        for x in ins:
            if "/" in x or not (root / x).is_dir():
                raise KitError(f"{where}: input {x!r} is not a folder of {root}")
        if out in outs:
            raise KitError(f"{where}: out {out!r} given twice")
        outs.add(out)
        got.append(Recipe(out, ins))
    prices = raw.get("prices")
    if prices is not None and not isinstance(prices, str):
        raise KitError(f"{path}: `prices` is a path")
    return got, (ROOT / _relative(prices, f"{path} prices")) if prices else None


def digest(root: Path, recipe: Recipe, outs: set[str]) -> str:
    """sha256 over every measurement file of RECIPE's inputs: each file's path and content hash, in
    order; reports (any recipe's out) and dot-files (locks, figure caches) left out."""
    h = hashlib.sha256()
    for name in recipe.inputs:
        base = root / name
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(root).as_posix()
            if any(part.startswith(".") for part in p.relative_to(base).parts):
                continue
            if any(rel == o or rel.startswith(o + "/") for o in outs):
                continue
            if p.is_file() and not p.is_symlink():
                with p.open("rb") as f:
                    h.update(f"{rel}\0{hashlib.file_digest(f, 'sha256').hexdigest()}\n".encode())
    return h.hexdigest()


def tally(report_dir: Path) -> dict[str, str]:
    """Each claim's verdict in REPORT_DIR/report.json, keyed 'study claim-id' (with its split where one
    claim answers per split); {} where there is none."""
    got: dict[str, str] = {}
    claims = json_file(report_dir / "report.json").get("claims")
    for c in claims if isinstance(claims, list) else []:
        if not isinstance(c, dict):
            continue
        key = f"{c.get('study')} {c.get('id')}" + (f" [{c.get('split')}]" if c.get("split") else "")
        k, n = key, 1
        while k in got:
            n += 1
            k = f"{key} #{n}"
        got[k] = str(c.get("verdict"))
    return got


def render(root: Path = REFERENCES, out_root: Path | None = None, only: str | None = None, say: Any = print) -> dict:
    """Render every recipe of ROOT (ONLY: the one whose out starts with it) under OUT_ROOT (default
    ROOT); {out: {"inputs": digest, "claims": {...}, "counts": {...}}} or {"error": one line}."""
    from host.prices import load as load_prices
    from host.report import build_report

    todo, price_file = recipes(root)
    outs = {r.out for r in todo}
    if only:
        todo = [r for r in todo if r.out.startswith(only)]
        if not todo:
            raise KitError(f"no report in {root / RECIPES} whose out starts with {only!r}")
    prices = load_prices(path=price_file) if price_file else None
    out_root = out_root or root
    got: dict[str, dict] = {}
    for i, r in enumerate(todo, 1):
        dest = out_root / r.out
        say(f"[{i}/{len(todo)}] {r.out} <- {', '.join(r.inputs)}")
        entry: dict[str, Any] = {"inputs": digest(root, r, outs)}
        try:
            build_report([root / x for x in r.inputs], dest, prices=prices, jobs=1)
        except KitError as err:
            entry["error"] = str(err)
        else:
            claims = tally(dest)
            entry |= {"claims": claims, "counts": dict(sorted(Counter(claims.values()).items()))}
        got[r.out] = entry
    return got


def drop_traces(root: Path = REFERENCES) -> tuple[int, int]:
    """Replace every profiler trace (`<cell>/trace/*.json.gz`) of the recipes' inputs by its record
    (`bench.measure.profiling.dropped`: sha256, size, why): a trace is for a viewer, 1-5 MB each and
    half of the references' size; the cell's rows and profile.json keep what the report reads, and
    rerunning the cell makes the trace again. Returns (traces dropped, bytes freed)."""
    from bench.core.rows import atomic_write_text
    from bench.measure.profiling import DROPPED

    todo, _ = recipes(root)
    n = freed = 0
    for name in sorted({x for r in todo for x in r.inputs}):
        for path in sorted((root / name).glob("*/*/trace/*.json.gz")):
            if path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as f:
                sha = hashlib.file_digest(f, "sha256").hexdigest()
            size = path.stat().st_size
            why = "not kept in the committed reference (a viewer's file, remade by rerunning the cell)"
            record = {"sha256": sha, "bytes": size, "why": why}
            atomic_write_text(path.with_name(path.name + DROPPED), json.dumps(record) + "\n")
            path.unlink()
            n, freed = n + 1, freed + size
    return n, freed


def read_tallies(root: Path = REFERENCES) -> dict:
    path = root / TALLIES
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise KitError(f"{path}: not a tallies file ({err})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("reports"), dict):
        raise KitError(f"{path}: not a tallies file of format {FORMAT}")
    return raw["reports"]


def named_outs(root: Path = REFERENCES) -> set[str]:
    """The report outs ROOT/reports.toml names: a tally for any other out is stale."""
    return {r.out for r in recipes(root)[0]}


def write_tallies(got: dict, root: Path = REFERENCES) -> Path:
    """Record GOT's tallies beside the others; a tally whose report reports.toml no longer names
    is dropped (a removed reference leaves no verdicts behind)."""
    from bench.core.rows import atomic_write_text

    path = root / TALLIES
    named = named_outs(root)
    merged = {k: v for k, v in read_tallies(root).items() if k in named} | got
    atomic_write_text(
        path, json.dumps({"format": FORMAT, "reports": dict(sorted(merged.items()))}, indent=1, sort_keys=True) + "\n"
    )
    return path


def check(got: dict, recorded: dict, named: set[str] | None = None) -> list[str]:
    """One line per problem of GOT (render's result) against RECORDED (tallies.json's reports); with
    NAMED (reports.toml's outs), also each recorded tally whose report is named no more."""
    problems = (
        [
            f"{out}: in {TALLIES}, but {RECIPES} names no such report (rewrite it with `orchestrate.py reference-reports --write`)"
            for out in sorted(set(recorded) - named)
        ]
        if named is not None
        else []
    )
    for out, entry in got.items():
        if "error" in entry:
            problems.append(f"{out}: does not render: {entry['error']}")
            continue
        was = recorded.get(out)
        if not isinstance(was, dict):
            problems.append(f"{out}: not in {TALLIES} (run `orchestrate.py reference-reports --write`)")
            continue
        got_old = was.get("claims")
        old: dict = got_old if isinstance(got_old, dict) else {}
        moved = [
            f"{k}: {old.get(k, 'absent')} -> {entry['claims'].get(k, 'absent')}"
            for k in sorted(set(old) | set(entry["claims"]))
            if old.get(k) != entry["claims"].get(k)
        ]
        if was.get("inputs") != entry["inputs"]:
            problems.append(
                f"{out}: its reference changed since {TALLIES} was written ({len(moved)} verdict(s) moved): "
                "rewrite it with `orchestrate.py reference-reports --write` and commit both"
            )
        elif moved:
            shown = "; ".join(moved[:5]) + (f"; and {len(moved) - 5} more" if len(moved) > 5 else "")
            problems.append(f"{out}: {len(moved)} verdict(s) moved with the same measurements: {shown}")
    return problems


__all__ = ["Recipe", "check", "digest", "named_outs", "recipes", "render", "read_tallies", "tally", "write_tallies"]
