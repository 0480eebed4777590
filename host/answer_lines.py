"""The answer in the terminal where `all` ends: the headline's rows of this machine, a line each,
read back from the report.json the run just wrote (its one list of answers: the page and these
lines cannot disagree). A run of a CPU alone gets its CPU against the references' GPUs; a run
whose report forms no comparison of this machine says so and where the page is.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.resultset import json_file
from bench.core.text import term

MAX_LINES = 8  # the rest is on the page


def _fig(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def line(c: dict) -> str:
    """'mnist-cnn: PyTorch: CUDA over CPU (kit setup): 3.41x [3.2-3.6], holds (95% CS), on H200 host (...)'."""
    v, lo, hi = c.get("value"), c.get("lo"), c.get("hi")
    fig = ""
    if isinstance(v, (int, float)):
        fig = f": {_fig(v)}x"
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
            fig += f" [{_fig(lo)}-{_fig(hi)}]"
    verdict = str(c.get("verdict") or "")
    tag = c.get("coverage_tag")
    if tag and verdict in ("holds", "does not hold"):
        verdict += f" ({tag})"
    return term(f"  {c.get('study')}: {c.get('text')}{fig}, {verdict}, on {c.get('scope')}")


def lines(report_dir: Path) -> list[str]:
    """What `all` prints after its report: this machine's headline answers (at most MAX_LINES), or why
    there are none; [] where the report holds no readable report.json."""
    got = json_file(report_dir / "report.json")
    claims = got.get("claims")
    if not isinstance(claims, list):
        return []
    mine = [
        c
        for c in claims
        if isinstance(c, dict) and c.get("headline") and c.get("primary") and c.get("this_machine") and c.get("value") is not None
    ]
    page = report_dir / "REPORT.md"
    if not mine:
        return [f"the answer: no comparison formed on this machine's own cells; {page} says which and why"]
    out = [f"the answer (this machine; every row, its interval and what differs: {page}):"]
    out += [line(c) for c in mine[:MAX_LINES]]
    if len(mine) > MAX_LINES:
        out.append(f"  ... and {len(mine) - MAX_LINES} more on the page")
    return out


__all__ = ["MAX_LINES", "line", "lines"]
