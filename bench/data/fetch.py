"""Download MNIST from public mirrors with SHA-256 verification, and the checks every fetch shares.

Each file comes through the kit's one download path (bench.data.archive.download, pooch) to a
temp name in the target dir, is verified (SHA-256 of its decompressed IDX bytes, see
mnist.RAW_SHA256: the mirrors' gzip bytes are not what is pinned), and only then renamed into
place; a mismatch deletes the temp file and raises, so nothing unverified is ever left where
the reader looks.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from pathlib import Path

from bench.core.errors import KitError, UsageError
from bench.data.mnist import RAW_SHA256

MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)


def _raw_sha256(path: Path) -> str:
    """sha256 of the decompressed bytes of a fetched .gz, streamed within mnist.IDX_CAPS."""
    from bench.core import bounded
    from bench.data.mnist import IDX_CAPS

    h = hashlib.sha256()
    try:
        with bounded.open_stream(path, IDX_CAPS, follow=True) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except bounded.TooBig:
        raise
    except (OSError, EOFError, zlib.error, KitError) as err:
        raise KitError(f"{path.name}: not a valid gzip stream ({err})") from None
    return h.hexdigest()


def check_mirrors(mirrors: tuple[str, ...], allow_http: bool) -> None:
    """https only, unless ALLOW_HTTP (the content is pinned by SHA-256 either way; https also
    keeps what you fetch private and the mirror authenticated)."""
    for m in mirrors:
        scheme = m.split("://", 1)[0].lower() if "://" in m else ""
        if scheme == "https" or (scheme == "http" and allow_http):
            continue
        if scheme == "http":
            raise UsageError(
                f"mirror {m} is plain http: use https, or pass --allow-http (every file is SHA-256 checked either way)"
            )
        raise UsageError(f"mirror {m}: only https:// URLs are fetched")


def _valid(path: Path, want: str) -> bool:
    """True when PATH holds exactly the pinned content (a corrupt or truncated file is not)."""
    if not path.is_file() or path.is_symlink():
        return False
    try:
        return _raw_sha256(path) == want
    except KitError:
        return False


@contextlib.contextmanager
def fetch_target(target: Path):
    """Create TARGET (one line if it cannot be created or written); if the body fails and this
    created TARGET, remove it again while empty, so no empty dataset dir is left for the next
    run to take for a dataset."""
    made = not target.exists()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise KitError(f"cannot create {target}: {err.strerror}; pass a writable --data-dir") from None
    if not os.access(target, os.W_OK | os.X_OK):
        raise KitError(f"cannot write into {target} (permission denied or read-only); pass a writable --data-dir")
    try:
        yield target
    except BaseException:
        if made and target.is_dir() and not any(target.iterdir()):
            target.rmdir()
        raise


def fetch_mnist(
    data_dir: Path, mirrors: tuple[str, ...] = MIRRORS, timeout_s: float = 60.0, progress=None, allow_http: bool = False
) -> list[Path]:
    """Fetch the four files into <data_dir>/mnist/; files already present and valid are kept,
    corrupt ones fetched again."""
    check_mirrors(tuple(mirrors), allow_http)
    with fetch_target(Path(data_dir) / "mnist") as target:
        return _fetch_into(target, mirrors, timeout_s, progress)


def _fetch_into(target: Path, mirrors: tuple[str, ...], timeout_s: float, progress) -> list[Path]:
    from bench.data.archive import download

    done = []
    for stem, want in RAW_SHA256.items():
        final = target / f"{stem}.gz"
        if _valid(final, want):
            done.append(final)
            continue

        def check(path: Path, url: str, want: str = want, name: str = final.name) -> None:
            got = _raw_sha256(path)
            if got != want:
                raise KitError(f"{name} from {url}: SHA-256 mismatch (content {got[:12]}…, expected {want[:12]}…)")

        urls = [m.rstrip("/") + "/" + final.name for m in mirrors]
        tmp = download(urls, target, final.name, None, timeout_s, progress, check=check, dataset="mnist")
        os.replace(tmp, final)
        done.append(final)
    return done
