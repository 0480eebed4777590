"""The answer engine: sides, pairs and verdicts for every claim a study declares.

A *side* is the cells of one configuration in one run, one per repeat, whose facets (backend,
variant, platform, gpus and every param: `facets`) match what a claim asks for. Several cells
of one run matching one side at one repeat is an error of the declaration (the last one read
would silently win): the claim is listed as not judged, with the cells named.

A *pair* is chosen, not found. For a Ratio, every A side meets every B side of the same
workload (the params both share, besides the claim's free ones), and the candidates rank:

    0 same run              the repeats were interleaved: paired by repeat
    1 same host and environment (another run)
    2 same host             another environment (library versions, runtime, image)
    3 same machine class    two machines of one class (their machine ids differ), or, where a side
                            recorded no machine id, two boots (a machine rebooted or two machines)
    4 across hosts

Hosts are told apart by what they are (CPU model and cores, GPU model and count), never by
hostname: every VM calls itself `vm`. Within a class, the machine id each cell records
(provenance.machine_identity: a hash of the board's UUID or the OS install's id) tells two
machines apart (or, where neither is readable, the GPUs' UUIDs); a cell that predates it (or could
read none) is "machine not recorded", and two such sides of one class read as one host only where
they recorded one boot (or none): the lent GPU hosts recorded no machine id and a boot each. A claim may span hosts only where its sides run on
different platforms (GPU over CPU: "this GPU against that CPU"); a comparison on one device
(a framework over a kernel, AMP over fp32) stays on one host. Each (host, host) scope gets
its best pair (rank, then fewer cells predating a fix that changes numbers, more repeats,
fewer flagged cells); the others ride along as "other runs". A claim's answers are one per
workload and scope, same-host scopes first; the first is its primary answer.

Every pair says what differs between its sides: the host, the timing libraries' versions,
runtime or image, the data, and any work-amount param (epochs, images).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.core import claims as C
from bench.core import fixes, seqstats, stats

if TYPE_CHECKING:
    from bench.core.cell import Cell
    from bench.core.resultset import ResultCell
    from bench.core.study import Study

RANKS = ("same run", "same host and environment", "same host", "same machine class", "across hosts")
ACROSS = {"run": 0, "host": 2, "hosts": 4}


class DeclarationError(Exception):
    """A claim that does not fit the results it is judged on (one line: the study and claim are added)."""


# what judge_all reads of a cell many times (its facets, throughput, host, environment), read once
# per judge_all: the cells do not change while it runs; keyed by the objects' ids, all alive then
_MEMO: ContextVar[dict | None] = ContextVar("answers_memo", default=None)


def _once(key: tuple, fn: Callable[[], Any]) -> Any:
    memo = _MEMO.get()
    if memo is None:
        return fn()
    if key not in memo:
        memo[key] = fn()
    return memo[key]


# ---- what a cell is: facets, host, environment ---------------------------------------------
def facets(study: Study, c: ResultCell, part: str | None = None) -> dict[str, Any]:
    """What a claim can match on: backend (PART: the row backend, where one cell holds several,
    e.g. mlp-scratch's numpy+cupy), variant, platform, cell_platform (the cell's: a NumPy run
    inside mlp-scratch's GPU cell is cpu in a cuda cell), gpus (devices the cell used, at least
    1 on a GPU platform, 0 on a CPU), and every param of the cell's spec (a param the cell
    predates reads as the study's default)."""
    given = c.spec.get("params")
    return _facets(
        study,
        given if isinstance(given, dict) else {},
        part or str(c.first.get("backend")),
        str(c.first.get("variant")),
        str(c.spec.get("backend") or part or c.first.get("backend")),
        c.spec.get("devices"),
    )


def planned_facets(study: Study, cell: Cell, part: str) -> dict[str, Any]:
    """The facets a planned CELL's rows of backend PART will have (`facets`, before it runs)."""
    return _facets(study, cell.params, part, cell.variant, cell.backend, list(cell.devices))


def _facets(study: Study, given: dict, backend: str, variant: str, whole_backend: str, devs: Any) -> dict[str, Any]:
    params: dict[str, Any] = {**_defaults(study), **given}
    spec = study.backends.get(backend)
    platform = spec.platform if spec else "?"
    devs = devs or params.get("devices") or []
    n = len(devs) if isinstance(devs, list) else len([d for d in str(devs).split(",") if d])
    out: dict[str, Any] = dict(params)
    whole = [study.backends[b].platform for b in whole_backend.split("+") if b in study.backends]
    cell_platform = next((p for p in whole if p != "cpu"), whole[0] if whole else platform)
    out.update(
        backend=backend,
        variant=variant,
        platform=platform,
        cell_platform=cell_platform,
        gpus=0 if platform == "cpu" else max(1, n),
    )
    return out


def first_pairs(registry: dict[str, Study], cells: list[Cell]) -> list[Cell]:
    """The cells of CELLS that each study's first answer needs: per study, its first seed claim of the
    headline that compares two platforms (a GPU against the CPU), each side's first planned cell.
    `all` on a GPU host runs these before the rest of its first round and writes the report after
    them, so every study's headline GPU-over-CPU row is filled early."""
    picked: dict[int, Cell] = {}
    for name in dict.fromkeys(c.study for c in cells):
        study = registry[name]
        mine = [c for c in cells if c.study == name]
        for claim in getattr(study, "claims", ()):
            if not (claim.headline and not claim.kit and isinstance(claim.rule, C.Ratio)):
                continue
            a, b = _first_match(study, mine, claim.rule.a), _first_match(study, mine, claim.rule.b)
            if a is None or b is None or a[1] == b[1]:
                continue  # not formed here, or both sides on one platform
            picked[id(a[0])], picked[id(b[0])] = a[0], b[0]
            break
    return [c for c in cells if id(c) in picked]


def _first_match(study: Study, cells: list[Cell], want: dict) -> tuple[Cell, str] | None:
    """The first of CELLS with a part whose planned facets match WANT, and that part's platform."""
    for c in cells:
        for part in c.backend.split("+"):
            f = planned_facets(study, c, part)
            if all(f.get(k) == v for k, v in want.items()):
                return c, str(f["platform"])
    return None


def known_facets(study: Study) -> set[str]:
    return set(_defaults(study)) | {"backend", "variant", "platform", "cell_platform", "gpus"}


def _defaults(study: Study) -> dict:
    try:
        return study.config_defaults()
    except Exception:  # noqa: BLE001 - a study without a Config compares on what its cells say
        return {}


@dataclass(frozen=True)
class Host:
    """A machine by what it is. KEY compares (the class); LABEL reads; MACHINE is which machine of
    the class ("" not recorded) and BOOT which boot of it ("" not recorded)."""

    key: str
    label: str
    machine: str = ""
    boot: str = ""


def host_of(c: ResultCell) -> Host:
    s = c.system
    cpu = str(s.get("cpu_model") or "unknown CPU")
    cores = s.get("cpu_logical_cores") or s.get("cpu_affinity")
    got = s.get("gpu")
    gpu: dict = got if isinstance(got, dict) else {}
    gname = str(gpu.get("name") or "") if gpu.get("name") != "Apple MPS" else "Apple GPU"
    count = s.get("gpu_count")
    key = json.dumps([cpu, cores, gname, count], default=str)
    short_cpu = cpu.replace("(R)", "").replace(" Processor", "").replace("  ", " ")
    label = f"{cores}-core {short_cpu}" if cores else short_cpu
    if gname:
        g = gname.removeprefix("NVIDIA ")
        label = (f"{count}x {g}" if isinstance(count, int) and count > 1 else g) + f" host ({label})"
    machine, boot = s.get("machine_id"), s.get("boot_id")
    return Host(key, label, machine if isinstance(machine, str) else "", boot if isinstance(boot, str) else "")


def env_of(c: ResultCell) -> dict[str, str]:
    """What the numbers depend on besides the work: runtime, image or Python, timing libraries."""
    from bench.core.provenance import TIMING_LIBS

    s = c.system
    got = s.get("libraries")
    libs: dict = got if isinstance(got, dict) else {}
    img = str(s.get("image_id") or c.first.get("image_id") or "native")
    out = {"runtime": str(s.get("runtime") or "native")}
    if img != "native":
        out["image"] = img[:19]
    py = s.get("python")
    if isinstance(py, str) and img == "native":
        out["python"] = py.split()[0]
    for k in TIMING_LIBS:
        if isinstance(libs.get(k), str):
            out[k] = libs[k]
    return out


def _data(c: ResultCell) -> tuple[str, bool]:
    real = next((x.get("dataset_real") for x in c.rows if "dataset_real" in x), None)
    name = str(c.first.get("dataset") or (c.spec.get("params") or {}).get("dataset") or "?")
    return name, real is True


# ---- sides ---------------------------------------------------------------------------------
@dataclass
class Side:
    run: str
    part: str  # the row backend it measured
    workload: dict  # the params a partner must share
    facets: dict  # the first cell's facets
    family: str = ""  # its backend's family (torch, numba, numpy, cupy)
    work: tuple[str, ...] = ()  # its study's work-amount params (Study.work_amount), for Finding.work_differs
    cells: list = field(default_factory=list)  # one per repeat
    per: dict = field(default_factory=dict)  # repeat -> value

    @property
    def first(self) -> ResultCell:
        return self.cells[0]

    @property
    def host(self) -> Host:
        return _once(("host", id(self.first)), lambda: host_of(self.first))

    def ran_with(self, key: str) -> Any:
        """KEY as this side's rows recorded it where they did (an int: the loader workers a
        cifar-opt cell resolved from num_workers=-1, 8 on a CPU and 4 on a GPU, capped at the
        cores), else its facet (the param as asked)."""
        for c in self.cells:
            for r in c.ok_rows:
                v = r.get(key)
                if isinstance(v, int) and not isinstance(v, bool) and str(r.get("backend")) in (self.part, "None"):
                    return v
        return self.facets.get(key)

    @property
    def device(self) -> str:
        """What this side ran on: a CPU part of a GPU cell (mlp-scratch's NumPy beside CuPy) ran on the CPU."""
        if self.facets.get("platform") == "cpu" and self.facets.get("cell_platform") != "cpu":
            s = self.first.system
            cores = s.get("cpu_affinity") or s.get("cpu_logical_cores")
            return str(s.get("cpu_model") or "unknown CPU") + (f", {cores} cores" if cores else "")
        return self.first.device

    @property
    def env(self) -> dict[str, str]:
        return _once(("env", id(self.first)), lambda: env_of(self.first))

    @property
    def data(self) -> tuple[str, bool]:
        names = {_data(c) for c in self.cells}
        real = all(r for _, r in names)
        return ", ".join(sorted({n for n, _ in names})), real

    @property
    def flagged(self) -> int:
        return sum(1 for c in self.cells if c.flags)

    @property
    def stale(self) -> list[fixes.Fix]:
        """The fixes that change numbers which any of its cells predates."""
        seen: dict[str, fixes.Fix] = {}
        for c in self.cells:
            for f in fixes.missing(c):
                seen[f.commit] = f
        return list(seen.values())

    @property
    def dirty(self) -> bool:
        return any(c.unclean_source for c in self.cells)

    @property
    def context(self) -> bool:
        """Every cell came from a reference added for context (the main job's report)."""
        return all(getattr(c, "context", False) for c in self.cells)

    def describe(self, keys: dict, device: bool = True) -> str:
        """'torch-cuda default loader on NVIDIA H100 80GB HBM3 [run, n=3]' (without the device where the
        reader already has it: the answer names its hosts; the data path where the rows record one:
        loader, synthetic-gpu, resident)."""
        bits = [self.part, str(self.first.first.get("variant"))]
        pipe = self.first.first.get("pipeline")
        if isinstance(pipe, str) and pipe and "pipeline" not in keys:
            bits.append(pipe)
        bits += [f"{k}={v}" for k, v in keys.items() if k not in ("backend", "variant", "platform")]
        where = f" on {self.device}" if device else ""
        return f"{' '.join(bits)}{where} [{self.run}, n={len(self.per)}]"


def _workload(f: dict, skip: set[str]) -> dict:
    return {k: v for k, v in f.items() if k not in skip}


def _key(d: dict) -> str:
    return json.dumps(d, sort_keys=True, default=str)


def sides(study: Study, cells: list[ResultCell], want: dict, metric: C.Metric | None) -> list[Side]:
    """The sides of WANT among CELLS (ok cells only), each with its per-repeat metric: one per
    run and workload (every param but WANT's and ALWAYS_FREE)."""
    bad = set(want) - known_facets(study)
    if bad:
        raise DeclarationError(f"a side names {', '.join(sorted(bad))}, which no cell of {study.name} has")
    # which GPUs is free (ALWAYS_FREE's devices), how many is not: a side is one GPU count
    skip = set(want) | set(C.ALWAYS_FREE) | {"platform", "cell_platform"}
    out: dict[tuple[str, str], Side] = {}
    for c in cells:
        if _once(("status", id(c)), lambda: c.status) != "ok":  # noqa: B023
            continue
        values = _once(("throughput", id(study), id(c)), lambda: study.throughput(c.rows)) if metric is None else None  # noqa: B023
        parts = (
            list(values)
            if values is not None
            else _once(("parts", id(c)), lambda: sorted({str(r.get("backend")) for r in c.ok_rows}))  # noqa: B023
        )
        for part in parts:
            f = _once(("facets", id(study), id(c), part), lambda: facets(study, c, part))  # noqa: B023 - called at once
            if not all(f.get(k) == v for k, v in want.items()):
                continue
            v = (
                values.get(part)
                if values is not None
                else _once(("metric", id(metric), id(c), part), lambda: metric(c.rows, part))  # type: ignore[misc] # noqa: B023
            )
            if v is None or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
                continue
            work = _workload(f, skip)
            if isinstance(work.get("gpus"), int) and work["gpus"] <= 1:
                work.pop("gpus")  # one device is every cell's default: only a many-GPU side names its count
            spec = study.backends.get(part)
            new = Side(
                run=c.run_label, part=part, workload=work, facets=f, family=spec.family if spec else "", work=study.work_amount()
            )
            s = out.setdefault((c.run_label, _key(work)), new)
            if c.repeat in s.per:
                other = next(x for x in s.cells if x.repeat == c.repeat)
                raise DeclarationError(
                    f"two cells of run {c.run_label} match one side ({_text(want)}) at repeat {c.repeat}: "
                    f"{other.dir.name} ({other.first.get('backend')}) and {c.dir.name} ({c.first.get('backend')}); "
                    "the claim needs a facet that tells them apart"
                )
            env = _once(("env", id(c)), lambda: env_of(c))  # noqa: B023 - called at once
            if s.cells and env != s.env:
                raise DeclarationError(
                    f"the cells of run {c.run_label} on one side ({_text(want)}) disagree on their environment: "
                    f"{_env_text(s.env)} against {_env_text(env)}"
                )
            s.cells.append(c)
            s.per[c.repeat] = float(v)
    return list(out.values())


def _text(f: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in f.items())


def _env_text(env: dict) -> str:
    return " ".join(f"{k} {v}" for k, v in env.items())


# ---- findings ------------------------------------------------------------------------------
@dataclass
class Finding:
    """One measured value a claim rests on, with the sides it came from."""

    value: stats.Summary
    sides: tuple  # (A, B) for a ratio, (side,) for a level
    rank: int  # RANKS index (0 for a level)
    what: str = ""  # which condition of a Measured claim ("resnet50 above mobilenet_v2")
    unit: str = "x"
    exact: bool = False  # a count, not a timing: the value decides alone
    expect: C.Expect | None = None  # a Measured condition's own region (else the claim's)
    split: dict = field(default_factory=dict)  # the workload params that tell this answer apart
    work: dict | None = None  # its whole comparable workload (split names only what varies among a claim's findings)
    quality: bool = False  # of a claims.quality metric (an accuracy, a loss): its spread must be the seeds'
    of_ratio: bool = False  # value is the ratio of the two sides' per-repeat values (ratio_findings)
    stop: str = ""  # a sequential run's rounds and why it stopped (bench.core.seqstats); "" for fixed n

    @property
    def scope(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.host.key for s in self.sides))

    @property
    def scope_label(self) -> str:
        return " / ".join(dict.fromkeys(s.host.label for s in self.sides))

    @property
    def pairing(self) -> str:
        """How the sides pair, and on which machine: 'same host and environment (machine ab44…)',
        'same machine class (machines ab44… / 9f01…)', 'same host (machine not recorded)', 'same run,
        machine ab44…' ('same run' where the run recorded none)."""
        if len(self.sides) < 2:
            return "one side"
        text = RANKS[self.rank]
        if self.rank == 0:  # one run is one machine: which one, where it was recorded (two H200 runs of
            # one class were two lent machines, and read the same without it), else which boot of it
            h = self.sides[0].host
            return f"{text}, machine {h.machine}" if h.machine else f"{text}, boot {h.boot[:8]}" if h.boot else text
        if self.rank == 4:  # across hosts names both in `differs`
            return text
        ids = list(dict.fromkeys(s.host.machine or "" for s in self.sides[:2]))
        boots = list(dict.fromkeys(s.host.boot for s in self.sides[:2]))
        if self.rank == 3 and "" in ids:
            seen = [b[:8] for b in boots if b]
            if len(seen) == 2:
                return f"{text} (machine not recorded; boots {' / '.join(seen)}: two machines or one rebooted)"
            return f"{text} (machine not recorded: one machine or two, nothing tells which)"
        if self.rank == 3:
            return f"{text} (machines {' / '.join(ids)})"
        if ids == [""] or "" in ids:
            one = f"; one boot, {boots[0]}" if len(boots) == 1 and boots[0] else ""
            return f"{text} (machine not recorded{one})"
        return f"{text} (machine {ids[0]}" + (", two boots of it)" if len(boots) > 1 else ")")

    @property
    def differs(self) -> list[str]:
        """What differs between the sides besides what the claim compares."""
        if len(self.sides) < 2:
            return []
        a, b = self.sides[0], self.sides[1]
        out = []
        if a.host.key != b.host.key:
            out.append(f"host: {a.host.label} / {b.host.label}")
        ea, eb = a.env, b.env
        libs = FAMILY_LIBS.get(a.family, ()) + FAMILY_LIBS.get(b.family, ())
        for k in sorted(set(ea) | set(eb)):
            if ea.get(k) != eb.get(k) and (k in ("runtime", "image", "python") or k in libs):
                out.append(f"{k}: {ea.get(k, '-')} / {eb.get(k, '-')}")
        da, db = a.data, b.data
        if da != db:
            out.append(f"data: {da[0]}{'' if da[1] else ' (synthetic)'} / {db[0]}{'' if db[1] else ' (synthetic)'}")
        for k in self.work_differs:
            out.append(f"{k}: {a.facets.get(k)} / {b.facets.get(k)}")
        for k in C.ALWAYS_FREE:  # free for a pair, but a reader should know (loader workers, threads)
            va, vb = a.ran_with(k), b.ran_with(k)
            if va != vb and k in ("num_workers", "threads") and va is not None and vb is not None:
                out.append(f"{k}: {va} / {vb}")
        return out

    @property
    def stale(self) -> list[fixes.Fix]:
        seen: dict[str, fixes.Fix] = {}
        for s in self.sides:
            for f in s.stale:
                seen[f.commit] = f
        return list(seen.values())

    @property
    def n(self) -> str:
        return " / ".join(str(len(s.per)) for s in self.sides)

    @property
    def work_differs(self) -> list[str]:
        """The work-amount params (its study's: Side.work) whose values differ between the sides, by name."""
        if len(self.sides) < 2:
            return []
        a, b = self.sides[0], self.sides[1]
        return sorted(k for k in a.work if k not in ALWAYS_SKIP and a.facets.get(k) != b.facets.get(k))

    def order(self) -> tuple:
        """Best first: an interval at all (2+ repeats a side), then sides that did the same amount of
        work (fewer work-amount params differing: a 3-epoch side never stands in for a 10-epoch one
        while a pair of equals exists), then rank, fewer fixes predated, no dirty tree, more
        repeats, fewer flags; last the sides' runs and cells by name, so the order the result dirs
        were given in never picks the answer (31.1x one way, 34.1x the other for profile's GPU over
        CPU in the merged references)."""
        return (
            self.value.lo is None and not self.exact,
            len(self.work_differs),
            self.rank,
            len(self.stale),
            any(s.dirty for s in self.sides),
            -min(len(s.per) for s in self.sides),
            sum(s.flagged for s in self.sides),
            tuple((s.run, s.part, tuple(sorted(c.dir.name for c in s.cells))) for s in self.sides),
        )


ALWAYS_SKIP = {"n_test"}
# the libraries that time a backend family's work: a pair names a version that differs only
# where one of its sides runs on it
FAMILY_LIBS = {
    "torch": ("torch", "torchvision"),
    "numba": ("numba", "numba-cuda", "numpy"),
    "numpy": ("numpy",),
    "cupy": ("cupy-cuda12x", "cupy-cuda13x", "numpy"),
}  # held-out images: they change no rate a claim reads


def ratio_findings(study: Study, cells: list[ResultCell], rule: C.Ratio) -> list[Finding]:
    """Every pair of RULE's sides the cells form, within what RULE.across allows."""
    a_sides = sides(study, cells, rule.a, rule.metric)
    b_sides = sides(study, cells, rule.b, rule.metric)
    if {(id(c), s.part) for s in a_sides for c in s.cells} & {(id(c), s.part) for s in b_sides for c in s.cells}:
        raise DeclarationError("both sides resolve to the same cells: the sides need facets that tell them apart")
    span = ACROSS.get(rule.across) if rule.across else None
    out = []
    for a, b, work in _same_workload(study, rule, a_sides, b_sides):
        if unlike(study, a, b, set(rule.a) | set(rule.b)):
            continue  # not the same work or data: never a pair (missing() says what to run instead)
        rank = _rank(a, b)
        limit = span if span is not None else (4 if a.facets.get("platform") != b.facets.get("platform") else 2)
        if rank > limit:
            continue
        try:
            value = stats.ratio(a.per, b.per, paired=rank == 0)
        except ValueError:
            continue  # a side at 0 (or below) forms no ratio: missing() says which
        out.append(
            Finding(
                value=value, sides=(a, b), rank=rank, unit=rule.unit, split=work, of_ratio=True, quality=C.is_quality(rule.metric)
            )
        )
    return out


def free_of(study: Study, rule: C.Ratio | C.Level) -> tuple[str, ...]:
    """The params RULE lets differ between two answers: its `free`, or where a Level leaves it
    None, STUDY's work (Study.work_amount)."""
    return study.work_amount() if rule.free is None else rule.free


def _same_workload(study: Study, rule: C.Ratio, a_sides: list[Side], b_sides: list[Side]) -> Iterator[tuple[Side, Side, dict]]:
    """(a, b, workload) for every A and B side of RULE that share the workload: every param but
    the claim's own and its free ones (a CPU side runs on no GPU: GPU over CPU compares whatever GPU
    count A names). The one place pair candidates are found; ratio_findings and _not_alike read it."""
    skip = set(rule.a) | set(rule.b) | set(free_of(study, rule))
    if C.is_quality(rule.metric):  # how well a side learned depends on how much it trained: never free
        skip -= set(study.trained_params())
    for a in a_sides:
        for b in b_sides:
            apart = skip | ({"gpus"} if a.facets.get("platform") != b.facets.get("platform") else set())
            work = _workload(a.workload, apart)
            if _key(work) == _key(_workload(b.workload, apart)):
                yield a, b, work


def unlike(study: Study, a: Side, b: Side, compared: set[str] | None = None) -> list[str]:
    """What keeps A and B from being the same work: their data (name, or real against synthetic:
    the embedded digits never stand in for MNIST) and the trained work (Study.trained_work) that
    the claim does not compare itself (COMPARED). Empty: a pair may form."""
    out = []
    if a.data != b.data:
        out.append(f"data {_data_text(a.data)} / {_data_text(b.data)}")
    wa, wb = study.trained_work(a.facets), study.trained_work(b.facets)
    for k in wa:
        if k in (compared or set()) or k not in wb:
            continue
        if wa[k] != wb[k]:
            out.append(f"{k} {wa[k]} / {wb[k]}")
    return out


def _data_text(d: tuple[str, bool]) -> str:
    return d[0] + ("" if d[1] else " (synthetic)" if d[0] != "digits" else " (the embedded default)")


def _rank(a: Side, b: Side) -> int:
    if a.run == b.run:
        return 0
    if a.host.key != b.host.key:
        return 4
    ma, mb = a.host.machine, b.host.machine
    if ma and mb and ma != mb:  # one class, two machines: never "the same host"
        return 3
    if not (ma and mb) and not (a.host.boot and a.host.boot == b.host.boot):
        # no machine id on a side and not one recorded boot: two machines or one, nothing tells which
        # (two H100 runs 33 h apart, lent machines that recorded neither, read as one host); one boot
        # is one machine
        return 3
    return 1 if a.env == b.env else 2


def level_findings(study: Study, cells: list[ResultCell], rule: C.Level) -> list[Finding]:
    skip = set(rule.side) | set(free_of(study, rule))
    if C.is_quality(rule.metric):  # an accuracy at 3 epochs is another answer than at 10
        skip -= set(study.trained_params())
    return [
        Finding(
            value=stats.summarize(list(s.per.values())),
            sides=(s,),
            rank=0,
            unit=rule.unit,
            split=_workload(s.workload, skip),
            quality=C.is_quality(rule.metric),
        )
        for s in sides(study, cells, rule.side, rule.metric)
    ]


# A part of a rule: a study's derived figure (roofline's gain of two speedups, a bar against a ridge):
# FN(study, cells) -> findings of its own making, named `what` (a condition `conditions` requires; ""
# none) and with the `sides` it reads ("not measured here" names the missing ones)
Item = tuple[str, C.Ratio | C.Level, C.Expect | None]


@dataclass(frozen=True)
class Part:
    what: str
    fn: Callable[[Study, list[ResultCell]], list[Finding]]
    sides: tuple[dict, ...] = ()

    def __call__(self, study: Study, cells: list[ResultCell]) -> list[Finding]:
        return self.fn(study, cells)


def named_part(what: str, fn: Callable[[Study, list[ResultCell]], list[Finding]], *rules: C.Ratio | C.Level) -> Part:
    """FN as a Part named WHAT, reading the kinds of cell of RULES."""
    return Part(what, fn, _rule_sides(*rules))


def _rule_sides(*rules: C.Ratio | C.Level) -> tuple[dict, ...]:
    return tuple(s for r in rules for s in ((r.a, r.b) if isinstance(r, C.Ratio) else (r.side,)))


def device_split(*sides: Side) -> dict[str, str]:
    """The split that answers per device (or pair of devices): the devices its sides ran on."""
    return {"device": " / ".join(dict.fromkeys(s.first.device for s in sides))}


def conditions(
    *items: Item | Part,
    per_workload: bool = False,
    exact: bool = False,
    by: tuple[str, ...] = (),
    by_open: tuple[str, ...] = (),
    by_device: bool = False,
    need: bool = True,
    required: tuple[str, ...] | None = None,
    minus: bool = False,
) -> C.Measured:
    """A claim that holds when every (what, rule, expect) does: "Numba CUDA > Numba CPU > PyTorch
    CUDA", each a Ratio (or Level) with its own region (None: the claim's). The one rule language
    of the studies' claims; how its answers split:
    - by default each condition takes its best finding wherever it ran (a ranking may span setups
      and hosts);
    - PER_WORKLOAD: one answer per workload (and host) instead, every condition read from that
      workload's cells (a table row per dtype);
    - BY (e.g. ("model",)): one answer per value of those facets of the first side, and of every
      facet of BY_OPEN that a condition's sides leave open (a side {"backend": "torch-cpu"} with
      a metric that matches int8 and quant-dynamic cells: one answer per variant), and per host
      ("on") where one such answer's conditions ran on several;
    - BY_DEVICE: one answer per device (or pair of devices) its sides ran on.
    An item may also be a Part (named_part): a study's derived figure, its findings as it made them.
    EXACT: counts, whose value decides alone. NEED False: the claim is judged on the conditions
    that ran (the seed's "across Zaratan, P100 and Mac GPU"), not "not measured here" where one
    did not; REQUIRED: the `what`s each answer needs, where not every condition's. MINUS: a
    Ratio's two sides give a difference A - B (points, stats.difference), not A / B."""

    parts = [i for i in items if isinstance(i, Part)]
    tuples = [i for i in items if not isinstance(i, Part)]
    if sum((bool(by), by_device, per_workload)) > 1:
        raise ValueError("conditions: by, by_device and per_workload each split the answers: name one")
    if parts and (by or by_open or per_workload or exact or minus):
        raise ValueError("conditions: a Part makes its own findings: by, by_open, per_workload, exact and minus are for tuples")
    if parts and tuples and not by_device:
        raise ValueError("conditions: Parts split by device (device_split): tuples beside them need by_device=True")
    if required is not None and not need:
        raise ValueError("conditions: need=False needs none; required names what it needs")

    def measure(study: Study, cells: list[ResultCell]) -> list[Finding]:
        out = []
        for item in items:
            if isinstance(item, Part):
                out += item(study, cells)
                continue
            what, rule, expect = item
            if isinstance(rule, C.Ratio):
                got = ratio_findings(study, cells, rule)
                pinned = set(rule.a) & set(rule.b)
            else:
                got = level_findings(study, cells, rule)
                pinned = set(rule.side)
            for f in got:
                f.what, f.expect, f.exact = what, expect, exact or f.exact
                if by:
                    f.split = {k: f.sides[0].facets.get(k) for k in by}
                    f.split |= {k: f.sides[0].facets.get(k) for k in by_open if k not in pinned}
                elif by_device:
                    f.split = device_split(*f.sides)
                elif not per_workload:
                    f.split = {}
                if minus:
                    f.value = stats.difference(f.sides[0].per, f.sides[1].per, paired=f.rank == 0)
                    f.unit = "pts"
            out += got
        if by:
            scopes: dict[str, set] = {}
            for f in out:
                scopes.setdefault(_key(f.split), set()).add(f.scope)
            for f in out:
                if len(scopes[_key(f.split)]) > 1:
                    f.split = {**f.split, "on": f.scope_label}
        elif per_workload:
            keys = sorted({k for f in out for k in f.split})
            vary = [k for k in keys if len({_key({"v": f.split.get(k)}) for f in out}) > 1]
            hosts = len({f.scope for f in out}) > 1
            for f in out:
                f.split = {k: f.split.get(k) for k in vary} | ({"host": f.scope_label} if hosts else {})
        return out

    named = [item.what if isinstance(item, Part) else item[0] for item in items]
    needed = tuple(n for n in dict.fromkeys(named if required is None else required) if n)
    # the kinds of cell read ("not measured here" names those with no finished cell): a tuple's are its
    # rule's, a Part declares its own (named_part); the tuples' rules, for why two sides formed no pair
    sides = tuple(s for item in items for s in (item.sides if isinstance(item, Part) else _rule_sides(item[1])))
    return C.Measured(measure, needed if need else (), sides, tuple(t[1] for t in tuples))


# ---- answers -------------------------------------------------------------------------------
def _finding_coverage(f: Finding) -> float:
    """F's interval's coverage (1.0 for an exact count, 0.0 with no interval)."""
    return 1.0 if f.exact else (f.value.coverage or 0.0)


@dataclass
class Answer:
    """A claim's verdict for one workload in one scope (a host, or a pair of hosts)."""

    study: str
    claim: C.Claim
    verdict: str
    why: str = ""  # why this verdict (the policy's reason, what is missing, the declaration's fault)
    findings: list[Finding] = field(default_factory=list)  # what it rests on (best pair per condition)
    split: dict = field(default_factory=dict)  # the workload params that tell this answer apart (model=resnet18)
    primary: bool = True  # the claim's first answer for this workload
    others: list[tuple[float, str]] = field(default_factory=list)  # (value, where) of the same scope's other runs
    named: dict = field(default_factory=dict)  # its study's named params (Study.named_params) that split leaves out

    @property
    def label(self) -> str:
        split = ", ".join(f"{k}={v}" for k, v in {**self.split, **self.named}.items())
        return f"{self.claim.text} ({split})" if split else self.claim.text

    @property
    def value(self) -> stats.Summary | None:
        return self.findings[0].value if len(self.findings) == 1 else None

    @property
    def scope_label(self) -> str:
        return " / ".join(dict.fromkeys(f.scope_label for f in self.findings))

    @property
    def same_host(self) -> bool:
        """Every finding on one machine: one host class and, where recorded, one machine of it."""
        return all(len(f.scope) == 1 and f.rank != RANKS.index("same machine class") for f in self.findings)

    @property
    def deciding(self) -> list[Finding]:
        """The findings its verdict rests on: every one for "holds" (all must hold) and for a verdict
        not reached; for "does not hold", the one failing finding with the strongest interval (any
        one decides it: ResNet-18's 95 % interval, not another model's range of 2 beside it)."""
        if self.verdict == C.FAILS:
            fails = [
                f
                for f in self.findings
                if not one_seed_sides(f) and C.decide(f.value, f.expect or self.claim.region, f.exact)[0] == C.FAILS
            ]
            if fails:
                return [max(fails, key=_finding_coverage)]
        return self.findings

    @property
    def coverage(self) -> float | None:
        """The confidence its verdict rests on: the weakest interval of the findings deciding it (0.95
        for a 95% interval or confidence sequence, 1 - 2^(1-n) for a range of n repeats, 1.0 for an
        exact count or the bounds a count allows; None: no interval)."""
        got = [1.0 if f.exact else f.value.coverage for f in self.deciding]
        if not got or any(c is None for c in got):
            return None
        return min(c for c in got if c is not None)

    @property
    def coverage_tag(self) -> str:
        """What the verdict rests on, for the page: '95% CI', 'range of 3: 75%', '95% CS', 'exact'."""
        if not self.findings:
            return ""
        weakest = min(self.deciding, key=_finding_coverage)
        return "exact" if weakest.exact else weakest.value.tag

    @property
    def work(self) -> dict:
        """Its whole comparable workload where it rests on one finding's (a Ratio, a Level), else its
        split: what matches it with another judging's answer of the same claim and work, whichever
        other runs each judging had beside it (claimcheck)."""
        if len(self.findings) == 1 and self.findings[0].work is not None:
            return self.findings[0].work
        return self.split

    def key(self) -> str:
        """What identifies this answer across reports: claim, workload, scope."""
        scope = sorted({k for f in self.findings for k in f.scope})
        return json.dumps([self.study, self.claim.id, self.split, scope], sort_keys=True, default=str)


def findings_of(study: Study, cells: list[ResultCell], claim: C.Claim) -> list[Finding]:
    rule = claim.rule
    if isinstance(rule, C.Ratio):
        return ratio_findings(study, cells, rule)
    if isinstance(rule, C.Level):
        return level_findings(study, cells, rule)
    return list(rule.fn(study, cells))


def judge(study: Study, cells: list[ResultCell], claim: C.Claim) -> list[Answer]:
    """CLAIM's answers on CELLS: one per workload and scope, same-host first (module docstring)."""
    try:
        found = findings_of(study, cells, claim)
    except DeclarationError as err:
        return [Answer(study.name, claim, C.NOT_JUDGED, f"{study.name}: {claim.id}: {err}")]
    found = [f for f in found if not all(s.context for s in f.sides)]
    found = seqstats.swap(study.name, claim.id, found)  # a sequential run's comparisons: its confidence sequence
    if not found:
        return [Answer(study.name, claim, C.NOT_HERE, missing(study, cells, claim))]
    measured = isinstance(claim.rule, C.Measured)
    if not measured:  # a Measured claim names its own splits
        for f in found:
            f.work = dict(f.split)  # before the split keeps only what varies here
        _name_splits(found)
    # a Ratio or Level answers per workload and scope; a Measured claim per workload, its
    # conditions each taking their best finding wherever it ran (a ranking may span hosts)
    by: dict[tuple, dict[str, list[Finding]]] = {}
    for f in found:
        key = (_key(f.split), () if measured else f.scope)
        by.setdefault(key, {}).setdefault(f.what, []).append(f)
    answers = []
    for conditions in by.values():
        best: list[Finding] = []
        others: list[tuple[float, str]] = []
        for cands in conditions.values():
            cands.sort(key=Finding.order)
            best.append(cands[0])
            if not measured:
                others += [(f.value.median, _where(f)) for f in cands[1:]]
        verdict, why = verdict_of(claim, best)
        lacking = [w for w in getattr(claim.rule, "conditions", ()) if w not in conditions]
        if lacking and verdict != C.FAILS:
            verdict = C.combine([verdict, C.NOT_HERE]) if verdict == C.HOLDS else verdict
            why = "; ".join(x for x in (why, f"not measured here: {', '.join(lacking)}") if x)
        named = _named(study, best[0])
        answers.append(Answer(study.name, claim, verdict, why, best, dict(best[0].split), others=others, named=named))
    # per workload: an answer whose data can judge the claim before one that says it needs real data
    # (a same-host run on the embedded digits never hides a real-MNIST answer), then same host first
    answers.sort(
        key=lambda a: (
            json.dumps(a.split, sort_keys=True, default=str),
            a.verdict == C.NEEDS_REAL,
            not a.same_host,
            min(f.order() for f in a.findings),
        )
    )
    seen: set[str] = set()
    for a in answers:
        k = json.dumps(a.split, sort_keys=True, default=str)
        a.primary = k not in seen
        seen.add(k)
    return answers


def _where(f: Finding) -> str:
    """An other run's finding, for the 'other runs' list: its sides, and how they pair where that is
    not one run (two machines of one class read alike without it)."""
    sides = " / ".join(s.describe({}, device=False) for s in f.sides)
    return sides if f.rank == 0 or len(f.sides) < 2 else f"{sides}; {f.pairing}"


def _named(study: Study, f: Finding) -> dict:
    """STUDY's named params (Study.named_params) for an answer resting on F, beyond its split: the
    workload's value, else the sides' own (one value where they agree, 'a / b' where a claim lets
    them differ); nothing for a Measured claim's findings, which name their own."""
    work = f.work
    if work is None:
        return {}
    out = {}
    for k in study.named_params():
        if k in f.split:
            continue
        if k in work:
            out[k] = work[k]
            continue
        vals = [s.facets.get(k) for s in f.sides]
        if all(v is not None for v in vals):
            out[k] = vals[0] if len(set(map(str, vals))) == 1 else " / ".join(map(str, vals))
    return out


def _name_splits(found: list[Finding]) -> None:
    """The workload params that differ between a claim's findings name each answer (model=...);
    a finding's `split` holds its comparable workload until here."""
    works = [f.split for f in found]
    keys = sorted({k for w in works for k in w})
    varying = [k for k in keys if len({json.dumps(w.get(k), default=str) for w in works}) > 1]
    for f, w in zip(found, works):
        f.split = {k: w.get(k) for k in varying}


def verdict_of(claim: C.Claim, best: list[Finding]) -> tuple[str, str]:
    """The one policy, over the findings an answer rests on: the gate (claims.gate: not comparable,
    the seed's hardware, real data), then their intervals (claims.decide)."""
    gated = C.gate(claim, best)
    if gated:
        return gated
    verdicts, whys = [], []
    for f in best:
        one_seed = one_seed_sides(f)
        if one_seed:  # an accuracy's interval over repeats of one seed holds no training variance
            verdicts.append(C.UNDECIDED)
            whys.append(
                (f"{f.what}: " if f.what else "")
                + f"the repeats of {', '.join(one_seed)} trained from one seed (made before {ONE_SEED_FIX}): "
                "their accuracies have no spread to judge by; rerun them"
            )
            continue
        v, why = C.decide(f.value, f.expect or claim.region, f.exact)
        verdicts.append(v)
        if why:
            whys.append(f"{f.what}: {why}" if f.what else why)
    return C.combine(verdicts), "; ".join(dict.fromkeys(whys))


ONE_SEED_FIX = "ce207e0"  # bench.core.fixes: before it, a study's repeats all trained from the first one's seed


def one_seed_sides(f: Finding) -> list[str]:
    """The runs of F's sides whose several repeats trained from one seed, where F reads an accuracy
    or a loss (Finding.quality): a fix that touches repeats after the first (Fix.min_repeat) is one
    they predate."""
    if not f.quality:
        return []
    return [s.run for s in f.sides if len(s.per) > 1 and any(fx.min_repeat > 0 for fx in s.stale)]


MISSING_SHOWN = 4  # missing sides a "not measured here" names before it counts the rest


def missing(study: Study, cells: list[ResultCell], claim: C.Claim) -> str:
    """Why no finding formed: which side has no finished cell, or that their workloads differ."""
    rule = claim.rule
    need = f" (needs {claim.needs.gpus} GPUs)" if claim.needs.gpus else ""
    need += f" (needs {claim.needs.what})" if claim.needs.what else ""
    wants = (
        [rule.a, rule.b]
        if isinstance(rule, C.Ratio)
        else [rule.side]
        if isinstance(rule, C.Level)
        else list({json.dumps(w, sort_keys=True): w for w in rule.sides}.values())
    )
    ok = [c for c in cells if c.status == "ok"]
    why = []
    for want in wants:
        if not any(all(facets(study, c, p).get(k) == v for k, v in want.items()) for c in ok for p in _parts(c)):
            why.append("no finished cell with " + _text(want))
    if len(why) > MISSING_SHOWN:
        why = [*why[:MISSING_SHOWN], f"and {len(why) - MISSING_SHOWN} more such side(s)"]
    ratios = [rule] if isinstance(rule, C.Ratio) else [r for r in getattr(rule, "rules", ()) if isinstance(r, C.Ratio)]
    for r in ratios if not why else []:
        if got := _not_alike(study, cells, r):
            why += got
            break
    if not why:  # every side ran: a Ratio's or Level's sides kept apart by their workloads; else its figure not formed
        why.append(
            "the sides never ran the same workload on hosts it may pair"
            if isinstance(rule, C.Ratio | C.Level)
            else "the cells that ran do not form it"
        )
    return "; ".join(why) + need


def _not_alike(study: Study, cells: list[ResultCell], rule: C.Ratio) -> list[str]:
    """Why RULE's sides, which both ran, form no pair because their data or trained work differ,
    and what to run to make one (the first such pair found), or []."""
    try:
        a_sides, b_sides = sides(study, cells, rule.a, rule.metric), sides(study, cells, rule.b, rule.metric)
    except DeclarationError:
        return []
    for a, b, _ in _same_workload(study, rule, a_sides, b_sides):
        if a.context and b.context:
            continue  # two references added for context: what keeps them apart says nothing of this run
        diff = unlike(study, a, b, set(rule.a) | set(rule.b))
        if diff:
            return [f"not the same work: {', '.join(diff)} ({a.run} / {b.run}); " + _to_pair(study, a, b)]
        zero = [f"repeat {r}: {v:g}" for r, v in sorted(b.per.items()) if v <= 0]
        zero += [f"repeat {r}: {v:g} above" for r, v in sorted(a.per.items()) if v < 0]
        if zero:
            return [f"{b.describe({}, device=False)} measured 0 ({', '.join(zero)}): no ratio divides by it"]
    return []


def _to_pair(study: Study, a: Side, b: Side) -> str:
    """What to run so that A's and B's kind of side meet on the same work and data."""
    (na, ra), (nb, rb) = a.data, b.data
    if ra != rb or na != nb:
        synth = na if not ra else nb
        real = nb if not ra else na
        if synth == "digits" or (ra or rb):
            return (
                f"one side ran {_data_text((synth, False))}: fetch the real data (`orchestrate.py data fetch {real}`) "
                "and run again, or compare with a run on the same data"
            )
        return f"run both on one dataset ({na} or {nb})"
    wa, wb = study.trained_work(a.facets), study.trained_work(b.facets)
    sets = " ".join(f"--set {k}={wb[k]}" for k in wa if k in wb and wa[k] != wb[k])
    return f"run {a.run}'s side at {b.run}'s work ({sets}), or both with `--profile answer`"


def _parts(c: ResultCell) -> list[str]:
    return sorted({str(r.get("backend")) for r in c.ok_rows}) or [str(c.first.get("backend"))]


def judge_all(registry: dict[str, Study], cells: list[ResultCell]) -> list[Answer]:
    """Every declared claim of every study that has cells here, in declaration order."""
    out: list[Answer] = []
    token = _MEMO.set({})
    try:
        for name, study in registry.items():
            mine = [c for c in cells if c.study == name]
            if not mine or not getattr(study, "claims", ()):
                continue
            for claim in study.claims:
                out += judge(study, mine, claim)
    finally:
        _MEMO.reset(token)
    return out


def claim_answers(answers: list[Answer]) -> dict[tuple[str, str], list[Answer]]:
    """(study, claim id) -> the primary answers (one per workload) the claim's one verdict combines:
    the one place that choice is made (the verdict, the tallies and their coverage all read it). A
    workload whose data cannot judge the claim ("needs real data": the embedded digits) drops out
    where another workload's data can: the claim was judged there (a merge of the H200 main job's
    digits run with real-MNIST references counted 19 judged claims as needing real data)."""
    per: dict[tuple[str, str], list[Answer]] = {}
    for a in answers:
        if a.primary and not a.claim.kit:
            per.setdefault((a.study, a.claim.id), []).append(a)
    return {key: [a for a in got if a.verdict != C.NEEDS_REAL] or got for key, got in per.items()}


def combined(got: list[Answer]) -> str:
    """The one verdict of a claim's answers GOT (claim_answers)."""
    return C.combine([a.verdict for a in got]) if len(got) > 1 else got[0].verdict


def claim_verdicts(answers: list[Answer]) -> dict[tuple[str, str], str]:
    """(study, claim id) -> the claim's one verdict: its answers' (claim_answers) combined."""
    return {key: combined(got) for key, got in claim_answers(answers).items()}


def tally(answers: list[Answer]) -> dict[str, dict[str, int]]:
    """study -> TALLY category -> claims, each claim counted once by its combined primary verdict."""
    out: dict[str, dict[str, int]] = {}
    for (study, _), verdict in claim_verdicts(answers).items():
        cat = C.TALLY[verdict]
        out.setdefault(study, {})
        out[study][cat] = out[study].get(cat, 0) + 1
    return out


def tally_coverage(answers: list[Answer]) -> dict[str, dict[str, int]]:
    """study -> {"95%": claims judged at 95% or more, "range": claims judged from a range below it}:
    the judged claims of `tally`, counted apart by the coverage their answers rest on (the weakest of
    them), over the same answers as the verdict (claim_answers): every judged claim in one bucket."""
    out: dict[str, dict[str, int]] = {}
    for (study, _), got in claim_answers(answers).items():
        if C.TALLY.get(combined(got)) != "judged":
            continue
        covs = [a.coverage for a in got if a.verdict in C.DECIDED]
        key = "95%" if covs and all(c is not None and c >= stats.CONFIDENCE for c in covs) else "range"
        out.setdefault(study, {})
        out[study][key] = out[study].get(key, 0) + 1
    return out


__all__ = [
    "RANKS",
    "Answer",
    "DeclarationError",
    "Finding",
    "Host",
    "Side",
    "claim_answers",
    "combined",
    "env_of",
    "facets",
    "findings_of",
    "host_of",
    "judge",
    "judge_all",
    "conditions",
    "level_findings",
    "ratio_findings",
    "sides",
    "tally",
    "tally_coverage",
    "verdict_of",
]
