"""`python -m bench matrix`: studies x platforms x profile -> validated, resolved cells -> the scheduler.

Everything a user can get wrong is checked here, once, before any cell starts: study and
platform names, --set / --only keys and values, every cell's parameters, the data dir
and the dataset (each study resolves its cells' data identity, checksum included).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.core import params as P
from bench.core.cell import Cell
from bench.core.errors import KitError
from bench.core.lock import results_lock
from bench.core.provenance import environment_label
from bench.core.registry import get_study, select
from bench.core.request import MAX_REPEATS, RunRequest, Until, effective_profile
from bench.core.resultset import load_cells
from bench.core.rows import write_json
from bench.run import speedline
from bench.run.eta import estimate_s
from bench.run.schedule import Interrupted, Paused, Scheduler
from bench.run.sequential import Sequential, calls_s, check, record_call


def resolve(req: RunRequest, resolve_data: bool = True, allow_empty: bool = False) -> list[Cell]:
    """REQ's cells (its studies x platforms x profile, --set, --only; each study resolving its
    cells' data in REQ's data dir unless not RESOLVE_DATA), each REQ.repeats times (default:
    DEFAULT_REPEATS of the profile), in repeat-major order: every cell's repeat 0, then every
    cell's repeat 1, ..."""
    study_names, platforms = list(req.studies), list(req.platforms)
    profile = effective_profile(req.profile, platforms)  # auto with a GPU platform: answer
    sets, only = list(req.sets), list(req.only)
    chosen = select(study_names)  # platforms, profile and repeats: checked when REQ was made
    env = environment_label()
    P.check_only(only, chosen)
    cells: list[Cell] = []
    n_of: dict[str, int] = {}  # cell key -> repeats (the profile each study ran on that platform decides)
    generated = 0
    for study in chosen:
        made_n: list[tuple[Cell, int]] = []
        for p in dict.fromkeys(platforms):
            prof = study.profile_for(p, profile)
            if prof not in study.profiles:
                raise KitError(f"{study.name} has no profile {prof!r}: choose {', '.join(study.profiles)} (or auto)")
            made = study.matrix(p, prof)
            n = default_repeats(prof) if req.repeats is None else req.repeats
            made_n += [(c2, n) for c2 in P.apply(study, made, sets, chosen)]  # --set keeps order and length
        generated += len(made_n)
        n_of.update({c.key: n for c, n in made_n})
        mine = [c for c, _ in made_n if P.matches(c, only)]
        # `--set` can make two cells the same work (--set dtype=float64 over the float32 and float64
        # cells): run it once, under the later cell's name (the one the matrix made for that value)
        last = {c.key: i for i, c in enumerate(mine)}
        mine = [c for i, c in enumerate(mine) if last[c.key] == i]
        for c in mine:
            study.validate(c)
        resolved = [study.resolve(c, req.data_dir) for c in mine] if resolve_data else mine
        resolved = [c.replace(env=env) for c in resolved]  # another environment is other work: its own cell
        n_of.update({r.key: n_of[c.key] for c, r in zip(mine, resolved)})
        cells += resolved
    if not cells and (generated or not allow_empty):  # --only removed every cell: a mistake
        raise KitError(
            f"no cells to run: {', '.join(s.name for s in chosen)} on {', '.join(platforms)}"
            + (f" with --only {' '.join(only)}" if only else "")
        )
    if any(c.repeat for c in cells):  # `--set repeat=K` or `--only repeat=K` asked for one repeat by hand
        return cells
    most = max(n_of[c.key] for c in cells) if cells else 1
    return [dataclasses.replace(c, repeat=r) for r in range(most) for c in cells if r < n_of[c.key]]


# repeats (fresh processes) per cell: a smoke run checks wiring, a benchmark needs an interval
DEFAULT_REPEATS = {"smoke": 1}
PAUSED = 75  # the exit code of a run that stopped at --stop-after with work left (EX_TEMPFAIL: run it again)


def default_repeats(profile: str) -> int:
    return DEFAULT_REPEATS.get(profile, 3)  # "auto" is resolved per study before this is asked


@contextlib.contextmanager
def _bar(on: bool) -> Iterator[tuple[Callable[[str], None] | None, Callable[[int, int, float], None] | None]]:
    """(echo, progress) for the Scheduler: None, None (its plain stderr lines) unless ON. The
    bar shows the scheduler's own ETA (bench.run.eta), the one its lines print, never a second."""
    if not on:
        yield None, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.run.schedule import fmt_seconds

    with Progress(
        TextColumn("steps"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta {task.fields[eta]}"),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("steps", total=None, eta="...")

        def say(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

        def update(done: int, total: int, left: float) -> None:
            progress.update(task, completed=done, total=total, eta=fmt_seconds(left))

        yield say, update


def cell_count(cells: list[Cell]) -> str:
    """How CELLS break down into configurations and repeats, honestly when the studies' profiles
    give them different repeats: '5 configurations x 3 repeats + 8 x 1 repeat'."""
    per: dict[str, int] = {}
    for c in cells:
        k = c.replace(repeat=0).key
        per[k] = per.get(k, 0) + 1
    by: dict[int, int] = {}
    for n in per.values():
        by[n] = by.get(n, 0) + 1
    groups = sorted(by.items(), key=lambda x: -x[0])  # (repeats, configurations), most repeats first
    rep = [f"{n} repeat{'s' if n != 1 else ''}" for n, _ in groups]
    first = f"{groups[0][1]} configuration{'s' if groups[0][1] != 1 else ''} x {rep[0]}"
    return first + "".join(f" + {k} x {r}" for (_, k), r in zip(groups[1:], rep[1:]))


def run_matrix(req: RunRequest, echo: Callable[[str], None] = print, bar: bool = False, noise: bool = True) -> int:
    """Run REQ's matrix; returns the exit code (1 when any cell ended in error). Every step prints
    one plain line with the run's ETA (containers and logs read those); BAR adds a rich progress
    bar for a terminal. REQ.until (--until-decided): after the first rounds, rounds for the cells
    behind each comparison until it is decided (bench/run/sequential.py). NOISE: print the host's
    noise line first (bench/measure/noisecheck.py; its probe only where a cell has 2+ repeats)."""
    started = time.monotonic()
    paths, until, schedule = req.paths, req.until(), req.schedule
    study_names, platforms, out = list(req.studies), list(req.platforms), paths.out
    profile = effective_profile(req.profile, platforms)
    cells = resolve(req, allow_empty=True)
    if until is not None:
        check(until, max((c.repeat for c in cells), default=0) + 1, MAX_REPEATS)
    if not cells:  # these studies have no cell for this platform (e.g. mlp-scratch on mps)
        echo(f"nothing to run: {', '.join(study_names) or 'no study'} has no cell on {', '.join(platforms)}")
        return 0
    data = sorted({(str(c.params.get("dataset")), str(c.params.get("dataset_sha256", ""))[:12]) for c in cells})
    data = [(n + " (the embedded default: not the real dataset)" if n == "digits" else n, h) for n, h in data]
    echo(
        f"{len(cells)} cells ({cell_count(cells)}; repeats in rounds; {', '.join(platforms)}, profile {profile}, "
        f"schedule {schedule}) -> {out}"
    )
    echo(f"data: {', '.join(f'{n} {h}' if h else n for n, h in data)}")
    if noise:
        from bench.measure.noisecheck import matrix_line

        echo(matrix_line(repeated=any(c.repeat for c in cells), platforms=platforms))
    seq: Sequential | None = None
    paused: Paused | None = None
    report = _after_round(req, echo, started)
    with results_lock(out):  # one writer per results dir: a second run refuses with one line
        earlier_s = calls_s(Path(out))  # what the earlier calls on OUT took (a whole --budget counts it)
        call = uuid.uuid4().hex[:12]

        def mark() -> None:  # this call's time so far into OUT's journal, then the report
            record_call(Path(out), call, started)
            if report is not None:
                report()

        hook = None if report is None else mark
        try:
            with _bar(bar) as (say, progress):
                sched = Scheduler(paths, req.cell_timeout_s, req.rerun, echo=say, devices=list(req.devices), progress=progress)
                stop_s = req.stop_after_s
                sched.stop_at = None if stop_s is None else started + stop_s
                kept: list = []  # outcomes of the parts done, for a pause in a later one
                try:
                    late: list[Cell] = []  # the compiled cells, after the added rounds (their time kept in the budget)
                    if hook is not None:
                        # the answer first, in parts with the report written after each (answer_parts)
                        parts = answer_parts(cells)
                        if until is not None:
                            late = [c for c in cells if not _early(c)]
                            parts = [p for p in ([c for c in part if _early(c)] for part in parts) if p]
                        later_s = sum(estimate_s(c) for c in late)
                        rounds_s = _rounds_s(until, [c for p in parts for c in p], earlier_s, later_s)
                        for i, part in enumerate(parts):
                            sched.then_s = sum(estimate_s(c) for later in parts[i + 1 :] for c in later) + later_s + rounds_s
                            kept += sched.run(part, schedule)
                            hook()
                        sched.then_s = later_s
                    else:
                        kept = sched.run(cells, schedule)
                    outcomes = kept
                    if until is not None:
                        # the added rounds interleave their cells' steps (per-device keeps its GPU slots), so
                        # the two sides of a comparison share the machine's state within a round: the round
                        # is the unit the sequence pairs
                        again = schedule if schedule == "per-device" else "interleaved"
                        first = [c for c in cells if id(c) not in {id(x) for x in late}]
                        kept_s = 0.0 if until.rounds_first else sum(estimate_s(c) for c in late)

                        def one_round(more: list[Cell]) -> list:
                            # the ETA: this round, the rounds the budget still leaves after it, the compiled cells
                            left = seq.left_s() if seq is not None else None
                            sched.then_s = kept_s + max((left or 0.0) - sum(estimate_s(c) for c in more), 0.0)
                            return sched.run(more, again)

                        seq = Sequential(first, Path(out), until, one_round, say or echo, started, hook, sched.fits)
                        seq.reserve_s = 0.0 if until.rounds_first else sched.then_s
                        seq.earlier_calls_s = earlier_s
                        seq.first_serial = schedule == "sequential"
                        kept = kept + seq.run(kept)
                        outcomes = kept
                        # the compiled cells: once, after the rounds (their comparisons keep one repeat)
                        if late and until.rounds_first:
                            late = _fitting(late, seq.left_s(), say or echo)
                        if late and hook is not None:
                            sched.then_s = 0.0
                            kept = kept + _in_budget(sched, late, schedule, seq.budget_end())
                            outcomes = kept
                            hook()
                except Paused as p:  # --stop-after: what finished is kept; the same command resumes
                    paused = p
                    outcomes = kept + p.outcomes
                    if hook is not None and any(o.status in ("ok", "reused") for o in outcomes):
                        hook()  # the report of what finished (none: nothing to report yet)
        except Interrupted as stop:
            n = {s: sum(o.status == s for o in stop.outcomes) for s in ("ok", "reused", "interrupted")}
            raise KitError(
                f"interrupted: {n['ok'] + n['reused']} cells finished, {n['interrupted']} stopped and listed as "
                f"interrupted; run the same command again to resume",
                exit_code=130,
            ) from None
        finally:
            record_call(Path(out), call, started)
    for name in dict.fromkeys(c.study for c in cells):
        study = get_study(name)
        done = load_cells([o.cell.dir(out) for o in outcomes if o.cell.study == name])
        lines, summary = study.summary(done)
        if lines:
            echo("\n".join(["", f"== {name}", *lines]))
        if summary:
            write_json(Path(out) / "summaries" / f"{name}.json", summary)  # this run's cells only
    if seq is not None:
        echo("\n".join(seq.lines()))
    ran = load_cells(list(dict.fromkeys(o.cell.dir(out) for o in outcomes)))  # a cell of several rounds once
    fastest = speedline.sorted_lines(ran)  # timm's benchmark.py's summary: fastest first
    if fastest:
        echo("\n".join(["", *fastest]))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("ok", "reused", "skipped", "error")}
    echo(f"\n{len(outcomes)} cells: " + ", ".join(f"{s} {n}" for s, n in counts.items()) + f"; rows under {out}")
    for line in speedline.cpu_shared_lines(ran):  # once per run, last, where it is seen
        echo(line)
    if counts["error"]:
        return 1
    if paused is not None:
        echo(
            f"paused at --stop-after {req.stop_after} ({time.monotonic() - started:.0f} s): every finished cell is kept; "
            "run the same command again to go on"
        )
        return PAUSED
    return 0


def _rounds_s(until: Until | None, first: list[Cell], earlier_s: float, later_s: float) -> float:
    """The seconds the ETA gives the added rounds before they start: what a whole --budget leaves after
    round 1 (FIRST, by the estimates), the earlier calls (EARLIER_S) and the compiled cells (LATER_S),
    at most every comparison's remaining rounds (a repeat of round 1 each). The rounds fill the budget
    on a GPU host (on one H200, round 1 was 12 of the 20 minutes): an ETA of round 1 and the compiled
    cells alone said 10 min 31 s at the first step of a run that went on for 23 minutes (2026-11-30)."""
    if until is None or until.budget_s is None or not until.whole:
        return 0.0
    round1 = sum(estimate_s(c) for c in first)
    return max(0.0, min(until.budget_s - earlier_s - round1 - later_s, (until.max_repeats - 1) * round1))


def _in_budget(sched: Scheduler, cells: list[Cell], schedule: str, end: float | None) -> list:
    """The cells after the rounds (the compiled ones), each started only where the run's ETA (its pace
    so far included) ends it before END, the whole --budget's end, or --stop-after, whichever comes
    first: the budget is the whole run's, theirs included. Their estimate is kept out of the rounds'
    time, but it is an estimate: on one H200 four of the five compiled cells took 309 s of the 185 s kept
    for all five, and ran the README's main job 3 min past its 20 (2026-11-30). A cell the budget leaves
    out gets one line; a pause at --stop-after raises Paused as anywhere else."""
    stop = sched.stop_at
    if end is None or (stop is not None and stop <= end):
        return sched.run(cells, schedule)
    sched.stop_at, sched.stop_by = end, "--budget"
    try:
        return sched.run(cells, schedule)
    except Paused as p:  # the budget's end, not a pause: the run is done
        return p.outcomes
    finally:
        sched.stop_at, sched.stop_by = stop, "--stop-after"


def _fitting(late: list[Cell], left: float | None, echo: Callable[[str], None]) -> list[Cell]:
    """--rounds-first: the compiled cells, in order, while their estimates fit in LEFT (None: all); one
    line for those left out."""
    fit: list[Cell] = []
    used = 0.0
    for c in late:
        need = estimate_s(c)
        if left is None or used + need <= left:
            fit.append(c)
            used += need
        else:
            echo(
                f"not run: {get_study(c.study).label(c)} (a compiled cell, ~{need:.0f} s; {max(left - used, 0):.0f} s of the budget left "
                "after the rounds: --rounds-first)"
            )
    return fit


def answer_parts(cells: list[Cell]) -> list[list[Cell]]:
    """The answer's first round in the order `all` runs it, the report written after each part:
    1. each study's first GPU-over-CPU pair (first_part), so every study's headline row is filled
       within minutes;
    2. the first repeat of every other cell but the ones with a one-time compile (Study.deferred);
    3. those, and any further repeats.
    Empty parts are left out; every cell is in exactly one part, in the matrix's order."""
    first = {id(c) for c in first_part(cells)}
    early = [_early(c) for c in cells]
    parts = [
        [c for c in cells if id(c) in first],
        [c for c, e in zip(cells, early) if e and id(c) not in first],
        [c for c, e in zip(cells, early) if not e and id(c) not in first],
    ]
    return [p for p in parts if p]


def first_part(cells: list[Cell]) -> list[Cell]:
    """The cells of each study's first GPU-over-CPU pair among CELLS' early ones (bench.core.answers.first_pairs);
    [] where no study forms one."""
    from bench.core.answers import first_pairs

    names = dict.fromkeys(c.study for c in cells)
    return first_pairs({n: get_study(n) for n in names}, [c for c in cells if _early(c)])


def _early(cell: Cell) -> bool:
    return cell.repeat == 0 and not get_study(cell.study).deferred(cell)


def _after_round(req: RunRequest, echo: Callable[[str], None], started: float) -> Callable[[], None] | None:
    """REQ.after_round as a callable (None: none): the command runs between rounds, while no cell
    does (`all` rewrites its report there), with a time limit; its failure is one warning line,
    never the run's end."""
    if not req.after_round:
        return None
    import subprocess

    from bench.core.child import child_env

    def run() -> None:
        t0 = time.monotonic()
        try:
            got = subprocess.run(list(req.after_round), env=child_env(), capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as err:
            echo(f"warning: the after-round command failed ({err}); the run goes on")
            return
        said = got.stdout.strip().splitlines() or [""]
        last = next((x for x in reversed(said) if x.startswith("report:")), said[-1])  # not the answer lines after it
        if got.returncode != 0:
            why = (got.stderr.strip().splitlines() or [f"exit code {got.returncode}"])[-1]
            echo(f"warning: the after-round command exited {got.returncode}: {why}; the run goes on")
        elif last:
            # the run's time: the journal holds this call's (just recorded) and the earlier calls' (resumed)
            into = max(calls_s(Path(req.paths.out)), time.monotonic() - started)
            echo(f"{last} ({time.monotonic() - t0:.0f} s; {into:.0f} s into the run)")

    return run
