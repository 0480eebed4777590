"""Process RSS from a sampler thread: mean and peak over a region, in MB (10^6 bytes)."""

from __future__ import annotations

import threading

import psutil

MB = 1e6


class RSSSampler:
    """Samples this process's RSS every `interval_s` while running.

    `with RSSSampler() as s: work()` then `s.mean_mb`, `s.peak_mb`, `s.n_samples`. The
    first and last samples are taken on entry and exit, so a short region still has two.
    """

    def __init__(self, interval_s: float = 0.01):
        self.interval_s = interval_s
        self._proc = psutil.Process()
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._samples.append(self._proc.memory_info().rss)

    def __enter__(self) -> RSSSampler:
        self._samples = [self._proc.memory_info().rss]
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._samples.append(self._proc.memory_info().rss)

    @property
    def n_samples(self) -> int:
        return len(self._samples)

    @property
    def peak_mb(self) -> float:
        return max(self._samples) / MB

    @property
    def mean_mb(self) -> float:
        return sum(self._samples) / len(self._samples) / MB
