"""Find every finished cell under any number of result dirs and attach its provenance."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import KitError
from bench.results import read_rows


@dataclass
class Cell:
    dir: Path
    rows: list[dict]
    system: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        s = {r.get("status") for r in self.rows}
        return "error" if "error" in s else "ok" if "ok" in s else "skipped"

    @property
    def epochs(self) -> list[dict]:
        return [r for r in self.rows if r.get("status") == "ok" and r.get("epoch") is not None]

    @property
    def study(self) -> str:
        return self.rows[0].get("study", "mnist-cnn")

    @property
    def device(self) -> str:
        """What the cell ran on: the GPU for GPU backends, else the CPU model."""
        backend = self.rows[0].get("backend", "")
        gpu = (self.system.get("gpu") or {}).get("name")
        if any(t in backend for t in ("cuda", "mps")) and gpu:
            return gpu
        cores = self.system.get("cpu_affinity") or self.system.get("cpu_logical_cores")
        return (self.system.get("cpu_model") or "unknown CPU") + (f", {cores} cores" if cores else "")

    @property
    def label(self) -> str:
        r = self.rows[0]
        v = "" if r.get("variant") in (None, "default") else f" [{r['variant']}]"
        return f"{r.get('backend')} {r.get('pipeline')}{v}"


def collect(dirs: list[Path]) -> tuple[list[Cell], list[dict]]:
    """(cells, platform notes). Every dir must exist; a dir with no cells is an error."""
    cells, notes = [], []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise KitError(f"result dir {d} does not exist")
        found = sorted(d.rglob("rows.jsonl"))
        for p in found:
            rows = read_rows(p)
            if not rows:
                continue
            sysp = p.parent / "system.json"
            system = json.loads(sysp.read_text()) if sysp.is_file() else {}
            cells.append(Cell(p.parent, rows, system))
        for p in sorted(d.rglob("platforms.json")):
            for name, info in json.loads(p.read_text()).items():
                notes.append({"platform": name, **info, "source": str(p.parent)})
        if not found and not list(d.rglob("platforms.json")):
            raise KitError(f"no results under {d} (expected <dir>/<study>/<cell>/rows.jsonl)")
    return cells, notes
