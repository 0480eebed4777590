"""The first screen of REPORT.md (and REPORT.html): the headline table, one row per study and
comparison its seed made, then what to trust about it.

The rows come from the studies (`Study.comparisons`, formed by bench.core.headline); this
module only lays them out and names no study. Every figure is computed from rows.jsonl at
render time, like the sections below it.
"""

from __future__ import annotations

from bench.core import headline, stats
from bench.core.resultset import ResultCell
from bench.core.tables import md_row, md_sep
from bench.core.text import md as md_text


def _ratio(v: float) -> str:
    return f"{v:,.3g}x" if v < 100 else f"{v:,.0f}x"


def _seed(r: headline.Row) -> str:
    if r.seed is None:
        return r.seed_text or "–"
    fig = f"{_ratio(r.seed[0])}-{_ratio(r.seed[1])}" if isinstance(r.seed, tuple) else _ratio(r.seed)
    return f"{fig} ({r.seed_text})" if r.seed_text else fig


def build(registry: dict, cells: list[ResultCell], notes: list[dict]) -> tuple[list[str], dict]:
    """(markdown lines, a summary for report.json)."""
    rows: list[headline.Row] = []
    missing: list[str] = []
    for name, study in registry.items():
        mine = [c for c in cells if c.study == name]
        if not mine:
            continue
        got, lacking = headline.rows(study, mine)
        rows += headline.best(got)
        missing += lacking
    md = [
        "## Headline: how much faster, and does the seed's figure hold?",
        "",
        "One row per comparison a seed made. **Ours** is the ratio of the two sides' throughputs "
        "(the study's own unit; above 1x the first side is faster): median over repeats, paired by repeat where both sides ran in one run, "
        "with its **interval**: the 95 % bootstrap interval from 6 repeats a side, and below that the range of "
        "the repeats (of the per-repeat ratios where paired), marked *range*: a percentile bootstrap over fewer "
        "values cannot be a 95 % interval, and the range of n repeats holds the true median with probability "
        "1 - 2^(1-n) (75 % at 3). "
        "**Verdict** reads the interval (a ratio whose interval holds 1x is no clear difference). "
        "**Seed** is the seed's own figure for the same two setups; the rows below say what ran.",
        "",
    ]
    if rows:
        md += [
            md_row(["#", "study", "comparison", "ours", "interval", "repeats", "verdict", "seed", "ours vs seed", "data"]),
            md_sep(10),
        ]
        for i, r in enumerate(rows, 1):
            md.append(
                md_row(
                    [
                        i,
                        r.study,
                        r.comparison,
                        _ratio(r.ratio.median),
                        "–"
                        if r.ratio.lo is None or r.ratio.hi is None
                        else f"{_ratio(r.ratio.lo)}–{_ratio(r.ratio.hi)}" + (" (range)" if r.ratio.kind == "range" else ""),
                        r.ratio.n,
                        r.verdict,
                        _seed(r),
                        r.versus_seed,
                        r.data,
                    ]
                )
            )
        md += ["", "What each row compared (first side / second side; device, run and repeats):", ""]
        for i, r in enumerate(rows, 1):
            line = f"{i}. {md_text(r.numerator)} / {md_text(r.denominator)}"
            if r.others:
                others = ", ".join(f"{_ratio(v)} ({md_text(where)})" for v, where in r.others[:4])
                more = f" and {len(r.others) - 4} more" if len(r.others) > 4 else ""
                line += f". Other runs: {others}{more}"
            md.append(line)
        md.append("")
    else:
        md += ["_No comparison a seed made can be formed from these results._", ""]
    md += ["### What to trust", ""]
    trust: list[str] = []
    synthetic = [r for r in rows if r.synthetic]
    if synthetic:
        sets = sorted({r.data for r in synthetic})
        trust.append(
            f"{len(synthetic)} of {len(rows)} rows ran on synthetic data ({', '.join(md_text(s) for s in sets)}): the "
            "speed ratios hold for the same shapes; any accuracy claim of those seeds needs the real data."
        )
    one = [str(i) for i, r in enumerate(rows, 1) if r.ratio.lo is None]
    if one:
        trust.append(f"Rows {', '.join(one)} rest on one repeat a side: no interval, no verdict; rerun with `--repeats 3`.")
    cover = ", ".join(f"{i} ({r.ratio.n}: {r.ratio.coverage:.0%})" for i, r in enumerate(rows, 1) if r.ratio.kind == "range")
    if cover:
        trust.append(
            f"Rows {cover} have fewer than {stats.MIN_CI_REPEATS} repeats a side: their interval is the range of "
            "the repeats, with the confidence in brackets, and a verdict needs the whole range on one side of 1x."
        )
    flagged = [str(i) for i, r in enumerate(rows, 1) if r.flagged]
    if flagged:
        trust.append(f"Rows {', '.join(flagged)} include cells with noise or validity flags (see their study's section).")
    differs = [str(i) for i, r in enumerate(rows, 1) if r.versus_seed.startswith("differs")]
    if differs:
        trust.append(
            f"Rows {', '.join(differs)} differ from the seed's figure beyond our interval (other hardware, or the seed's claim does not hold)."
        )
    trust += [f"Not measured: {md_text(m)}." for m in missing]
    skipped = sorted({f"{n.get('platform')} on {n.get('source')}" for n in notes if n.get("status") != "ran"})
    if skipped:
        trust.append(
            f"Platforms not run: {', '.join(md_text(s) for s in skipped[:8])}" + (" ..." if len(skipped) > 8 else "") + "."
        )
    unclean = sum(c.unclean_source for c in cells)
    if unclean:
        trust.append(f"{unclean} cell(s) ran from a checkout with uncommitted changes.")
    md += [f"- {t}" for t in trust] or ["- Nothing to add: every row has repeats, real data and no flags."]
    md.append("")
    summary = {
        "rows": [
            {
                "study": r.study,
                "comparison": r.comparison,
                "ratio": r.ratio.median,
                "lo": r.ratio.lo,
                "hi": r.ratio.hi,
                "interval": r.ratio.kind,  # "ci" (95% bootstrap), "range" (fewer than 6 repeats a side), "none"
                "repeats": r.ratio.n,
                "verdict": r.verdict,
                "seed": r.seed,
                "versus_seed": r.versus_seed,
                "data": r.data,
                "numerator": r.numerator,
                "denominator": r.denominator,
            }
            for r in rows
        ],
        "missing": missing,
    }
    return md, summary
