"""Finished cells under any number of result dirs, with their provenance: what the report
and the matrix summary read. Standard library only (the host side uses it)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import KitError
from bench.core.rows import read_rows


@dataclass
class ResultCell:
    dir: Path
    rows: list[dict]
    system: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        s = {r.get("status") for r in self.rows}
        return "error" if "error" in s else "ok" if "ok" in s else "skipped"

    @property
    def study(self) -> str:
        return str(self.rows[0].get("study") or "unknown")

    @property
    def first(self) -> dict:
        return self.rows[0]

    @property
    def ok_rows(self) -> list[dict]:
        return [r for r in self.rows if r.get("status") == "ok"]

    @property
    def reason(self) -> str:
        return next((str(r.get("reason") or "") for r in self.rows if r.get("status") in ("error", "skipped")), "")

    @property
    def device(self) -> str:
        """What the cell ran on: the row's device, else the GPU for GPU backends or the CPU model."""
        dev = next((r.get("device") for r in self.rows if r.get("device")), None)
        if dev:
            return str(dev)
        backend = str(self.first.get("backend", ""))
        gpu = (self.system.get("gpu") or {}).get("name")
        if any(t in backend for t in ("cuda", "mps", "cupy")) and gpu:
            return str(gpu)
        cores = self.system.get("cpu_affinity") or self.system.get("cpu_logical_cores")
        return str(self.system.get("cpu_model") or "unknown CPU") + (f", {cores} cores" if cores else "")

    @property
    def unclean_source(self) -> bool:
        src = self.system.get("kit_source") or {}
        return bool(src.get("dirty")) or str(self.system.get("kit_git_sha") or "").endswith("-dirty")


def collect(dirs: list[Path]) -> tuple[list[ResultCell], list[dict]]:
    """(cells, platform notes). Every dir must exist; a dir with no cells and no notes is an error."""
    cells, notes = [], []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise KitError(f"result dir {d} does not exist")
        found = sorted(d.rglob("rows.jsonl"))
        for p in found:
            rows = [r for r in read_rows(p) if isinstance(r, dict)]
            if not rows:
                continue
            sysp = p.parent / "system.json"
            system = json.loads(sysp.read_text()) if sysp.is_file() else {}
            cells.append(ResultCell(p.parent, rows, system))
        plat = sorted(d.rglob("platforms.json"))
        for p in plat:
            for name, info in json.loads(p.read_text()).items():
                notes.append({"platform": name, **info, "source": str(p.parent)})
        if not found and not plat:
            raise KitError(f"no results under {d} (expected <dir>/<study>/<cell>/rows.jsonl)")
    return cells, notes


def load_cells(dirs: list[Path]) -> list[ResultCell]:
    """ResultCells of exactly these cell dirs (those with rows.jsonl)."""
    out = []
    for d in dirs:
        p = Path(d) / "rows.jsonl"
        if p.is_file():
            rows = read_rows(p)
            if rows:
                sysp = Path(d) / "system.json"
                out.append(ResultCell(Path(d), rows, json.loads(sysp.read_text()) if sysp.is_file() else {}))
    return out
