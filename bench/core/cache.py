"""The kit's cache dir (generated data sets, measured device roofs): one rule for every user.

$KIT_CACHE_DIR when set: it must be (or become) a writable dir, else one line (KitError), as a
named data dir must hold its data; never silently replaced. Unset: $XDG_CACHE_HOME/cnn-bench,
else ~/.cache/cnn-bench; when that cannot be created or written (a container user without a
home, a read-only root), <tempdir>/cnn-bench-<uid>, private to this user (0700, refused if it is
a link or another user's dir).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from bench.core.errors import KitError


def cache_dir() -> Path:
    named = os.environ.get("KIT_CACHE_DIR")
    if named:
        d = Path(named)
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KitError(
                f"KIT_CACHE_DIR={named}: cannot create it ({err.strerror or err}); point it at a writable dir, or unset it"
            ) from None
        if not d.is_dir() or not os.access(d, os.W_OK | os.X_OK):
            raise KitError(f"KIT_CACHE_DIR={named}: not a writable dir (uid {_uid()}); point it at a writable dir, or unset it")
        return d
    try:
        if os.environ.get("XDG_CACHE_HOME"):
            first = Path(os.environ["XDG_CACHE_HOME"]) / "cnn-bench"
        else:
            first = Path.home() / ".cache" / "cnn-bench"
        first.mkdir(parents=True, exist_ok=True)
        if os.access(first, os.W_OK | os.X_OK):
            return first
    except (OSError, RuntimeError):  # RuntimeError: no home dir to be found
        pass
    uid = _uid()
    tmp = Path(tempfile.gettempdir()) / f"cnn-bench-{uid}"
    try:
        tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(tmp)
    except OSError as err:
        raise KitError(f"no writable cache dir ({tmp}: {err.strerror}); set KIT_CACHE_DIR") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != uid):
        raise KitError(f"{tmp} is not a dir of this user (uid {uid}); set KIT_CACHE_DIR to a writable dir")
    return tmp


def existing_cache_dir() -> Path | None:
    """The dir cache_dir() would return, when it exists already; None otherwise. Creates nothing
    (for listing what runs left there)."""
    named = os.environ.get("KIT_CACHE_DIR")
    if named:
        return Path(named) if Path(named).is_dir() else None
    try:
        home = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
        first: Path | None = home / "cnn-bench"
    except RuntimeError:  # no home dir to be found
        first = None
    for d in (first, Path(tempfile.gettempdir()) / f"cnn-bench-{_uid()}"):
        if d is not None and d.is_dir() and not d.is_symlink() and os.access(d, os.R_OK | os.X_OK):
            return d
    return None


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0
