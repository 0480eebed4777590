"""Formatting shared by every study's report section (standard library only).

Every markdown table goes through `markdown` (rows of dicts) or `md_row` (one row of
values): each cell is escaped there (`bench.core.text.md`: no HTML, no link, no table break,
one line), so a value read from a result dir cannot inject markup whatever study code puts
it in. A cell the kit marks up itself is wrapped in `bench.core.text.Md`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.core.text import Md, md


def fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v == 0:
        return "0"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:.2f}"
    return "" if v is None else str(v)


def sig(v: Any, digits: int = 3) -> str:
    """V in DIGITS significant digits, for a terminal line: 1657.3 -> '1,660', 0.13513 -> '0.135',
    59.21 -> '59.2' (fmt keeps 4 decimals for a table; a summary line says no more than it knows)."""
    import math

    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return str(v)
    v = float(f"{v:.{digits}g}")  # rounded first: 99.96 is 100, with 100's magnitude
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    if mag >= digits - 1:
        return f"{round(v, digits - 1 - mag):,.0f}"
    return f"{v:.{digits - 1 - mag}f}"


def cell(v: Any) -> str:
    """One table cell: V formatted (`fmt`) and escaped (`md`); an `Md` as it is."""
    return str(v) if isinstance(v, Md) else md(fmt(v))


def md_row(values: Iterable[Any]) -> str:
    """One markdown table row, every value a `cell` (escaped)."""
    return "| " + " | ".join(cell(v) for v in values) + " |"


def md_sep(n: int) -> str:
    """The header separator of an N-column table."""
    return "|" + "|".join("---" for _ in range(n)) + "|"


def markdown(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A markdown table of ROWS; COLUMNS are (key, header) pairs. Every cell is escaped."""
    head = md_row(h for _, h in columns)
    body = [md_row(r.get(k) for k, _ in columns) for r in rows]
    return "\n".join([head, md_sep(len(columns)), *body])


def text_table(rows: list[dict], columns: list[tuple[str, str]]) -> list[str]:
    """Aligned plain-text lines (for terminals and logs)."""
    cells = [[h for _, h in columns]] + [[fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
