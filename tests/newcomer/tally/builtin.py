"""tally's `builtin` backend: sum() over a generator."""

from __future__ import annotations


class Builtin:
    def total(self, n: int) -> int:
        return sum(i * i for i in range(n))


def available() -> str | None:
    return None


def create(cell, data) -> Builtin:
    return Builtin()
