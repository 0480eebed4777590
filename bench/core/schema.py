"""The declared schema of every file the kit reads back (pydantic), one per file kind.

Result dirs, job dirs, journals and caches come from other machines, other users or an
earlier kit, so each file is checked against its schema where it is loaded, and a file that
fails is one line naming the file, the line (rows) and the key:

    rows.jsonl, rows.partial.jsonl   ROW (common keys) + the number rule below for every metric
    cell.json, job specs, commands   CELL_SPEC (and bench.core.cell.Cell's own invariants)
    system.json                      SYSTEM
    platforms.json                   PLATFORMS
    job dir manifest.json            MANIFEST (host/cluster/jobdir.py: a job dir is data; what a
                                     task runs comes from the machine that submits it)
    slurm/submissions.jsonl          SUBMISSION
    optuna-journal.log               JOURNAL_LINE (a line of Optuna's JournalStorage)

The number rule keeps every later sum, ratio and logarithm finite. A value is a JSON number
that is finite and at most MAX_MAGNITUDE in size (nested values too); a key whose name ends in
a unit (QUANTITIES) holds that quantity, in its unit's range: times, memory sizes, energies,
powers and frequencies from 0 to a stated physical bound, rates (`*_per_s`) above 0. A key
naming a difference or a remainder (MAY_BE_NEGATIVE_WORDS / _KEYS) may be negative. A loss
(`loss`, `*_loss`) may be NaN or +Infinity (a diverged training, which the study flags).
A study's required measurements (Study.required_metrics: what its report divides by) must be
above 0 where they are times or rates (`measured_problem`).

pydantic is imported on first use: importing this module costs nothing.
"""

import functools
import math
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 2  # of the rows: 2 added `flags`
STATUSES = ("ok", "skipped", "error", "incomplete", "interrupted")
MAX_MAGNITUDE = 1e18  # any number: far above any count, FLOP total or rate the kit records
MAX_TEXT = 1 << 16  # characters of one string value of a known key (a command: ~2 kB)


@dataclass(frozen=True)
class Quantity:
    """What a unit suffix measures and the range of its values, in that unit."""

    what: str  # "a time"
    unit: str  # "_s"
    high: float  # the physical bound, in this unit
    low: float = 0.0
    above: bool = False  # True: the low end is excluded (a rate of 0 measured nothing)
    floor: float = 0.0  # a required measurement (Study.required_metrics) is at least this

    def range_text(self) -> str:
        if self.above:
            return f"{self.what} ({self.unit}) must be above {self.low:g} and at most {self.high:g}"
        return f"{self.what} ({self.unit}) must be from {self.low:g} to {self.high:g}"


_DAYS_116 = 1e7  # seconds: no region the kit times runs this long
_PS = 1e-12  # seconds: a required time (an epoch, a step, a latency) is at least a picosecond
# unit suffix -> quantity; the longest matching suffix wins (`_per_s` before `_s`)
QUANTITIES = {
    "_per_s": Quantity("a rate", "_per_s", MAX_MAGNITUDE, 1e-9, above=True, floor=1e-9),  # 1e-9/s: once in 30 years
    "_s": Quantity("a time", "_s", _DAYS_116, floor=_PS),
    "_ms": Quantity("a time", "_ms", _DAYS_116 * 1e3, floor=_PS * 1e3),
    "_us": Quantity("a time", "_us", _DAYS_116 * 1e6, floor=_PS * 1e6),
    "_ns": Quantity("a time", "_ns", _DAYS_116 * 1e9, floor=_PS * 1e9),
    "_bytes": Quantity("a memory size", "_bytes", 1e15, floor=1),  # a petabyte
    "_kb": Quantity("a memory size", "_kb", 1e12, floor=1e-3),
    "_mb": Quantity("a memory size", "_mb", 1e9, floor=1e-6),
    "_gb": Quantity("a memory size", "_gb", 1e6, floor=1e-9),
    "_j": Quantity("an energy", "_j", 1e12),
    "_w": Quantity("a power", "_w", 1e7),
    "_hz": Quantity("a frequency", "_hz", 1e13),
    "_mhz": Quantity("a frequency", "_mhz", 1e7),
}
_SUFFIXES = sorted(QUANTITIES, key=len, reverse=True)
# a key naming a difference or a remainder, which its name says with one of these words
# (`energy_net_j`: energy minus the idle baseline; `framework_overhead_bytes`: growth minus the
# arrays; `mean_other_ms` / `mean_idle_ms`: step minus the parts, which float rounding can take
# a hair below zero), may be negative: from -high to high
MAY_BE_NEGATIVE_WORDS = frozenset({"net", "overhead", "delta", "diff", "drop", "change", "gain", "cost", "other", "idle"})
MAY_BE_NEGATIVE_KEYS = frozenset({"memory_total_bytes"})  # mlp-scratch: growth of process memory (end - start)


def quantity_of(key: str) -> Quantity | None:
    """The quantity KEY's unit suffix names (None: no unit)."""
    unit = next((u for u in _SUFFIXES if key.endswith(u)), None)
    return QUANTITIES[unit] if unit else None


def may_be_negative(key: str) -> bool:
    return key in MAY_BE_NEGATIVE_KEYS or bool(MAY_BE_NEGATIVE_WORDS & set(key.split("_")))


def is_loss(key: str) -> bool:
    """A loss (`loss`, `train_loss`, ...): may be NaN or +Infinity when training diverged."""
    return key == "loss" or key.endswith("_loss")


# ---------------------------------------------------------------------------- showing a value
def show(v: Any, limit: int = 60) -> str:
    """V as a problem line shows it: short, one line."""
    if isinstance(v, bool) or v is None:
        return "true" if v is True else "false" if v is False else "null"
    if isinstance(v, int):
        try:
            return str(v) if abs(v) < 10**15 else f"an integer of {len(str(abs(v)))} digits"
        except ValueError:  # more digits than Python prints
            return "an integer of over 4300 digits"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, str):
        s = repr(v if len(v) <= limit else v[: limit - 3] + "...")
        return " ".join(s.split())
    return f"a {'list' if isinstance(v, list) else 'object' if isinstance(v, dict) else type(v).__name__}"


def _key(key: str) -> str:
    return repr(key) if len(key) <= 80 else repr(key[:77] + "...")


# ---------------------------------------------------------------------------- pydantic types
@functools.cache
def _types() -> Any:
    """The pydantic types, built once on first use (pydantic's import is not free)."""
    from types import SimpleNamespace
    from typing import Annotated, Literal, NotRequired, Required

    from pydantic import (
        ConfigDict,
        Field,
        StrictBool,
        StrictFloat,
        StrictInt,
        StrictStr,
        StringConstraints,
        TypeAdapter,
        ValidationError,
    )
    from typing_extensions import TypedDict

    t = SimpleNamespace()
    Text = Annotated[StrictStr, StringConstraints(max_length=MAX_TEXT)]
    Name = Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_TEXT)]
    Count = Annotated[StrictInt, Field(ge=0, le=int(MAX_MAGNITUDE))]
    Num = Annotated[StrictInt | StrictFloat, Field(ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE, allow_inf_nan=False)]
    t.number = TypeAdapter(Num)

    def quantity(q: Quantity, low: float, above: bool, high: float) -> TypeAdapter:
        lim = {"gt": low} if above else {"ge": low}
        return TypeAdapter(Annotated[StrictInt | StrictFloat, Field(le=high, allow_inf_nan=False, **lim)])

    t.quantity = {u: quantity(q, q.low, q.above, q.high) for u, q in QUANTITIES.items()}
    t.signed = {u: quantity(q, -q.high, False, q.high) for u, q in QUANTITIES.items()}
    t.measured = {u: quantity(q, max(q.low, q.floor), q.above, q.high) for u, q in QUANTITIES.items()}
    strict = ConfigDict(strict=True, extra="allow")

    class Row(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        schema: Annotated[StrictInt, Field(ge=1)] | None
        study: Required[Name]
        status: Required[Literal[STATUSES]]  # type: ignore[valid-type]
        cell: Text | None
        backend: Text | None
        variant: Text | None
        seed: Count | None
        repeat: Count | None
        run_id: Text | None
        reason: Text | None
        flags: Text | None
        host: Text | None
        device: Text | None
        image_id: Text | None
        lock_hash: Text | None
        dataset: Text | None
        dataset_real: StrictBool | None
        command: Text | None
        # under a cluster scheduler only (bench.core.provenance.scheduler_row_fields)
        scheduler: Text | None
        scheduler_job: Text | None
        scheduler_task: Text | None
        scheduler_node: Text | None

    t.row = TypeAdapter(Row)
    t.row_keys = frozenset(Row.__annotations__)

    class Gpu(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        name: Text | None
        driver: Text | None
        memory_mb: Num | None
        torch_cuda: Text | None

    DatasetInfo = TypedDict(  # noqa: UP013 - 'real' and friends read as they are written
        "DatasetInfo",
        {"name": NotRequired[Text | None], "real": NotRequired[StrictBool | None], "sha256": NotRequired[Text | None]},
        total=False,
    )
    DatasetInfo.__pydantic_config__ = strict  # type: ignore[attr-defined]
    KitSource = TypedDict(  # noqa: UP013 - `from` is a keyword
        "KitSource",
        {"dirty": NotRequired[StrictBool | None], "sha": NotRequired[Text | None], "from": NotRequired[Text | None]},
        total=False,
    )
    KitSource.__pydantic_config__ = strict  # type: ignore[attr-defined]
    Obj = dict[StrictStr, Any]

    class System(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        hostname: Text | None
        machine_id: Text | None
        machine_id_source: Text | None
        boot_id: Text | None
        runtime: Text | None
        image_ref: Text | None
        image_id: Text | None
        lock_hash: Text | None
        kit_git_sha: Text | None
        kit_version: Text | None
        kit_source: KitSource | None
        python: Text | None
        os: Text | None
        libraries: dict[StrictStr, Text | None] | None
        cpu_model: Text | None
        cpu_arch: Text | None
        cpu_affinity: Count | None
        cpu_logical_cores: Count | None
        memory_total_mb: Num | None
        load_avg: dict[StrictStr, Annotated[StrictInt | StrictFloat, Field(ge=0, le=1e6, allow_inf_nan=False)]] | None
        gpu: Gpu | None
        dataset: DatasetInfo | None
        cell: Obj | None
        config: Obj | None
        run_id: Text | None
        run_label: Text | None
        created_utc: Text | None
        command: Text | None
        scheduler: Obj | None
        # read by a study's report section
        roofs: Obj | None
        telemetry: Obj | None
        idle_baseline: Obj | None

    t.system = TypeAdapter(System)

    class Platform(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        status: Text
        reason: Text | None
        studies: list[Text] | None

    t.platforms = TypeAdapter(dict[StrictStr, Platform])

    class CellSpec(TypedDict, total=False):  # the types; bench.core.cell.Cell adds its invariants (env's letters, ...)
        __pydantic_config__ = ConfigDict(strict=True, extra="forbid")  # type: ignore[misc]
        study: Required[Name]
        backend: Required[Name]
        variant: Name
        params: Obj
        devices: list[StrictStr | StrictInt] | StrictStr | None
        seed: Count
        repeat: Count
        env: Text
        nodes: Annotated[StrictInt, Field(ge=1, le=1024)]
        name: Text

    t.cell_spec = TypeAdapter(CellSpec)

    Path_ = Annotated[StrictStr, StringConstraints(min_length=1, max_length=4096, pattern=r"^/[^\x00-\x1f\x7f]*$")]

    class ManifestImage(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        ref: Required[Annotated[StrictStr, StringConstraints(min_length=1, max_length=500, pattern=r"^[^\x00-\x20\x7f]+$")]]
        id: Annotated[StrictStr, StringConstraints(max_length=200, pattern=r"^[A-Za-z0-9:]*$")] | None

    class ManifestEnv(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        label: Required[Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z0-9._+-]{1,120}$")]]
        runtime: Required[Literal["native", "container"]]
        python: Text | None  # what planned it; never what runs it (host/cluster/slurm.py)
        image: ManifestImage | None

    class ManifestData(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        dir: Path_ | None
        datasets: dict[StrictStr, Text]

    class ManifestCell(TypedDict, total=False):
        __pydantic_config__ = strict  # type: ignore[misc]
        task: Required[Annotated[StrictStr, StringConstraints(pattern=r"^[0-9]{4,7}$")]]
        id: Required[Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z0-9.+_-]{1,200}$")]]  # Cell.id's letters
        study: Text
        shape: Text

    class Manifest(TypedDict, total=False):  # kit, format and kit_version are checked first, with their own lines
        __pydantic_config__ = strict  # type: ignore[misc]
        kit: Required[StrictStr]
        format: Required[StrictInt]
        kit_version: Required[Text]
        environment: Required[ManifestEnv]
        data: Required[ManifestData]
        cells: Required[Annotated[list[ManifestCell], Field(min_length=1, max_length=100_000)]]
        request: Obj
        shapes: Obj
        command: Text
        kit_root: Text  # where the plan was made; never what a task runs (host/cluster/slurm.py)
        kit_git_sha: Text | None
        created_utc: Text

    t.manifest = TypeAdapter(Manifest)

    class Submission(TypedDict):
        __pydantic_config__ = ConfigDict(strict=True, extra="allow")  # type: ignore[misc]
        job_id: Annotated[StrictStr, StringConstraints(pattern=r"^[0-9]{1,20}$")]
        shape: Annotated[StrictStr, StringConstraints(pattern=r"^[a-z0-9-]{1,40}$")]
        tasks: Annotated[list[Annotated[StrictInt, Field(ge=0, le=1_000_000)]], Field(max_length=1_000_000)]
        submit: Text

    t.submission = TypeAdapter(Submission)

    class JournalLine(TypedDict):  # Optuna's JournalStorage: one operation a line
        __pydantic_config__ = ConfigDict(strict=True, extra="allow")  # type: ignore[misc]
        op_code: Annotated[StrictInt, Field(ge=0, le=64)]
        worker_id: Text

    t.journal_line = TypeAdapter(JournalLine)
    t.ValidationError = ValidationError
    return t


def _first_error(err: Any, where: str = "") -> str:
    """One line for a pydantic ValidationError: the key path, the value, what it should be."""
    e = err.errors(include_url=False)[0]
    path = [str(x) for x in e["loc"] if not (isinstance(x, str) and ("[" in x or x in _TAGS))]
    key = ".".join(path)
    what = e["msg"][0].lower() + e["msg"][1:] if e["msg"] else e["type"]
    if e["type"] == "missing":
        return f"{where}{_key(key)} is missing"
    if e["type"] == "extra_forbidden":
        return f"{where}unknown key {_key(key)}"
    lead = f"{_key(key)} is {show(e.get('input'))}" if key else f"it is {show(e.get('input'))}"
    return f"{where}{lead}: {what}"


_TAGS = {"int", "float", "str", "bool", "none", "list", "dict", "literal"}


# ---------------------------------------------------------------------------- numbers
def _nested_problem(key: str, v: Any) -> str | None:
    """The first number anywhere in V (a list or object, under KEY) that is not finite or too
    large, named by its path ('traces[0][1]', 'gpu.memory_mb')."""
    stack: list[tuple[str, Any]] = [(key, v)]
    while stack:  # iterative: JSON nests up to the parser's recursion limit
        path, x = stack.pop()
        if isinstance(x, dict):
            stack.extend((f"{path}.{k}" if path else str(k), y) for k, y in reversed(list(x.items())))
        elif isinstance(x, list):
            stack.extend((f"{path}[{i}]", y) for i, y in reversed(list(enumerate(x))))
        else:
            why = nested_number_problem(path, x)
            if why:
                return why
    return None


def nested_number_problem(path: str, x: Any) -> str | None:
    """Why X, a value inside a list or object at PATH ('traces[0][1]'), is refused (None: it is
    not): a number there must be finite and at most MAX_MAGNITUDE in size, whatever its key."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    t = _types()
    try:
        t.number.validate_python(x)
    except t.ValidationError:
        return f"{_key(path)} holds {show(x)}: every number must be finite and at most {MAX_MAGNITUDE:g} in size"
    return None


def number_bounds(key: str) -> tuple[float, bool, float]:
    """(low, whether low itself is excluded, high): the range the number rule holds a finite
    number of metric KEY to (a loss's NaN / +Infinity aside)."""
    q = quantity_of(key)
    if q is None:
        return -MAX_MAGNITUDE, False, MAX_MAGNITUDE
    if may_be_negative(key):
        return -q.high, False, q.high
    return q.low, q.above, q.high


def row_keys() -> frozenset[str]:
    """The keys the rows schema types (every other key of a row is a study's metric)."""
    return _types().row_keys


def number_problem(key: str, v: Any) -> str | None:
    """Why value V of metric KEY is impossible (None: it is not), by the number rule of the
    module docstring."""
    if isinstance(v, (list, dict)):
        return _nested_problem(key, v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None  # a string, a flag, a null: no number to check
    t = _types()
    if is_loss(key) and isinstance(v, float) and (math.isnan(v) or v == math.inf):
        return None  # a diverged training: the study flags it
    q = quantity_of(key)
    adapter = t.number if q is None else (t.signed if may_be_negative(key) else t.quantity)[q.unit]
    try:
        adapter.validate_python(v)
    except t.ValidationError:
        if q is None:
            return f"{_key(key)} is {show(v)}: a number must be finite and at most {MAX_MAGNITUDE:g} in size"
        if may_be_negative(key):
            return f"{_key(key)} is {show(v)}: {q.what} ({q.unit}) must be finite and at most {q.high:g} in size"
        return f"{_key(key)} is {show(v)}: {q.range_text()}"
    return None


def measured_problem(key: str, v: Any) -> str | None:
    """Why V cannot be KEY as a study's required measurement (None: it can): a number, and a
    time or rate above its floor (an epoch of 0 s, a throughput of 0: nothing was measured)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{_key(key)} is {'missing' if v is None else type(v).__name__}, expected a number"
    why = number_problem(key, v)
    if why or is_loss(key) or may_be_negative(key):
        return why
    q = quantity_of(key)
    if q is None or not q.floor:
        return None
    t = _types()
    try:
        t.measured[q.unit].validate_python(v)
    except t.ValidationError:
        return f"{_key(key)} is {show(v)}: a measured {q.what[2:] if q.what.startswith('a ') else q.what} is at least {q.floor:g} {q.unit[1:]}"
    return None


# ---------------------------------------------------------------------------- files
def check_row(row: object) -> str | None:
    """Why ROW (one line of a rows file) cannot be trusted (None: it can): ROW's common keys,
    then every value by the number rule."""
    t = _types()
    if not isinstance(row, dict):
        return f"not an object ({'list' if isinstance(row, list) else type(row).__name__})"
    try:
        t.row.validate_python(row)
    except t.ValidationError as err:
        return _first_error(err)
    if (row.get("schema") or 0) > SCHEMA_VERSION:
        return _newer(row["schema"])
    for k, v in row.items():
        why = number_problem(k, v)
        if why:
            return why
    return None


def _newer(version: int) -> str:
    return f"schema {version} is newer than this kit's {SCHEMA_VERSION}: update the kit"


def value_problem(key: str, v: Any) -> str | None:
    """Why check_row refuses V under KEY of a row whose other values it reads (None: it reads
    it): where KEY is a common key, the ROW model's type for it (and a schema no newer than this
    kit's); then the number rule. A row passes check_row exactly when it has `study` and `status`
    and every value passes this, so the writer (bench.core.rows) holds each value to it before it
    writes: the one set of bounds, read by both sides."""
    t = _types()
    if key in t.row_keys:
        try:
            t.row.validate_python({"study": "s", "status": "ok", key: v})
        except t.ValidationError as err:
            return _first_error(err)
        if key == "schema" and isinstance(v, int) and v > SCHEMA_VERSION:
            return f"{_key(key)} is {show(v)}: {_newer(v)}"
    return number_problem(key, v)


Path_ = tuple[str | int, ...]  # keys and list indices from a file's top


def path_text(path: Path_) -> str:
    """PATH as problem lines name it: 'gpu.memory_mb', 'traces[0][1]'."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _at(obj: Any, path: Path_) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _real_path(obj: Any, loc: tuple) -> Path_:
    """The path into OBJ that a pydantic error's LOC names, its type tags ('int', 'typed-dict')
    left out: each element that is a key or index of the value reached so far."""
    path: list[str | int] = []
    for x in loc:
        if isinstance(obj, dict) and isinstance(x, str) and x in obj:
            path.append(x)
            obj = obj[x]
        elif isinstance(obj, list) and isinstance(x, int) and 0 <= x < len(obj):
            path.append(x)
            obj = obj[x]
    return tuple(path)


def fit(kind: str, obj: dict) -> dict[str, str]:
    """Make OBJ (a whole JSON file of KIND, plain JSON: objects with text keys, lists, text,
    numbers, true/false/null) one that check(KIND) passes, in place, by writing as null each value
    it refuses; returns {path: why} for each value not kept. A number past the number rule is
    nulled where it is; a value the file's model refuses is nulled, and where null is not allowed
    there, dropped from its object (a list: the list nulled). What cannot be fixed this way (a
    required key) is left for check() to name."""
    t = _types()
    adapter = getattr(t, kind)
    notes: dict[str, str] = {}
    stack: list[tuple[Path_, Any]] = [((), obj)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, dict):
            stack.extend(((*path, k), y) for k, y in x.items())
        elif isinstance(x, list):
            stack.extend(((*path, i), y) for i, y in enumerate(x))
        elif path and (why := nested_number_problem(path_text(path), x)):
            _at(obj, path[:-1])[path[-1]] = None
            notes[path_text(path)] = why
    for _ in range(10_000):  # each turn nulls or drops one value
        try:
            adapter.validate_python(obj)
            break
        except t.ValidationError as err:
            path = _real_path(obj, err.errors(include_url=False)[0]["loc"])
            if not path:
                break  # the file's top itself (a required key missing): check() names it
            notes.setdefault(path_text(path), _first_error(err))
            parent = _at(obj, path[:-1])
            if parent[path[-1]] is not None:
                parent[path[-1]] = None
            elif isinstance(parent, dict):
                del parent[path[-1]]  # null is not allowed here: the key goes (a required one: its object next turn)
            elif len(path) > 1:
                _at(obj, path[:-2])[path[-2]] = None
            else:
                break
    return notes


def check(kind: str, obj: object) -> str | None:
    """Why OBJ (a whole JSON file of KIND: system, platforms, cell_spec, submission,
    journal_line) does not fit its schema, as 'key ...: what' (None: it fits). Every number in
    it follows the number rule (finite, bounded), nested ones too."""
    t = _types()
    adapter = getattr(t, kind)
    if not isinstance(obj, dict):
        return f"not a JSON object ({'a list' if isinstance(obj, list) else show(obj)})"
    try:
        adapter.validate_python(obj)
    except t.ValidationError as err:
        return _first_error(err)
    return _nested_problem("", obj)


__all__ = [
    "MAX_MAGNITUDE",
    "QUANTITIES",
    "SCHEMA_VERSION",
    "STATUSES",
    "check",
    "check_row",
    "fit",
    "measured_problem",
    "number_bounds",
    "number_problem",
    "row_keys",
    "quantity_of",
    "value_problem",
]
