"""Choices shared by both command lines (python -m bench and orchestrate.py)."""

from __future__ import annotations

from enum import StrEnum


class Profile(StrEnum):
    # the CLIs' default: "answer" where the run holds a GPU platform (every study's comparisons of this
    # host's GPU against its CPU, the same work on both sides); on a CPU alone each study's own quick
    # choice (Study.auto_profiles: default, or smoke where the default takes long)
    auto = "auto"
    smoke = "smoke"  # a wiring check: minutes, tiny data
    default = "default"  # the seeds' own setups
    full = "full"  # default + extra variants (GPU tuning options)
    answer = "answer"  # the smallest matrix that answers each study's comparisons, the same work on every platform


class Schedule(StrEnum):
    sequential = "sequential"
    interleaved = "interleaved"  # steps of every cell round-robin
    per_device = "per-device"  # one cell per GPU, in parallel
