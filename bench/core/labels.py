"""Row and series labels that never collide.

A merged report holds several runs of one configuration (two hosts, a rerun, a smoke beside a
default run): a row or a legend entry named only by its configuration would print twice. These
helpers add, only where names collide, the first qualifier that tells the colliding entries
apart (the run label, then the environment, then the dataset, then the profile's length, ...),
and number what no qualifier separates, so two rows never print the same label. The environment
is named as a reader tells it (`native torch 2.14.1`, `container torch 2.10.0`: `env`), then by
its full label where two share runtime and torch (`environments`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence


def distinct(names: Sequence[str], *qualifiers: Sequence[object]) -> list[str]:
    """NAMES, each shared name made unique: for every group of equal names, the first qualifier
    (one value per name) whose values differ inside the group is appended as ' [value]'; names
    still equal after every qualifier get ' #1', ' #2', ... in order."""
    out = [str(n) for n in names]
    for q in qualifiers:
        if len(q) != len(out):
            raise ValueError("a qualifier needs one value per name")
        counts = Counter(out)
        groups: dict[str, list[int]] = defaultdict(list)
        for i, n in enumerate(out):
            if counts[n] > 1:
                groups[n].append(i)
        for idx in groups.values():
            if len({str(q[i]) for i in idx}) > 1:
                for i in idx:
                    out[i] = f"{out[i]} [{q[i]}]"
    counts, seen = Counter(out), Counter[str]()
    for i, n in enumerate(out):
        if counts[n] > 1:
            seen[n] += 1
            out[i] = f"{n} #{seen[n]}"
    return out


def qualify(rows: list[dict], keys: Sequence[str], target: str, *qualifiers: Sequence[object]) -> list[dict]:
    """Table ROWS whose KEYS (the columns a reader tells rows apart by) repeat get what
    `distinct` adds appended to their TARGET column, in place; returns ROWS."""
    base = ["\x1f".join(str(r.get(k)) for k in keys) for r in rows]
    for r, b, tagged in zip(rows, base, distinct(base, *qualifiers)):
        if tagged != b:
            r[target] = f"{r.get(target)}{tagged[len(b) :]}"
    return rows


def environments(cells: Sequence) -> tuple[list[str], list[str]]:
    """Two qualifiers for CELLS (ResultCells, or groups of them: the first stands for its group):
    the readable environment, then the full one (runtime, image or Python, every timing library)."""
    firsts = [c[0] if isinstance(c, list | tuple) else c for c in cells]
    return [c.env_name for c in firsts], [c.environment for c in firsts]


__all__ = ["distinct", "environments", "qualify"]
