"""`orchestrate.py report DIR...`: merge result dirs from any hosts into one REPORT.md.

It opens with the headline (host/headline.py): one row per comparison a seed made, the
ratio with its interval beside the seed's figure, then what to trust about it. Then it
loops over the study registry: each study renders its own section from its
own cells (tables, figures), and every section lists the cells that did not run, with
the reason, and the platforms a host skipped. A study's cells never land in another's
section; cells of a study this checkout does not know get a plain listing.

Beside REPORT.md it writes the tidy table (`host/tidy.py`): every row of every cell, flat
columns, as tidy.csv and tidy.parquet, with a section in REPORT.md on how to load it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from bench.core.registry import studies
from bench.core.resultset import ResultCell, collect
from bench.core.rows import atomic_write_text, write_json
from bench.core.tables import md_row
from bench.core.text import md as md_text
from bench.core.text import md_code, one_line


def _not_run(cells: list[ResultCell], notes: list[dict], study: str) -> list[str]:
    bad = [c for c in cells if c.status != "ok"]
    plat = [n for n in notes if n.get("status") != "ran" and (not n.get("studies") or study in _names(n.get("studies")))]
    if not bad and not plat:
        return []
    md = ["### Not run", "", "| what | status | reason |", "|---|---|---|"]
    md += [
        md_row([f"platform {n['platform']} ({n.get('source', '')})", n.get("status", "skipped"), one_line(n.get("reason", ""))])
        for n in plat
    ]
    for c in bad:
        r = c.first
        what = f"{r.get('backend')} {r.get('variant', '')} ({r.get('cell')})"
        md.append(md_row([what, c.status, one_line(c.reason, 300)]))
    return md + [""]


def _names(v: object) -> list[str]:
    """platforms.json's `studies` as names (anything else in that field names no study)."""
    return [str(x) for x in v] if isinstance(v, list) else []


def build_report(dirs: list[Path], out: Path = Path("results/report")) -> dict:
    cells, notes, problems = collect(dirs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    registry = studies()
    by_study: dict[str, list[ResultCell]] = {}
    for c in cells:
        by_study.setdefault(c.study, []).append(c)
    md = [
        "# cnn-bench report",
        "",
        f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} from: " + ", ".join(md_code(d) for d in dirs),
        "",
    ]
    unclean = sorted({md_text(c.system.get("kit_git_sha")) for c in cells if c.unclean_source})
    if unclean:
        md += [
            f"> **Unclean source tree**: {sum(c.unclean_source for c in cells)} cell(s) ran from a checkout with "
            f"uncommitted changes ({', '.join(unclean)}); their numbers may not be reproducible from any commit.",
            "",
        ]
    from host.headline import build as headline

    head, head_summary = headline(registry, cells, notes)
    md += head
    summary: dict = {"studies": {}, "report": str(out / "REPORT.md"), "headline": head_summary}
    for name, study in registry.items():
        mine = by_study.pop(name, [])
        if not mine and not any(n.get("status") != "ran" for n in notes):
            continue
        md += [f"## {study.title or name}", ""]
        ok = [c for c in mine if c.status == "ok"]
        md += study.report_section(ok, out) if ok else ["_no finished cells_", ""]
        md += _not_run(mine, notes, name)
        summary["studies"][name] = {
            "cells": len(mine),
            "ok": len(ok),
            "not_run": [c.first.get("cell") for c in mine if c.status != "ok"],
        }
    for name, mine in sorted(by_study.items()):  # rows of a study this checkout does not know
        md += [
            f"## {md_text(name)} (not a study of this checkout)",
            "",
            f"{len(mine)} cell(s) under " + ", ".join(sorted({md_code(c.dir.parent) for c in mine})),
            "",
        ]
        summary["studies"][name] = {"cells": len(mine), "unknown": True}
    if problems:
        md += [
            "## Lines that could not be read",
            "",
            "These cells are listed as `corrupt` above and left out of every table:",
            "",
        ]
        md += [f"- {md_code(one_line(p))}" for p in problems[:50]] + (
            [f"- ... and {len(problems) - 50} more"] if len(problems) > 50 else []
        )
        md.append("")
    from host.tidy import report_lines, write_tidy

    tidy = write_tidy(cells, out)
    md += report_lines(tidy)
    from host.history import report_lines as history_lines

    md += history_lines(out)
    summary["tidy"] = {k: v for k, v in tidy.items() if k != "note"}
    atomic_write_text(out / "REPORT.md", "\n".join(md))
    atomic_write_text(out / "REPORT.html", render_html("\n".join(md), out))
    summary["html"] = str(out / "REPORT.html")
    write_json(out / "report.json", summary)
    summary["notes"] = notes
    summary["problems"] = problems
    return summary


_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 12px; margin: 1em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; display: block; margin: 1em 0; }
blockquote { border-left: 4px solid #d33; margin: 1em 0; padding: 0.2em 1em; background: #fff5f5; }
code, pre { background: #f6f6f6; font-size: 12px; } pre { padding: 0.8em; overflow-x: auto; }
nav.toc { font-size: 13px; border: 1px solid #ddd; padding: 0.5em 1em; margin: 1em 0; }
nav.toc ul { margin: 0.3em 0; padding-left: 1.2em; } nav.toc li.sub { margin-left: 1.5em; font-size: 12px; }
"""


# what REPORT.html allows: its own inline style and images inlined as data: URIs (or files
# beside it); no script, no frame, no object, no form, no other origin
CSP = "default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
# the only HTML the kit's own markdown holds (mnist-cnn's collapsed per-cell table); the
# summary text is the kit's, never a value from a result dir
_DETAILS = re.compile(r"<details><summary>([^<>&\"'`]*)</summary>")


def render_html(md: str, out: Path) -> str:
    """REPORT.md as one self-contained HTML page: the PNGs it names inlined as data URIs, so
    the file can be mailed or opened anywhere (markdown-it-py, CommonMark + tables).

    Raw HTML is off: any markup in the markdown is shown as text, never run, and links keep
    markdown-it's check (no javascript:, vbscript:, file: or non-image data: URLs); the page's
    Content-Security-Policy forbids scripts besides. The kit's own `<details>` lines (a whole
    line each, in the allowed form) become the element here, outside the markdown."""
    import base64
    import html

    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    parts: list[str] = []
    chunk: list[str] = []
    depth = 0

    def flush() -> None:
        if chunk:
            parts.append(parser.render("\n".join(chunk)))
            chunk.clear()

    for line in md.split("\n"):
        m = _DETAILS.fullmatch(line)
        if m:
            flush()
            parts.append(f"<details><summary>{html.escape(m.group(1))}</summary>\n")
            depth += 1
        elif line == "</details>" and depth:
            flush()
            parts.append("</details>\n")
            depth -= 1
        else:
            chunk.append(line)
    flush()
    body = "".join(parts) + "</details>\n" * depth

    inlined: set[str] = set()

    def inline(m: re.Match) -> str:
        name = html.unescape(m.group(1))
        path = out / name
        if "/" in name or not path.is_file() or path.is_symlink() or name in inlined:
            return m.group(0)  # a second use of one figure links the file beside the page
        inlined.add(name)
        return f'src="data:image/png;base64,{base64.b64encode(_small_png(path)).decode()}"'

    body = re.sub(r'src="([^"]+\.png)"', inline, body)
    body, toc = _anchors(body)
    title = "cnn-bench report"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{title}</title><style>{_CSS}</style></head>\n<body>\n{toc}{body}</body></html>\n"
    )


def _small_png(path: Path) -> bytes:
    """PATH as the page inlines it: quantized to 128 colours (the kit's plots are flat colours
    and lines; the full file stays beside the page), or as it is where that fails or is not
    smaller. Keeps the merged page of every reference under 2 MB."""
    import io

    raw = path.read_bytes()
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            q = im.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
            buf = io.BytesIO()
            q.save(buf, "PNG", optimize=True)
    except Exception:  # noqa: BLE001 - an image Pillow cannot read is inlined as it is
        return raw
    small = buf.getvalue()
    return small if len(small) < len(raw) else raw


def _anchors(body: str) -> tuple[str, str]:
    """(BODY with an id on every h2/h3, a table of contents linking them). The heading text is
    markdown-it's escaped output; the ids are slugs of it (letters, digits, '-'), unique."""
    seen: dict[str, int] = {}
    entries: list[tuple[int, str, str]] = []

    def add_id(m: re.Match) -> str:
        level, inner = int(m.group(1)), m.group(2)
        text = re.sub(r"<[^>]+>", "", inner)
        slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "section"
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        if n:
            slug = f"{slug}-{n + 1}"
        entries.append((level, slug, text))
        return f'<h{level} id="{slug}">{inner}</h{level}>'

    body = re.sub(r"<h([23])>(.*?)</h\1>", add_id, body)
    if not entries:
        return body, ""
    items = []
    for level, slug, text in entries:
        cls = ' class="sub"' if level == 3 else ""
        items.append(f'<li{cls}><a href="#{slug}">{text}</a></li>')
    toc = '<nav class="toc"><strong>Contents</strong><ul>' + "".join(items) + "</ul></nav>\n"
    return body, toc
