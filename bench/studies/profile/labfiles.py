"""What the profile report reads from a run's `lab/` folder, beside its cells: the lab scripts'
JSON results, read as untrusted input (they come from other hosts, as result dirs do).

    dp_collapse(run)    <run>/lab/dp_collapse.json (python -m lab.dp_collapse): one DenseNet step
                        timed with cudnn.benchmark on and off in the places nn.DataParallel runs it
    kit_vs_bare(run)    <run>/lab/kit_vs_bare_ddp.json (python -m lab.bare_ddp compare): the kit's
                        DDP cell against a bare DDP loop, per repeat

Each returns (the document, None), (None, None) where the file is absent, or (None, one line
saying why it was not read): a symlink or non-file, more than MAX_BYTES, not JSON, NaN or
Infinity, or anything the schema refuses (pydantic, strict: types, ranges, lengths, no place
measured twice). Figures derived from a document are computed again from its raw values (a
place's median from its steps, kit / bare from its repeats), never taken from its summary fields.
Strings in it (versions, the device's name) are still untrusted: escape them where shown.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.core.stats import Summary, ratio

MAX_BYTES = 256 << 10  # dp_collapse.json is about 3 KB, kit_vs_bare_ddp.json 0.3 KB
DP_COLLAPSE = "lab/dp_collapse.json"
KIT_VS_BARE = "lab/kit_vs_bare_ddp.json"
PLACES = ("main", "fresh", "worker", "dp")

Ms = Annotated[float, Field(gt=0, lt=1e9)]  # a step's time, milliseconds
Text = Annotated[str, Field(max_length=300)]
Repeat = Annotated[str, Field(pattern=r"^[0-9]{1,6}$")]
Rate = Annotated[float, Field(gt=0, lt=1e12)]  # images per second


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False, frozen=True)


class Options(_Doc):
    model: str = Field(max_length=64)
    batch: int = Field(ge=1, le=1 << 20)
    image_size: int = Field(ge=1, le=1 << 16)
    steps: int = Field(ge=1, le=10_000)
    device: Literal["cuda", "cpu"]


class Meta(_Doc):
    options: Options
    torch: str = Field(max_length=64)
    cudnn: int | None = None
    device_name: str = Field(max_length=128)
    gpus: int = Field(ge=0, le=1024)
    skipped: dict[Literal["main", "fresh", "worker", "dp"], Text] = Field(default_factory=dict)


class Place(_Doc):
    place: Literal["main", "fresh", "worker", "dp"]
    cudnn_benchmark: bool
    first_step_ms: Ms
    step_ms: list[Ms] = Field(min_length=1, max_length=10_000)
    events_per_step: int | None = Field(default=None, ge=0, le=1 << 30)
    events_error: Text | None = None
    events: str = Field(max_length=40)
    images_per_step: int = Field(ge=1, le=1 << 24)

    @property
    def median_ms(self) -> float:
        """The median of the timed steps (after the first), from the steps themselves."""
        return statistics.median(self.step_ms)


class DpCollapse(_Doc):
    meta: Meta
    places: list[Place] = Field(min_length=1, max_length=2 * len(PLACES))

    @model_validator(mode="after")
    def _each_once(self) -> DpCollapse:
        keys = [(p.place, p.cudnn_benchmark) for p in self.places]
        if len(keys) != len(set(keys)):
            raise ValueError("a place is measured twice with one cudnn.benchmark setting")
        return self

    def get(self, place: str, benchmark: bool) -> Place | None:
        return next((p for p in self.places if p.place == place and p.cudnn_benchmark is benchmark), None)


class KitVsBare(_Doc):
    world: int = Field(ge=1, le=1 << 16)
    kit: dict[Repeat, Rate] = Field(min_length=1, max_length=1000)
    bare: dict[Repeat, Rate] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _shared_repeat(self) -> KitVsBare:
        if not set(self.kit) & set(self.bare):
            raise ValueError("no repeat holds both a kit and a bare figure")
        return self

    def ratio(self) -> Summary:
        """kit / bare over the repeats both hold, paired by repeat (bench.core.stats.ratio)."""
        both = sorted(set(self.kit) & set(self.bare), key=int)
        return ratio({int(k): self.kit[k] for k in both}, {int(k): self.bare[k] for k in both})


D = TypeVar("D", bound=_Doc)


def _read(path: Path, model: type[D]) -> tuple[D | None, str | None]:
    if not os.path.lexists(path):
        return None, None
    if path.is_symlink() or not path.is_file():
        return None, "a symlink or not a regular file"
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as err:
        return None, f"unreadable ({type(err).__name__})"
    if len(raw) > MAX_BYTES:
        return None, f"larger than {MAX_BYTES >> 10} KB"
    try:
        return model.model_validate_json(raw), None
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(x) for x in first.get("loc", ())) or "the document"
        return None, f"{where}: {first.get('msg', 'invalid')}"


def dp_collapse(run: Path) -> tuple[DpCollapse | None, str | None]:
    """<RUN>/lab/dp_collapse.json, checked (module docstring)."""
    return _read(Path(run) / DP_COLLAPSE, DpCollapse)


def kit_vs_bare(run: Path) -> tuple[KitVsBare | None, str | None]:
    """<RUN>/lab/kit_vs_bare_ddp.json, checked (module docstring)."""
    return _read(Path(run) / KIT_VS_BARE, KitVsBare)
