"""tally's two backends in one module: create() picks by the cell's backend."""

from __future__ import annotations


class Loop:
    def total(self, n: int) -> int:
        t = 0
        for i in range(n):
            t += i * i
        return t


class Builtin:
    def total(self, n: int) -> int:
        return sum(i * i for i in range(n))


def available() -> str | None:
    return None


def create(cell, data):
    return Loop() if cell.backend == "loop" else Builtin()
