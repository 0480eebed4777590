"""Download one archive against a pinned hash, and unpack a zip without trusting its member names.

download(): each mirror in turn, to a temp name in the target dir, hashed while it streams; a
mismatch or a broken transfer deletes the temp file and tries the next mirror.
extract_zip(): every member is checked before anything is written (no absolute path, no `..`,
no symlink or other special file, a cap on the unpacked size), then written under DEST only.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import stat
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from bench.core.errors import KitError

MAX_UNPACKED_BYTES = 8 << 30  # 8 GiB; Tiny-ImageNet unpacks to about 0.25 GB of JPEGs


def download(urls: list[str], dest_dir: Path, name: str, algo: str, want: str, timeout_s: float, progress=None) -> Path:
    """The first of URLS whose content has hash ALGO ('md5', 'sha256') WANT, as a temp file in
    DEST_DIR (the caller renames or deletes it); KitError with every mirror's failure otherwise."""
    errors = []
    for url in urls:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=dest_dir)
        except OSError as err:
            raise KitError(f"cannot write into {dest_dir}: {err.strerror}; pass a writable --data-dir") from None
        try:
            h = hashlib.new(algo, usedforsecurity=False)  # a content pin, not a signature
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as resp:
                total = int(resp.headers.get("Content-Length") or 0)
                task = progress.add_task(name, total=total or None) if progress else None
                for chunk in iter(lambda: resp.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
                    if progress:
                        progress.advance(task, len(chunk))
            got = h.hexdigest()
            if got != want:
                raise KitError(f"{name} from {url}: {algo.upper()} mismatch (content {got[:12]}…, expected {want[:12]}…)")
            return Path(tmp)
        except (urllib.error.URLError, http.client.HTTPException, OSError, KitError) as err:
            errors.append(f"{url}: {err}")
            os.unlink(tmp)
        except BaseException:
            os.unlink(tmp)
            raise
    raise KitError(f"could not fetch {name}: " + "; ".join(errors))


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why member INFO must not be unpacked, or None."""
    name = info.filename
    kind = stat.S_IFMT(info.external_attr >> 16)  # unix mode bits, when the archiver stored them
    if kind == stat.S_IFLNK:
        return "is a symlink"
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        return "is a special file (device, fifo or socket)"
    if not name or name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "has an absolute path"
    if "\\" in name:
        return "has a backslash in its path"
    if ".." in name.split("/"):
        return "has `..` in its path"
    return None


def extract_zip(zip_path: Path, dest: Path, max_bytes: int = MAX_UNPACKED_BYTES) -> None:
    """Unpack ZIP_PATH under DEST (an empty dir), refusing the whole archive when any member is unsafe."""
    try:
        with zipfile.ZipFile(zip_path) as zf:
            infos = zf.infolist()
            for info in infos:
                why = _member_problem(info)
                if why:
                    raise KitError(f"{zip_path.name}: member {info.filename!r} {why}; refusing to unpack the archive")
            total = sum(i.file_size for i in infos)  # zipfile reads no more than this per member
            if total > max_bytes:
                raise KitError(f"{zip_path.name}: unpacks to {total / 2**30:.1f} GiB, over the {max_bytes / 2**30:.0f} GiB cap")
            for info in infos:
                target = dest.joinpath(*PurePosixPath(info.filename).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zf.open(info) as src, open(target, "xb") as out:
                        shutil.copyfileobj(src, out, 1 << 20)
                except FileExistsError:
                    raise KitError(f"{zip_path.name}: member {info.filename!r} appears twice") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:
        raise KitError(f"{zip_path.name}: not a valid zip archive ({' '.join(str(err).split())})") from None
    except OSError as err:  # a member that is a file and a dir at once, a full disk, ...
        raise KitError(f"{zip_path.name}: cannot unpack into {dest} ({err.strerror or err}: {err.filename})") from None
