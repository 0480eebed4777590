"""The report's answers: the headline (the claims a study marks `headline`), every study's
table of seed claims, and report.json's `claims`, all rendered from one list of answers
(bench.core.answers.judge_all), so no two tables can disagree. Names no study.
"""

from __future__ import annotations

from bench.core import answers as A
from bench.core import claims as C
from bench.core import stats
from bench.core.tables import md_row, md_sep
from bench.core.text import md as md_text

STALE, DIRTY, FLAG = "†", "‡", "⚑"
# which method made an interval (report.json's `method`), by Summary.kind
METHODS = {
    "ci": "95% percentile bootstrap over the repeats (scipy.stats.bootstrap): a fixed number of repeats",
    "range": "the range of the repeats (below 6 repeats; its confidence is 1 - 2^(1-n))",
    "bounds": "the two bounds a count allows",
    "none": "one repeat: no interval",
    "cs": "95% confidence sequence of the median per-round ratio (Howard & Ramdas 2022, ville.QuantileCS): "
    "valid at whatever round --until-decided stopped",
}
# REPORT.html lays these tables out to the page's width, long text wrapping and the verdict on one
# line (host/report.py: a line of exactly this form becomes the element; REPORT.md shows it as is)
HEADLINE_OPEN, CLAIMS_OPEN, CLOSE = '<div class="headline">', '<div class="claims">', "</div>"


def _num(v: float, unit: str) -> str:
    if unit == "x":
        return f"{v:,.3g}x" if abs(v) < 100 else f"{v:,.0f}x"
    text = f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{text} {unit}".rstrip()


def _fig(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def value_text(a: A.Answer) -> str:
    """'4.53x [4.32–4.53, range of 3]', or the conditions' values joined."""
    if not a.findings:
        return "–"
    parts = []
    for f in a.findings:
        v = f.value
        if v.kind == "cs" and (v.lo is None or v.hi is None):
            bracket = f" [unbounded, 95% CS of {v.n} rounds]"
        elif f.exact or v.lo is None or v.hi is None:
            bracket = ""
        else:
            kinds = {"ci": "]", "bounds": ", bounds]", "cs": f", 95% CS of {v.n} rounds]"}
            bracket = f" [{_fig(v.lo)}–{_fig(v.hi)}" + kinds.get(v.kind, f", range of {v.n}]")
        txt = _num(v.median, f.unit) + bracket
        parts.append(f"{f.what}: {txt}" if f.what else txt)
    return "; ".join(parts)


def seed_text(c: C.Claim, unit: str = "x") -> str:
    if c.seed is None:
        return c.seed_text or "–"
    fig = f"{_num(c.seed[0], unit)}–{_num(c.seed[1], unit)}" if isinstance(c.seed, tuple) else _num(c.seed, unit)
    return f"{fig} ({c.seed_text})" if c.seed_text else fig


def marks(a: A.Answer) -> str:
    m = ""
    if any(f.stale for f in a.findings):
        m += STALE
    if any(s.dirty for f in a.findings for s in f.sides):
        m += DIRTY
    if any(s.flagged for f in a.findings for s in f.sides):
        m += FLAG
    return m


def _unit(a: A.Answer) -> str:
    return a.findings[0].unit if a.findings else a.claim.unit


def details(a: A.Answer, note: bool = True) -> str:
    """One line: what each side ran and how they pair, what differs, the seed, why, the note (NOTE:
    False where an earlier answer of the claim printed it). The hosts are in the answer's row, the
    fixes a side predates in What to trust."""
    bits = []
    for f in a.findings:
        sides = " / ".join(s.describe({}, device=False) for s in f.sides)
        head = f"{f.what}: " if f.what else ""
        pairing = f" ({f.pairing})" if len(f.sides) > 1 else ""
        bits.append(f"{head}{sides}{pairing}")
        if f.differs:
            bits.append("what differs: " + "; ".join(f.differs))
        if f.stop:
            bits.append(f"until decided: {f.stop}; the interval is the median per-round ratio's 95% confidence sequence")
    if a.value is not None and a.claim.seed is not None:
        bits.append("against the seed: " + C.versus_seed(a.value, a.claim.seed))
    if a.why:
        bits.append(a.why)
    if a.claim.note and note:
        bits.append(a.claim.note)
    if a.others:
        shown = ", ".join(f"{_num(v, _unit(a))} ({w})" for v, w in a.others[:2])
        bits.append(f"other runs: {shown}" + (f" and {len(a.others) - 2} more" if len(a.others) > 2 else ""))
    return ". ".join(bits)


def headline(answers: list[A.Answer]) -> list[str]:
    rows = [a for a in answers if a.claim.headline and a.findings]
    md = [
        "## Headline: how much faster, and does the seed's claim hold?",
        "",
        "One row per comparison a seed made, for every host (or pair of hosts: this GPU against that CPU) "
        "that ran both sides, same-host pairs first. **Ours** is the ratio of the two sides' throughputs (above 1x "
        f"the first side is faster) with its interval ({stats.INTERVAL_TEXT}; where a run added rounds until the "
        "comparison was decided, `95% CS`: the median per-round ratio with its 95% confidence sequence, "
        "valid however early the run stopped). **Verdict** reads the interval by "
        "the kit's one policy: *holds* when all of it lies where the claim holds, *does not hold* when none of it "
        "does, *undecided* when it reaches across, *too few repeats* with one repeat a side. "
        f"{STALE} a side made before a fix that changes numbers, {DIRTY} from an unclean tree, {FLAG} noisy cells; "
        "the list below the table gives, per row, the seed's own figure, what was compared and what differs "
        "between its sides.",
        "",
    ]
    if not rows:
        return md + ["_No comparison a seed made can be formed from these results._", ""]
    md += [HEADLINE_OPEN, "", md_row(["#", "claim", "ours", "verdict", "n", "on"]), md_sep(6)]
    for i, a in enumerate(rows, 1):
        md.append(md_row([i, f"{a.study}: {a.label}", value_text(a), a.verdict + marks(a), a.findings[0].n, a.scope_label]))
    md += ["", CLOSE, "", "The seed's figure and what each row compared (first side / second side; device, run, repeats):", ""]
    md += [f"{i}. the seed: {md_text(seed_text(a.claim, _unit(a)))}. {md_text(details(a))}" for i, a in enumerate(rows, 1)]
    return md + [""]


def trust(answers: list[A.Answer], cells: list, notes: list[dict]) -> list[str]:
    """What to trust about the answers: synthetic data, fixes predated, unclean trees, gaps."""
    md = ["### What to trust", ""]
    out: list[str] = []
    rows = [a for a in answers if a.claim.headline and a.findings]
    synthetic = sorted({s.data[0] for a in rows for f in a.findings for s in f.sides if not s.data[1]})
    if synthetic:
        out.append(
            f"Rows on synthetic data ({', '.join(synthetic)}): a speed ratio holds for the same shapes; "
            "an accuracy claim of those seeds needs the real data."
        )
    cross = [str(i) for i, a in enumerate(rows, 1) if not a.same_host]
    if cross:
        out.append(f"Rows {', '.join(cross)} pair two hosts: each names both and what differs between them.")
    stale: dict[str, tuple[A.fixes.Fix, set[str]]] = {}
    for a in answers:
        for f in a.findings:
            for s in f.sides:
                for fx in s.stale:
                    stale.setdefault(fx.commit, (fx, set()))[1].add(s.run)
    for fx, runs in stale.values():
        out.append(f"{STALE} {', '.join(sorted(runs))}: made before {fx.short} ({fx.what}).")
    dirty = sorted({s.run for a in answers for f in a.findings for s in f.sides if s.dirty})
    if dirty:
        out.append(f"{DIRTY} {', '.join(dirty)}: made from a checkout with uncommitted changes.")
    wrong = [a for a in answers if a.verdict == C.NOT_JUDGED]
    out += [f"Not judged: {a.why}." for a in wrong]
    skipped = sorted({f"{n.get('platform')} on {n.get('source')}" for n in notes if n.get("status") != "ran"})
    if skipped:
        out.append(f"Platforms not run: {', '.join(skipped[:8])}" + (" ..." if len(skipped) > 8 else "") + ".")
    return md + [f"- {md_text(t)}" for t in out] + [""] if out else md + ["- Nothing to add."] + [""]


def tally_line(counts: dict[str, int]) -> str:
    order = ["judged", "undecided", "needs real data", "not measured here", "not comparable", "not judged"]
    total = sum(counts.values())
    return f"{total} claims: " + ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))


def study_section(study: str, answers: list[A.Answer]) -> list[str]:
    """The seed's claims of one study, every answer: the table, then what each rests on."""
    mine = [a for a in answers if a.study == study]
    if not mine:
        return []
    counts = A.tally(mine).get(study, {})
    md = [
        "### The seed's claims",
        "",
        f"{tally_line(counts)} (a claim counts once, by its first answer per workload). Each claim is judged on every "
        "host (or pair of hosts) that ran it, first answer first; the verdict policy is the headline's.",
        "",
        CLAIMS_OPEN,
        "",
        md_row(["#", "the seed says", "ours", "verdict", "seed", "where", "on"]),
        md_sep(7),
    ]
    for i, a in enumerate(mine, 1):
        md.append(
            md_row(
                [
                    i,
                    a.label,
                    value_text(a),
                    a.verdict + marks(a),
                    seed_text(a.claim, _unit(a)),
                    a.claim.where,
                    a.scope_label or "–",
                ]
            )
        )
    md += ["", CLOSE, ""]
    noted: set[str] = set()
    for i, a in enumerate(mine, 1):
        line = details(a, a.claim.id not in noted) if a.findings else a.why
        noted.add(a.claim.id)
        if line:
            md.append(f"{i}. {md_text(line)}")
    return md + [""]


def tallies(answers: list[A.Answer], registry: dict) -> list[str]:
    """One line per seed: how many claims are judged, undecided, need real data, not measured here."""
    per = A.tally(answers)
    lines = []
    for name, study in registry.items():
        if name in per:
            lines.append(f"- seed {study.seed_doc} ({name}): {tally_line(per[name])}")
    return ["### The seeds' claims, counted", "", *lines, ""] if lines else []


def as_json(answers: list[A.Answer]) -> list[dict]:
    out = []
    for a in answers:
        v = a.value
        out.append(
            {
                "study": a.study,
                "id": a.claim.id,
                "text": a.label,
                "where": a.claim.where,
                "headline": a.claim.headline,
                "primary": a.primary,
                "verdict": a.verdict,
                "why": a.why,
                "value": v.median if v else None,
                "lo": v.lo if v else None,
                "hi": v.hi if v else None,
                "interval": v.kind if v else None,
                "seed": a.claim.seed,
                "seed_text": a.claim.seed_text,
                "split": a.split,
                "scope": a.scope_label,
                "findings": [
                    {
                        "what": f.what,
                        "value": f.value.median,
                        "lo": f.value.lo,
                        "hi": f.value.hi,
                        "interval": f.value.kind,
                        "method": METHODS.get(f.value.kind, f.value.kind),
                        "until_decided": f.stop,
                        "unit": f.unit,
                        "pairing": f.pairing,
                        "differs": f.differs,
                        "stale": [fx.short for fx in f.stale],
                        "sides": [
                            {
                                "run": s.run,
                                "host": s.host.label,
                                "device": s.device,
                                "dirs": sorted({str(c.dir.parent.parent) for c in s.cells}),
                                "environment": s.env,
                                "n": len(s.per),
                                "data": s.data[0],
                                "real_data": s.data[1],
                            }
                            for s in f.sides
                        ],
                    }
                    for f in a.findings
                ],
                "others": [{"value": v2, "where": w} for v2, w in a.others],
            }
        )
    return out
