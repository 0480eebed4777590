"""One run request: what to run (studies, platforms, profile, filters, repeats, schedule,
until-decided settings) and where results and data go. Frozen; every value is checked when
it is made, so a bad one is one UsageError line before any work.

Both command lines build one (`orchestrate.py run|all|plan|reference`, `python -m bench
matrix`); the host hands it to the bench side as argv (`matrix_argv`), the one place that
command line is written. `resolve`, `run_matrix`, `host/plan.py` and the cluster job dirs take
it whole instead of a list of its fields.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from bench.core.choices import Profile, Schedule
from bench.core.errors import UsageError

PLATFORMS = ("cpu", "cuda", "mps")
GPU_PLATFORMS = ("cuda", "mps")
MAX_REPEATS = 50  # fresh-process repeats of one cell, and rounds of one comparison
DEFAULT_TIMEOUT_S = 3600.0  # per cell, where the request names none
DEFAULT_MAX_REPEATS = 20  # --until-decided: rounds a comparison may reach
_UNITS = {"s": 1, "m": 60, "h": 3600}


def default_out() -> Path:
    """The results dir when none is named: $KIT_RESULTS_DIR (the images set /results), else
    results/<host-label>/. The one rule for both command lines."""
    from bench.core.provenance import host_label

    env = os.environ.get("KIT_RESULTS_DIR")
    return Path(env) if env else Path("results") / host_label()


@dataclass(frozen=True)
class Paths:
    """Where one run's results go (OUT) and where its datasets are (DATA_DIR, as named: None
    lets the data rule of bench.data pick $KIT_DATA_DIR or ./data)."""

    out: Path
    data_dir: str | None = None


@dataclass(frozen=True)
class Until:
    """--until-decided's settings, once parsed (bench/run/sequential.py runs them)."""

    max_repeats: int = DEFAULT_MAX_REPEATS  # rounds a comparison may reach, first rounds included
    budget_s: float | None = None  # seconds for the rounds added after the first ones; None: no limit
    target_width: float | None = None  # stop at (hi - lo) / median <= this; None: only a decision stops
    whole: bool = False  # the budget is the whole run's (counted from the matrix's start, first rounds included)
    # every comparison gets rounds to max_repeats, whatever its verdict on the way (no look at the data decides a
    # stop, so the fixed-n 95% bootstrap is valid at the end: stats.MIN_CI_REPEATS), not the confidence sequence
    fixed: bool = False
    # the compiled cells (Study.deferred) only in what budget the rounds leave, instead of keeping their
    # estimated time out of the rounds' budget (`reference gpu`: the rounds decide; the compiled cells are one repeat)
    rounds_first: bool = False


def parse_budget(text: str, flag: str = "--budget") -> float:
    """'15m', '900s', '1h30m', '90' (seconds) -> seconds; UsageError (one line) otherwise or when not above 0."""
    t = str(text).strip().lower().replace(" ", "")
    if re.fullmatch(r"-?\d+(\.\d+)?", t):
        secs = float(t)
    elif re.fullmatch(r"-?(\d+(\.\d+)?[hms])+", t):
        secs = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([hms])", t)) * (-1 if t[0] == "-" else 1)
    else:
        raise UsageError(f"{flag} takes a time such as 15m, 900s or 1h30m, got {text!r}")
    if not secs > 0 or not math.isfinite(secs):
        raise UsageError(f"{flag} must be a time above zero (15m, 900s, 1h), got {text!r}")
    return secs


def effective_profile(profile: str, platforms: tuple[str, ...] | list[str]) -> str:
    """The profile a run on PLATFORMS runs: 'auto' where a GPU platform is among them is 'answer'
    (this host's GPU against its CPU, the same work on both sides); else PROFILE as given (on a CPU
    alone 'auto' stays each study's own quick choice, Study.auto_profiles). The one rule for both
    command lines and for the container runs, which get the resolved name."""
    if profile == Profile.auto.value and any(p in GPU_PLATFORMS for p in platforms):
        return Profile.answer.value
    return profile


def until_options(
    on: bool,
    max_repeats: int | None,
    budget: str | None,
    target_width: float | None,
    whole: bool = False,
    fixed: bool = False,
    rounds_first: bool = False,
) -> Until | None:
    """The CLI's --until-decided options as Until (None: off); UsageError (one line) for a bad
    one, or for --max-repeats, --budget, --target-width or --fixed-rounds without --until-decided."""
    given = (
        [n for n, v in (("--max-repeats", max_repeats), ("--budget", budget), ("--target-width", target_width)) if v is not None]
        + (["--fixed-rounds"] if fixed else [])
        + (["--rounds-first"] if rounds_first else [])
    )
    if not on:
        if given:
            raise UsageError(f"{', '.join(given)} only applies with --until-decided")
        return None
    opts = Until(
        DEFAULT_MAX_REPEATS if max_repeats is None else max_repeats,
        None if budget is None else parse_budget(budget),
        target_width,
        whole,
        fixed,
        rounds_first,
    )
    if fixed and target_width is not None:
        raise UsageError("--fixed-rounds gives every comparison its --max-repeats rounds: --target-width does not apply")
    check_until(opts, 1, MAX_REPEATS)
    return opts


def check_until(opts: Until, first_round: int, most: int) -> None:
    """Bad options are one line each, before any cell runs."""
    if not isinstance(opts.max_repeats, int) or opts.max_repeats < first_round:
        raise UsageError(
            f"--max-repeats {opts.max_repeats} is below the first round's {first_round} repeats: "
            f"it must be at least {first_round} (rounds are only ever added)"
        )
    if opts.max_repeats > most:
        raise UsageError(f"--max-repeats must be at most {most}, got {opts.max_repeats}")
    if opts.budget_s is not None and not (opts.budget_s > 0 and math.isfinite(opts.budget_s)):
        raise UsageError(f"--budget must be a time above zero (15m, 900s, 1h), got {opts.budget_s!r} s")
    w = opts.target_width
    if w is not None and not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0):
        raise UsageError(f"--target-width must be above 0 (the interval's width over its median: 0.05 is 5 %), got {w!r}")


def _choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    value = getattr(value, "value", value)  # an Enum member from typer
    if value not in choices:
        raise UsageError(f"unknown {name} {value!r}: choose {', '.join(choices)}")
    return str(value)


def _strings(name: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):  # type: ignore[attr-defined]
        raise UsageError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunRequest:
    """One run: the cells to make and how to run them, and where their results and data go."""

    studies: tuple[str, ...] = ()  # empty: every registered study
    platforms: tuple[str, ...] = ()  # cpu | cuda | mps; empty: the caller picks (every platform this host runs)
    profile: str = Profile.auto.value  # each study picks per platform (Study.profile_for)
    sets: tuple[str, ...] = ()  # --set key=value or study.key=value
    only: tuple[str, ...] = ()  # --only key=value[|value]
    schedule: str = Schedule.sequential.value
    rerun: bool = False  # rerun cells already done
    timeout_s: float | None = None  # per cell, s; None: DEFAULT_TIMEOUT_S
    repeats: int | None = None  # fresh-process repeats; None: the profile's (bench.run.matrix.default_repeats)
    label: str | None = None  # the run's label (system.json run_label); None: the results dir's name
    until_decided: bool = False  # add rounds until each comparison is decided (bench/run/sequential.py)
    max_repeats: int | None = None  # --until-decided: as typed
    budget: str | None = None  # --until-decided: as typed (15m, 900s)
    target_width: float | None = None  # --until-decided: (hi - lo) / median to stop at
    budget_whole: bool = False  # --until-decided: --budget is the whole run's time, first rounds included (`all`)
    fixed_rounds: bool = (
        False  # --until-decided: rounds to --max-repeats for every comparison, no stop on its verdict (Until.fixed)
    )
    rounds_first: bool = False  # --until-decided: the compiled cells only in the budget the rounds leave (Until.rounds_first)
    after_round: tuple[str, ...] = ()  # argv run after the first rounds and after every added round (`all`: the report)
    stop_after: str | None = None  # start no cell or round that would end past this time from the start (15m, 540s)
    devices: tuple[str, ...] = ()  # per-device schedule: GPU slots; empty: every visible GPU
    out: Path | None = None  # results dir; None: default_out()
    data_dir: str | None = None  # datasets dir as named; None: $KIT_DATA_DIR, else ./data

    def __post_init__(self) -> None:
        fix = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalised once, here
        for name in ("studies", "platforms", "sets", "only", "devices", "after_round"):
            fix(name, _strings(f"--{name}", getattr(self, name)))
        for p in self.platforms:
            _choice("platform", p, PLATFORMS)
        fix("profile", _choice("profile", self.profile, tuple(p.value for p in Profile)))
        fix("schedule", _choice("schedule", self.schedule, tuple(s.value for s in Schedule)))
        self.until()
        if self.stop_after is not None:
            fix("stop_after", str(self.stop_after))
            parse_budget(self.stop_after, "--stop-after")
        r = self.repeats
        if r is not None and (not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= MAX_REPEATS):
            raise UsageError(f"--repeats must be a whole number from 1 to {MAX_REPEATS}, got {r!r}")
        t = self.timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t > 0)):
            raise UsageError(f"--timeout-s must be a number of seconds above 0, got {t!r}")
        if self.label is not None:
            from bench.core.provenance import check_run_label

            try:
                fix("label", check_run_label(self.label))
            except Exception as err:  # a KitError: the command line's
                raise UsageError(str(err)) from None
        if self.out is not None:
            fix("out", Path(self.out))
        if self.data_dir is not None:
            fix("data_dir", str(self.data_dir))

    def replace(self, **changes: object) -> RunRequest:
        """A copy with CHANGES, checked as a new request is."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def paths(self) -> Paths:
        """Where results and data go (OUT resolved to default_out() when none was named)."""
        return Paths(self.out if self.out is not None else default_out(), self.data_dir)

    @property
    def cell_timeout_s(self) -> float:
        return DEFAULT_TIMEOUT_S if self.timeout_s is None else float(self.timeout_s)

    def until(self) -> Until | None:
        """The --until-decided settings, parsed (None: off)."""
        return until_options(
            self.until_decided,
            self.max_repeats,
            self.budget,
            self.target_width,
            self.budget_whole,
            self.fixed_rounds,
            self.rounds_first,
        )

    @property
    def stop_after_s(self) -> float | None:
        """--stop-after in seconds (None: no limit)."""
        return None if self.stop_after is None else parse_budget(self.stop_after, "--stop-after")

    def matrix_argv(self) -> list[str]:
        """`python -m bench matrix ...`'s arguments (after `python -m bench`) for this request:
        the one place the host writes that command line."""
        a = ["matrix", *self.studies]
        for p in self.platforms:
            a += ["--platform", p]
        a += ["--profile", self.profile, "--schedule", self.schedule, "--out", str(self.paths.out)]
        for s in self.sets:
            a += ["--set", s]
        for o in self.only:
            a += ["--only", o]
        if self.data_dir:
            a += ["--data-dir", self.data_dir]
        if self.devices:
            a += ["--devices", ",".join(self.devices)]
        if self.rerun:
            a.append("--rerun")
        if self.timeout_s is not None:
            a += ["--timeout-s", str(self.timeout_s)]
        if self.repeats is not None:
            a += ["--repeats", str(self.repeats)]
        if self.label:
            a += ["--label", self.label]
        if self.until_decided:
            a.append("--until-decided")
            for flag, v in (
                ("--max-repeats", self.max_repeats),
                ("--budget", self.budget),
                ("--target-width", self.target_width),
            ):
                if v is not None:
                    a += [flag, str(v)]
            if self.budget_whole:
                a.append("--budget-whole")
            if self.fixed_rounds:
                a.append("--fixed-rounds")
            if self.rounds_first:
                a.append("--rounds-first")
        for arg in self.after_round:
            a += ["--after-round", arg]
        if self.stop_after is not None:
            a += ["--stop-after", self.stop_after]
        return a


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_REPEATS",
    "PLATFORMS",
    "Paths",
    "RunRequest",
    "Until",
    "check_until",
    "default_out",
    "effective_profile",
    "parse_budget",
    "until_options",
]
