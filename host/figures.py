"""The report's figures: drawn in parallel processes, and only where their inputs changed.

A report section asks for a figure with `bench.core.figures.figure(out, name, draw, data)`;
inside `build_report` that call lands in a `Batch`:

- its key (`bench.core.figures.key`: the data, the code that draws it, the plotting libraries'
  versions) is looked up in the cache, a folder beside --out (`.<out name>.figures/`, outside the
  temp dir the report is renamed from). A hit is copied into the report: nothing is drawn.
- a miss is drawn by a pool of worker processes (one per usable core; `jobs=1` draws in this
  process), which also makes the copy REPORT.html inlines (`small_png`: 128 colours). Both go into
  the cache under the key. A figure whose key is already being drawn under another name (two runs'
  identical data: the copies of a result dir) is that drawing, copied when it is done.

The cache is written by the kit and read back as untrusted. Its folder is used only when no other
user can write it: a real dir (no symlink) owned by this user and writable by no group or other
(the kit makes it 0700). Whoever can write beside --out could otherwise plant a figure into
every later report. Each entry, `<key>-<sha256 of its bytes, 32 hex>.png` (and `.small.png`),
written under a temp name and renamed, is served only when the kit's own index
(`index.json` in the folder, written by the kit after each report) names it with the sha256 of
its bytes, and it is a regular file under MAX_ENTRY_BYTES, a PNG, whose bytes hash to both: a
file whose bytes hash to its own name is not enough. Anything else is a miss (and removed). A
cache folder that cannot be trusted, made or written leaves the report uncached, never
unwritten. After a report the cache keeps what that report used and, under MAX_CACHE_BYTES, the
most recently used of the rest; a file its index does not name is removed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import figures as F

MAX_ENTRY_BYTES = 32 << 20  # the largest figure the kit draws is under 0.5 MB
MAX_CACHE_BYTES = 512 << 20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
INDEX = "index.json"  # the kit's own list of its entries and their sha256s
MAX_INDEX_BYTES = 4 << 20  # a report of a few hundred figures: a few tens of kB
_HEX64 = frozenset("0123456789abcdef")


def cache_dir_for(out: Path) -> Path:
    """Where the figure cache of a report at OUT lives: beside it, hidden."""
    out = Path(out)
    return out.parent / f".{out.name}.figures"


# widest figure REPORT.html inlines: its column is at most 1,200 px (mnist-cnn's merged grids draw 3,211 px wide)
INLINE_MAX_PX = 1400


def small_png(raw: bytes) -> bytes:
    """A PNG as REPORT.html inlines it: at most INLINE_MAX_PX wide (the merged references' page: 4.68 MB
    with 28 folders at 2,000 px, 4.36 MB at 1,400), quantized to 128 colours (the kit's plots are flat colours
    and lines; the full file stays beside the page), or as it is where that fails or is not
    smaller. Keeps the merged page of every reference under 4.5 MB (tests/test_answers.py).
    Fast octree (over the references' 58 figures 4x faster than median cut with `optimize`: 22 against
    97 ms a figure on a loaded 2-core VM, and 10 % smaller) and zlib's level 9 (1.48 against 1.64 MB
    over the merged references' 72 figures, 2026-11-28)."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            rgb = im.convert("RGB")
            if rgb.width > INLINE_MAX_PX:  # the page shows it narrower than this; the file keeps every pixel
                rgb = rgb.resize((INLINE_MAX_PX, max(1, round(rgb.height * INLINE_MAX_PX / rgb.width))), Image.Resampling.LANCZOS)
            q = rgb.quantize(colors=128, method=Image.Quantize.FASTOCTREE)
            buf = io.BytesIO()
            q.save(buf, "PNG", compress_level=9)  # 9 % smaller than zlib's default over the references' figures
    except Exception:  # noqa: BLE001 - an image Pillow cannot read is inlined as it is
        return raw
    small = buf.getvalue()
    return small if len(small) < len(raw) else raw


def draw_job(module: str, qualname: str, data: Any, path: str) -> tuple[bytes, float]:
    """In a worker: draw the figure into PATH; its small copy's bytes and the CPU seconds the
    drawing took back to the report."""
    cpu = time.process_time()
    F.render_named(module, qualname, data, path)
    small = small_png(Path(path).read_bytes())
    return small, time.process_time() - cpu


def _why_not_trusted(st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory (a symlink?)"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return "owned by another user"
    if st.st_mode & 0o022:
        return "writable by other users"
    return None


def trusted_dir(folder: Path) -> str | None:
    """Why FOLDER cannot hold a cache this process reads (None: it can): a symlink, not a dir, owned
    by another user, or writable by a group or other users."""
    try:
        return _why_not_trusted(os.lstat(folder))
    except OSError as err:
        return err.strerror or "cannot be read"


def _read_index(folder: Path) -> dict[str, str] | None:
    """The kit's index in FOLDER: entry name -> the sha256 of its bytes ({} when there is none or it
    is not the kit's; None when FOLDER cannot be trusted). The folder is opened once and checked on
    that handle, and the index read through it, so a folder swapped in between is never read."""
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if _why_not_trusted(os.fstat(dfd)) is not None:
            return None
        try:
            fd = os.open(INDEX, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dfd)
        except OSError:
            return {}
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return {}
            raw = fh.read(MAX_INDEX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(dfd)
    try:
        obj = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_INDEX_BYTES else None
    except (ValueError, RecursionError):
        return {}
    if not isinstance(obj, dict) or obj.get("kit") != "cnn-bench" or not isinstance(obj.get("entries"), dict):
        return {}
    return {
        k: v
        for k, v in obj["entries"].items()
        if isinstance(k, str) and isinstance(v, str) and len(v) == 64 and set(v) <= _HEX64 and "/" not in k
    }


class Cache:
    """The figure cache folder (module docstring). Every method swallows the folder's OSErrors:
    a cache that cannot be used is a miss, never a failed report."""

    def __init__(self, folder: Path | None):
        self.dir: Path | None = None
        self.entries: dict[str, str] = {}  # "<key>" or "<key>.small" -> file name
        self.sums: dict[str, str] = {}  # file name -> the sha256 of its bytes, as the kit wrote it
        self.used: set[str] = set()
        self.made = False  # this report made the folder (made on the first entry written)
        if folder is None:
            return
        index = _read_index(folder) if os.path.lexists(folder) else {}
        if index is None:
            return  # another user could have written it: neither read nor written
        self.dir = folder
        for name, digest in index.items():
            k, sep, rest = name.partition("-")
            if sep and rest.endswith(".png") and len(k) == 64:
                kind = ".small" if rest.endswith(".small.png") else ""
                self.entries[k + kind] = name
                self.sums[name] = digest

    def discard(self) -> None:
        """Remove the folder again when this report made it (a report that failed leaves nothing)."""
        if self.made and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.made = False

    def get(self, k: str) -> bytes | None:
        """The entry K's bytes when it can be trusted (module docstring), else None."""
        name = self.entries.get(k)
        if self.dir is None or name is None:
            return None
        p = self.dir / name
        try:
            if trusted_dir(self.dir) is not None:
                raise OSError("the cache folder is no longer the kit's alone")
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                raise OSError("not a regular file of a figure's size")
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read(MAX_ENTRY_BYTES + 1)
            want = name.rpartition("-")[2].split(".", 1)[0]
            digest = hashlib.sha256(raw).hexdigest()
            if not raw.startswith(PNG_MAGIC) or digest[:32] != want or digest != self.sums.get(name):
                raise OSError("not the PNG the kit's index names")
            os.utime(p)  # recently used: kept first when the cache is trimmed
        except OSError:
            self._drop(k)
            return None
        self.used.add(name)
        return raw

    def put(self, k: str, raw: bytes) -> None:
        if self.dir is None or len(raw) > MAX_ENTRY_BYTES:
            return
        base, _, kind = k.partition(".")
        digest = hashlib.sha256(raw).hexdigest()
        name = f"{base}-{digest[:32]}{'.' + kind if kind else ''}.png"
        try:
            if not os.path.lexists(self.dir):
                os.mkdir(self.dir, 0o700)
                os.chmod(self.dir, 0o700)  # whatever the umask: no one else writes it
                self.made = True
            if trusted_dir(self.dir) is not None:
                return
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.dir)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(raw)
                os.chmod(tmp, 0o644)
                os.replace(tmp, self.dir / name)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        except OSError:
            return
        old = self.entries.get(k)
        self.entries[k] = name
        self.sums[name] = digest
        self.used.add(name)
        if old and old != name:
            self._unlink(old)

    def _drop(self, k: str) -> None:
        name = self.entries.pop(k, None)
        if name:
            self.sums.pop(name, None)
            self._unlink(name)

    def _unlink(self, name: str) -> None:
        if self.dir is not None:
            try:
                os.unlink(self.dir / name)
            except OSError:
                pass

    def trim(self, cap: int = MAX_CACHE_BYTES) -> None:
        """Remove stray temp files and every file the index does not name, then the least recently
        used entries this report did not use until the folder is under CAP bytes; then write the
        index of what is left."""
        if self.dir is None or not os.path.lexists(self.dir) or trusted_dir(self.dir) is not None:
            return
        try:
            listing = []
            for e in os.scandir(self.dir):
                st = e.stat(follow_symlinks=False)
                if e.name == INDEX:
                    continue
                if e.name.endswith(".tmp"):
                    if time.time() - st.st_mtime > 3600:
                        self._unlink(e.name)
                elif e.name not in self.sums:
                    self._unlink(e.name)  # not the kit's (or no longer): never served, so not kept
                elif e.name not in self.used:
                    listing.append((st.st_mtime, st.st_size, e.name))
            total = sum(size for _, size, _ in listing) + sum(
                os.lstat(self.dir / n).st_size for n in self.used if os.path.lexists(self.dir / n)
            )
            for _mtime, size, name in sorted(listing):
                if total <= cap:
                    break
                self._unlink(name)
                self.sums.pop(name, None)
                total -= size
            self._write_index()
        except OSError:
            return

    def _write_index(self) -> None:
        assert self.dir is not None
        keep = {n: h for n, h in self.sums.items() if os.path.lexists(self.dir / n)}
        text = json.dumps({"kit": "cnn-bench", "format": 1, "entries": dict(sorted(keep.items()))}, indent=0)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            os.replace(tmp, self.dir / INDEX)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@dataclass
class Batch:
    """The sink `build_report` puts under every report section (module docstring). `finish()`
    waits for every figure and returns {file name: the bytes REPORT.html inlines}."""

    cache: Cache
    jobs: int
    small: dict[str, bytes] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"figures": 0, "cached": 0, "drawn": 0, "twins": 0})
    draw_s: float = 0.0  # seconds spent drawing in this process (jobs=1, or after a broken pool)
    draw_cpu_s: float = 0.0  # CPU seconds the drawings took, here or in a worker
    worker_cpu_s: float = 0.0  # of those, the workers' (not in this process's CPU time)
    _pool: ProcessPoolExecutor | None = None
    _pending: list[tuple[str, str, Path, tuple[str, str, Any], Future]] = field(default_factory=list)
    _twins: dict[str, list[tuple[str, Path]]] = field(default_factory=dict)  # key -> other names of a pending drawing

    def __call__(self, out: Path, name: str, draw: F.Draw, data: Any) -> None:
        k = F.key(draw, data)
        self.counts["figures"] += 1
        if k in self._twins:  # the same picture is being drawn under another name: copied from it when done
            self.counts["twins"] += 1
            self._twins[k].append((name, out / name))
            return
        raw = self.cache.get(k)
        small = self.cache.get(k + ".small") if raw is not None else None
        if raw is not None and small is not None:
            self.counts["cached"] += 1
            (out / name).write_bytes(raw)
            self.small[name] = small
            return
        self.counts["drawn"] += 1
        job = (*F.where(draw), data)
        pool = self._executor()
        if pool is None:
            self._draw_here(k, name, out / name, job)
            return
        fut = pool.submit(draw_job, *job, str(out / name))
        self._pending.append((k, name, out / name, job, fut))
        self._twins[k] = []

    def _executor(self) -> ProcessPoolExecutor | None:
        if self.jobs <= 1:
            return None
        if self._pool is None:
            import multiprocessing as mp

            methods = mp.get_all_start_methods()
            ctx = mp.get_context("forkserver" if "forkserver" in methods and sys.platform != "darwin" else "spawn")
            if ctx.get_start_method() == "forkserver":
                ctx.set_forkserver_preload(["matplotlib.pyplot", "bench.core.figures"])
            self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx)
        return self._pool

    def _draw_here(self, k: str, name: str, path: Path, job: tuple[str, str, Any]) -> None:
        t = time.perf_counter()
        small, cpu = draw_job(*job, str(path))
        self.draw_s += time.perf_counter() - t
        self.draw_cpu_s += cpu
        self._keep(k, name, path, small)

    def _keep(self, k: str, name: str, path: Path, small: bytes) -> None:
        raw = path.read_bytes()
        self.small[name] = small
        for twin, where in self._twins.pop(k, []):
            where.write_bytes(raw)
            self.small[twin] = small
        self.cache.put(k, raw)
        self.cache.put(k + ".small", small)

    def finish(self) -> dict[str, bytes]:
        try:
            for k, name, path, job, fut in self._pending:
                try:
                    small, cpu = fut.result()
                except BrokenProcessPool:  # a worker died (killed, out of memory): draw it here
                    self._draw_here(k, name, path, job)
                    continue
                self.draw_cpu_s += cpu
                self.worker_cpu_s += cpu
                self._keep(k, name, path, small)
        finally:
            self.close()
        self.cache.trim()
        return self.small

    def close(self) -> None:
        self._pending = []
        self._twins = {}
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def batch_for(out: Path, jobs: int | None = None, cache: Path | None | bool = True) -> Batch:
    """A Batch for a report at OUT: JOBS worker processes (default: the usable cores; 1 draws
    here), the cache beside OUT (CACHE=True), in folder CACHE, or none (False/None)."""
    from bench.core.machine import usable_cores

    folder = cache_dir_for(out) if cache is True else (Path(cache) if cache else None)
    return Batch(Cache(folder), max(1, jobs if jobs is not None else usable_cores()))


def remove_cache(out: Path) -> None:
    """Delete the figure cache of a report at OUT (a symlink there is only unlinked)."""
    folder = cache_dir_for(out)
    if folder.is_symlink():
        folder.unlink()
    elif folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
