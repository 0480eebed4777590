"""results/reference/README.md lists every committed folder with the command that made it, and
no committed report names a temporary directory (or anything outside results/reference) as its source."""

from __future__ import annotations

import re
from pathlib import Path

REF = Path(__file__).resolve().parent.parent / "results" / "reference"


def test_every_reference_folder_is_in_the_index():
    index = (REF / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`/]+)/", index, flags=re.M))
    # a dot-folder is a report's figure cache (ignored by git), not a reference
    folders = {p.name for p in REF.iterdir() if p.is_dir() and p.name != "baselines" and not p.name.startswith(".")}
    assert folders - listed == set(), "folders with no row in results/reference/README.md"
    assert listed - folders == set(), "rows naming a folder that is not committed"


def test_every_committed_report_names_committed_sources():
    reports = sorted(REF.rglob("REPORT.md"))
    assert len(reports) >= 10
    for md in reports:
        head = md.read_text().splitlines()[:5]
        line = next((x for x in head if x.startswith("Generated ") and " from: " in x), None)
        assert line, f"{md}: no 'Generated ... from:' line"
        sources = re.findall(r"`([^`]+)`", line.split(" from: ", 1)[1])
        assert sources and all(s.startswith("results/reference/") and (REF.parent.parent / s).is_dir() for s in sources), (
            md,
            sources,
        )
