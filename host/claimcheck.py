"""`orchestrate.py verify DIR --claims`: every seed claim re-judged on DIR, beside the committed
references' verdict for the same claim and workload.

Each side is judged on its own cells alone (bench.core.answers.judge_all), and its primary
answer per (study, claim, workload) is compared. A *flip* is a claim that one side decides
(holds / does not hold: its whole interval on one side of the claim's threshold) and the other
decides the other way; an answer on one side only, or an undecided one, is listed and never
fails. Names no study.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import studies
from bench.core.resultset import collect, holding_results
from bench.core.text import short, term


@dataclass
class Line:
    study: str
    claim: str
    label: str
    ours: A.Answer | None
    ref: A.Answer | None

    @property
    def flip(self) -> bool:
        return bool(
            self.ours
            and self.ref
            and self.ours.verdict in C.DECIDED
            and self.ref.verdict in C.DECIDED
            and self.ours.verdict != self.ref.verdict
        )

    def text(self) -> str:
        mark = "FLIP" if self.flip else "same" if self.ours and self.ref and self.ours.verdict == self.ref.verdict else "-"
        return f"{mark:4} {term(self.study)} {term(self.claim)}: ours {_side(self.ours)} | reference {_side(self.ref)}"


def _side(a: A.Answer | None) -> str:
    if a is None:
        return "not formed"
    v = a.value
    num = (
        ""
        if v is None
        else f" {short(v.median)}" + (f" [{short(v.lo)}-{short(v.hi)}]" if v.lo is not None and v.hi is not None else "")
    )
    return f"{a.verdict}{num} on {term(a.scope_label) or '-'}"


def _primary(answers: list[A.Answer]) -> dict[str, A.Answer]:
    return {_key(a): a for a in answers if a.primary}


def _key(a: A.Answer) -> str:
    """Claim and whole workload (Answer.work): a reference judged beside runs of other epochs names its
    splits by them, this run alone by none; the work is the same."""
    return json.dumps([a.study, a.claim.id, a.work], sort_keys=True, default=str)


def check(dirs: list[Path], references: list[Path]) -> tuple[list[Line], int]:
    """(one line per claim DIRS answer, beside the references' answer; the number of flips)."""
    registry = studies()
    mine, _, _ = collect(dirs)
    refs, _ = holding_results(references)
    theirs, _, _ = collect(refs)
    ours, judged = _primary(A.judge_all(registry, mine)), A.judge_all(registry, theirs)
    ref, scoped = _primary(judged), {_scoped(a): a for a in judged}
    lines = []
    for key in sorted(ours):
        a = ours[key]
        if a.verdict == C.NOT_HERE:
            continue
        lines.append(Line(a.study, a.claim.id, a.label, a, scoped.get(_scoped(a)) or ref.get(key)))
    return lines, sum(x.flip for x in lines)


def _scoped(a: A.Answer) -> str:
    """The answer's claim, workload and hosts: a reference judged on the same kind of machine comes first."""
    return json.dumps([_key(a), sorted({k for f in a.findings for k in f.scope})], default=str)


__all__ = ["Line", "check"]
