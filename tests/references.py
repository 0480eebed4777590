"""What the study-facing tests are generated from: the kit's registered studies, and for each
the committed reference that holds its cells (results/reference/<folder>/<study>/), if any.

A study's reference is the first such folder that the CI machine made (`cpu-*`), else the
first by name; a study with none gets no reference, and the tests that read one skip it
with that reason (a new study needs only its package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.registry import studies

REF = Path(__file__).resolve().parent.parent / "results" / "reference"


def kit_studies() -> list[str]:
    """The kit's own studies (bench/studies/), not those tests register from tests/."""
    return [n for n, s in studies().items() if type(s).__module__.startswith("bench.studies.")]


def reference(study: str) -> Path | None:
    """The committed reference folder holding STUDY's cells, or None."""
    held = [d for d in sorted(REF.iterdir()) if d.is_dir() and any((d / study).glob("*/rows.jsonl"))]
    cpu = [d for d in held if d.name.startswith("cpu-")]
    return (cpu or held or [None])[0]


def reference_or_skip(study: str) -> Path:
    ref = reference(study)
    if ref is None:
        pytest.skip(f"{study} has no committed reference (no results/reference/*/{study}/ with rows): nothing to read")
    return ref
