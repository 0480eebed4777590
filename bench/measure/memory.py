"""Process RSS over a region, mean and peak, in MB (10^6 bytes), read by a process of its own.

RSSSampler reads the process's RSS every 10 ms between entering and leaving its block. Where
/proc/PID/statm exists (Linux) the reading is done by a child process (bench.measure.outproc:
one os.pread of the parent's statm a reading), so the measured process runs no sampler thread
and its training thread never hands the GIL to one. Elsewhere (macOS: psutil's memory_info()),
or where the child cannot start, a thread in this process reads instead; `how` says which ran.

What the thread cost (`python -m lab.sampler_cost` on a shared 2-core AMD EPYC VM): 1.8 us of CPU
a reading, but each wake-up takes the GIL, a switch the training thread pays for when it holds
it; on an H100 at host-paced ~20 ms steps the training thread blocked 2.3-2.6 times a step with
the kit's sampler threads on against 1.0 without, and 1.0 with them read by child processes
(lab/gpu_harness, results/reference/H100-80GB-HBM3-harness/).

A peak says what it rests on: `n_samples` readings, and `note` where the sampler did not read the
whole region (its process died or was killed: the peak is then one reading, taken on exit, and
says so; its process stopped reading on an error: the readings up to it and one on exit). Every region that ends is recorded in this process; the cell entry point
takes them after each step (`take_regions`) and puts the fewest readings any peak of the step
rests on (`rss_peak_readings`) and every note (`rss_note`) into the step's rows, so a study
reporting `rss_peak_mb` never shows a one-reading peak without saying so.
"""

from __future__ import annotations

import os
import threading

import psutil

from bench.measure.outproc import ChildSampler, ChildSamplerError

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
_PROC_STATM = RSS_HOW.startswith("os.pread")
MAX_NOTES = 8  # distinct notes kept between two take_regions() calls
_regions_lock = threading.Lock()
_fewest: int | None = None  # the fewest readings of any region ended since take_regions()
_notes: list[str] = []


def _record(readings: int, note: str | None) -> None:
    global _fewest
    with _regions_lock:
        _fewest = readings if _fewest is None else min(_fewest, readings)
        if note and note not in _notes and len(_notes) < MAX_NOTES:
            _notes.append(note)


def take_regions() -> tuple[int | None, list[str]]:
    """(the fewest readings any RSS peak ended in this process since the last call rests on, None
    when none ended; the notes of the samplers that did not read their whole region), and forget them."""
    global _fewest
    with _regions_lock:
        got, notes = _fewest, list(_notes)
        _fewest = None
        _notes.clear()
    return got, notes


class RSSSampler:
    """Samples this process's RSS every `interval_s` while running.

    `with RSSSampler() as s: work()` then `s.mean_mb`, `s.peak_mb`, `s.n_samples`, `s.how`,
    `s.note`. The first and last samples are taken on entry and exit, so a short region still has
    two. `note` is None when the sampler read the whole region, else why the peak rests on fewer
    readings (its process died: the exit reading alone). PROCESS=False reads from a thread in this
    process (the fallback, kept for comparison).
    """

    def __init__(self, interval_s: float = 0.01, process: bool = True):
        self.interval_s = interval_s
        self.process = process and _PROC_STATM
        self.how = ""
        self.note: str | None = None
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._child: ChildSampler | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._samples.append(_read_rss())

    def __enter__(self) -> RSSSampler:
        self._samples = []
        self.note = None
        if self.process:
            try:
                self._child = ChildSampler("rss", os.getpid(), self.interval_s).start()
                self.how = f"a child process, os.pread(/proc/{os.getpid()}/statm)"
                return self
            except ChildSamplerError as err:
                self._child = None
                self.how = f"a thread, {RSS_HOW} ({err})"
        else:
            self.how = f"a thread, {RSS_HOW}"
        self._samples = [_read_rss()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._child is not None:
            child, self._child = self._child, None
            try:
                got = child.stop()
                self._samples = [int(v) for v in got["values"]]
                if got.get("error"):
                    self.note = (
                        f"the RSS sampler process stopped reading after {len(self._samples)} reading(s) ({got['error']}): "
                        f"the peak rests on those and one on exit"
                    )
                    self._samples.append(_read_rss())
            except (ChildSamplerError, TypeError, ValueError) as err:
                self.how += f"; its readings were lost ({err}): only the exit reading is kept"
                self.note = (
                    f"the RSS sampler process died before its readings came back ({' '.join(str(err).split())[:200]}): "
                    "the peak rests on 1 reading, taken on exit, not on the region's samples"
                )
                self._samples = []
            if not self._samples:
                self._samples = [_read_rss()]
            _record(len(self._samples), self.note)
            return
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._samples.append(_read_rss())
        _record(len(self._samples), self.note)

    @property
    def n_samples(self) -> int:
        return len(self._samples)

    @property
    def peak_mb(self) -> float:
        return max(self._samples) / MB

    @property
    def mean_mb(self) -> float:
        return sum(self._samples) / len(self._samples) / MB
