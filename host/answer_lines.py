"""The answer in the terminal where `all` ends: the headline's rows of this machine, a line each,
read back from the report.json the run just wrote (its one list of answers: the page and these
lines cannot disagree). A run of a CPU alone gets its CPU against the references' GPUs; a run
whose report forms no comparison of this machine says so and where the page is.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.claims import NOT_COMPARABLE
from bench.core.resultset import json_file
from bench.core.text import short, term
from host.answers import THIS

MAX_LINES = 8  # the rest is on the page


def line(c: dict) -> str:
    """'mnist-cnn: PyTorch: CUDA over CPU (kit setup): 3.41x [3.2-3.6], holds (95% CS), on H200 host (...)'."""
    v, lo, hi = c.get("value"), c.get("lo"), c.get("hi")
    fig = ""
    if isinstance(v, (int, float)):
        fig = f": {short(v)}x"
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
            fig += f" [{short(lo)}-{short(hi)}]"
    verdict = str(c.get("verdict") or "")
    tag = c.get("coverage_tag")
    if tag and verdict in ("holds", "does not hold"):
        verdict += f" ({tag})"
    return term(f"  {c.get('study')}: {c.get('text')}{fig}, {verdict}, on {scope(c)}")


def scope(c: dict) -> str:
    """The hosts a report.json answer C ran on, this machine's named so: 'H200 host (16-core Intel Xeon) /
    this machine (2-core AMD EPYC)' (a 2-core EPYC laptop read its own side as the committed 2-core EPYC
    reference's); the answer's `scope` where its findings name no sides."""
    names = [
        f"{THIS} ({s.get('host')})" if s.get("this_machine") is True else str(s.get("host"))
        for f in c.get("findings") or []
        if isinstance(f, dict)
        for s in f.get("sides") or []
        if isinstance(s, dict) and s.get("host")
    ]
    return " / ".join(dict.fromkeys(names)) if names else str(c.get("scope"))


def _count(n: float) -> str:
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{short(n / div)}{unit}"
    return short(n)


def worth_line(w: dict) -> str:
    """'    worth it: the GPU finishes first above 794k samples (13.2 epochs); energy: not measured; cost: no price
    given' from report.json's `worth` entry W."""
    got = w.get("break_even_time")
    be: dict = got if isinstance(got, dict) else {}
    kind, n, epoch = be.get("kind"), be.get("samples"), w.get("epoch_samples")
    if kind == "always":
        first = "the GPU finishes first from the first sample"
    elif kind == "never":
        first = "the GPU never finishes first"
    elif kind in ("above", "below") and isinstance(n, (int, float)):
        ep = f" ({short(n / epoch)} epochs)" if isinstance(epoch, (int, float)) and epoch > 0 else ""
        first = f"the GPU finishes first {'above' if kind == 'above' else 'only below'} {_count(n)} samples{ep}"
    else:
        first = "break-even not formed"
    e = w.get("energy_ratio") if isinstance(w.get("energy_ratio"), dict) else None
    energy = (
        f"{short(e['value'])}x less per sample on the GPU" if e and isinstance(e.get("value"), (int, float)) else "not measured"
    )
    c = w.get("cost_ratio") if isinstance(w.get("cost_ratio"), dict) else None
    cost = f"{short(c['value'])}x" if c and isinstance(c.get("value"), (int, float)) else str(w.get("cost_why") or "not measured")
    return term(f"    worth it: {first}; energy: {energy}; cost: {cost}")


def lines(report_dir: Path, all_mine: bool = False) -> list[str]:
    """What `all` prints after its report: this machine's headline answers (at most MAX_LINES), or why
    there are none; [] where the report holds no readable report.json. ALL_MINE: the report holds this
    machine's cells alone (`all --no-references`), so every row is its own, though the page, with no
    reference beside, names none "this machine"."""
    got = json_file(report_dir / "report.json")
    claims = got.get("claims")
    if not isinstance(claims, list):
        return []
    mine = [
        c
        for c in claims
        if isinstance(c, dict)
        and c.get("headline")
        and c.get("primary")
        and (all_mine or c.get("this_machine"))
        and c.get("value") is not None
    ]
    page = report_dir / "REPORT.md"
    # a row that is not comparable (the sides ran different work, or the claim's quantity is not one
    # our cells measure) is listed on the page with its reason, never given as the answer
    apart = [c for c in mine if c.get("verdict") == NOT_COMPARABLE]
    mine = [c for c in mine if c.get("verdict") != NOT_COMPARABLE]
    if not mine:
        if apart:
            c = apart[0]
            why = str(c.get("why") or "not comparable")
            some = f"{len(apart)} rows are not comparable, e.g." if len(apart) > 1 else "its one row is not comparable:"
            return [
                term(
                    f"the answer: no comparison on this machine's cells answers a seed claim; {some} "
                    f"{c.get('study')}: {c.get('text')}: {why}. {page} lists each row and why"
                )
            ]
        return [f"the answer: no comparison formed on this machine's own cells; {page} says which and why"]
    worths = [w for w in got.get("worth") or [] if isinstance(w, dict)]
    out = [f"the answer (this machine; every row, its interval and what differs: {page}):"]
    for c in mine[:MAX_LINES]:
        out.append(line(c))
        w = next(
            (
                w
                for w in worths
                if (w.get("study"), w.get("text"), w.get("scope")) == (c.get("study"), c.get("text"), c.get("scope"))
            ),
            None,
        )
        if w is not None:
            out.append(worth_line(w))
    if len(mine) > MAX_LINES:
        out.append(f"  ... and {len(mine) - MAX_LINES} more on the page")
    return out


__all__ = ["MAX_LINES", "line", "lines", "scope"]
