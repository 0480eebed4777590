"""Reading and formatting shared by every study's report section.

Every number a report section, a readout or a plot reads from a result dir (a row, cell.json's
params, system.json) goes through `num` (a key of an object; `real` for a value in hand) or
`nums` (one key over rows), and every ratio it forms through `quotient` (`finite` for a ratio with
its interval): a value that is not a real, finite number (text, a bool, null, NaN, a list) is
None there, "not measured", never a TypeError or ValueError further on, and a ratio whose divisor
is 0 or whose result is not finite is None too. The schema (bench.core.schema) bounds what a
number may be; these say that a value is one at all, since a key without a unit may hold text
that the rows reader keeps.

Every markdown table goes through `markdown` (rows of dicts) or `md_row` (one row of
values): each cell is escaped there (`bench.core.text.md`: no HTML, no link, no table break,
one line), so a value read from a result dir cannot inject markup whatever study code puts
it in. A cell the kit marks up itself is wrapped in `bench.core.text.Md`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from bench.core.study import number
from bench.core.text import Md, md


def real(v: Any) -> float | None:
    """V as it is (an int stays an int) where it is a real, finite number (`bench.core.study.number`),
    else None: text, a bool, null, NaN, infinity, an integer past a float's reach."""
    try:
        return v if number(v) is not None else None
    except OverflowError:  # an integer with more digits than a float holds
        return None


def num(obj: Any, key: str) -> float | None:
    """The number at KEY of OBJ (a row, a side file's object), by `real`; None where OBJ is no
    object: the one way a report reads a number from a result dir."""
    return real(obj.get(key)) if isinstance(obj, dict) else None


def nums(rows: Iterable[Any], key: str) -> list[float]:
    """The numbers at KEY over ROWS (`num`), those that are none left out."""
    return [v for r in rows if (v := num(r, key)) is not None]


def finite(s: Any) -> Any:
    """S (a bench.core.stats.Summary, or None) where its median, interval and spread are finite,
    else None: a ratio whose result is not finite (a divisor near 0) is not measured, never inf in
    a table or report.json."""
    if s is None:
        return None
    vals = (s.median, s.lo, s.hi, s.q1, s.q3, s.min, s.max)
    return s if all(v is None or math.isfinite(v) for v in vals) else None


def quotient(a: Any, b: Any) -> float | None:
    """A / B where both are numbers (`number`), B is not 0 and the result is finite, else None:
    a ratio that cannot be formed is "not measured", never inf, NaN or a ZeroDivisionError."""
    try:
        x, y = number(a), number(b)
        return None if x is None or not y else number(x / y)
    except OverflowError:
        return None


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
