"""The report's answers: the headline (the claims a study marks `headline`), every study's
table of seed claims, and report.json's `claims`, all rendered from one list of answers
(bench.core.answers.judge_all), so no two tables can disagree. Names no study.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.core import answers as A
from bench.core import claims as C
from bench.core import noise, stats
from bench.core.tables import md_row, md_sep
from bench.core.text import md as md_text
from bench.core.text import md_code, short, term

STALE, DIRTY, FLAG = "†", "‡", "⚑"
# REPORT.html lays these tables out to the page's width, long text wrapping and the verdict on one
# line (host/report.py: a line of exactly this form becomes the element; REPORT.md shows it as is)
HEADLINE_OPEN, CLAIMS_OPEN, CLOSE = '<div class="headline">', '<div class="claims">', "</div>"


THIS = "this machine"


# ---- this machine: the report's own cells beside context (the committed references) -------------
# Where a report has context dirs (the main job: this host's cells, the references beside), a side
# made of the report's own cells is "this machine", named so wherever its host is; a context host of
# the same class (a reference on the same 2-core EPYC) keeps its plain label: the cells decide, not
# the host key. HERE: the report has context (without it every dir is equal and none is this machine).
def mine(s: A.Side, here: bool) -> bool:
    """Whether side S is this machine's: HERE, and its cells are the report's own, not context."""
    return here and not s.context


def host_name(s: A.Side, here: bool) -> str:
    """S's host as the report names it: 'this machine (2-core AMD EPYC)' for this machine's side."""
    return f"{THIS} ({s.host.label})" if mine(s, here) else s.host.label


def scope_text(a: A.Answer, here: bool) -> str:
    """A's hosts ('H100 80GB HBM3 host (16-core Intel Xeon) / this machine (2-core AMD EPYC)'): its
    scope_label with this machine's sides named so."""
    if not here:
        return a.scope_label
    per = [" / ".join(dict.fromkeys(host_name(s, here) for s in f.sides)) for f in a.findings]
    return " / ".join(dict.fromkeys(per))


def share(a: A.Answer, here: bool) -> int:
    """0: every side of A is this machine's, 1: some are (this machine against a reference), 2: none."""
    got = [mine(s, here) for f in a.findings for s in f.sides]
    return 0 if got and all(got) else 1 if any(got) else 2


def this_first(items: list, answer_of: Any, here: bool) -> list:
    """ITEMS (answers, or what ANSWER_OF maps to one) with this machine's first: its same-host
    answers, then it against a reference, then the rest; each group in its order."""
    return sorted(items, key=lambda x: share(answer_of(x), here)) if here else list(items)


def headline_rows(answers: list[A.Answer], here: bool = False) -> list[A.Answer]:
    """The headline's rows, in its order (this machine's first where HERE)."""
    return this_first([a for a in answers if a.claim.headline and a.findings], lambda a: a, here)


def _host_differs(f: A.Finding, here: bool) -> list[str]:
    """F's `differs`, its host entry naming this machine's side."""
    if not here or len(f.sides) < 2:
        return f.differs
    a, b = f.sides[0], f.sides[1]
    return [f"host: {host_name(a, here)} / {host_name(b, here)}" if d.startswith("host: ") else d for d in f.differs]


def machine_gpus(cells: Iterable[Any]) -> int:
    """The most GPUs one of CELLS' hosts has (0: a CPU alone)."""
    most = 0
    for c in cells:
        got = c.system.get("gpu")
        name = got.get("name") if isinstance(got, dict) else None
        count = c.system.get("gpu_count")
        n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1 if name else 0
        most = max(most, n)
    return most


def _sides(study: Any, cells: list, want: dict, metric: Any) -> list[A.Side]:
    try:
        return A.sides(study, cells, want, metric)
    except A.DeclarationError:
        return []


def _device(study: Any, want: dict) -> str | None:
    """What a side needs to run on: its cell's platform where it names one (NumPy inside the GPU
    cell), else its own (bench.core.worth.want_platform)."""
    from bench.core.worth import want_platform

    return str(want["cell_platform"]) if "cell_platform" in want else want_platform(study, want)


def _want_text(want: dict) -> str:
    return " ".join(str(v) for v in want.values())


def lack(study: Any, claim: C.Claim, here: list, beside: list, gpus: int) -> tuple[str, str]:
    """Why this machine (its cells HERE, GPUS on its host) has no answer of its own to CLAIM, with
    BESIDE (the context's cells) to pair with: (kind, detail), kind one of REASONS."""
    rule = claim.rule
    if claim.needs.gpus > max(gpus, 1):
        return ("gpu", "") if not gpus else ("gpus", str(claim.needs.gpus))
    ok = [c for c in here if c.status == "ok"]
    wants = [rule.a, rule.b] if isinstance(rule, C.Ratio) else [rule.side] if isinstance(rule, C.Level) else []
    metric = getattr(rule, "metric", None)
    devs = [_device(study, w) for w in wants]
    have = [bool(_sides(study, ok, w, metric)) for w in wants]

    def device(d: str | None) -> tuple[str, str]:
        return ("gpu", "") if not gpus else ("device", str(d))

    cross = isinstance(rule, C.Ratio) and "cpu" in devs and len(set(devs)) == 2 and rule.across in ("", "hosts")
    if cross:  # this CPU against a context GPU, or this GPU against a context CPU
        ci = devs.index("cpu")
        gi = 1 - ci
        elsewhere = [bool(_sides(study, beside, w, metric)) for w in wants]
        if not have[ci] and not have[gi]:
            if not elsewhere[gi]:
                return device(devs[gi])
            return ("study", study.name) if not ok else ("cells", _want_text(wants[ci]))
        if not have[gi] and not elsewhere[gi]:
            return device(devs[gi])
        if not have[ci] and not elsewhere[ci]:
            return ("cells", _want_text(wants[ci]))
    else:
        missing = [i for i, h in enumerate(have) if not h]
        dev = [devs[i] for i in missing if devs[i] not in (None, "cpu")]
        if dev:
            return device(dev[0])
        if not ok:
            return ("study", study.name)
        if missing:
            return ("cells", _want_text(wants[missing[0]]))
    if not ok:
        return ("study", study.name)
    return _unpaired(study, rule, ok, beside) if isinstance(rule, C.Ratio) else ("other", "")


def _unpaired(study: Any, rule: C.Ratio, ok: list, beside: list) -> tuple[str, str]:
    """Why RULE's sides, both at hand (one here, one perhaps in the context), form no pair that
    holds one of this machine's: the data (what to fetch), or the work (which params differ)."""
    a_sides, b_sides = _sides(study, ok + beside, rule.a, rule.metric), _sides(study, ok + beside, rule.b, rule.metric)
    skip = set(rule.a) | set(rule.b) | set(rule.free)
    compared = set(rule.a) | set(rule.b)
    data: list[str] = []
    work: list[str] = []
    for a in a_sides:
        for b in b_sides:
            if a.context and b.context:
                continue  # the context's own pair answers nothing here
            apart = skip | ({"gpus"} if a.facets.get("platform") != b.facets.get("platform") else set())
            wa = {k: v for k, v in a.workload.items() if k not in apart}
            wb = {k: v for k, v in b.workload.items() if k not in apart}
            if wa != wb:
                work += [k for k in sorted(set(wa) | set(wb)) if wa.get(k) != wb.get(k)]
                continue
            for d in A.unlike(study, a, b, compared):
                key = d.split(" ", 1)[0]
                if key != "data":
                    work.append(key)
                    continue
                theirs = b.data if b.context else a.data if a.context else None
                if theirs is not None and theirs[1]:
                    data.append(theirs[0])
                else:
                    work.append("dataset")
    if data:
        return ("data", data[0])
    if work:
        return ("work", ", ".join(dict.fromkeys(work)))
    return ("other", "")


# kind -> what the statement says for it (DETAILS: the kind's details, escaped for the sink)
REASONS = ("gpu", "gpus", "device", "study", "data", "work", "cells", "other")


def _reason_text(kind: str, details: list[str], code: Any, esc: Any) -> str:
    shown = [esc(d) for d in dict.fromkeys(d for d in details if d)]
    if kind == "gpu":
        return "need a GPU beside this CPU: none here"
    if kind == "gpus":
        return f"need {max(int(d) for d in details)} GPUs in one host: fewer here"
    if kind == "device":
        return f"need a {' or '.join(shown)} device: none here"
    if kind == "study":
        return f"need {', '.join(shown)} cells: none ran here ({code('orchestrate.py all')} runs every study)"
    if kind == "data":
        names = list(dict.fromkeys(details))
        fetch = ", ".join(code(f"orchestrate.py data fetch {n}") for n in names)
        return f"need the real {' and '.join(esc(n) for n in names)} data, as the references ran: {fetch}"
    if kind == "work":
        keys = list(dict.fromkeys(k for d in details for k in d.split(", ")))
        return f"ran other work than the references ({', '.join(esc(k) for k in keys)}): {code('--profile answer')} runs theirs"
    if kind == "cells":
        more = " ..." if len(shown) > 2 else ""
        return f"need cells this run did not make ({'; '.join(shown[:2])}{more})"
    return "form no pair with this machine's cells (each study's claims below say why)"


def reason_groups(reasons: list[tuple[str, str]], markdown: bool = True) -> list[tuple[int, str]]:
    """REASONS ((kind, detail) per claim) grouped: (claims, what they need), most claims first, as
    markdown (escaped) or terminal text."""
    code = md_code if markdown else (lambda x: str(x))
    esc = md_text if markdown else term
    by: dict[str, list[str]] = {}
    for kind, detail in reasons:
        by.setdefault(kind, []).append(detail)
    got = []
    for k, d in by.items():
        text = _reason_text(k, d, code, esc)
        verb, _, rest = text.partition(" ")
        if len(d) == 1 and verb in ("need", "form"):
            text = f"{verb}s {rest}"
        got.append((len(d), text))
    return sorted(got, key=lambda x: -x[0])


def machine_label(cells: Iterable[Any]) -> str:
    """This machine's host label (several, joined, where the report's own dirs hold several hosts)."""
    return ", ".join(sorted({A.host_of(c).label for c in cells}))


def this_machine(answers: list[A.Answer], registry: dict, cells: list, beside: list) -> list[str]:
    """The headline's first lines (at most 4) where the report has context: which machine is this
    one, how many headline comparisons it answers itself and, grouped and counted, why not the rest."""
    claims: dict[tuple[str, str], C.Claim] = {}
    answered: set[tuple[str, str]] = set()
    for a in answers:
        if not a.claim.headline:
            continue
        key = (a.study, a.claim.id)
        claims.setdefault(key, a.claim)
        if a.findings and share(a, True) < 2:
            answered.add(key)
    label = machine_label(cells)
    n, total = len(answered), len(claims)
    first = (
        f"**{THIS.capitalize()}** is {md_text(label)} (this run's cells; the other hosts named are context, the "
        f"committed references, paired only with this machine's). It answers {n} of {total} headline comparisons"
    )
    rest = [k for k in claims if k not in answered]
    if not rest:
        return [first + ".", ""]
    gpus = machine_gpus(cells)
    reasons = []
    for study_name, cid in rest:
        study = registry.get(study_name)
        if study is None:
            continue
        mine_here = [c for c in cells if c.study == study_name]
        theirs = [c for c in beside if c.study == study_name]
        reasons.append(lack(study, claims[(study_name, cid)], mine_here, theirs, gpus))
    groups = reason_groups(reasons)
    lines = [first + "; of the rest:"]
    for i, (k, text) in enumerate(groups[:3]):
        if i == 2 and len(groups) > 3:
            text = "; ".join(f"{k2} {t2}" for k2, t2 in groups[2:])
            lines.append(f"- {text}")
            break
        lines.append(f"- {k} {text}")
    return [*lines, ""]


def _num(v: float, unit: str) -> str:
    return f"{short(v)}x" if unit == "x" else f"{short(v)} {unit}".rstrip()


def value_text(a: A.Answer) -> str:
    """'4.53x [4.32–4.53, range of 3]', or the conditions' values joined; an accuracy over repeats
    that trained from one seed prints no bracket (its zero-width range would read as certainty)."""
    if not a.findings:
        return "–"
    parts = []
    for f in a.findings:
        v = f.value
        one_seed = A.one_seed_sides(f)
        if one_seed:  # repeats of one seed: their accuracies agree by construction, not a spread
            bracket = f" ({v.n} repeats of one seed: no spread)" if v.n > 1 else " (one seed: no spread)"
        elif v.kind == "cs" and (v.lo is None or v.hi is None):
            bracket = f" [unbounded, 95% CS of {v.n} rounds]"
        elif f.exact or v.lo is None or v.hi is None:
            bracket = ""
        else:
            kinds = {"ci": "]", "bounds": ", bounds]", "cs": f", 95% CS of {v.n} rounds]"}
            rng = f", unpaired ranges of {' / '.join(map(str, v.sides_n))}]" if v.sides_n else f", range of {v.n}]"
            bracket = f" [{short(v.lo)}–{short(v.hi)}" + kinds.get(v.kind, rng)
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


def details(a: A.Answer, note: bool = True, here: bool = False) -> str:
    """One line: what each side ran and how they pair, what differs, the seed, why, the note (NOTE:
    False where an earlier answer of the claim printed it). The hosts are in the answer's row, the
    fixes a side predates in What to trust; HERE: this machine's host named so (scope_text)."""
    bits = []
    for f in a.findings:
        sides = " / ".join(s.describe({}, device=False) for s in f.sides)
        head = f"{f.what}: " if f.what else ""
        pairing = f" ({f.pairing})" if len(f.sides) > 1 else ""
        bits.append(f"{head}{sides}{pairing}")
        differs = _host_differs(f, here)
        if differs:
            bits.append("what differs: " + "; ".join(differs))
        if f.stop:
            how = f"; the interval: {f.value.method}" if f.value is not None else ""  # a --fixed-rounds run's is the fixed-n one
            bits.append(f"until decided: {f.stop}{how}")
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


def headline(answers: list[A.Answer], here: bool = False, lead: list[str] | None = None) -> list[str]:
    """The headline: LEAD (this_machine's lines) first, then one row per answer of a headline claim;
    HERE (the report has context): this machine's rows first, its host named so."""
    rows = headline_rows(answers, here)
    md = [
        "## Headline: how much faster, and does the seed's claim hold?",
        "",
        *(lead or []),
        "One row per comparison a seed made, for every host (or pair of hosts: this GPU against that CPU) "
        "that ran both sides, same-host pairs first. **Ours** is the ratio of the two sides' throughputs (above 1x "
        f"the first side is faster) with its interval ({stats.INTERVAL_TEXT}; where a run added rounds until the "
        "comparison was decided, `95% CS`: the median per-round ratio with its 95% confidence sequence, "
        "valid however early the run stopped). **Verdict** reads the interval by "
        "the kit's one policy: *holds* when all of it lies where the claim holds, *does not hold* when none of it "
        "does, *undecided* when it reaches across, *too few repeats* with one repeat a side; beside a decided "
        "verdict, what it rests on: `95% CI` or `95% CS`, or a `range of n` repeats with its lower confidence "
        "(75% at 3), never read as a 95% interval. "
        f"{STALE} a side made before a fix that changes numbers, {DIRTY} from an unclean tree, {FLAG} noisy cells; "
        "the list below the table gives, per row, the seed's own figure, what was compared and what differs "
        "between its sides.",
        "",
    ]
    if not rows:
        return md + ["_No comparison a seed made can be formed from these results._", ""]
    md += [HEADLINE_OPEN, "", md_row(["#", "claim", "ours", "verdict", "n", "on"]), md_sep(6)]
    for i, a in enumerate(rows, 1):
        on = scope_text(a, here)
        md.append(md_row([i, f"{a.study}: {a.label}", value_text(a), verdict_text(a) + marks(a), a.findings[0].n, on]))
    md += ["", CLOSE, "", "The seed's figure and what each row compared (first side / second side; device, run, repeats):", ""]
    md += [
        f"{i}. the seed: {md_text(seed_text(a.claim, _unit(a)))}. {md_text(details(a, here=here))}" for i, a in enumerate(rows, 1)
    ]
    return md + [""]


def trust(answers: list[A.Answer], cells: list, notes: list[dict], here: bool = False) -> list[str]:
    """What to trust about the answers: synthetic data, fixes predated, unclean trees, gaps (rows
    numbered as the headline's: HERE as headline's)."""
    md = ["### What to trust", ""]
    out: list[str] = []
    rows = headline_rows(answers, here)
    synthetic = sorted({s.data[0] for a in rows for f in a.findings for s in f.sides if not s.data[1]})
    if synthetic:
        out.append(
            f"Rows on synthetic data ({', '.join(synthetic)}): a speed ratio on inputs made on the device is the "
            "model's own for those shapes; through a loader of synthetic images it includes that loader's cost "
            "(decoding images that are not the real set's), so it is not a property of the model alone; an accuracy "
            "claim of those seeds needs the real data."
        )
    busy = busy_rows(answers)
    if busy:
        _, worst, n_cells = busy
        head = busy_rows(rows)
        where = f" (headline rows {_rows_text(head[0])})" if head else ""
        out.append(
            f"{len(busy[0])} answers{where} rest on cells that ran beside other work ({n_cells} cells flagged "
            f"cpu-shared: other processes used up to {worst:.0f}% of the CPUs while they were timed): their times "
            "are slower and noisier than the machine's own, so those ratios and verdicts are a busy machine's. Stop "
            "the other work (top shows it) and rerun those cells with --rerun, or run on a quiet machine."
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


def verdict_text(a: A.Answer) -> str:
    """The verdict as the tables print it: a decided one with what it rests on ('holds (95% CI)',
    'does not hold (range of 3: 75%)'), so a range of a few repeats never reads as a 95% interval; and
    'on a busy machine' where a side's cells ran beside other work (cpu-shared: What to trust says more)."""
    busy = any(noise.cpu_shared_flag(c.flags) for f in a.findings for s in f.sides for c in s.cells)
    if a.verdict in C.DECIDED and a.coverage_tag:
        return f"{a.verdict} ({a.coverage_tag}" + ("; on a busy machine)" if busy else ")")
    return a.verdict + (" (on a busy machine)" if busy else "")


def busy_rows(rows: list[A.Answer]) -> tuple[list[int], float, int] | None:
    """(the numbers, from 1, of ROWS whose sides hold a cell flagged cpu-shared, the most the other
    processes used, how many such cells), or None where no row has one."""
    nums: list[int] = []
    cells: set[int] = set()
    worst = 0.0
    for i, a in enumerate(rows, 1):
        shared = [c for f in a.findings for s in f.sides for c in s.cells if noise.cpu_shared_flag(c.flags)]
        if shared:
            nums.append(i)
            cells.update(id(c) for c in shared)
            worst = max([worst, *(noise.cpu_shared_pct(c.flags) for c in shared)])
    return (nums, worst, len(cells)) if nums else None


def _rows_text(nums: list[int]) -> str:
    return ", ".join(map(str, nums[:12])) + (f" and {len(nums) - 12} more" if len(nums) > 12 else "")


def tally_line(counts: dict[str, int], coverage: dict[str, int] | None = None) -> str:
    """'44 claims: 17 judged (5 at 95%, 12 from a range below 95%), 2 undecided, ...'."""
    order = C.CATEGORIES
    total = sum(counts.values())

    def item(k: str) -> str:
        text = f"{counts[k]} {k}"
        if k == "judged" and coverage:
            parts = [f"{coverage[c]} {t}" for c, t in (("95%", "at 95%"), ("range", "from a range below 95%")) if coverage.get(c)]
            text += f" ({', '.join(parts)})"
        return text

    return f"{total} claims: " + ", ".join(item(k) for k in order if counts.get(k))


def study_section(study: str, answers: list[A.Answer], here: bool = False) -> list[str]:
    """The seed's claims of one study, every answer: the table, then what each rests on (HERE:
    this machine's host named so)."""
    mine = [a for a in answers if a.study == study]
    if not mine:
        return []
    counts = A.tally(mine).get(study, {})
    coverage = A.tally_coverage(mine).get(study, {})
    md = [
        "### The seed's claims",
        "",
        f"{tally_line(counts, coverage)} (a claim counts once, by its first answer per workload). Each claim is judged on every "
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
                    verdict_text(a) + marks(a),
                    seed_text(a.claim, _unit(a)),
                    a.claim.where,
                    scope_text(a, here) or "–",
                ]
            )
        )
    md += ["", CLOSE, ""]
    noted: set[str] = set()
    for i, a in enumerate(mine, 1):
        line = details(a, a.claim.id not in noted, here) if a.findings else a.why
        noted.add(a.claim.id)
        if line:
            md.append(f"{i}. {md_text(line)}")
    return md + [""]


def tallies(answers: list[A.Answer], registry: dict) -> list[str]:
    """One line per seed: how many claims are judged, undecided, need real data, not measured here."""
    per, cov = A.tally(answers), A.tally_coverage(answers)
    lines = []
    for name, study in registry.items():
        if name in per:
            lines.append(f"- seed {study.seed_doc} ({name}): {tally_line(per[name], cov.get(name))}")
    return ["### The seeds' claims, counted", "", *lines, ""] if lines else []


def as_json(answers: list[A.Answer], here: bool = False) -> list[dict]:
    """report.json's `claims`; HERE: `this_machine` says which answers and sides are this machine's."""
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
                "coverage": a.coverage,
                "coverage_tag": a.coverage_tag,
                "why": a.why,
                "value": v.median if v else None,
                "lo": v.lo if v else None,
                "hi": v.hi if v else None,
                "interval": v.kind if v else None,
                "seed": a.claim.seed,
                "seed_text": a.claim.seed_text,
                "split": a.split,
                "scope": a.scope_label,
                "this_machine": share(a, here) < 2,
                "findings": [
                    {
                        "what": f.what,
                        "value": f.value.median,
                        "lo": f.value.lo,
                        "hi": f.value.hi,
                        "interval": f.value.kind,
                        "method": f.value.method,
                        "coverage": f.value.coverage,
                        "until_decided": f.stop,
                        "unit": f.unit,
                        "pairing": f.pairing,
                        "differs": f.differs,
                        "stale": [fx.short for fx in f.stale],
                        "sides": [
                            {
                                "run": s.run,
                                "host": s.host.label,
                                "this_machine": mine(s, here),
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
