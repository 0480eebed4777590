"""Bounded readers: the one way the kit reads a compressed or line-oriented input that came
from outside (rows files, journals, submissions, gzip'd datasets and traces, logs).

Every reader has caps (Caps: bytes of the file as stored, bytes once decompressed, bytes of
one line, lines), streams instead of reading whole, reads regular files only, and says which
cap it hit in its error line. A symlink is never followed, except where a dataset's own file
may be one (`follow=True`: a data dir that links a shared copy of an archive). Headers come first: a caller reads the few bytes that say how
large the rest is (`read_exact`), checks that against its cap, and only then reads the bulk.

    for n, line in lines(path, ROWS):      # (line number, bytes), or (n, None) for a line over the cap
    with open_stream(path, cap) as fh:     # a .gz decompressed as it is read, at most cap bytes out
        head = read_exact(fh, 16, path)

Standard library only: the image side and the host side both use it.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench.core.errors import KitError


def mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB" if n >= 1024 else f"{n} bytes"


class TooBig(KitError):
    """An input over one of its caps; the message names the file and the cap."""


@dataclass(frozen=True)
class Caps:
    file_bytes: int  # the file as stored
    line_bytes: int = 1 << 20  # one line (line-oriented inputs)
    lines: int = 1_000_000  # lines in all
    out_bytes: int = 0  # a compressed file, decompressed (0: the same as file_bytes)

    @property
    def decompressed(self) -> int:
        return self.out_bytes or self.file_bytes


def open_regular(path: Path, follow: bool = False) -> IO[bytes]:
    """PATH opened for reading in binary, refusing anything but a regular file, and a symlink
    (O_NOFOLLOW) unless FOLLOW: KitError naming it."""
    flags = os.O_RDONLY | (0 if follow else getattr(os, "O_NOFOLLOW", 0)) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if os.path.islink(path):
            raise KitError(f"{path}: a symlink: not read") from None
        raise KitError(f"{path}: cannot be read ({err.strerror or err})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise KitError(f"{path}: not a regular file: not read")
    return os.fdopen(fd, "rb")


class _Capped(io.RawIOBase):
    """A binary stream of at most CAP bytes: reading past it raises TooBig."""

    def __init__(self, inner: IO[bytes], cap: int, path: Path, what: str) -> None:
        self.inner, self.cap, self.path, self.what, self.seen = inner, cap, path, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        want = min(len(b), self.cap + 1 - self.seen)
        if want <= 0:
            raise TooBig(f"{self.path}: over {mib(self.cap)} {self.what}: not read further")
        data = self.inner.read(want)
        n = len(data)
        b[:n] = data
        self.seen += n
        if self.seen > self.cap:
            raise TooBig(f"{self.path}: over {mib(self.cap)} {self.what}: not read further")
        return n

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def open_stream(path: Path, caps: Caps, follow: bool = False) -> io.BufferedReader:
    """PATH as a binary stream of its content: a `.gz` decompressed as it is read. TooBig when
    the stored file is over caps.file_bytes (checked before reading) or its content grows past
    caps.decompressed (a gzip bomb stops there, never inflated in memory)."""
    path = Path(path)
    fh = open_regular(path, follow)
    size = os.fstat(fh.fileno()).st_size
    if size > caps.file_bytes:
        fh.close()
        raise TooBig(f"{path}: {mib(size)}, over the {mib(caps.file_bytes)} this input may have: not read")
    inner: IO[bytes] = gzip.GzipFile(fileobj=fh, mode="rb") if path.name.endswith(".gz") else fh  # type: ignore[assignment]
    what = "decompressed" if path.name.endswith(".gz") else "read"
    return io.BufferedReader(_Capped(inner, caps.decompressed if inner is not fh else caps.file_bytes, path, what), 1 << 16)


def read_exact(fh: IO[bytes], n: int, path: Path, what: str = "bytes") -> bytes:
    """Exactly N bytes of FH; KitError (truncated) when it ends before."""
    data = fh.read(n)
    if len(data) != n:
        raise KitError(f"{path}: truncated ({len(data)} of {n} {what})")
    return data


def lines(path: Path, caps: Caps) -> Iterator[tuple[int, bytes | None]]:
    """(line number from 1, the line's bytes) of PATH, never holding more than one line of
    caps.line_bytes; a longer line is (n, None), skipped a block at a time. TooBig when the file
    is over caps.file_bytes (before reading) or holds more than caps.lines lines (stops there)."""
    with open_stream(path, caps) as fh:
        n = 0
        while True:
            line = fh.readline(caps.line_bytes + 1)
            if not line:
                return
            n += 1
            if n > caps.lines:
                raise TooBig(f"{path}: over {caps.lines:,} lines: not read further")
            if len(line) > caps.line_bytes and not line.endswith(b"\n"):
                while True:  # the rest of the line, a block at a time
                    rest = fh.readline(caps.line_bytes)
                    if not rest or rest.endswith(b"\n"):
                        break
                yield n, None
            else:
                yield n, line


def tail(path: Path, n_bytes: int = 1 << 16) -> str:
    """The last N_BYTES of PATH as text ("" when it cannot be read): a log's end, however long
    the log grew."""
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - n_bytes))
            return fh.read(n_bytes).decode("utf-8", errors="replace")
    except (KitError, OSError):
        return ""


def read_bytes(path: Path, caps: Caps, follow: bool = False) -> bytes:
    """The whole content of a small input (a .gz decompressed), within its caps."""
    with open_stream(path, caps, follow) as fh:
        return fh.read()
