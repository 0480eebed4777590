"""The one download path of the kit (pooch), and unpacking a zip without trusting its member names.

download(): each mirror in turn through pooch (requests underneath), into a private temp dir in
the target dir; pooch checks the file's hash (`md5:`/`sha256:`) before it leaves that dir, and
CHECK (the caller's own test, e.g. MNIST's SHA-256 of the decompressed bytes) runs before it
becomes a temp file the caller renames into place. A mismatch or a broken transfer deletes
everything it wrote and tries the next mirror; when no mirror could even be reached, the one
error line names the offline route (an existing copy through --data-dir or KIT_DATA_DIR).
extract_zip(): every member is checked before anything is written (no absolute path, no `..`,
no symlink or other special file, a cap on the unpacked size), then written under DEST only.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from bench.core.errors import KitError

MAX_UNPACKED_BYTES = 8 << 30  # 8 GiB; Tiny-ImageNet unpacks to about 0.25 GB of JPEGs
CHUNK_BYTES = 1 << 20  # per read of the response body


class _Bar:
    """The progress-bar object pooch's HTTPDownloader drives (total, update, reset, close: tqdm's
    names), shown as one task of a rich Progress."""

    def __init__(self, progress: Any, name: str):
        self.progress, self.name, self.task, self._total = progress, name, None, 0

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, n: int) -> None:  # pooch sets it once, from Content-Length (0: unknown)
        self._total = n
        self.task = self.progress.add_task(self.name, total=n or None)

    def update(self, n: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def reset(self) -> None:  # pooch: reset, then update(total) so the bar ends full
        if self.task is not None:
            self.progress.reset(self.task, total=self._total or None)

    def close(self) -> None:
        pass


def _mismatch(name: str, url: str, err: ValueError, known_hash: str | None) -> str:
    """One line for pooch's hash-mismatch ValueError (its own message runs to several sentences)."""
    algo, _, want = (known_hash or "sha256:?").rpartition(":")
    got = re.search(r"but got ([0-9a-fA-F]+)", str(err))
    label = {"md5": "MD5", "sha256": "SHA-256"}.get(algo.lower(), algo.upper())
    content = f"content {got.group(1)[:12]}…, " if got else ""
    return f"{name} from {url}: {label} mismatch ({content}expected {want[:12]}…)"


def download(
    urls: list[str],
    dest_dir: Path,
    name: str,
    known_hash: str | None,
    timeout_s: float,
    progress: Any = None,
    check: Callable[[Path, str], None] | None = None,
    dataset: str | None = None,
) -> Path:
    """The first of URLS whose content matches KNOWN_HASH ('md5:HEX', 'sha256:HEX'; None: no
    file hash) and passes CHECK(path, url) (a KitError when it does not), as a temp file in
    DEST_DIR (the caller renames or deletes it). KitError with every mirror's failure otherwise;
    when no mirror answered at all, the line says how to run from a copy DATASET/ already made."""
    try:
        import pooch
        import requests
    except ImportError as err:
        raise KitError(
            f"downloads need pooch ({err.name} is not installed here): bash scripts/setup.sh, or pip install -r requirements/host.txt"
        ) from None
    pooch.get_logger().setLevel("WARNING")  # its "Downloading ..." notes are not ours to print
    errors, unreachable = [], []
    for url in urls:
        try:
            tmp_dir = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".download", dir=dest_dir))
        except OSError as err:
            raise KitError(f"cannot write into {dest_dir}: {err.strerror}; pass a writable --data-dir") from None
        try:
            bar = _Bar(progress, name) if progress is not None else False
            downloader = pooch.HTTPDownloader(progressbar=bar, chunk_size=CHUNK_BYTES, timeout=timeout_s)
            got = Path(pooch.retrieve(url, known_hash, fname=name, path=tmp_dir, downloader=downloader))
            if check is not None:
                check(got, url)
            fd, out = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=dest_dir)
            os.close(fd)
            os.replace(got, out)
            return Path(out)
        except requests.exceptions.ConnectionError as err:  # refused, no route, DNS, connect timeout
            unreachable.append(urlsplit(url).netloc or url)
            errors.append(f"{url}: cannot connect ({type(err).__name__})")
        except requests.exceptions.Timeout:
            errors.append(f"{url}: no data for {timeout_s:g} s")
        except requests.exceptions.HTTPError as err:
            code = err.response.status_code if err.response is not None else "?"
            errors.append(f"{url}: HTTP {code}")
        except requests.exceptions.RequestException as err:
            errors.append(f"{url}: {type(err).__name__}: {' '.join(str(err).split())[:200]}")
        except ValueError as err:  # pooch: the hash of what came does not match
            errors.append(_mismatch(name, url, err, known_hash))
        except KitError as err:
            errors.append(f"{url}: {err}" if url not in str(err) else str(err))
        except OSError as err:
            errors.append(f"{url}: {err.strerror or err}")
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    if urls and len(unreachable) == len(urls):
        held = f"{dataset}/" if dataset else "the dataset"
        raise KitError(
            f"could not fetch {name}: no mirror reachable ({', '.join(unreachable)}); offline? "
            f"run from an existing copy: --data-dir DIR or KIT_DATA_DIR=DIR, where DIR holds {held} "
            "(copied from a machine that fetched it)"
        )
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
