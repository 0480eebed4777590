"""Process RSS from a sampler thread: mean and peak over a region, in MB (10^6 bytes).

What the thread costs (`python -m lab.sampler_cost` on a shared 2-core AMD EPYC VM, torch 2.14.1,
psutil 7.2.2, load ~3.5): it reads every 10 ms (100 Hz asked, 90-97 achieved). /proc/self/statm
stays open and one os.pread reads it: 1.8 us of CPU a reading (0.18 ms a second), one GIL release,
each a switch the training thread pays for when it holds the GIL; psutil's memory_info() (where
/proc is absent; RSS_HOW says which way ran) opens, reads and closes the file: 12.3 us a reading,
three GIL releases. A GIL-bound loop of tiny torch CPU ops (the launch-bound proxy, 15 x 1 s
interleaved) could not tell either from no sampler: medians 0.96x and 0.95x of it, run-to-run
noise on that VM +-10 %. What its GIL switches cost a CUDA launch loop is for a GPU run to measure.
"""

from __future__ import annotations

import os
import threading

import psutil

MB = 1e6
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _statm_reader():
    """A reader of this process's RSS in bytes: one pread of a kept-open /proc/<pid>/statm (Linux),
    else psutil's memory_info(); (reader, how), the fd closed with the interpreter. The open file
    names the process that opened it, so a forked child (a DataLoader worker, a fork-started
    rank) opens its own on first use instead of reading its parent's."""
    try:
        os.close(os.open("/proc/self/statm", os.O_RDONLY))
    except OSError:
        proc = psutil.Process()
        return (lambda: proc.memory_info().rss), "psutil memory_info()"
    opened: dict[int, int] = {}  # pid -> fd

    def read() -> int:
        pid = os.getpid()
        fd = opened.get(pid)
        if fd is None:
            fd = opened[pid] = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
        return int(os.pread(fd, 128, 0).split()[1]) * _PAGE  # statm: size resident shared ... (pages)

    return read, "os.pread(/proc/<pid>/statm)"


_read_rss, RSS_HOW = _statm_reader()


class RSSSampler:
    """Samples this process's RSS every `interval_s` while running.

    `with RSSSampler() as s: work()` then `s.mean_mb`, `s.peak_mb`, `s.n_samples`. The
    first and last samples are taken on entry and exit, so a short region still has two.
    """

    def __init__(self, interval_s: float = 0.01):
        self.interval_s = interval_s
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._samples.append(_read_rss())

    def __enter__(self) -> RSSSampler:
        self._samples = [_read_rss()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._samples.append(_read_rss())

    @property
    def n_samples(self) -> int:
        return len(self._samples)

    @property
    def peak_mb(self) -> float:
        return max(self._samples) / MB

    @property
    def mean_mb(self) -> float:
        return sum(self._samples) / len(self._samples) / MB
