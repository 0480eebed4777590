"""`orchestrate.py report DIR...`: merge result dirs from any hosts into one REPORT.md.

The report loops over the study registry: each study renders its own section from its
own cells (tables, figures), and every section lists the cells that did not run, with
the reason, and the platforms a host skipped. A study's cells never land in another's
section; cells of a study this checkout does not know get a plain listing.

Beside REPORT.md it writes the tidy table (`host/tidy.py`): every row of every cell, flat
columns, as tidy.csv and tidy.parquet, with a section in REPORT.md on how to load it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from bench.core.registry import studies
from bench.core.resultset import ResultCell, collect
from bench.core.rows import atomic_write_text, write_json


def _not_run(cells: list[ResultCell], notes: list[dict], study: str) -> list[str]:
    bad = [c for c in cells if c.status != "ok"]
    plat = [n for n in notes if n.get("status") != "ran" and (not n.get("studies") or study in n.get("studies", []))]
    if not bad and not plat:
        return []
    md = ["### Not run", "", "| what | status | reason |", "|---|---|---|"]
    md += [
        f"| platform {n['platform']} ({n.get('source', '')}) | {n.get('status', 'skipped')} | "
        f"{str(n.get('reason', '')).replace('|', '/')} |"
        for n in plat
    ]
    for c in bad:
        r = c.first
        what = f"{r.get('backend')} {r.get('variant', '')} ({r.get('cell')})"
        md.append(f"| {what} | {c.status} | {c.reason.replace('|', '/')[:300]} |")
    return md + [""]


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
        f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} from: " + ", ".join(f"`{d}`" for d in dirs),
        "",
    ]
    unclean = sorted({str(c.system.get("kit_git_sha")) for c in cells if c.unclean_source})
    if unclean:
        md += [
            f"> **Unclean source tree**: {sum(c.unclean_source for c in cells)} cell(s) ran from a checkout with "
            f"uncommitted changes ({', '.join(unclean)}); their numbers may not be reproducible from any commit.",
            "",
        ]
    summary: dict = {"studies": {}, "report": str(out / "REPORT.md")}
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
            f"## {name} (not a study of this checkout)",
            "",
            f"{len(mine)} cell(s) under " + ", ".join(sorted({f"`{c.dir.parent}`" for c in mine})),
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
        md += [f"- `{p}`" for p in problems[:50]] + ([f"- ... and {len(problems) - 50} more"] if len(problems) > 50 else [])
        md.append("")
    from host.tidy import report_lines, write_tidy

    tidy = write_tidy(cells, out)
    md += report_lines(tidy)
    summary["tidy"] = {k: v for k, v in tidy.items() if k != "note"}
    atomic_write_text(out / "REPORT.md", "\n".join(md))
    write_json(out / "report.json", summary)
    summary["notes"] = notes
    summary["problems"] = problems
    return summary
