"""`orchestrate.py report DIR...`: merge result dirs from any hosts into one REPORT.md.

It opens with the headline (host/answers.py): one row per comparison a seed made and host
(or pair of hosts) that ran it, the ratio with its interval and verdict beside the seed's
figure, then what to trust about it. Every claim is judged once (bench.core.answers), and the
headline, each study's table of its seed's claims and report.json's `claims` are rendered
from that one list. Then it
loops over the study registry: each study renders its own section from its
own cells (tables, figures), and every section lists the cells that did not run, with
the reason, and the platforms a host skipped. A study's cells never land in another's
section; cells of a study this checkout does not know get a plain listing.

Beside REPORT.md it writes the tidy table (`host/tidy.py`): every row of every cell, flat
columns, as tidy.csv and tidy.parquet, with a section in REPORT.md on how to load it.

--out is the user's dir, and the report owns only the files it wrote there (host/outdir.py):
they are named in `.cnn-bench-report.json`, and the next report replaces or removes only those;
a user's notes, or anything else, stay byte for byte. Every file is written into a stage dir
inside --out, then fsync'ed and renamed into place: a full or read-only disk, or a file-size
limit, is one line naming the path and leaves --out as it was, never a report without its
REPORT.md. A --out that is a symlink or a file, that is, holds or lies inside a cell dir of the
result dirs read, or where a file the report writes is one the kit did not write (a user's own
REPORT.md), is refused in one line before any work.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core.errors import KitError
from bench.core.registry import studies
from bench.core.resultset import ResultCell, ResultSet, collect_set
from bench.core.rows import atomic_write_text, write_json
from bench.core.tables import md_row
from bench.core.text import md as md_text
from bench.core.text import md_code, one_line
from host.figures import batch_for, small_png


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


def _platform(registry: dict, c: ResultCell) -> str:
    study = registry.get(c.study)
    spec = study.backends.get(str(c.first.get("backend"))) if study else None
    return spec.platform if spec else "cpu"


def _names(v: object) -> list[str]:
    """platforms.json's `studies` as names (anything else in that field names no study)."""
    return [str(x) for x in v] if isinstance(v, list) else []


REFERENCES = Path(__file__).resolve().parent.parent / "results" / "reference"
REPORT_FILES = ("REPORT.md", "report.json", "REPORT.html", "tidy.csv")  # every report writes these


def context_cells(dirs: list[Path], mine: list[ResultCell]) -> list[ResultCell]:
    """The cells of DIRS (committed references, another host's results) to answer beside MINE:
    marked, they join only a pair whose other side is one of MINE (bench.core.answers); a cell
    that is one of MINE (the same dir, or the same run's cell) is not read twice."""
    from bench.core.resultset import holding_results

    try:
        keep, _ = holding_results(dirs)
        cells = collect_set(keep).cells
    except KitError:
        return []
    seen = {c.dir.resolve() for c in mine} | {(c.first.get("run_id"), c.dir.name) for c in mine}
    out = []
    for c in cells:
        if c.dir.resolve() in seen or (c.first.get("run_id"), c.dir.name) in seen:
            continue
        c.context = True  # type: ignore[attr-defined]
        out.append(c)
    return out


def out_target(out: Path, inputs: list[Path], label: str = "report --out") -> Any:
    """The report's --out OUT, beside the result dirs INPUTS it reads (host.outdir.Target); LABEL
    names the option in its lines."""
    from host.outdir import Target

    return Target(Path(out), "report", inputs, REPORT_FILES, label)


def check_out(out: Path, inputs: list[Path] | None = None, label: str = "report --out") -> None:
    """UsageError (one line) when OUT cannot take a report of INPUTS: a symlink, a file, a dir that
    is, holds or lies inside their results, or one where a file the report writes is not the kit's."""
    out_target(out, inputs or [], label).check()


def build_report(
    dirs: list[Path],
    out: Path = Path("results/report"),
    context: list[Path] | None = None,
    prices: Any = None,
    say: Any = None,
    jobs: int | None = None,
    figure_cache: bool | Path | None = True,
) -> dict:
    """Render the report of DIRS into OUT (see the module docstring); KitError (one line) when
    it cannot be written, with OUT left as it was. CONTEXT: result dirs whose cells answer a claim
    only against these dirs' own cells (the main job sets its host's CPU against the committed
    references' GPUs); they add no section, table or plot. PRICES (host.prices.Prices, or None:
    no cost column) price the GPU-over-CPU answers. SAY (host.progress.stages) hears each stage.
    JOBS: processes drawing the figures (default the usable cores; 1 draws them here);
    FIGURE_CACHE: True for the cache beside OUT, a folder, or None (host/figures.py). The
    summary's `timings` gives each stage's seconds."""
    from host.outdir import cannot_write

    say = say or (lambda what, done=None, total=None: None)
    out = Path(out)
    target = out_target(out, [*map(Path, dirs), *map(Path, context or [])])
    target.check()
    clock = _Clock()
    say(f"reading {len(dirs)} result dir{'s' if len(dirs) != 1 else ''}")
    rs = collect_set(dirs)
    clock.lap("read")
    batch = batch_for(out, jobs, figure_cache)
    done = False
    try:
        with target.staging() as stage:
            summary = _render(rs, dirs, stage, out, context or [], prices, batch, clock, say)
            target.commit()
            summary["replaced"] = "REPORT.md" in target.replaced  # the CLI says so: an earlier report is gone
        done = True
    except OSError as err:
        raise KitError(cannot_write("report", out, err, target.touched)) from None
    finally:
        batch.close()
        if not done:
            batch.cache.discard()  # a cache this failed report made is not left behind
    clock.lap("html")
    summary["timings"] = clock.laps
    summary["figures"] = {**batch.counts, "draw_cpu_s": round(batch.draw_cpu_s, 3), "worker_cpu_s": round(batch.worker_cpu_s, 3)}
    return summary


class _Clock:
    """Seconds per stage of a report: read (the result dirs), stats (judging, tables, the tidy
    table), plots (waiting for the figures, and drawing any drawn here), html (the page, the files)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self.t = time.perf_counter()

    def lap(self, stage: str, less: float = 0.0) -> None:
        now = time.perf_counter()
        self.laps[stage] = self.laps.get(stage, 0.0) + now - self.t - less
        self.t = now


def _render(
    rs: ResultSet, dirs: list[Path], stage: Path, out: Path, context: list[Path], prices: Any, batch: Any, clock: _Clock, say: Any
) -> dict:
    """Write every file of the report into STAGE; the summary names them under OUT. Every figure
    a section asks for goes to BATCH (host/figures.py)."""
    from bench.core.figures import collecting

    with collecting(batch):
        md, summary = _sections(rs, dirs, stage, out, context, prices, say)
    clock.lap("stats", less=batch.draw_s)
    drawn_here = batch.draw_s
    say("drawing the figures")
    small = batch.finish()
    clock.lap("plots", less=-drawn_here)
    say("REPORT.md and the one-page REPORT.html")
    atomic_write_text(stage / "REPORT.md", "\n".join(md))
    atomic_write_text(stage / "REPORT.html", render_html("\n".join(md), stage, small))
    summary["html"] = str(out / "REPORT.html")
    write_json(stage / "report.json", summary)
    summary["notes"] = rs.notes
    summary["problems"] = rs.problems
    return summary


def _sections(
    rs: ResultSet, dirs: list[Path], stage: Path, out: Path, context: list[Path], prices: Any, say: Any
) -> tuple[list[str], dict]:
    """REPORT.md's lines and report.json's summary; the tables and figures into STAGE. The studies'
    own sections are made first, so that their figures are drawn while the claims are judged."""
    registry = studies()
    md = _preamble(dirs, rs.cells)
    by_study: dict[str, list[ResultCell]] = {}
    for c in rs.cells:
        by_study.setdefault(c.study, []).append(c)
    shown: list[tuple[str, Any, list[ResultCell]]] = []
    own: dict[str, list[str]] = {}
    for i, (name, study) in enumerate(registry.items()):
        mine = by_study.pop(name, [])
        if not mine and not any(n.get("status") != "ran" for n in rs.notes):
            continue
        say(f"{name}: tables and plots", i + 1, len(registry))
        ok = [c for c in mine if c.status == "ok"]
        own[name] = study.report_section(ok, stage) if ok else ["_no finished cells_", ""]
        shown.append((name, study, mine))
    answers, judged, worths, prices = _answers(rs, registry, context, prices, say)
    md += answers
    from host import answers as ans
    from host import worth as hw

    here = bool(context)  # with context, the report's own cells are this machine's (host/answers.py)
    summary: dict = {
        "studies": {},
        "report": str(out / "REPORT.md"),
        "claims": ans.as_json(judged, here),
        "worth": hw.as_json(worths, here),
        "prices": prices.describe() if prices is not None else None,
        "skipped": rs.skipped,
    }
    for name, study, mine in shown:
        md += _study_section(name, study, own[name], mine, rs.notes, judged, worths, stage, prices, here)
        summary["studies"][name] = {
            "cells": len(mine),
            "ok": sum(c.status == "ok" for c in mine),
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
    md += _problem_lines(rs.problems)
    tidy_md, summary["tidy"] = _tidy(rs.cells, stage, out, say)
    return md + tidy_md, summary


def _preamble(dirs: list[Path], cells: list[ResultCell]) -> list[str]:
    """The title, when and from which dirs, and a warning where a cell ran from an unclean tree."""
    when = datetime.now(UTC).isoformat(timespec="seconds")
    if len(dirs) <= 3:
        md = ["# cnn-bench report", "", f"Generated {when} from: " + ", ".join(md_code(d) for d in dirs), ""]
    else:  # the headline belongs on the first screen, not a list of folders: the list folds away
        md = [
            "# cnn-bench report",
            "",
            f"<details><summary>Generated {when} from {len(dirs)} result dirs</summary>",
            "",
            ", ".join(md_code(d) for d in dirs),
            "",
            "</details>",
            "",
        ]
    unclean = [c for c in cells if c.unclean_source]
    if unclean:
        where = sorted({str(c.dir.parent.parent) for c in unclean})
        shas = sorted({md_text(c.system.get("kit_git_sha")) for c in unclean})
        md += [  # one line here; the runs are named in What to trust (‡)
            f"> **Unclean source tree**: {len(unclean)} cell(s) under {', '.join(md_code(w) for w in where[:3])}"
            f"{f' and {len(where) - 3} more' if len(where) > 3 else ''} ran from a checkout with uncommitted changes "
            f"({', '.join(shas[:2])}{' ...' if len(shas) > 2 else ''}): What to trust names them (‡).",
            "",
        ]
    return md


def _answers(rs: ResultSet, registry: dict, context: list[Path], prices: Any, say: Any) -> tuple[list[str], list, list, Any]:
    """Every claim judged once (with CONTEXT's cells beside) and every GPU-over-CPU answer's worth:
    (the headline, its worth table, what to trust and the tallies; the judged answers; the worths;
    PRICES narrowed to the devices these cells ran on, PRICES itself untouched)."""
    from bench.core.answers import judge_all
    from bench.core.worth import cell_device_name, worth_all
    from host import answers as ans
    from host import worth as hw

    cells = rs.cells
    say(f"judging the seeds' claims on {len(cells)} cells" + (f" and {len(context)} reference dirs" if context else ""))
    beside = context_cells(context, cells) if context else []
    judged = judge_all(registry, cells + beside)
    if prices is not None:
        prices = prices.for_devices({cell_device_name(c, _platform(registry, c)) for c in cells + beside})
    worths = worth_all(registry, judged, prices)
    head = [w for w in worths if w.answer.claim.headline]
    # with context (the main job's references), the report's own cells are "this machine": named so,
    # its rows first, and the headline says what it answers itself and why not the rest
    here = bool(context)
    lead = ans.this_machine(judged, registry, cells, beside) if here else []
    md = ans.headline(judged, here, lead)
    md += hw.section(
        head, "### Is the GPU worth it? Time, energy and cost beside every GPU-over-CPU answer", None, "", prices, here
    )
    md += hw.prices_lines(prices) if head else []
    if rs.skipped:
        md += ["> " + "; ".join(md_text(line) for line in rs.skipped), ""]
    md += ans.trust(judged, cells, rs.notes, here) + ans.tallies(judged, registry)
    return md, judged, worths, prices


def _study_section(
    name: str,
    study: Any,
    own: list[str],
    mine: list[ResultCell],
    notes: list,
    judged: list,
    worths: list,
    stage: Path,
    prices: Any,
    here: bool = False,
) -> list[str]:
    """One study's part: its own section OWN (made by study.report_section, its tables and figures
    in STAGE), its seed's claims, its worth table and the cells that did not run (HERE: the report
    has context, its own cells named this machine)."""
    from host import answers as ans
    from host import worth as hw

    md = [f"## {study.title or name}", "", *own]
    md += ans.study_section(name, judged, here)
    md += hw.section([w for w in worths if w.answer.study == name], "### Is the GPU worth it?", stage, name, prices, here)
    return md + _not_run(mine, notes, name)


def _problem_lines(problems: list[str]) -> list[str]:
    """The lines no cell could be read from (the first 50)."""
    if not problems:
        return []
    md = [
        "## Lines that could not be read",
        "",
        "These cells are listed as `corrupt` above and left out of every table:",
        "",
    ]
    md += [f"- {md_code(one_line(p))}" for p in problems[:50]] + (
        [f"- ... and {len(problems) - 50} more"] if len(problems) > 50 else []
    )
    return md + [""]


def _tidy(cells: list[ResultCell], stage: Path, out: Path, say: Any) -> tuple[list[str], dict]:
    """The tidy table written into STAGE: (its section and the run history's, report.json's `tidy`)."""
    from host.history import report_lines as history_lines
    from host.tidy import report_lines, write_tidy

    say("the tidy table (tidy.csv, tidy.parquet)")
    tidy = write_tidy(cells, stage)
    md = report_lines(tidy) + history_lines(out)
    return md, {k: (str(out / Path(v).name) if k in ("csv", "parquet") and v else v) for k, v in tidy.items() if k != "note"}


_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 12px; margin: 1em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; display: block; margin: 1em 0; }
blockquote { border-left: 4px solid #d33; margin: 1em 0; padding: 0.2em 1em; background: #fff5f5; }
code, pre { background: #f6f6f6; font-size: 12px; } pre { padding: 0.8em; overflow-x: auto; }
nav.toc { font-size: 13px; border: 1px solid #ddd; padding: 0.5em 1em; margin: 1em 0; }
nav.toc ul { margin: 0.3em 0; padding-left: 1.2em; columns: 3; column-gap: 2em; }
nav.toc li { break-inside: avoid; } nav.toc li.sub { margin-left: 1em; font-size: 12px; }
nav.toc li.sub2 { margin-left: 2em; font-size: 11px; }
.headline table, .claims table { display: table; width: 100%; table-layout: auto; }
.headline td, .claims td { white-space: normal; text-align: left; vertical-align: top; }
.headline th, .claims th { text-align: left; }
.headline td:nth-child(3), .headline td:nth-child(4), .headline td:nth-child(5), .claims td:nth-child(4) { white-space: nowrap; }
.headline td:nth-child(6) { font-size: 11px; color: #444; }
.headline td:nth-child(4), .claims td:nth-child(4) { font-weight: 600; }
.worth table { display: table; width: 100%; table-layout: auto; }
.worth td { white-space: normal; vertical-align: top; } .worth td:last-child { font-size: 11px; color: #444; }
"""


# what REPORT.html allows: its own inline style and images inlined as data: URIs (or files
# beside it); no script, no frame, no object, no form, no other origin
CSP = "default-src 'none'; img-src data: 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
# the only HTML the kit's own markdown holds (mnist-cnn's collapsed per-cell table); the
# summary text is the kit's, never a value from a result dir
_DETAILS = re.compile(r"<details><summary>([^<>&\"'`]*)</summary>")
# the answers' tables (host/answers.py), laid out to the page's width: a line of exactly this form
_BLOCKS = ('<div class="headline">', '<div class="claims">', '<div class="worth">')


def render_html(md: str, out: Path, small: dict[str, bytes] | None = None) -> str:
    """REPORT.md as one self-contained HTML page: the PNGs it names inlined as data URIs, so
    the file can be mailed or opened anywhere (markdown-it-py, CommonMark + tables).

    Raw HTML is off: any markup in the markdown is shown as text, never run, and links keep
    markdown-it's check (no javascript:, vbscript:, file: or non-image data: URLs); the page's
    Content-Security-Policy forbids scripts besides. The kit's own `<details>` lines (a whole
    line each, in the allowed form) become the element here, outside the markdown. SMALL: the
    inlined form of figures made beforehand ({file name: PNG bytes}, host/figures.py)."""
    body = _inline_figures(_html_body(md), out, small or {})
    body, toc = _anchors(body)
    title = "cnn-bench report"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{title}</title><style>{_CSS}</style></head>\n<body>\n{toc}{body}</body></html>\n"
    )


def _html_body(md: str) -> str:
    """MD rendered with raw HTML off, the kit's own `<details>` and answer-table `<div>` lines
    opened and closed around the rendered chunks (any left open closed at the end)."""
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

    divs = 0
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
        elif line in _BLOCKS:
            flush()
            parts.append(line + "\n")
            divs += 1
        elif line == "</div>" and divs:
            flush()
            parts.append("</div>\n")
            divs -= 1
        else:
            chunk.append(line)
    flush()
    return "".join(parts) + "</div>\n" * divs + "</details>\n" * depth


# The most bytes REPORT.html's body holds with its figures inlined: past it a figure stays a link to
# its file beside the page, in the page's order (the first ones, under the headline, are inlined).
# The merged references' page grew by ~0.1-0.3 MB a reference folder (4.59 MB with the 30th,
# H200-quant-dynamic-mbv2, 3.1 MB of it figures); a page a browser opens at once stays under ~4 MB.
PAGE_INLINE_MAX = 4_000_000


def _inline_figures(body: str, out: Path, small: dict[str, bytes], most: int = PAGE_INLINE_MAX) -> str:
    """BODY with each PNG beside it under OUT inlined as a data URI at its first use (SMALL's
    form where given), while the body stays within MOST bytes; a second use, a path with a folder,
    a link, or a figure past MOST stays a link (a note at the end counts those)."""
    import base64
    import html

    inlined: set[str] = set()
    room = most - len(body.encode())
    linked: list[str] = []

    def inline(m: re.Match) -> str:
        nonlocal room
        name = html.unescape(m.group(1))
        path = out / name
        if "/" in name or not path.is_file() or path.is_symlink() or name in inlined:
            return m.group(0)  # a second use of one figure links the file beside the page
        uri = f"data:image/png;base64,{base64.b64encode(small.get(name) or small_png(path.read_bytes())).decode()}"
        if len(uri) - len(m.group(1)) > room:
            linked.append(name)  # past the page's budget: the file beside it
            return m.group(0)
        room -= len(uri) - len(m.group(1))
        inlined.add(name)
        return f'src="{uri}"'

    body = re.sub(r'src="([^"]+\.png)"', inline, body)
    if linked:
        body += (
            f"<p><em>{len(linked)} figure(s) past the page's {most / 1e6:g} MB are links to the PNG files beside "
            "this page, not inlined: open it in its folder to see them.</em></p>\n"
        )
    return body


def _anchors(body: str) -> tuple[str, str]:
    """(BODY with an id on every h2/h3/h4, a table of contents linking them: the report's parts, their
    sections and each study's own tables; a long heading shortened there). The heading text is
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

    body = re.sub(r"<h([234])>(.*?)</h\1>", add_id, body)
    if not entries:
        return body, ""
    items = []
    for level, slug, text in entries:
        cls = {3: ' class="sub"', 4: ' class="sub2"'}.get(level, "")
        short = text if len(text) <= 70 else text[:68].rstrip() + "…"  # a heading that says its table's setup
        items.append(f'<li{cls}><a href="#{slug}">{short}</a></li>')
    # folded: the page's first screen is the headline, one click opens the contents
    toc = (
        '<nav class="toc"><details><summary><strong>Contents</strong></summary><ul>' + "".join(items) + "</ul></details></nav>\n"
    )
    return body, toc
