"""Prices for the cost answer: `--price DEVICE=USD_PER_HOUR` (repeatable), `--prices FILE` (TOML,
docs/prices-example.toml is one) and `--kwh-price USD`. The user's own prices are the only ones:
no price given, no cost column; a command-line price wins over the file's for the same device.

A price is matched to a side by its device name (bench.core.worth.device_name: the GPU's name, or
'<cores>-core <CPU model>'), case-insensitively as a substring; where several match, the longest
wins ('H100 80GB HBM3' over 'H100'). A GPU side pays its price once per GPU it uses.

A price is 0 (hardware owned or free: its cost per sample is 0, which bench.core.worth never divides
by) or from a millionth of a dollar to USD_PER_HOUR_MAX an hour (USD_PER_KWH_MAX a kWh): a price that
is negative, past that bound, between 0 and a millionth, not a number or names no device any cell
ran on, and a file that is not TOML or not of this shape, is one line on stderr and left out
(`problems`): the cost that needed it reads "not measured", and nothing else of the report is lost.

    [electricity]                   # optional: for owned hardware (cloud hourly prices include it)
    usd_per_kwh = 0.12
    source = "where the figure comes from"
    [[device]]
    match = "H100"                  # a substring of the device name
    usd_per_hour = 3.78             # per GPU, or per CPU machine of that many cores
    source = "https://..."          # where the figure comes from
    date = "2026-05-07"             # when it was that
    note = "1x H100 SXM on-demand"
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

USD_PER_HOUR_MAX = 1e6  # a million dollars an hour: far past any machine's list price
USD_PER_KWH_MAX = 1e3  # a thousand dollars a kWh: far past any tariff
LEAST = 1e-6  # USD: a positive price below a millionth of a dollar is 0 or a slip, never a figure to divide by


def price_problem(v: float, high: float, unit: str) -> str | None:
    """Why V cannot be a price in UNIT (None: it can): 0 (free) or from LEAST to HIGH."""
    if v < 0:
        return "a price cannot be negative"
    if v > high:
        return f"{v:g} {unit} is above {high:g} {unit}, past any real price"
    if 0 < v < LEAST:
        return f"{v:g} {unit} is between 0 and {LEAST:g}: give 0 for hardware that costs nothing, else at least {LEAST:g}"
    return None


class _Device(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    match: str = Field(min_length=1, max_length=200)
    usd_per_hour: float = Field(ge=0, allow_inf_nan=False)
    source: str = ""
    date: str = ""
    note: str = ""


class _Electricity(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    usd_per_kwh: float = Field(ge=0, allow_inf_nan=False)
    source: str = ""
    date: str = ""


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    device: list[_Device] = []
    electricity: _Electricity | None = None


@dataclass(frozen=True)
class Price:
    match: str
    usd_per_hour: float
    source: str = ""  # "--price" for the command line, else the file's source for the entry
    date: str = ""
    note: str = ""


@dataclass
class Prices:
    entries: list[Price] = field(default_factory=list)
    kwh_usd: float | None = None
    kwh_source: str = ""
    problems: list[str] = field(default_factory=list)  # one line each: what was left out and why
    origin: str = ""  # the file, or "--price"

    def for_device(self, name: str) -> Price | None:
        hits = [p for p in self.entries if p.match.lower() in name.lower()]
        return max(hits, key=lambda p: len(p.match)) if hits else None

    def for_devices(self, names: set[str]) -> Prices:
        """These prices less (with a line each in problems) every one that matches none of NAMES,
        the devices cells ran on: a new Prices, this one unchanged (one Prices serves several
        reports, each with its own devices: `reference-reports`)."""
        keep, left = [], []
        for p in self.entries:
            if any(p.match.lower() in n.lower() for n in names):
                keep.append(p)
            else:
                left.append(
                    f"price for {p.match!r} ({p.usd_per_hour:g} USD/h) matches no device a cell ran on "
                    f"({', '.join(sorted(names)) or 'none'}): not used"
                )
        return replace(self, entries=keep, problems=[*self.problems, *left])

    def describe(self) -> dict:
        return {
            "devices": [vars(p) for p in self.entries],
            "usd_per_kwh": self.kwh_usd,
            "kwh_source": self.kwh_source,
            "problems": self.problems,
            "origin": self.origin,
        }


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def load(cli: list[str] | None = None, path: Path | None = None, kwh: str | float | None = None) -> Prices | None:
    """The prices given (None when none is: no cost). Bad entries become `problems`, never an exception."""
    if not cli and path is None and kwh is None:
        return None
    out = Prices(origin=", ".join(x for x in (str(path) if path else "", "--price" if cli else "") if x))
    if path is not None:
        _read_file(Path(path), out)
    for raw in cli or []:
        dev, sep, val = raw.rpartition("=")
        v = _number(val.strip())
        if not sep or not dev.strip():
            out.problems.append(f"--price {raw!r}: give DEVICE=USD_PER_HOUR (e.g. H100=3.78): not used")
        elif v is None:
            out.problems.append(f"--price {raw!r}: {val.strip()!r} is not a number of USD per hour: not used")
        elif why := price_problem(v, USD_PER_HOUR_MAX, "USD/h"):
            out.problems.append(f"--price {raw!r}: {why}: not used")
        else:
            out.entries = [p for p in out.entries if p.match.lower() != dev.strip().lower()]
            out.entries.append(Price(dev.strip(), v, "--price"))
    if kwh is not None:
        v = kwh if isinstance(kwh, float) and math.isfinite(kwh) else _number(str(kwh).strip())
        why = "give a non-negative number of USD per kWh" if v is None else price_problem(v, USD_PER_KWH_MAX, "USD/kWh")
        if why or v is None:
            out.problems.append(f"--kwh-price {kwh!r}: {why}: not used")
        else:
            out.kwh_usd, out.kwh_source = v, "--kwh-price"
    return out


def _read_file(path: Path, out: Prices) -> None:
    try:
        if path.is_symlink() or not path.is_file():
            raise OSError("not a regular file")
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        out.problems.append(f"prices file {path}: cannot read it ({err}): no price from it")
        return
    except tomllib.TOMLDecodeError as err:
        out.problems.append(f"prices file {path}: not TOML ({err}): no price from it")
        return
    devices = raw.get("device") if isinstance(raw, dict) else None
    rest = {k: v for k, v in raw.items() if k != "device"}
    try:
        head = _File.model_validate(rest)
    except ValidationError as err:
        out.problems.append(f"prices file {path}: {_first(err)}: its electricity price not used")
        head = _File()
    if head.electricity is not None:
        why = price_problem(head.electricity.usd_per_kwh, USD_PER_KWH_MAX, "USD/kWh")
        if why:
            out.problems.append(f"prices file {path}: electricity.usd_per_kwh: {why}: its electricity price not used")
        else:
            out.kwh_usd, out.kwh_source = head.electricity.usd_per_kwh, head.electricity.source or str(path)
    if devices is not None and not isinstance(devices, list):
        out.problems.append(f"prices file {path}: 'device' must be a list of [[device]] tables: no device price from it")
        return
    for i, d in enumerate(devices or [], 1):
        try:
            e = _Device.model_validate(d)
        except ValidationError as err:
            out.problems.append(f"prices file {path}: device entry {i}: {_first(err)}: not used")
            continue
        why = price_problem(e.usd_per_hour, USD_PER_HOUR_MAX, "USD/h")
        if why:
            out.problems.append(f"prices file {path}: device entry {i}: usd_per_hour: {why}: not used")
            continue
        out.entries.append(Price(e.match, e.usd_per_hour, e.source or str(path), e.date, e.note))


def _first(err: ValidationError) -> str:
    e = err.errors()[0]
    where = ".".join(str(x) for x in e.get("loc", ())) or "entry"
    return f"{where}: {e.get('msg', 'invalid')}"


__all__ = ["LEAST", "USD_PER_HOUR_MAX", "USD_PER_KWH_MAX", "Price", "Prices", "load", "price_problem"]
