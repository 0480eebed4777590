"""`Cell`: one unit of work, and the only thing that crosses a process or container boundary.

    cell = Cell("my-study", "torch-cpu", params={"epochs": 10, ...}, name="torch-cpu_fast")
    cell.id            -> "torch-cpu_fast-3f1c0a9d2b7e"  (name + hash of the full spec)
    cell.dir(out)      -> out/my-study/<cell.id>          (the one place this path is joined)
    Cell.from_json(cell.to_json()) == cell

The id hashes every field but `name` (a readable prefix the study picks), so two cells
share a directory only when they are exactly the same work in the same environment;
studies put the resolved dataset's checksum into params, so other data is other work, and
the matrix puts the environment's label into `env`, so a container run never reuses a
native result (nor one made under other library versions).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from bench.core.errors import KitError

_FIELDS = ("study", "backend", "variant", "params", "devices", "seed", "repeat", "env", "nodes", "name")


def _canonical(value: Any) -> Any:
    """JSON-stable form: dicts sorted, tuples as lists, floats as floats (1 and 1.0 differ in type only)."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        return value.item()
    return value


def check_devices(devices: Any) -> tuple[str, ...]:
    """DEVICES as a tuple of names: GPU ids (each once, compared as numbers: `0` and `00` are one
    GPU; written without leading zeros) or 'cpu' ranks, never a mix; KitError else. GPUs are named
    one way, all by index or all by UUID: which index a UUID is depends on the host (and on
    CUDA_VISIBLE_DEVICES), so `0,GPU-<uuid of 0>` would be one GPU named twice. A UUID is known
    case-insensitively and by any prefix (as CUDA_VISIBLE_DEVICES takes one): one that starts
    another is that GPU again."""
    if isinstance(devices, str):
        devices = [d for d in devices.split(",")]
    if not isinstance(devices, (list, tuple)):
        raise KitError(f"cell devices must be a list of GPU ids or cpu ranks (got {type(devices).__name__})")
    given = tuple(str(d).strip() for d in devices)
    if any(not re.fullmatch(r"cpu|[0-9]{1,3}|(GPU|MIG)-[A-Za-z0-9/-]{1,80}", d) for d in given):
        raise KitError(f"devices must be GPU indices (0,1), GPU/MIG UUIDs, or cpu ranks (cpu,cpu); got {','.join(given)!r}")
    devs = tuple(str(int(d)) if d.isdigit() else d for d in given)
    gpus = [d for d in devs if d != "cpu"]
    if gpus and len(gpus) != len(devs):
        raise KitError(f"devices mix cpu ranks and GPUs ({','.join(given)}): choose one kind")
    if len(set(gpus)) != len(gpus):
        raise KitError(f"devices name a GPU twice ({','.join(given)}): each GPU runs one rank")
    uuids = sorted(d.lower() for d in gpus if not d.isdigit())
    if uuids and len(uuids) != len(gpus):
        raise KitError(
            f"devices name GPUs both by index and by UUID ({','.join(given)}): an index and a UUID may be one GPU; "
            "name them one way"
        )
    if any(b.startswith(a) for a, b in zip(uuids, uuids[1:])):  # sorted: a prefix sorts right before what it starts
        raise KitError(f"devices name a GPU twice ({','.join(given)}): one UUID is the other or starts it")
    return devs


@dataclass(frozen=True)
class Cell:
    study: str  # registry name of the study
    backend: str  # registry name of the backend within the study
    variant: str = "default"  # backend tuning label
    params: dict = field(default_factory=dict, hash=False)  # the study's resolved config (units in key names)
    devices: tuple = ()  # GPU ids the cell runs on ("0", "1": one process per GPU or DataParallel), or
    # "cpu" ranks ("cpu", "cpu": 2 gloo ranks); (): one device of the backend's platform, the scheduler's choice
    seed: int = 0  # weights and data order
    repeat: int = 0  # 0, 1, ...: the same spec again, in a fresh process
    env: str = ""  # the environment the matrix resolved it in (provenance.environment_label()): the
    # runtime, the image or the libraries that time the work; another environment is another cell.
    # "" (a spec written by hand, or made before environments were told apart): any environment
    nodes: int = 1  # hosts a many-device cell spans (its devices on each; a cluster scheduler starts it on
    # every one with a rendezvous: bench/run/ranks.py); 1: one host
    name: str = field(default="", compare=False)  # readable id prefix; not part of the identity

    def __post_init__(self) -> None:
        for f in ("study", "backend", "variant"):
            v = getattr(self, f)
            if not isinstance(v, str) or not v:
                raise KitError(f"cell {f} must be a non-empty string (got {v!r})")
        if not isinstance(self.env, str) or not re.fullmatch(r"[A-Za-z0-9._+-]{0,120}", self.env):
            raise KitError(f"cell env must be a short label of letters, digits and ._+- (got {self.env!r})")
        if not isinstance(self.params, dict):
            raise KitError(f"cell params must be an object (got {type(self.params).__name__})")
        for f in ("seed", "repeat"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise KitError(f"cell {f} must be an integer >= 0 (got {v!r})")
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or not 1 <= self.nodes <= 1024:
            raise KitError(f"cell nodes must be an integer from 1 to 1024 (got {self.nodes!r})")
        object.__setattr__(self, "devices", check_devices(self.devices))
        object.__setattr__(self, "params", _canonical(self.params))

    # ---- identity
    def spec(self) -> dict:
        """Every field that defines the work (not `name`; `env` only when set and `nodes` only
        above 1, so specs made before them keep their ids), canonical."""
        skip = {"name"} | ({"env"} if not self.env else set()) | ({"nodes"} if self.nodes == 1 else set())
        return _canonical({k: v for k, v in asdict(self).items() if k not in skip})

    @property
    def key(self) -> str:
        """sha256 of the canonical spec."""
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def id(self) -> str:
        prefix = self.name or f"{self.backend}_{self.variant}" + (f"_r{self.repeat}" if self.repeat else "")
        return re.sub(r"[^A-Za-z0-9.+_-]+", "-", prefix)[:80] + "-" + self.key[:12]

    def dir(self, out: Path) -> Path:
        return Path(out) / self.study / self.id

    def replace(self, **changes: Any) -> Cell:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return Cell(**d)

    def with_params(self, **changes: Any) -> Cell:
        return self.replace(params={**self.params, **changes})

    # ---- serialisation
    def to_json(self, indent: int | None = None) -> str:
        d = {**self.spec(), "name": self.name}
        return json.dumps(d, sort_keys=True, indent=indent, separators=None if indent else (",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Cell:
        """The Cell TEXT holds, held to the cell spec's schema (bench.core.schema) first: KitError
        (one line naming the key) for anything else."""
        from bench.core import schema

        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise KitError(f"cell spec is not JSON: {err}") from None
        if isinstance(d, dict) and set(d) - set(_FIELDS):
            unknown = sorted(set(d) - set(_FIELDS), key=str)
            raise KitError(f"cell spec has unknown field(s) {', '.join(map(str, unknown))[:200]}: expected {', '.join(_FIELDS)}")
        why = schema.check("cell_spec", d)
        if why:
            raise KitError(f"cell spec: {why}")
        d["devices"] = d.get("devices") or ()
        return cls(**d)

    @classmethod
    def load(cls, path: Path) -> Cell:
        from bench.core import bounded

        try:
            text = bounded.read_bytes(Path(path), bounded.Caps(file_bytes=1 << 20)).decode("utf-8", errors="replace")
        except (KitError, OSError, EOFError) as err:
            raise KitError(f"cell spec {err}") from None
        return cls.from_json(text)
