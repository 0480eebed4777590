"""`--until-decided`: fresh-process rounds for the cells behind each declared comparison, until
its verdict is decided.

After the matrix's first rounds (its profile's repeats), every comparison the run forms from
its own cells is planned: the Ratio claims of its studies, and each ratio a Measured claim is
made of (`answers.conditions`), whose two sides ran in this run. Then, round after round:

    judge     each open comparison by its 95 % confidence sequence (bench.core.seqstats) on the
              rounds both sides ran, against the claim's region (claims.decide)
    stop it   decided        the sequence lies wholly inside or outside the region
              width          (hi - lo) / median <= --target-width
              max-repeats    it has --max-repeats rounds
              failed         a cell of it failed in a round (its earlier rounds are kept)
              budget         the rounds it still needs before it can be decided (to its first
                             bounded round, then one) do not fit in what is left of --budget;
                             comparisons of the CPU against an accelerator are admitted first,
                             then the others, cheapest first within each, so the cheap GPU-vs-CPU
                             ones are the ones the budget decides
    run       one more round (repeat index r for every cell an open comparison needs, its cells'
              steps interleaved: step i of each before step i+1 of any, so both sides of a
              comparison see the same machine within a round; per-device keeps its GPU slots);
              cells no open comparison needs keep their repeats

--fixed-rounds (Until.fixed; a GPU host's answer, `reference gpu`): no verdict stops a comparison;
each gets rounds to --max-repeats (6: stats.MIN_CI_REPEATS, where the fixed-n 95 % bootstrap
starts), GPU-vs-CPU comparisons first and cheapest first within the budget (one whose last round does
not fit beside the cheaper ones gets rounds to claims.MIN_DECIDING_RANGE, then one more while they fit),
and is judged by that fixed-n figure, else by the range of its rounds. Since no look at
the data decides how many rounds it gets, the fixed-n interval keeps its meaning; the confidence
sequence would need 10 rounds (stats.CS_MIN_ROUNDS) before it bounds anything.

Round r runs repeat r of each cell in it, so repeat i of A and of B always ran in one round:
the sequence pairs them. The budget is the time granted to the added rounds, counted from the
end of the first ones (those are the matrix as asked, and always run whole); a round is started
only when the mean time of its cells' earlier repeats says it fits in what is left.
`<out>/sequential.json` is rewritten after every round: the method, the options, and per
comparison its rounds, seconds of cells and why it stopped; the report reads it back to say
which method made each interval (bench.core.seqstats.swap).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.core import answers as A
from bench.core import claims as C
from bench.core import rows as R
from bench.core import seqstats, stats
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.registry import get_study
from bench.core.request import DEFAULT_MAX_REPEATS, parse_budget, until_options
from bench.core.request import Until as Options
from bench.core.request import check_until as check
from bench.core.resultset import json_file, load_cells
from bench.core.rows import write_json
from bench.core.stats import CS_MIN_ROUNDS, Summary
from bench.core.text import short
from bench.run.eta import estimate_s
from bench.run.schedule import Paused

if TYPE_CHECKING:
    from bench.core.study import Study


@dataclass
class Comparison:
    study: str
    claim: C.Claim
    what: str  # the condition of a Measured claim ("" for a Ratio)
    expect: C.Expect
    keys: tuple[str, str]  # the sides' configurations (Cell.replace(repeat=0).key)
    names: tuple[str, str]  # how the note names them
    stopped: str = "open"
    why: str = ""
    value: Summary | None = None
    verdict: str = ""
    seconds: float = 0.0  # its cells' share of the run's time, every round (an added round's wall time split over its cells)
    at_s: float | None = None  # seconds from the matrix's start to its stop: the time it took
    across: bool = False  # its sides ran on the CPU and on an accelerator: the question the kit answers, admitted first

    @property
    def label(self) -> str:
        return f"{self.study} {self.claim.id}" + (f" ({self.what})" if self.what else "")

    def record(self) -> dict:
        v = self.value
        return {
            "study": self.study,
            "claim": self.claim.id,
            "what": self.what,
            "cells": list(self.names),
            "rounds": v.n if v else 0,
            "stopped": self.stopped,
            "why": self.why,
            "seconds": round(self.seconds, 3),
            "at_s": None if self.at_s is None else round(self.at_s, 1),
            "verdict": self.verdict,
            "value": v.median if v else None,
            "lo": v.lo if v else None,
            "hi": v.hi if v else None,
        }


def _config(c: Cell) -> str:
    return c.replace(repeat=0).key


@dataclass
class Sequential:
    """The rounds after the first: `run(first)` returns the outcomes of the rounds it added."""

    cells: list[Cell]  # the matrix's first rounds
    out: Path
    opts: Options
    run_round: Callable[[list[Cell]], list]  # the scheduler, on one round's cells -> Outcomes
    echo: Callable[[str], None]
    started: float = field(default_factory=time.monotonic)  # the matrix's start (the closing note's total)
    after_round: Callable[[], None] | None = None  # run after every added round (`all`: the report, rewritten)
    fits: Callable[[float], bool] = lambda _s: True  # whether a round of these seconds ends before --stop-after
    added_from: float = 0.0  # when the first rounds ended: the budget counts from here
    reserve_s: float = 0.0  # seconds of the budget kept for cells that run after the rounds (`all`: the compiled ones)
    comparisons: list[Comparison] = field(default_factory=list)
    _spent: dict[str, list[float]] = field(default_factory=dict)  # config -> seconds of each repeat run here
    _reused_s: float = 0.0  # seconds earlier calls spent on the cells this one reused (a whole budget counts them)
    _reused_spans: list[tuple[float, float]] = field(default_factory=list)  # their start-end spans, by the files
    first_serial: bool = False  # the first rounds ran one cell after another (a cell's wall time is its cost)
    earlier_calls_s: float = 0.0  # the earlier calls' wall time on this results dir (calls_s: their journal)
    planned: dict[int, int] = field(default_factory=dict)  # the last _admit: id(comparison) -> rounds planned for it
    _on_disk: dict[tuple[str, int], bool] = field(default_factory=dict)  # (config, round) -> finished on disk, per _admit

    # ---- the plan and the judging
    def _findings(self, cells: list[Cell]) -> list[tuple[Study, C.Claim, A.Finding]]:
        done = load_cells([c.dir(self.out) for c in cells])
        out = []
        for name in dict.fromkeys(c.study for c in cells):
            study = get_study(name)
            mine = [c for c in done if c.study == name]
            for claim in getattr(study, "claims", ()):
                try:
                    found = A.findings_of(study, mine, claim)
                except A.DeclarationError:
                    continue  # the report lists it as not judged
                out += [(study, claim, f) for f in found if f.of_ratio and f.rank == 0 and len(f.sides) == 2]
        return out

    def _keys(self, f: A.Finding, by_id: dict[str, Cell]) -> tuple[str, str] | None:
        keys = []
        for s in f.sides:
            got = {_config(by_id[c.dir.name]) for c in s.cells if c.dir.name in by_id}
            if len(got) != 1:
                return None
            keys.append(got.pop())
        return keys[0], keys[1]

    def plan(self, cells: list[Cell]) -> list[Comparison]:
        by_id = {c.id: c for c in cells}
        seen: set[tuple] = set()
        for study, claim, f in self._findings(cells):
            keys = self._keys(f, by_id)
            ident = (study.name, claim.id, f.what, keys)
            if keys is None or ident in seen:
                continue
            seen.add(ident)
            names = seqstats.side_names(f)
            self.comparisons.append(
                Comparison(
                    study.name, claim, f.what, f.expect or claim.region, keys, (names[0], names[1]), across=across(f.sides)
                )
            )
        return self.comparisons

    def judge(self, cells: list[Cell]) -> None:
        by_id = {c.id: c for c in cells}
        now = {(s.name, cl.id, f.what, self._keys(f, by_id)): f for s, cl, f in self._findings(cells)}
        for comp in self.comparisons:
            f = now.get((comp.study, comp.claim.id, comp.what, comp.keys))
            if f is None:
                continue
            try:
                if self.opts.fixed:
                    comp.value = stats.ratio(f.sides[0].per, f.sides[1].per)
                else:
                    comp.value = seqstats.paired(f.sides[0].per, f.sides[1].per)
            except ValueError:
                continue
            comp.verdict, _ = C.decide(comp.value, comp.expect)
            comp.seconds = sum(sum(self._spent.get(k, [])) for k in dict.fromkeys(comp.keys))

    def _settle(self) -> None:
        """Stop every open comparison that is decided, narrow enough or at its last round."""
        for comp in self.comparisons:
            if comp.stopped != "open" or comp.value is None:
                continue
            w = seqstats.width(comp.value)
            if self.opts.fixed:
                if comp.value.n >= self.opts.max_repeats:
                    comp.stopped, comp.why = "max-repeats", f"{comp.verdict} at its {comp.value.n} fixed rounds"
            elif comp.verdict in C.DECIDED:
                comp.stopped, comp.why = "decided", comp.verdict
            elif self.opts.target_width is not None and w is not None and w <= self.opts.target_width:
                comp.stopped, comp.why = "width", f"{w:.1%} <= {self.opts.target_width:.1%}; {comp.verdict}"
            elif comp.value.n >= self.opts.max_repeats:
                comp.stopped, comp.why = "max-repeats", f"{comp.verdict} at {comp.value.n} rounds"

    def write(self) -> None:
        now = time.monotonic() - self.started + self.earlier_calls_s  # into the run, its earlier calls included
        for comp in self.comparisons:
            if comp.stopped != "open" and comp.at_s is None:
                comp.at_s = now
        write_json(
            self.out / seqstats.RECORD,
            {
                "method": seqstats.FIXED_METHOD if self.opts.fixed else seqstats.METHOD,
                "fixed": self.opts.fixed,
                "confidence": 1 - seqstats.ALPHA,
                "options": {
                    "max_repeats": self.opts.max_repeats,
                    "budget_s": self.opts.budget_s,
                    "target_width": self.opts.target_width,
                },
                "elapsed_s": round(time.monotonic() - self.started, 1),
                "added_s": round(time.monotonic() - self.added_from, 1) if self.added_from else 0.0,
                "comparisons": [c.record() for c in self.comparisons],
            },
        )

    # ---- the rounds
    def note(self, outcomes: list, share: float | None = None, serial: bool = False) -> None:
        """Each outcome's seconds: SHARE (an added round's wall time over the cells that ran in it: their
        steps interleave, so each cell's own seconds span the whole round), each cell's part weighted by
        the time it was busy (an equal split gave a 5 s cell a 49 s cell's cost, and the next rounds'
        estimates came out 40 % short), else its own wall time where the
        cells ran one after another (SERIAL: a sequential first round, process start included), else the
        time the cell itself was busy (its warm-up and steps: in interleaved first rounds a cell's
        start-to-end spans every other cell's steps too, which made a slow cell's rounds look 4x dearer
        than they ran). A reused cell's come from its files (cell.json is written as it starts,
        rows.jsonl as it ends), so a resumed run still counts what its cells took: cells whose spans
        overlap ran side by side (an interleaved round), so each costs its share of their union, and the
        whole budget counts the union once (summed, a resumed round of 21 cells counted 45 minutes for
        its 3 and left no budget)."""
        spans: list[tuple[float, float, Any]] = []
        weight = _weights(outcomes)
        for o in outcomes:
            if o.status == "reused":
                d = o.cell.dir(self.out)
                try:
                    t0, t1 = (d / "cell.json").stat().st_mtime, (d / "rows.jsonl").stat().st_mtime
                except OSError:
                    continue
                if 0 < t1 - t0 < 30 * 86400:
                    spans.append((t0, t1, o))
                continue
            if share is not None:
                secs = share * weight.get(id(o), 1.0)
            elif serial:
                secs = float(o.seconds)
            else:
                secs = float(getattr(o, "active_s", None) or o.seconds)
            self._spent.setdefault(_config(o.cell), []).append(secs)
        for group in _side_by_side(sorted(spans, key=lambda s: s[0])):
            length = max(t1 for _, t1, _ in group) - min(t0 for t0, _, _ in group)
            for _, _, o in group:
                self._spent.setdefault(_config(o.cell), []).append(length / len(group))
            self._reused_spans.append((min(t0 for t0, _, _ in group), max(t1 for _, t1, _ in group)))
        # the earlier calls' journal counts what the cells' files leave out (process starts, reports,
        # gaps): the files alone counted 420 s for two calls of 1,024 s, and a third call went over budget
        self._reused_s = max(_union(self._reused_spans), self.earlier_calls_s)

    def _estimate(self, round_cells: list[Cell]) -> float:
        """Seconds the round should take: each cell's mean over its repeats run here, else its study's estimate."""
        total = 0.0
        for c in round_cells:
            v = self._spent.get(_config(c))
            if v:
                total += sum(v) / len(v)
            else:
                total += estimate_s(c)  # this host's (a CPU cell's scaled by its cores)
        return total

    def left_s(self) -> float | None:
        """Seconds of --budget left for rounds (None: no budget), less what is kept for the cells after them.
        A whole budget counts the run from its start and what earlier calls on this results dir took (their
        journal, calls.json; at least the resumed cells' files' times); else only the rounds added here."""
        if self.opts.budget_s is None:
            return None
        now = time.monotonic()
        spent = now - self.started + self._reused_s if self.opts.whole else now - self.added_from
        return self.opts.budget_s - spent - self.reserve_s

    def budget_end(self) -> float | None:
        """The time.monotonic() at which the whole budget ends, what is kept for the cells after the rounds
        included (None: no budget): where those cells stop, by their running estimates."""
        left = self.left_s()
        return None if left is None else time.monotonic() + left + self.reserve_s

    def _ahead(self, comp: Comparison) -> int:
        """Rounds COMP needs at least before it can stop by itself: to its first bounded round, else one
        (--fixed-rounds: to its last)."""
        n = comp.value.n if comp.value else 0
        return max(1, (self.opts.max_repeats if self.opts.fixed else CS_MIN_ROUNDS) - n)

    def _short(self, comp: Comparison) -> int:
        """Under --fixed-rounds, the rounds COMP needs to be judged at all when its last round does not fit:
        to claims.MIN_DECIDING_RANGE, then one more at a time (H200-mlp-scratch-profile's first call: the
        profile's GPU-vs-CPU pair, 126 s a round, was stopped at one repeat with 1,065 s of the budget
        left, because its five rounds did not fit beside the cheaper ones' four)."""
        n = comp.value.n if comp.value else 0
        return max(1, C.MIN_DECIDING_RANGE - n)

    def _done(self, cell: Cell, repeat: int) -> bool:
        """Whether CELL's round REPEAT is finished in the results dir (an earlier call's: reused, no cost).
        Read once per `_admit` (`_on_disk`): its trials ask again for every comparison they add."""
        at = (_config(cell), repeat)
        if at not in self._on_disk:
            try:
                self._on_disk[at] = R.cell_status(cell.replace(repeat=repeat).dir(self.out)) in ("ok", "skipped")
            except (KitError, OSError):
                self._on_disk[at] = False
        return self._on_disk[at]

    def _rounds_s(self, cell: Cell, n: int, start: int | None) -> float:
        """Seconds CELL's next N rounds take: its estimate each, but none for a round from START on that an
        earlier call finished (START None: estimates alone). A resumed run's third call on one H200 stopped
        roofline's and profile's comparisons at their first round, 30 s of the budget left, for rounds the
        second call had run (3 rounds before, 1 after: its report lost two rounds of each)."""
        one = self._estimate([cell])
        if start is None:
            return one * n
        return one * sum(not self._done(cell, j) for j in range(start, start + n))

    def _free(self, comp: Comparison, base: dict[str, Cell], start: int | None) -> int:
        """How many of COMP's next rounds from START an earlier call finished, every cell of each (0 when
        START is None). They are admitted beside any budget: the same H200 run's call, resumed, kept
        roofline's MobileNetV2 pair at 1 round where its second was on disk, the other four it needed not."""
        keys = [k for k in comp.keys if k in base]
        n = 0
        while (
            start is not None and keys and start + n < self.opts.max_repeats and all(self._done(base[k], start + n) for k in keys)
        ):
            n += 1
        return n

    def plan_s(self, trial: list[Comparison], ahead: dict[int, int], base: dict[str, Cell], start: int | None = None) -> float:
        """Seconds the rounds TRIAL still needs: each cell's cost times the most rounds a comparison of
        TRIAL that uses it still needs (AHEAD, by id; a cell shared by two comparisons runs once a round);
        from round START on, a round already finished costs nothing."""
        rounds: dict[str, int] = {}
        for c in trial:
            for k in c.keys:
                if k in base:
                    rounds[k] = max(rounds.get(k, 0), ahead[id(c)])
        return sum(self._rounds_s(base[k], n, start) for k, n in rounds.items())

    def _admit(
        self, open_: list[Comparison], base: dict[str, Cell], left: float | None, start: int | None = None
    ) -> tuple[list[Comparison], float, list[Comparison]]:
        """The open comparisons the next round runs, GPU-vs-CPU ones first (`across`: the kit's question;
        H200-fixed-rounds gave 6 rounds to AMP over default and 2 to mnist-cnn's kit GPU-over-CPU pairs),
        cheapest first within each, while the rounds each still needs
        before it can be decided fit in LEFT (None: all); the round's estimated seconds; and those
        the budget stops now: the ones whose own rounds do not fit in LEFT even alone (a comparison
        that fits alone but not beside the cheaper ones waits for a later round, when they are done).
        Under --fixed-rounds a waiting one could not reach its last round (rounds are numbered from the
        first), so one whose last round does not fit beside the cheaper ones is admitted short, when the
        rounds to be judged at all (`_short`) fit, and stopped otherwise.
        The cheap ones are the ones that get decided. From round START on (a resumed run), a round an
        earlier call finished costs nothing, so rounds already run are always admitted, budget or not."""
        self._on_disk = {}  # the results dir as it is now: a round may have finished since the last _admit
        cost = {id(c): self.plan_s([c], {id(c): 1}, base, start) for c in open_}
        admitted: list[Comparison] = []
        ahead: dict[int, int] = {}
        stopped: list[Comparison] = []

        def fit(s: float) -> bool:  # nothing to run (s == 0) fits whatever is left
            return left is None or s <= max(left, 0.0)

        for comp in sorted(open_, key=lambda c: (not c.across, cost[id(c)])):
            trial = admitted + [comp]
            if fit(self.plan_s(trial, ahead | {id(comp): self._ahead(comp)}, base, start)):
                admitted, ahead[id(comp)] = trial, self._ahead(comp)
            elif self.opts.fixed and fit(self.plan_s(trial, ahead | {id(comp): self._short(comp)}, base, start)):
                admitted, ahead[id(comp)] = trial, self._short(comp)
            elif free := self._free(comp, base, start):  # its next rounds are on disk: those, at no cost
                admitted, ahead[id(comp)] = trial, free
            elif self.opts.fixed or self.plan_s([comp], {id(comp): self._ahead(comp)}, base, start) > (left or 0):
                stopped.append(comp)
        self.planned = ahead
        keys = list(dict.fromkeys(k for c in admitted for k in c.keys))
        return admitted, sum(self._rounds_s(base[k], 1, start) for k in keys if k in base), stopped

    def run(self, first: list) -> list:
        """After the first rounds' outcomes FIRST: plan, then add rounds until every comparison stopped."""
        self.note(first, serial=self.first_serial)
        self.added_from = time.monotonic()
        cells = list(self.cells)
        self.plan(cells)
        if not self.comparisons:
            self.echo("until decided: this run forms no comparison of two of its own cells: nothing to add")
            self.write()
            return []
        self.judge(cells)
        self._settle()
        added: list = []
        base = {_config(c): c.replace(repeat=0) for c in cells}
        r = max((c.repeat for c in cells), default=0) + 1
        try:
            while any(c.stopped == "open" for c in self.comparisons):
                self.write()
                open_ = [c for c in self.comparisons if c.stopped == "open"]
                if r >= self.opts.max_repeats:  # a comparison short of rounds (a failed first repeat) ends here
                    for comp in open_:
                        comp.stopped, comp.why = "max-repeats", f"{comp.verdict} at {comp.value.n if comp.value else 0} rounds"
                    break
                left = self.left_s()
                admitted, need, over = self._admit(open_, base, left, start=r)
                for comp in over:
                    per = self._estimate([base[k] for k in comp.keys if k in base])
                    ahead = self._ahead(comp)
                    comp.stopped = "budget"
                    beside = " beside the cheaper comparisons' rounds" if admitted else ""
                    comp.why = (
                        f"its next {ahead} round(s) need ~{per * ahead:.0f} s, {max(left or 0, 0):.0f} s of the budget "
                        f"left{beside}; {comp.verdict}"
                    )
                if not admitted:
                    break
                open_ = admitted
                keys = list(dict.fromkeys(k for comp in open_ for k in comp.keys))
                round_cells = [base[k].replace(repeat=r) for k in keys if k in base]
                if not self.fits(need):  # --stop-after: this call ends here; the same command resumes
                    raise Paused([])
                self.echo(
                    f"until decided: round {r + 1} for {len(open_)} open comparison(s): {len(round_cells)} cells"
                    + (f", ~{need:.0f} s of {left:.0f} s left" if left is not None else "")
                )
                t0 = time.monotonic()
                got = self.run_round(round_cells)
                ran = sum(o.status != "reused" for o in got)  # a resumed round's reused cells took no time here
                self.note(got, (time.monotonic() - t0) / max(ran, 1))
                added += got
                cells += round_cells
                failed = {_config(o.cell): o for o in got if o.status not in ("ok", "reused", "skipped")}
                for comp in open_:
                    bad = [failed[k] for k in comp.keys if k in failed]
                    if bad:
                        o = bad[0]
                        comp.stopped = "failed"
                        comp.why = f"{o.cell.id} failed in round {r + 1}: {o.reason or o.status}"
                        self.echo(
                            f"error: {comp.label}: {o.cell.id} failed in round {r + 1} ({o.reason or o.status}); "
                            f"the comparison stops here, its earlier rounds are kept"
                        )
                self.judge(cells)
                self._settle()
                self.write()
                if self.after_round is not None:
                    self.after_round()
                r += 1
        except Paused as err:  # --stop-after (here, or the scheduler's within a round): the rounds so far are kept
            for comp in self.comparisons:
                if comp.stopped == "open":
                    comp.stopped, comp.why = "paused", f"--stop-after came before round {r + 1}; {comp.verdict}"
            self.write()
            raise Paused(added + [o for o in err.outcomes if o not in added]) from None
        except BaseException:
            for comp in self.comparisons:
                if comp.stopped == "open":
                    comp.stopped, comp.why = "interrupted", "the run was stopped"
            self.write()
            raise
        self.judge(cells)
        self.write()
        return added

    def lines(self) -> list[str]:
        """The closing note: per comparison its value, verdict, rounds, time and why it stopped."""
        total = time.monotonic() - self.started
        added = time.monotonic() - self.added_from if self.added_from else 0.0
        out = [
            "",
            f"== until decided: {len(self.comparisons)} comparison(s); the run took {total:.0f} s, its added rounds {added:.0f} s "
            f"({seqstats.FIXED_METHOD if self.opts.fixed else seqstats.METHOD}; record: {self.out / seqstats.RECORD})",
        ]
        for c in self.comparisons:
            v = c.value
            val = f"{short(v.median)}x{v.bracket()}" if v else "no rounds"
            out.append(
                f"{c.label}: {c.names[0]} / {c.names[1]}: {val} {c.verdict or '-'}; "
                + seqstats.stop_text(
                    {"rounds": v.n if v else 0, "seconds": c.seconds, "at_s": c.at_s, "stopped": c.stopped, "why": ""}
                )
                + (f" ({c.why})" if c.why and c.stopped != "decided" else "")
            )
        return out


CALLS = "calls.json"  # the calls that made a results dir: each one's wall time, rewritten as it goes


def across(sides: tuple) -> bool:
    """Whether a comparison's two SIDES ran on the CPU and on an accelerator: their `platform` facets
    (answers.facets: the row backend's, "?" for a backend the study does not know)."""
    plats = {side.facets.get("platform") for side in sides}
    return len(plats) == 2 and "cpu" in plats and all(isinstance(p, str) and p not in ("", "?") for p in plats)


@functools.cache
def _journal_model() -> Any:
    """The calls journal's pydantic model, built once (bench.core.seqstats._model's pattern)."""
    from pydantic import BaseModel, ConfigDict, Field

    class Call(BaseModel):
        model_config = ConfigDict(extra="ignore")
        call: str = Field(max_length=64)
        s: float = Field(ge=0, le=30 * 86400, allow_inf_nan=False)

    class Journal(BaseModel):
        model_config = ConfigDict(extra="ignore")
        calls: list[Call] = Field(max_length=10_000)

    return Journal


def _journal(out: Path) -> list[dict]:
    """OUT's call journal as a list of {call, s}; [] where there is none or it cannot be trusted (a
    symlink, too big, not JSON, or not a list of calls with finite seconds from 0 to 30 days)."""
    raw = json_file(Path(out) / CALLS)
    if not raw:
        return []
    try:
        return [c.model_dump() for c in _journal_model().model_validate(raw).calls]
    except Exception:  # noqa: BLE001 - pydantic's ValidationError: an untrusted file that is not ours
        return []


def calls_s(out: Path) -> float:
    """Seconds the earlier calls of the matrix spent on OUT, by its journal (0.0 where there is none,
    or none to trust)."""
    return float(sum(c["s"] for c in _journal(out)))


def record_call(out: Path, token: str, started: float) -> None:
    """This call's wall time so far (from STARTED, monotonic) into OUT's journal, under TOKEN (its
    entry is replaced, the others kept; one that cannot be trusted starts again)."""
    calls = [c for c in _journal(out) if c["call"] != token]
    calls.append({"call": token, "s": round(time.monotonic() - started, 1)})
    try:  # best effort: a journal that cannot be written costs the next call its count, never this run
        _write_journal(out, calls)
    except (OSError, KitError):
        pass


def _write_journal(out: Path, calls: list[dict]) -> None:
    write_json(
        Path(out) / CALLS, {"about": "each call's wall time on this results dir (a whole --budget counts them)", "calls": calls}
    )


def _weights(outcomes: list) -> dict[int, float]:
    """id(outcome) -> its part of an interleaved round's time, over the outcomes that ran: its busy
    seconds (warm-up and steps) over their mean, so the parts sum to the number of cells; 1.0 each where
    a busy time is missing."""
    ran = [o for o in outcomes if o.status != "reused"]
    busy = [getattr(o, "active_s", None) for o in ran]
    if not ran or any(not isinstance(b, (int, float)) or not b > 0 for b in busy):
        return {}
    mean = sum(busy) / len(busy)  # type: ignore[arg-type]
    return {id(o): float(b) / mean for o, b in zip(ran, busy)}  # type: ignore[arg-type]


def _side_by_side(spans: list) -> list[list]:
    """SPANS (start, end, ...), sorted by start, in groups whose spans overlap (cells that ran together)."""
    groups: list[list] = []
    end = -math.inf
    for span in spans:
        if not groups or span[0] >= end:
            groups.append([span])
            end = span[1]
        else:
            groups[-1].append(span)
            end = max(end, span[1])
    return groups


def _union(spans: list[tuple[float, float]]) -> float:
    """The seconds SPANS cover, each second once."""
    total, end = 0.0, -math.inf
    for t0, t1 in sorted(spans):
        if t1 > end:
            total += t1 - max(t0, end)
            end = t1
    return total


def stopped_ok(comparisons: list[Comparison]) -> bool:
    """Every comparison ended by its own rule (decided, width, max-repeats), none by a failure."""
    return all(c.stopped in ("decided", "width", "max-repeats", "budget") for c in comparisons)


__all__ = ["DEFAULT_MAX_REPEATS", "Comparison", "Options", "Sequential", "check", "parse_budget", "stopped_ok", "until_options"]
