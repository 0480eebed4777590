"""Choices shared by both command lines (python -m bench and orchestrate.py)."""

from __future__ import annotations

from enum import StrEnum


class Profile(StrEnum):
    auto = "auto"  # each study's own choice per platform (Study.auto_profiles): default, or smoke where the default takes hours
    smoke = "smoke"  # a wiring check: minutes, tiny data
    default = "default"  # the seeds' own setups
    full = "full"  # default + extra variants (GPU tuning options)


class Schedule(StrEnum):
    sequential = "sequential"
    interleaved = "interleaved"  # steps of every cell round-robin
    per_device = "per-device"  # one cell per GPU, in parallel
