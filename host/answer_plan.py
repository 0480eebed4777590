"""The main job's plan on a host with a GPU: the answer first, then rounds until decided.

`orchestrate.py all` without --profile resolves `auto`: on a CPU alone each study keeps its own
quick choice; where a GPU platform runs too, every study runs its `answer` matrix (the cells its
comparisons pair, the same work on every platform, bench/core/request.py `effective_profile`):

    round 1   every cell once, in parts (bench.run.matrix.answer_parts): each study's first
              GPU-over-CPU pair, then the others, then the ones with a one-time compile
              (Study.deferred); the report is written after each part, so the first report,
              every study's headline row filled, comes after a few minutes
    rounds    `--until-decided --fixed-rounds` for the cells behind each comparison: rounds to
              ROUNDS (6, where the fixed-n 95 % bootstrap starts; the confidence sequence would
              need 10 before it bounds anything), cheapest comparisons first, within --budget (the
              whole run's time, round 1 included; default DEFAULT_BUDGET); the report is rewritten
              after every round, so a stop at any point leaves one
    compiled  the cells with a one-time compile (Study.deferred) run last, once: the rounds keep
              their estimated time in the budget

In containers (one per platform, run one after the other) the rounds cannot pair a CPU cell with
a GPU cell in one round: there the answer runs its cells DEFAULT_CONTAINER_REPEATS times instead.
Host side only: the plan is printed before the first cell; nothing here imports torch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bench.core.errors import UsageError
from bench.core.request import RunRequest, effective_profile, parse_budget
from bench.core.stats import MIN_CI_REPEATS
from bench.run.eta import cpu_speedup

DEFAULT_BUDGET = "20m"  # a one-GPU host: the whole run, the first round included
DEFAULT_CONTAINER_REPEATS = 3
ROUNDS = MIN_CI_REPEATS  # rounds a comparison gets (fixed, whatever its verdict on the way)


@dataclass(frozen=True)
class AnswerPlan:
    request: RunRequest
    cells: int  # round 1's cells
    first_s: float  # round 1's estimate on this host
    pair_cells: int  # the first part's cells (each study's GPU-over-CPU pair): the first report after them
    pair_s: float  # their estimate
    budget_s: float | None  # None: no rounds (containers)
    platforms: tuple[str, ...]


def report_argv(out: Path, report_dir: Path, context: list[Path]) -> tuple[str, ...]:
    """The command the matrix runs between rounds: this CLI's `report` of OUT into REPORT_DIR."""
    argv = [sys.executable, "-c", "from host.cli import start; start()", "report", str(out), "--out", str(report_dir)]
    for c in context:
        argv += ["--context", str(c)]
    return tuple(argv)


def first_round_s(req: RunRequest) -> tuple[int, float]:
    """(cells, seconds) of REQ's first round on this host, by the ETA's own estimate of each cell
    (bench.run.eta.estimate_here: a CPU cell's scaled by this host's cores)."""
    cells = _first_round(req)
    return len(cells), _seconds(cells)


def _first_round(req: RunRequest) -> list:
    from bench.run.matrix import resolve

    return [c for c in resolve(req.replace(repeats=1), resolve_data=False) if c.repeat == 0]


def _seconds(cells: list) -> float:
    from bench.run.eta import estimate_s

    speed = cpu_speedup()
    return sum(estimate_s(c, speed) for c in cells)


def plan(
    req: RunRequest,
    todo: list[str],
    containers: bool,
    report: tuple[str, ...],
    budget: str | None = None,
    rounds_first: bool = False,
) -> AnswerPlan | None:
    """The answer's run request for REQ on the platforms TODO (None where REQ is not the answer:
    a profile named, or no GPU platform here). A bad --budget, or one shorter than round 1, is one
    UsageError line. ROUNDS_FIRST: the compiled cells only in the budget the rounds leave."""
    if req.profile != "auto" or effective_profile(req.profile, todo) != "answer":
        return None
    from bench.run.matrix import first_part

    r = req.replace(profile="answer", platforms=tuple(todo))
    cells = _first_round(r)
    n, first = len(cells), _seconds(cells)
    pair = first_part(cells)  # not answer_parts()[0]: with no pair formed, that is the rest of round 1
    if containers:  # each platform in its own container, one after the other: no round pairs a CPU and a GPU cell
        return AnswerPlan(
            r.replace(repeats=req.repeats or DEFAULT_CONTAINER_REPEATS), n, first, len(pair), _seconds(pair), None, tuple(todo)
        )
    given = budget or req.budget
    budget = given or DEFAULT_BUDGET
    budget_s = parse_budget(budget)
    if budget_s < first:
        if given:  # the user's: one line, before any cell
            raise UsageError(
                f"--budget {budget} is shorter than the answer's first round here (~{_mins(first)}: {n} cells once); "
                f"give at least --budget {int(first // 60) + 1}m, or --study to answer fewer studies"
            )
        # the default on a slow host: round 1 runs whole, and a third of it again for rounds
        budget = f"{int(first * 4 / 3 // 60) + 1}m"
        budget_s = parse_budget(budget)
    r = r.replace(
        repeats=req.repeats or 1,
        until_decided=True,
        max_repeats=ROUNDS,
        fixed_rounds=True,
        rounds_first=rounds_first,
        budget=budget,
        budget_whole=True,
        after_round=report,
        schedule=req.schedule,
    )
    return AnswerPlan(r, n, first, len(pair), _seconds(pair), budget_s, tuple(todo))


def lines(p: AnswerPlan) -> list[str]:
    """The plan, printed before the first cell."""
    plats = " and ".join(p.platforms)
    head = (
        f"answer first: every study's comparisons of this host's {plats}, the same work on both sides "
        f"(profile answer): {p.cells} cells once, ~{_mins(p.first_s)} by the studies' estimates"
    )
    if p.budget_s is None:
        return [head + f", {p.request.repeats} repeats each (containers run one platform after the other: no added rounds)"]
    return [
        head + f"; the first report after each study's GPU-over-CPU pair ({p.pair_cells} cells, ~{_mins(p.pair_s)}), "
        "again after the rest of them;",
        f"then rounds to {ROUNDS} for each comparison (its 95% bootstrap interval), cheapest first, the compiled cells "
        + ("last in what the rounds leave of" if p.request.rounds_first else "last, within")
        + f" --budget {p.request.budget} for the whole run; the report is rewritten after every round "
        "(Ctrl-C keeps it). The seeds' own setups: --profile default.",
    ]


def _mins(s: float) -> str:
    s = round(s)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


__all__ = ["DEFAULT_BUDGET", "ROUNDS", "AnswerPlan", "cpu_speedup", "first_round_s", "lines", "plan", "report_argv"]
