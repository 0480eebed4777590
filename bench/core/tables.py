"""Formatting shared by every study's report section (standard library only)."""

from __future__ import annotations

from typing import Any


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


def markdown(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A markdown table of ROWS; COLUMNS are (key, header) pairs."""
    head = "| " + " | ".join(h for _, h in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt(r.get(k)).replace("|", "/") for k, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def text_table(rows: list[dict], columns: list[tuple[str, str]]) -> list[str]:
    """Aligned plain-text lines (for terminals and logs)."""
    cells = [[h for _, h in columns]] + [[fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
