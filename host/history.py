"""`orchestrate.py history add|show|report`: every run kept, a trend per configuration, change
points flagged when they happen (as asv, conbench and MongoDB's performance CI keep them).

The store is one SQLite database, `<store>/history.sqlite` (default results/history/), written
only by `history add` and only by INSERT (triggers refuse UPDATE and DELETE): append-only.
Each `add` is one transaction taken with BEGIN IMMEDIATE, so two adds at once run one after the
other (the second waits up to BUSY_S, then stops with one line and adds nothing); a cell
already in the store (the same measurement: its rows' own cell id and run id, never its dir's
name) is skipped, so adding a dir twice, or a copy of it under other names, adds nothing. A store
written by another format is one line and is never written to; a write that fails (a full or
read-only disk) is one line naming the store and the cause, and adds nothing.

The store is read back as untrusted (another user's file, or one edited by hand): a row whose
figure is not a finite number above 0 and at most MAX_FIGURE, or whose other fields are not text
and numbers of their kind, is left out of every series and counted (`Series.left_out`, `show`'s last
line); every text is cut at MAX_TEXT characters.

    cells    one row per finished cell added: its ids, configuration, machine class and
             environment (host/speed.py), commit, run date, host, label, source dir, and its
             rows and system.json as they were read (untrusted: checked by collect() first)
    figures  one row per cell, part and speed metric (Study.speed): the value and its unit

A *series* is one configuration's part and metric on one machine class (environments are
points on it: a torch upgrade is a step the trend should show). A *point* is one run: the cells
of that configuration in one result dir as one `history add` took them (its `batch`), the
median of their repeats with their interval (bench.core.stats.summarize), dated by its earliest
cell. Change points: host/changepoints.py over the points' medians in date order.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.core.errors import KitError, UsageError
from bench.core.resultset import collect_set, shown_name, utf8
from host import speed
from host.compare import config_label, config_of, match_key, parts

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STORE = ROOT / "results" / "history"
DB_NAME = "history.sqlite"
FORMAT = "1"
BUSY_S = 60.0  # how long an add waits for another writer
MAX_FIGURE = 1e18  # the largest figure a series takes (the rows schema's bound: bench.core.schema)
MAX_TEXT = 500  # characters of any text read back from the store

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cells(
  uid TEXT PRIMARY KEY, cell TEXT NOT NULL, run_id TEXT NOT NULL, batch TEXT NOT NULL, repeat INTEGER NOT NULL,
  study TEXT NOT NULL,
  config_key TEXT NOT NULL, config_label TEXT NOT NULL, class_key TEXT NOT NULL, class_label TEXT NOT NULL,
  env_key TEXT NOT NULL, env_label TEXT NOT NULL, commit_sha TEXT NOT NULL, created_utc TEXT NOT NULL,
  host TEXT NOT NULL, label TEXT NOT NULL, source TEXT NOT NULL, added_utc TEXT NOT NULL,
  rows_json TEXT NOT NULL, system_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS figures(
  uid TEXT NOT NULL REFERENCES cells(uid), part TEXT NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL,
  higher_is_better INTEGER NOT NULL, value REAL NOT NULL CHECK (value > 0), PRIMARY KEY (uid, part, metric));
CREATE TRIGGER IF NOT EXISTS cells_append_only_u BEFORE UPDATE ON cells BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER IF NOT EXISTS cells_append_only_d BEFORE DELETE ON cells BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER IF NOT EXISTS figures_append_only_u BEFORE UPDATE ON figures BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER IF NOT EXISTS figures_append_only_d BEFORE DELETE ON figures BEGIN SELECT RAISE(ABORT, 'append-only'); END;
"""


# ---------------------------------------------------------------------------- the store
def db_path(store: Path) -> Path:
    store = Path(store)
    return store if store.suffix == ".sqlite" else store / DB_NAME


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=BUSY_S, isolation_level=None)
    con.text_factory = lambda b: b.decode("utf-8", "replace")  # a store's text that is not UTF-8 reads, never fails
    con.execute("PRAGMA foreign_keys = ON")
    return con


def _check_format(con: sqlite3.Connection, path: Path) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    except sqlite3.DatabaseError as err:
        raise KitError(f"history store {path} is not a history store ({err})") from None
    if row is None or row[0] != FORMAT:
        raise KitError(
            f"history store {path} is format {row[0] if row else 'unknown'!r}; this kit reads format {FORMAT}: "
            "add to another store (--store DIR), or use the kit version that wrote it"
        )


def open_store(store: Path, create: bool = False) -> sqlite3.Connection:
    """A connection to STORE's database, checked to be a history store of this FORMAT; KitError
    (one line) otherwise. CREATE: make it when absent."""
    path = db_path(store)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise KitError(f"history store {path} is not a regular file")
    if not path.exists():
        if not create:
            raise UsageError(f"no history store at {path}: `orchestrate.py history add DIR...` makes it")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KitError(
                f"history store {path}: cannot make {path.parent} ({err.strerror or err}): nothing was added"
            ) from None
    try:
        con = _connect(path)
        if create:
            _create(con)
        _check_format(con, path)
    except sqlite3.OperationalError as err:
        raise KitError(f"history store {path}: {err}") from None
    except sqlite3.DatabaseError as err:
        raise KitError(f"history store {path} is not a history store ({err})") from None
    return con


def _create(con: sqlite3.Connection) -> None:
    """The tables, once: in one immediate transaction, so two first adds cannot race."""
    con.execute("BEGIN IMMEDIATE")
    try:
        have = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if not have:
            for stmt in SCHEMA.split(";\n"):
                if stmt.strip():
                    con.execute(stmt)
            con.execute("INSERT INTO meta VALUES ('format', ?), ('created_utc', ?)", (FORMAT, _now()))
        con.execute("COMMIT")
    except BaseException:
        _rollback(con)
        raise


def _rollback(con: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already (a failed COMMIT on a full disk rolls
    back by itself: a second ROLLBACK would hide the cause behind 'no transaction is active')."""
    if con.in_transaction:
        try:
            con.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _date(v: object) -> str:
    """An ISO date from system.json, normalised to UTC; '' when it is not one."""
    try:
        d = datetime.fromisoformat(str(v))
    except ValueError:
        return ""
    return (d if d.tzinfo else d.replace(tzinfo=UTC)).astimezone(UTC).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------- add
def _records(d: Path, label: str | None, batch: str) -> tuple[list[tuple], list[tuple], int]:
    """(cell rows, figure rows, cells not added: not ok or no speed figure) of result dir D."""
    if not d.exists():
        raise UsageError(f"history add: {d} does not exist")
    if not d.is_dir():  # a README beside the result dirs (results/reference/*)
        return [], [], 0
    try:
        rs = collect_set([d])  # read once: each measurement once (ResultCell.identity), within the read budget
    except UsageError:
        raise
    except KitError:  # no cells under it (a report, a folder of notes): nothing to add
        return [], [], 0
    newer = [p for p in rs.problems if "newer than this kit" in p]
    if newer:
        raise KitError(f"history add: {newer[0]}" + (f" (and {len(newer) - 1} more)" if len(newer) > 1 else ""))
    cells = rs.cells
    out_cells, out_figs, skipped = [], [], 0
    for c in cells:
        if c.status != "ok" or c.state:
            skipped += 1
            continue
        mc = speed.machine_class(c)  # KitError names the cell
        env = speed.environment(c)
        run_id = str(c.first.get("run_id") or "")
        if not run_id:
            raise KitError(f"{c.dir}: rows carry no run_id, so the run cannot be told apart")
        uid = f"{c.cell_id}|{run_id}"  # the measurement (its rows' cell id), never the dir's name
        figs = [
            (uid, p, m, sp.unit, int(sp.higher_is_better), sp.value) for p in parts(c) for m, sp in speed.figures(c, p).items()
        ]
        if not figs:
            skipped += 1
            continue
        cfg = config_of(c)
        out_cells.append(
            (
                uid,
                c.cell_id,
                run_id,
                batch,
                c.repeat,
                c.study,
                match_key(cfg),
                f"{c.study} {config_label(cfg)}",
                speed.key(mc),
                speed.class_label(mc),
                speed.key(env),
                speed.env_label(env),
                str(c.system.get("kit_git_sha") or "unknown"),
                _date(c.system.get("created_utc")),
                str(c.first.get("host") or ""),
                label or c.run_label,
                str(d),
                _now(),
                json.dumps(c.rows, default=str),
                json.dumps(c.system, default=str),
            )
        )
        out_figs += figs
    return out_cells, out_figs, skipped


def add(dirs: list[Path], store: Path = DEFAULT_STORE, label: str | None = None) -> dict:
    """Append every finished cell of DIRS (with its speed figures) to STORE, in one transaction.
    Everything is read and checked before the store is touched: bad input adds nothing."""
    if label is not None:
        from bench.core.provenance import check_run_label

        label = check_run_label(label)
    for d in dirs:
        if not utf8(d):
            raise UsageError(f"history add: {shown_name(d)} has a name that is not UTF-8: rename it to add it")
    cells: list[tuple] = []
    figs: list[tuple] = []
    skipped = 0
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    for i, d in enumerate(dirs):  # one batch per dir and add: the repeats of one run of a configuration
        c, f, s = _records(Path(d), label, f"{stamp}-{i}")
        cells, figs, skipped = cells + c, figs + f, skipped + s
    if not cells:
        raise KitError(f"history add: no finished cell with a speed figure under {', '.join(map(str, dirs))}")
    con = open_store(store, create=True)
    try:
        con.execute("BEGIN IMMEDIATE")
        before = con.total_changes
        try:
            con.executemany("INSERT OR IGNORE INTO cells VALUES (" + ",".join("?" * 20) + ")", cells)
            added = con.total_changes - before
            con.executemany("INSERT OR IGNORE INTO figures VALUES (?, ?, ?, ?, ?, ?)", figs)
            con.execute("COMMIT")
        except BaseException:
            _rollback(con)
            raise
    except sqlite3.Error as err:  # busy past BUSY_S, a full disk, a read-only store: the transaction is undone
        why = " (another `history add` held it)" if "locked" in str(err) else ""
        raise KitError(f"history store {db_path(store)}: cannot write ({err}){why}: nothing was added") from None
    finally:
        con.close()
    return {"store": str(db_path(store)), "added": added, "already": len(cells) - added, "not_added": skipped}


# ---------------------------------------------------------------------------- series
@dataclass
class Point:
    run: str  # the batch: one result dir as one `history add` took it
    label: str
    date: str
    commit: str
    env: str
    values: list[float]
    median: float = 0.0
    lo: float | None = None
    hi: float | None = None
    kind: str = "none"


@dataclass
class Series:
    study: str
    config_key: str
    config: str
    part: str
    metric: str
    unit: str
    higher_is_better: bool
    class_key: str
    machine: str
    points: list[Point] = field(default_factory=list)
    change_points: list[int] = field(default_factory=list)  # indices of points that start a new segment
    change_note: str = ""  # why no change points were looked for
    left_out: int = 0  # rows of the whole store left out as not what `add` writes (text or NaN figures)

    @property
    def name(self) -> str:
        return f"{self.config} [{self.part}] {self.metric}"

    def trend(self) -> float | None:
        """The last point over the median of the ones before it (> 1: a higher figure)."""
        if len(self.points) < 2:
            return None
        return self.points[-1].median / statistics.median(p.median for p in self.points[:-1])

    def steps(self) -> list[dict]:
        """Each change point: where, and the median after it over the median before it."""
        bounds = [0, *self.change_points, len(self.points)]
        out = []
        for k, i in enumerate(self.change_points):
            before = statistics.median(p.median for p in self.points[bounds[k] : i])
            after = statistics.median(p.median for p in self.points[i : bounds[k + 2]])
            p = self.points[i]
            out.append({"index": i, "commit": p.commit, "date": p.date, "label": p.label, "ratio": after / before})
        return out


def _text(v: object) -> str | None:
    """A text field of a store row as the kit reads it: text (or a number written as one), cut at
    MAX_TEXT characters; None for anything else (a blob, NULL)."""
    if isinstance(v, str):
        return v[:MAX_TEXT]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)[:MAX_TEXT]
    return None


def _figure(v: object) -> float | None:
    """A store row's figure when the kit could have written it: a finite number above 0 and at most
    MAX_FIGURE (None: text, NULL, NaN, an infinity, a blob)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and 0 < f <= MAX_FIGURE else None


def _store_row(row: tuple) -> tuple | None:
    """ROW of the series query held to what `add` writes (module docstring); None when it is not."""
    *texts, value = row
    hib = texts.pop(6)
    fields = [_text(t) for t in texts]
    figure = _figure(value)
    if figure is None or any(f is None for f in fields) or hib not in (0, 1) or isinstance(hib, float):
        return None
    return (*fields[:6], bool(hib), *fields[6:], figure)


@dataclass(frozen=True)
class Only:
    """Which rows of the store a view keeps: each given field a case-insensitive part of the cell's
    study name, machine class or host name (`history show --study mnist --machine H100 --host gpu01`)."""

    study: str | None = None
    machine: str | None = None
    host: str | None = None

    def keeps(self, study: str, machine: str, host: str) -> bool:
        """Whether a cell of STUDY, MACHINE class and HOST is kept (casefolded: any case, any script)."""
        return all(
            not v or v.casefold() in x.casefold() for v, x in ((self.study, study), (self.machine, machine), (self.host, host))
        )

    def text(self) -> str:
        got = [
            f"{k} containing {v!r}" for k, v in (("study", self.study), ("machine class", self.machine), ("host", self.host)) if v
        ]
        return "; ".join(got)


def series(store: Path = DEFAULT_STORE, changes: bool = True, only: Only = Only()) -> list[Series]:
    """Every series in STORE (ONLY: of the cells it keeps), points in date order, with change points
    (CHANGES). A row that is not what `add` writes is left out (`_store_row`); every series counts
    them (`left_out`)."""
    from bench.core import stats
    from host import changepoints

    con = open_store(store)
    try:
        rows = con.execute(
            "SELECT c.study, c.config_key, c.config_label, f.part, f.metric, f.unit, f.higher_is_better, c.class_key, "
            "c.class_label, c.batch, c.label, c.created_utc, c.commit_sha, c.env_label, f.value, c.host "
            "FROM figures f JOIN cells c ON c.uid = f.uid ORDER BY c.created_utc, c.uid"
        ).fetchall()
    except sqlite3.Error as err:
        raise KitError(f"history store {db_path(store)} cannot be read as a history store ({err})") from None
    finally:
        con.close()
    by: dict[tuple, Series] = {}
    pts: dict[tuple, dict[tuple, Point]] = {}
    left_out = 0
    for raw in rows:
        row = _store_row(raw[:-1])
        if row is None:
            left_out += 1
            continue
        study, ck, cl, part, metric, unit, hib, clk, cll, run, label, date, commit, env, value = row
        if not only.keeps(study, cll, _text(raw[-1]) or ""):
            continue
        k = (study, ck, part, metric, clk)
        s = by.setdefault(k, Series(study, ck, cl, part, metric, unit, hib, clk, cll))
        p = pts.setdefault(k, {}).setdefault((run, label), Point(run, label, date, commit, env, []))
        p.values.append(value)
        p.date = min(p.date, date) if p.date and date else (p.date or date)
    why = changepoints.available() if changes else "not asked for"
    for k, s in by.items():
        s.left_out = left_out
        s.points = sorted(pts[k].values(), key=lambda p: (p.date, p.commit, p.run))
        for p in s.points:
            sm = stats.summarize(p.values)
            p.median, p.lo, p.hi, p.kind = sm.median, sm.lo, sm.hi, sm.kind
        if why:
            s.change_note = why
        elif len(s.points) < changepoints.MIN_POINTS:
            s.change_note = f"fewer than {changepoints.MIN_POINTS} runs"
        else:
            s.change_points = changepoints.find([p.median for p in s.points])
    return sorted(by.values(), key=lambda s: (s.machine, s.config, s.part, s.metric))


# ---------------------------------------------------------------------------- show
def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def show_text(all_series: list[Series], width: int = 120) -> str:
    """One table per machine class: configuration, runs, last value, trend, change points."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from bench.core.text import term

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False, emoji=False)
    for machine in dict.fromkeys(s.machine for s in all_series):
        con.print(Text(term(f"machine class: {machine}")))
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
        for col, just in (("configuration [part] metric", "left"), ("runs", "right"), ("last", "right"), ("trend", "right")):
            t.add_column(col, justify=just, overflow="fold", ratio=1 if col.startswith("conf") else None)  # type: ignore[arg-type]
        t.add_column("change points", overflow="fold")
        for s in (x for x in all_series if x.machine == machine):
            last = s.points[-1]
            tr = s.trend()
            trend = "-" if tr is None else f"{tr:.3f}x"
            cps = "; ".join(f"{st['ratio']:.3f}x at {st['commit'][:8]} {st['date'][:10]}" for st in s.steps())
            t.add_row(
                *(
                    Text(term(x))
                    for x in (s.name, str(len(s.points)), f"{_num(last.median)} {s.unit}", trend, cps or s.change_note or "none")
                )
            )
        con.print(t)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    lines.append(
        "trend: the last run's median over the median of the runs before it; change points: E-Divisive means "
        "(signal-processing-algorithms), the median after / before each"
    )
    left = max((s.left_out for s in all_series), default=0)
    if left:
        lines.append(
            f"left out: {left} row(s) of the store that `history add` would not write (a figure that is text, "
            f"NaN, infinite, not above 0 or past {MAX_FIGURE:g}, or a field of the wrong kind)"
        )
    return "\n".join(lines) + "\n"


def as_json(all_series: list[Series]) -> list[dict]:
    return [
        {
            "study": s.study,
            "configuration": s.config,
            "part": s.part,
            "metric": s.metric,
            "unit": s.unit,
            "higher_is_better": s.higher_is_better,
            "machine_class": s.machine,
            "trend": s.trend(),
            "change_points": s.steps(),
            "change_note": s.change_note,
            "store_rows_left_out": s.left_out,
            "runs": [p.__dict__ for p in s.points],
        }
        for s in all_series
    ]


def batches_of(store: Path, uids: set[str]) -> set[str]:
    """The batches that hold any of the cells UIDS (cell id|run id) in STORE."""
    con = open_store(store)
    try:
        rows = con.execute("SELECT uid, batch FROM cells").fetchall()
    finally:
        con.close()
    return {b for u, b in rows if u in uids}


def write_page(all_series: list[Series], store: Path, out: Path) -> Path:
    """The trend page OUT/index.html (host/trend_page.py), written as every output dir of the kit is
    (host/outdir.py): it replaces only what the kit wrote in OUT (`.cnn-bench-history-report.json`
    names it), an OUT that is or holds the store is refused, and a write that fails is one line
    (KitError) naming the path and the cause, with OUT left as it was."""
    from bench.core.rows import atomic_write_text
    from host import trend_page
    from host.outdir import Target, cannot_write

    db = db_path(store)
    target = Target(Path(out), "history-report", [db], ("index.html",), label="history report --out")
    target.check()
    try:
        with target.staging() as stage:
            atomic_write_text(stage / "index.html", trend_page.render(all_series, str(db)))
            target.commit()
    except OSError as err:
        raise KitError(cannot_write("history report", Path(out), err, target.touched)) from None
    return Path(out) / "index.html"


def report_lines(out: Path, store: Path = DEFAULT_STORE) -> list[str]:
    """REPORT.md's lines on the run history, where one exists: how many runs, and a link to its
    trend page (relative to OUT) or the command that makes it."""
    import os

    path = db_path(store)
    if not path.is_file():
        return []
    try:
        con = open_store(store)
        try:
            n = con.execute("SELECT count(DISTINCT batch), count(*) FROM cells").fetchone()
        finally:
            con.close()
    except KitError as err:
        return ["## Run history", "", f"The history store cannot be read: {err}", ""]
    page = path.parent / "report" / "index.html"
    from bench.core.text import md_code

    lines = [
        "## Run history",
        "",
        f"{n[0]} run(s), {n[1]} cell(s) in {md_code(path)}: every run kept, a trend per configuration.",
    ]
    if page.is_file():
        rel = os.path.relpath(page.resolve(), Path(out).resolve())
        lines.append(f"Trend page (change points marked): [{rel}]({rel}).")
    else:
        lines.append("Make its trend page with `python orchestrate.py history report`.")
    return lines + [""]


__all__ = [
    "DEFAULT_STORE",
    "Point",
    "Series",
    "add",
    "as_json",
    "batches_of",
    "open_store",
    "series",
    "show_text",
    "write_page",
]
