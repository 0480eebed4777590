"""The kit's fixes that change numbers: a result made before one of them measured something
else, and every table that uses it says so.

A cell made from commit S predates fix F when F's commit is not an ancestor of S (`git
merge-base --is-ancestor`, in this checkout); a fix with a `since` only touches cells made
from a commit that contains `since` (the change that brought the fault). Where git cannot
answer (no checkout, an unknown commit), the cell's creation time against the fix's commit
time decides, and `how` says so.

Add a fix here in the commit that makes it (its own sha is known only after: add the entry
in the next commit, as the ones below were).
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.core.resultset import ResultCell

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Fix:
    commit: str  # the full sha of the commit that made the fix
    date: str  # its commit time, UTC ISO 8601
    what: str  # what a result made before it got wrong, in a reader's words
    studies: tuple[str, ...] = ()  # the studies whose numbers it changes (empty: all)
    since: str = ""  # the commit that brought the fault (older results are not touched)
    min_repeat: int = 0  # it touches only the repeats from this one on (1: every repeat but the first)

    @property
    def short(self) -> str:
        return self.commit[:7]


FIXES = (
    Fix(
        "265ca19fad59d50c58cbd9d67b424aa0fccad38e",
        "2026-11-23T00:22:09+00:00",
        "warm-up took no optimizer step and the timed epochs carried per-step timers (5 CUDA events a numba-cuda step)",
        ("mnist-cnn",),
    ),
    Fix(
        "b3f32e206ebcc8a62767794660771858cf0dca39",
        "2026-11-23T00:57:13+00:00",
        "interleaved siblings that had ended were counted as other processes on the GPU (false gpu-shared flags)",
    ),
    Fix(
        "e991be0970263907c0b1ba9cce038943d167a7ea",
        "2026-11-24T06:54:55+00:00",
        "an interleaved cell closed (wrote and summarised) while another cell's epoch was timed: CPU last epochs 1.4-2.6x slow",
    ),
    Fix(
        "eedcfbd53c3d993018c5f9b125fc1ecca9a2bfc6",
        "2026-11-24T09:50:53+00:00",
        "a process the sampler found late added its whole CPU time to one sample (DataLoader workers read as 7,700 %)",
        ("profile", "roofline"),
    ),
    Fix(
        "13184d6e2cee364f029d34f120c1c0c4cdca823f",
        "2026-11-24T09:58:30+00:00",
        "the Tuned cells' peak memory was the Optuna search's, not the trained model's",
        ("cifar-opt",),
    ),
    Fix(
        "f8a1ba9d0556604745bf8e5fa5bcada55fabc281",
        "2026-11-24T11:59:45+00:00",
        "the RSS sampler, forked, read its own memory instead of the cell's",
        since="d26e36e",
    ),
    Fix(
        "ce207e0a4c0b0d5aca5610efa7b05d15902bb7db",
        "2026-11-28T22:45:24+00:00",
        "every repeat trained from the first one's seed: the repeats' accuracies had no spread to judge by",
        ("mnist-cnn",),
        min_repeat=1,
    ),
)


@functools.lru_cache(maxsize=4096)
def _contains(sha: str, commit: str) -> bool | None:
    """Whether SHA's history holds COMMIT (None: git cannot say here)."""
    try:
        r = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, sha],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(r.returncode)


def missing(c: ResultCell) -> list[Fix]:
    """The fixes C's numbers predate."""
    return missing_for(c.study, c.repeat, c.system)


def missing_for(study: str, repeat: int, system: dict) -> list[Fix]:
    """The fixes that a cell of STUDY at REPEAT, whose system.json is SYSTEM, predates."""
    raw = str(system.get("kit_git_sha") or "").removesuffix("-dirty")
    sha = raw if len(raw) >= 7 and all(ch in "0123456789abcdef" for ch in raw) else ""
    out = []
    for f in FIXES:
        if (f.studies and study not in f.studies) or repeat < f.min_repeat:
            continue
        has = _contains(sha, f.commit) if sha else None
        if has is None:
            made = str(system.get("created_utc") or "")
            has = bool(made) and made >= f.date
        if has:
            continue
        if f.since:
            touched = _contains(sha, f.since) if sha else None
            if touched is False:
                continue
        out.append(f)
    return out


__all__ = ["FIXES", "Fix", "missing", "missing_for"]
