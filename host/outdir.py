"""A dir the kit writes its outputs into (`report --out`, `history report --out`): it replaces
only what it wrote there.

`--out` is the user's dir: it may hold their notes, an earlier report, even the results the
command reads. So a command owns only the files it wrote, named in its manifest
`<out>/.cnn-bench-<command>.json` with the sha256 of each file as written. The next write
replaces or removes only those files, and only while they still hold what the kit wrote;
everything else stays byte for byte. A file the new output would write over that the kit did not
write (a user's REPORT.md), or that changed since, is one line and nothing is written.

Before any work, `Target.check` refuses with one line an `--out` that is a symlink or a file, or
that overlaps the command's inputs: it is an input, holds one, lies inside a cell dir of one, or
holds results of one (`report X/hostA --out X`; `report X --out X/mnist-cnn`). A dir inside an
input that holds none of its results is allowed (`all --out X` writes its report into X/report).

The one write path: `Target.staging` takes a lock on OUT (flock on the dir: one writer at a time;
a second is one line), removes a stage a killed writer of this command left there (no writer
holds the lock, so no stage is live), and makes a fresh stage dir inside OUT
(`.cnn-bench-<command>.stage-XXXXXXXX/`). The command writes every file into the stage; then
`Target.commit` checks every name against the manifest, fsyncs each file, writes the manifest of
old and new files (so a kill part way leaves every file of the kit named), renames the files into
place, removes the kit's files the new output no longer has, and writes the final manifest. Any
failure before the first rename leaves OUT as it was (an OUT the command made is removed again);
`cannot_write` is its one line, naming the path and the cause (a full or read-only disk, a
file-size limit).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import KitError, UsageError
from bench.core.resultset import CELL_FILES  # a dir holding one is a cell dir
from bench.core.rows import atomic_write_text

KIT = "cnn-bench"
FORMAT = 1
MAX_MANIFEST_BYTES = 4 << 20  # a report names a few hundred files: a few kB
_HEX64 = re.compile(r"[0-9a-f]{64}")


def manifest_name(command: str) -> str:
    return f".{KIT}-{command}.json"


def stage_prefix(command: str) -> str:
    return f".{KIT}-{command}.stage-"


def _real(p: Path) -> Path:
    """P absolute with its symlinks resolved, as far as it exists."""
    return Path(os.path.realpath(Path(p).expanduser()))


def _inside(p: Path, q: Path) -> bool:
    """P is Q or lies under it (both resolved)."""
    return p == q or q in p.parents


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _holds_results(d: Path) -> str | None:
    """The name of a file that makes dir D (or something under it) results, else None (a
    bounded walk: bench.core.resultset.walk, no symlink followed)."""
    from bench.core.resultset import walk

    if not d.is_dir() or d.is_symlink():
        return None
    for here, _subdirs, files in walk(d):
        for f in (*CELL_FILES, "platforms.json"):
            if f in files:
                return str(here / f)
    return None


def overlap(out: Path, inputs: Sequence[Path]) -> str | None:
    """Why OUT cannot take output beside INPUTS (what the same command reads), or None: OUT is an
    input, holds one, lies inside a cell dir of one, or holds results of one."""
    o = _real(out)
    for i in inputs:
        r = _real(i)
        if o == r:
            return f"is {i}, which this command reads"
        if _inside(r, o):
            return f"holds {i}, which this command reads"
        if not _inside(o, r) or not r.is_dir():
            continue
        a = o
        while True:  # OUT's dirs from OUT up to the input: a cell dir among them is results
            if a.is_dir() and any((a / f).is_file() for f in CELL_FILES):
                return f"lies inside {a}, a cell dir this command reads"
            if a == r:
                break
            a = a.parent
        held = _holds_results(o)
        if held is not None:
            return f"holds {held}, results this command reads"
    return None


@dataclass
class Manifest:
    """What the kit wrote into a dir: file (relative, '/'-separated) -> the sha256s it may hold
    (two while an output is being replaced), and the dirs it made there."""

    files: dict[str, list[str]] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)

    def text(self, command: str) -> str:
        obj = {
            "kit": KIT,
            "command": command,
            "format": FORMAT,
            "about": f"the files `{command}` wrote into this dir; the next one replaces or removes only these",
            "files": {k: sorted(v) for k, v in sorted(self.files.items())},
            "dirs": sorted(self.dirs),
        }
        return json.dumps(obj, indent=1) + "\n"


def _safe_rel(rel: object) -> bool:
    """REL names a path under the dir: relative, no '.', '..' or empty part, no NUL."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or rel.startswith("/") or "\\" in rel:
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def _parse_manifest(raw: bytes, command: str) -> Manifest:
    """The manifest in RAW; ValueError (why) when it is not one the kit wrote for COMMAND."""
    obj = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    if not isinstance(obj, dict) or obj.get("kit") != KIT or obj.get("command") != command or obj.get("format") != FORMAT:
        raise ValueError(f"not a {KIT} {command} manifest of format {FORMAT}")
    files, dirs = obj.get("files"), obj.get("dirs", [])
    if not isinstance(files, dict) or not isinstance(dirs, list):
        raise ValueError("'files' is not an object or 'dirs' not a list")
    m = Manifest()
    for rel, hashes in files.items():
        if (
            not _safe_rel(rel)
            or not isinstance(hashes, list)
            or not all(isinstance(h, str) and _HEX64.fullmatch(h) for h in hashes)
        ):
            raise ValueError(f"entry {rel!r} is not a file under the dir with its sha256")
        m.files[rel] = list(hashes)
    for rel in dirs:
        if not _safe_rel(rel):
            raise ValueError(f"dir {rel!r} is not under the dir")
        m.dirs.append(rel)
    return m


# The file a failed write was writing, where the error does not say (a write() past a file-size
# limit or onto a full disk names no file): the last file this process opened for writing inside an
# output dir, seen by an audit hook (PEP 578) that looks only while a stage there is being written.
_STAGES: list[str] = []  # the output dirs being written in this process (absolute)
_LAST: dict[str, str] = {}  # output dir -> the last path opened for writing under it
_HOOKED: list[bool] = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND


def _opened(event: str, args: tuple) -> None:
    if event != "open" or not _STAGES:
        return
    try:
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writing and isinstance(path, (str, bytes, os.PathLike)):
            p = os.path.abspath(os.fsdecode(path))
            for stage in _STAGES:
                if p.startswith(stage + os.sep):
                    _LAST[stage] = p
    except Exception:  # noqa: BLE001 - a hook that raised would stop the open itself
        return


def _watch(stage: Path) -> str:
    if not _HOOKED:
        import sys

        sys.addaudithook(_opened)
        _HOOKED.append(True)
    key = os.path.abspath(stage)
    _STAGES.append(key)
    return key


def _unwatch(key: str) -> str | None:
    """Stop looking at output dir KEY; the last path opened for writing under it, if any."""
    if key in _STAGES:
        _STAGES.remove(key)
    return _LAST.pop(key, None)


def shown_path(where: Path, out: Path) -> Path:
    """WHERE as the user knows it: a file of a stage in OUT, or a temp file, by its place in OUT; the
    stage dir itself as OUT."""
    try:
        rel = Path(os.path.abspath(where)).relative_to(os.path.abspath(out))
    except ValueError:
        return Path(where)
    parts = list(rel.parts)
    if parts and parts[0].startswith(f".{KIT}-") and ".stage-" in parts[0]:
        parts = parts[1:]
    if not parts:
        return Path(out)
    parts[-1] = re.sub(r"^\.(.+)\.[A-Za-z0-9_]+\.tmp$", r"\1", parts[-1])  # a temp name (atomic_write_text, mkstemp)
    return Path(out).joinpath(*parts)


def cannot_write(command: str, out: Path, err: OSError, touched: bool = False) -> str:
    """The one line for a write that failed: the path (where ERR names none, the file the command was
    writing, else OUT; a stage or temp file by its place in OUT) and the cause, what is left, and what
    to do. TOUCHED: a file of OUT was replaced already."""
    where = Path(err.filename) if isinstance(err.filename, str) and err.filename else None
    guess = getattr(err, "kit_writing", None)
    if where is None and isinstance(guess, str) and type(err.__cause__).__name__ != "_RemoteTraceback":
        where = Path(guess)  # a worker process's error (a figure) is not the file this process last opened
    what = err.strerror or type(err).__name__
    how = {
        errno.ENOSPC: "free space",
        errno.EDQUOT: "free space under your quota",
        errno.EFBIG: "raise the file-size limit (ulimit -f)",
        errno.EROFS: "choose a writable --out",
        errno.EACCES: "choose a writable --out",
        errno.EPERM: "choose a writable --out",
    }.get(err.errno or 0, "fix that")
    left = "its files there are part old, part new: run it again" if touched else "nothing written"
    shown = shown_path(where, out) if where is not None else out
    return f"{command} --out {out}: cannot write {shown} ({what}): {left}; {how} or choose another --out"


class Target:
    """The dir OUT that COMMAND writes its output into, beside INPUTS (what it reads). FIXED: file
    names every output of the command has (checked before any work). LABEL: the command and its
    option as its lines name them (default 'COMMAND --out')."""

    def __init__(
        self, out: Path, command: str, inputs: Sequence[Path] = (), fixed: Sequence[str] = (), label: str | None = None
    ) -> None:
        self.out = Path(out)
        self.command = command
        self.label = label or f"{command} --out"
        self.inputs = [Path(i) for i in inputs]
        self.fixed = tuple(fixed)
        self.manifest_path = self.out / manifest_name(command)
        self.touched = False  # a file of OUT was replaced or removed
        self.stage: Path | None = None
        self.replaced: list[str] = []  # the kit's earlier files the last commit replaced

    # ---- checks (one line each, UsageError: before any work) -------------------------------------
    def _refuse(self, why: str) -> UsageError:
        return UsageError(f"{self.label} {self.out} {why}")

    def check(self) -> None:
        """OUT can take this command's output: not a symlink or a file, not overlapping its inputs,
        no earlier manifest that is not the kit's, no FIXED name taken by a file the kit did not write."""
        out = self.out
        if out.is_symlink():
            raise self._refuse("is a symlink: name the dir itself")
        if out.exists() and not out.is_dir():
            raise self._refuse("is a file: name a dir")
        why = overlap(out, self.inputs)
        if why is not None:
            raise self._refuse(f"{why}: name a dir apart from the inputs")
        if out.is_dir():
            owned = self._owned(self.read_manifest())
            for rel in self.fixed:
                self._check_place(rel, owned)

    def read_manifest(self) -> Manifest:
        """The manifest in OUT (empty when there is none); UsageError when it is not the kit's."""
        path = self.manifest_path
        if not os.path.lexists(path):
            return Manifest()
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as err:
            raise self._refuse(f"holds {path.name}, which cannot be read ({err.strerror}): remove it") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST_BYTES:
                raise self._refuse(f"holds {path.name}, which is not a manifest the kit wrote: remove it")
            with os.fdopen(os.dup(fd), "rb") as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
        finally:
            os.close(fd)
        try:
            return _parse_manifest(raw, self.command)
        except (ValueError, RecursionError) as err:
            why = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            raise self._refuse(f"holds {path.name}, which is not a manifest the kit wrote ({why}): remove it") from None

    def _owned(self, m: Manifest) -> dict[str, str]:
        """The manifest's files that are in OUT as the kit wrote them: rel -> their sha256."""
        owned: dict[str, str] = {}
        for rel, hashes in m.files.items():
            path = self.out / rel
            if not self._real_dirs(rel) or not os.path.lexists(path):
                continue
            try:
                h = _sha256(path) if stat.S_ISREG(os.lstat(path).st_mode) else None
            except OSError:  # unreadable: not known to be the kit's
                h = None
            if h in hashes:
                owned[rel] = str(h)
        return owned

    def _real_dirs(self, rel: str) -> bool:
        """Every dir on REL's way under OUT is absent or a real dir (no symlink, no file)."""
        p = self.out
        for part in rel.split("/")[:-1]:
            p = p / part
            if not os.path.lexists(p):
                return True
            if os.path.islink(p) or not p.is_dir():
                return False
        return True

    def _check_place(self, rel: str, owned: dict[str, str]) -> None:
        """REL can take a file of the kit: its dirs real, and no file there the kit did not write."""
        if not self._real_dirs(rel):
            raise self._refuse(f"holds a link or a file where the kit writes {rel}: move it away or choose another --out")
        if os.path.lexists(self.out / rel) and rel not in owned:
            raise self._refuse(
                f"holds {rel}, which the kit did not write (or which changed since; {manifest_name(self.command)} "
                "names what it wrote): move it away or choose another --out"
            )

    # ---- writing -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh stage dir inside OUT, with OUT locked (module docstring). On the way out the stage
        is removed; an OUT (and the dirs above it) this made is removed again unless a commit used it."""
        made: list[Path] = []
        p = self.out
        while not os.path.lexists(p):
            made.append(p)
            p = p.parent
        fd = -1
        try:
            for d in reversed(made):
                os.mkdir(d)
            fd = os.open(self.out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
            self._lock(fd)
            self._clean_stale()
            self.stage = Path(tempfile.mkdtemp(prefix=stage_prefix(self.command), dir=self.out))
            os.chmod(self.stage, 0o755)
            watched = _watch(self.out)  # the stage's files and the manifest's temp file
            try:
                yield self.stage
            except OSError as err:
                last = _unwatch(watched)
                if last is not None and not err.filename:
                    err.kit_writing = last  # type: ignore[attr-defined]  # cannot_write names it
                raise
            finally:
                _unwatch(watched)
        finally:
            if self.stage is not None:
                shutil.rmtree(self.stage, ignore_errors=True)
            if not self.touched:
                for d in made:  # deepest first; only while empty
                    with contextlib.suppress(OSError):
                        os.rmdir(d)
            if fd >= 0:
                os.close(fd)  # closing releases the lock

    def _lock(self, fd: int) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KitError(
                f"{self.label} {self.out} is being written by another {self.command} now: wait for it or choose another dir"
            ) from None

    def _clean_stale(self) -> None:
        """Remove the stage a killed writer of this command left in OUT (none is live: OUT is locked)."""
        pat = re.compile(re.escape(stage_prefix(self.command)) + r"[A-Za-z0-9_]{8}")
        for name in os.listdir(self.out):
            p = self.out / name
            if pat.fullmatch(name) and not p.is_symlink() and p.is_dir():
                shutil.rmtree(p, ignore_errors=True)

    def commit(self) -> list[str]:
        """Move every file of the stage into OUT (module docstring); returns their names. UsageError
        (nothing written) when a name is taken by a file the kit did not write; OSError from the disk."""
        stage = self.stage
        assert stage is not None, "commit() inside staging()"
        files: list[str] = []
        for root, _subdirs, names in os.walk(stage):
            for n in names:
                p = Path(root) / n
                if not p.is_symlink() and p.is_file():
                    files.append(p.relative_to(stage).as_posix())
        files.sort()
        old = self.read_manifest()
        owned = self._owned(old)
        for rel in files:
            self._check_place(rel, owned)
        new: dict[str, str] = {}
        for rel in files:
            _fsync(stage / rel)
            new[rel] = _sha256(stage / rel)
        kit_dirs = [
            d for d in old.dirs if self._real_dirs(d + "/x") and (self.out / d).is_dir() and not (self.out / d).is_symlink()
        ]
        needed = sorted({str(Path(rel).parent.as_posix()) for rel in files} - {"."})
        make = [d for d in needed if not os.path.lexists(self.out / d)]  # dirs of the new output, made (and named) here
        kit_dirs += make
        both = {rel: sorted({h for h in (owned.get(rel), new.get(rel)) if h}) for rel in {*owned, *new}}
        # first the manifest of old and new: a kill from here on leaves every file of the kit named
        atomic_write_text(self.manifest_path, Manifest(both, sorted(set(kit_dirs))).text(self.command))
        self.touched = True
        self.replaced = sorted(set(owned) & set(new))
        for d in make:
            os.makedirs(self.out / d, exist_ok=True)
        for rel in files:
            os.replace(stage / rel, self.out / rel)
        for rel in sorted(set(owned) - set(new)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.out / rel)
        keep: set[str] = set()
        for d in sorted(set(kit_dirs), key=lambda d: -d.count("/")):  # the kit's dirs it no longer needs, if empty
            if d in needed or any(n.startswith(d + "/") for n in needed):
                keep.add(d)
                continue
            try:
                os.rmdir(self.out / d)
            except OSError:
                pass  # a user's file is in it: it stays, as theirs
        atomic_write_text(self.manifest_path, Manifest({k: [h] for k, h in new.items()}, sorted(keep)).text(self.command))
        for where in {self.out, *(self.out / k for k in keep)}:  # the renames themselves, on disk
            with contextlib.suppress(OSError):
                _fsync(where)
        return files


__all__ = ["Manifest", "Target", "cannot_write", "manifest_name", "overlap", "shown_path"]
