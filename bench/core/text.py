"""Text from result dirs made safe to show (standard library only): one rule per sink.

Every string a report reads from a result dir (rows, cell.json, system.json, platforms.json,
a dir's name) comes from another machine and is untrusted. Wherever it is shown, a line break
or tab becomes a space and every other control character (ESC included), every bidi control
(which reorders what follows it on screen) and every character that takes no room (a zero-width
space or joiner, a word joiner, a byte order mark: two names that look alike) is shown as its
escape (`\x1b`, `\u202e`, `\u200b`): `visible`. Then each sink has its rule:

- the terminal: `term` (one line, nothing the terminal acts on);
- markdown (and the HTML rendered from it): `md`, `md_code`, `md_alt`, below (a `$` escaped too,
  so no renderer with math reads a formula);
- CSV (tidy.csv, table1.csv, rows.csv): `csv_cell`: a cell starting with `=`, `+`, `-` or `@`
  (after leading spaces) gets a `'` in front, so no spreadsheet reads it as a formula (OWASP,
  CSV injection);
- a plot's label: `plot_text` (no mathtext: every `$` escaped);
- the bundle's MANIFEST.sha256: `manifest_line`, as GNU sha256sum writes a name holding a
  backslash, a newline or a carriage return, so `sha256sum -c` reads every name back.

Two rules more for markdown:

- a reason (an error or skip reason, a platform's note) is ONE line: `one_line` keeps the
  last meaningful line of an exception text (a DataLoader worker's traceback, rich's boxed
  frames), without frame characters, at most 500 characters. The cell process writes its
  reasons through it, and the report shows every reason through it again;
- a value put into markdown goes through `md` (or `bench.core.tables.markdown` / `md_row`,
  which call it for every cell): no raw HTML (`<`, `>` and `&` become entities), no link
  (a `]` before `(` or `[` escaped) or code span (backticks escaped), no table break (`|` escaped, newlines and
  control characters become spaces). Markdown the kit writes itself is wrapped in `Md` and
  left as it is.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

REASON_MAX = 500  # characters of a one-line reason

# line breaks as str.splitlines knows them, plus every other C0/C1 control character
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# what `visible` shows as a space (line breaks and tabs, as str.splitlines knows them) ...
_SPACE = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]")
# ... and as an escape: every other control character, the bidi controls (ALM, LRM, RLM,
# LRE..RLO, LRI..PDI), which reorder what follows them, and the characters that take no room on
# screen (zero-width space, non-joiner and joiner, word joiner, the invisible operators U+2061..2064,
# the byte order mark U+FEFF), which make two names look alike or hide text in one
_HIDDEN = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_INVISIBLE = re.compile(rf"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f{_HIDDEN}]")
_FORMULA = ("=", "+", "-", "@")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# rich's boxes and panels (box drawing, block elements) and a traceback's carets and tildes
_FRAME = "\u2500-\u259f"
_FRAME_EDGES = re.compile(rf"^[\s{_FRAME}]+|[\s{_FRAME}]+$")
_NOT_MEANINGFUL = re.compile(rf"^[\s{_FRAME}^~\-=_*.·…]*$")
# what md() escapes: entities for HTML's characters, a backslash for markdown's (`$` too: a
# renderer with math, GitHub's, reads `$...$` as a formula); a `]` only where a link would follow
# (`](`, `][`), so the kit's own "[95% CI]" stays as it is
_MD_ESCAPE = re.compile(r"[&<>\\`|$]|\](?=[(\[])")
_MD_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_ALT_ESCAPE = re.compile(r"[&<>\\`|$\[\]]")


class Md(str):
    """Markdown the kit wrote itself (bold, a link to its own figure): `md` leaves it as it is.
    Never wrap a value read from a result dir in it."""


def one_line(text: Any, limit: int = REASON_MAX) -> str:
    """The last meaningful line of TEXT (an exception's text, a reason), as one line: ANSI
    colours and rich's frame characters removed, blank or decoration-only lines skipped,
    at most LIMIT characters (cut with an ellipsis)."""
    s = _ANSI.sub("", "" if text is None else str(text))
    lines = [_FRAME_EDGES.sub("", _CONTROL.sub(" ", ln)) for ln in s.splitlines()]
    meaningful = [ln for ln in lines if not _NOT_MEANINGFUL.match(ln)]
    line = re.sub(r"\s+", " ", meaningful[-1]).strip() if meaningful else ""
    return line if len(line) <= limit else line[: max(0, limit - 1)].rstrip() + "…"


def visible(value: Any) -> str:
    """VALUE as one line whose every character shows: line breaks and tabs as spaces, other
    control characters and bidi controls as escapes (`\x1b`, `\u202e`)."""
    s = _SPACE.sub(" ", "" if value is None else str(value))
    return _INVISIBLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)


def md(value: Any) -> str:
    """VALUE as inline markdown text that shows exactly VALUE: one line (`visible`), no HTML,
    no link, no code span, no table break. An `Md` is returned as it is."""
    if isinstance(value, Md):
        return str(value)
    s = visible(value)
    return _MD_ESCAPE.sub(lambda m: _MD_ENTITY.get(m.group()) or "\\" + m.group(), s)


def md_alt(value: Any) -> str:
    """VALUE as an image's alt text: `md`, and every bracket escaped (the alt text ends at
    the first unescaped `]`)."""
    if isinstance(value, Md):
        return str(value)
    s = visible(value)
    return _MD_ALT_ESCAPE.sub(lambda m: _MD_ENTITY.get(m.group()) or "\\" + m.group(), s)


def md_reason(value: Any) -> str:
    """A reason in markdown: its one line (`one_line`), escaped (`md`)."""
    return md(one_line(value))


def md_code(value: Any) -> str:
    """VALUE as a code span when it can be one as it is (no backtick, HTML or table
    character, one line), else as escaped text (`md`): what a path or a command shows as."""
    s = "" if value is None else str(value)
    if s and not _CONTROL.search(s) and not _INVISIBLE.search(s) and not any(ch in s for ch in "`<>&|\\"):
        return f"`{s}`"
    return md(s)


def safe_name(value: Any) -> str:
    """VALUE (a cell dir's name) as a file-name part the report may write and link to: as it
    is when it holds only letters, digits, `.`, `_` and `-`; else those, plus a short hash
    of VALUE (two names never share a file)."""
    s = "" if value is None else str(value)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", s).lstrip(".")
    if safe == s and s:
        return s
    return f"{safe[:60]}-{hashlib.sha256(s.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def term(value: Any) -> str:
    """VALUE for a terminal: one line (`visible`), ESC and every other control or bidi
    character shown as an escape, so an untrusted string cannot clear the screen, set the
    window title, move the cursor, recolour or reorder what follows."""
    return visible(value)


def plot_text(value: Any) -> str:
    """VALUE for a matplotlib label: one line (`visible`), every `$` escaped (shown as `$`), so
    an untrusted string is never parsed as mathtext (a bad formula fails the whole figure)."""
    return visible(value).replace("$", r"\$")


def csv_cell(value: Any) -> Any:
    """VALUE as a CSV cell: a number, a bool or None as it is; a string `visible`, with a `'`
    in front when it starts (after spaces) with `=`, `+`, `-` or `@`, so a spreadsheet shows it
    as text and never runs it as a formula (OWASP: CSV injection)."""
    if not isinstance(value, str):
        return value
    s = visible(value)
    return "'" + s if s.lstrip().startswith(_FORMULA) else s


def csv_text(rows: list[dict], fieldnames: list[str]) -> str:
    """ROWS as CSV text with a header, every cell (the header's too) through `csv_cell`."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([csv_cell(k) for k in fieldnames])
    for r in rows:
        w.writerow([csv_cell(r.get(k)) for k in fieldnames])
    return buf.getvalue()


def manifest_line(digest: str, name: str) -> str:
    """One line of a sha256sum manifest for file NAME, as GNU sha256sum writes it: a name
    holding a backslash, a newline or a carriage return is escaped and the line starts with a
    backslash, so `sha256sum -c` reads every name back."""
    if any(ch in name for ch in "\\\n\r"):
        esc = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {esc}\n"
    return f"{digest}  {name}\n"


def sig(v: Any, digits: int = 3) -> str:
    """V in DIGITS significant digits, never in scientific notation (`{:.3g}` prints 999.7 as '1e+03'
    and 1.2e-5 as '1.2e-05'): 1657.3 -> '1,660', 0.13513 -> '0.135', 59.21 -> '59.2'. The one
    formatter of a ratio or figure in a line of text (tables.fmt keeps 4 decimals for a table; a
    summary line says no more than it knows)."""
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


def short(v: Any, digits: int = 3) -> str:
    """`sig` without trailing zeros, as `{:.3g}` writes but never in scientific notation: 3.0 -> '3',
    1000 -> '1,000', 0.0000123 -> '0.0000123', 2.50 -> '2.5'."""
    text = sig(v, digits)
    if "." in text and text[-1:].isdigit():
        text = text.rstrip("0").rstrip(".")
    return text
