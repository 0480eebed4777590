"""results/reference/README.md lists every committed folder with the command that made it, and
no committed report names a temporary directory (or anything outside results/reference) as its source."""

from __future__ import annotations

import re
from pathlib import Path

REF = Path(__file__).resolve().parent.parent / "results" / "reference"


def test_every_reference_folder_is_in_the_index():
    from host.reference_reports import recipes

    index = (REF / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`/]+)/", index, flags=re.M))
    # a dot-folder is a report's figure cache (ignored by git), not a reference
    folders = {p.name for p in REF.iterdir() if p.is_dir() and p.name != "baselines" and not p.name.startswith(".")}
    made = {r.out for r in recipes()[0] if "/" not in r.out}  # merged reports: made by reference-reports, not committed
    assert folders - listed == set(), "folders with no row in results/reference/README.md"
    assert listed - folders - made == set(), "rows naming a folder that is not committed"


def test_every_committed_report_names_committed_sources():
    """The references' reports are made, not committed (reports.toml): each names committed folders."""
    from host.reference_reports import recipes

    made, _ = recipes()
    assert len(made) >= 10
    for r in made:
        assert r.inputs and all((REF / x).is_dir() for x in r.inputs), r
