"""CIFAR-10 from the official binary archive, a synthetic set in exactly that format, and fetch.

Format (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version"): cifar-10-binary.tar.gz
holds cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin, batches.meta.txt (the class
names, one a line) and readme.html. Each .bin is a run of 3073-byte records: 1 label byte
(0..9), then 3072 pixel bytes: 1024 R, 1024 G, 1024 B, each plane 32x32 row-major.

Layout: <data dir>/cifar10/cifar-10-binary.tar.gz (or an extracted cifar10/cifar-10-batches-bin/)
        <data dir>/cifar10-synthetic/cifar-10-binary.tar.gz   (`orchestrate.py data synth cifar10`)
The synthetic archive's readme.html carries SYNTHETIC_MARKER; that, never the dir it sits
in, decides `real`, so synthetic data can never be reported as CIFAR-10.

Synthetic set (write_synthetic, GENERATOR_VERSION 1): per class a base hue, a stripe or
checker texture with its own angle and frequency (_disk), on an object disk of jittered
place and size over a random weakly saturated background; per image hue, angle and
frequency jitter, random phase, brightness jitter, gaussian noise, and in half the images a
small distractor disk with a random class's pattern. Balanced classes. Learnable, not
trivial. Measured with the cifar-opt seed recipe: torchvision resnet18(num_classes=10),
SGD lr 0.001 momentum 0.9 wd 1e-4, batch 32, per-sample RandomCrop(32, padding=4) + flip,
inputs /255 then per-channel standardised, the stratified 5,000/1,000 subsample (seed 0) of
the default 6,000/1,200 set (seed 0), torch 2.14.1 CPU, 2 threads, torch seed 0:
    epoch 1: train loss 1.644, test accuracy 0.503 (58 s)
    epoch 2: train loss 1.023, test accuracy 0.741
    epoch 3: train loss 0.681, test accuracy 0.784 (chance: 0.100)
(2026-11-23; a second run gave the same numbers; torch seed 1 gave 0.521 and 0.798 after
epochs 1 and 2. Later epochs took 50-300 s each on a shared, loaded 2-core host: those times
say nothing.) Default set: sha256 of the arrays 16af485991e8…, of the archive file
dc9e4341a823…; writing it takes about 2.5 s.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import os
import sys
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.core import bounded
from bench.core.cache import cache_dir  # noqa: F401  (re-exported: cifar10.cache_dir)
from bench.core.errors import KitError, UsageError
from bench.data import check_resolved, data_dir_named, fetch_hint, resolve_data_dir, shown

ARCHIVE = "cifar-10-binary.tar.gz"
# MD5 of ARCHIVE as https://www.cs.toronto.edu/~kriz/cifar.html publishes it (binary version, 162 MB)
ARCHIVE_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
RECORD = 3073  # bytes per image: 1 label + 3 planes x 32 x 32
BATCH_DIR = "cifar-10-batches-bin"
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILE = "test_batch.bin"
META_FILE = "batches.meta.txt"
README_FILE = "readme.html"
SYNTHETIC_MARKER = "cnn-bench synthetic CIFAR-10"
GENERATOR_VERSION = 1  # bump when write_synthetic's output changes: the cache dir is named after it
DATASETS = ("auto", "cifar10", "cifar10-synthetic")
REAL_DIR, SYNTH_DIR = "cifar10", "cifar10-synthetic"  # subdirs of the data dir


@dataclass(frozen=True)
class Cifar10:
    """Images uint8 (N,3,32,32) (channels R,G,B), labels int64 (N,); plus where they came from."""

    name: str  # "cifar10" | "cifar10-synthetic"
    real: bool
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    checksum: str  # sha256 over the decoded arrays' bytes, so any change to the data shows
    source: str  # archive or dir it was read from

    def describe(self) -> dict:
        return {
            "name": self.name,
            "real": self.real,
            "kind": "real" if self.real else "synthetic",
            "n_train": int(len(self.y_train)),
            "n_test": int(len(self.y_test)),
            "sha256": self.checksum,
            "source": self.source,
        }


def _checksum(arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# ---- reading ----------------------------------------------------------------------------


def _decode(where: str, name: str, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """One batch file's bytes -> images uint8 (n,3,32,32), labels int64 (n,)."""
    if not raw:
        raise KitError(f"{where}: {name} is empty (0 records)")
    if len(raw) % RECORD:
        raise KitError(
            f"{where}: {name} has {len(raw)} bytes, not a multiple of the {RECORD}-byte record (truncated or not CIFAR-10 binary)"
        )
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, RECORD)  # (n, 3073)
    labels = rec[:, 0]
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise KitError(f"{where}: {name} record {bad[0]} has label {labels[bad[0]]}, outside 0..9")
    return rec[:, 1:].reshape(-1, 3, 32, 32), labels.astype(np.int64)


def _assemble(where: str, files: dict[str, bytes], source: str) -> Cifar10:
    """FILES: batch file name -> bytes (every one of TRAIN_FILES + TEST_FILE; README_FILE optional)."""
    for name in (*TRAIN_FILES, TEST_FILE):
        if name not in files:
            raise KitError(f"{where}: {BATCH_DIR}/{name} is missing (incomplete or not the CIFAR-10 binary version)")
    train = [_decode(where, n, files[n]) for n in TRAIN_FILES]
    x_test, y_test = _decode(where, TEST_FILE, files[TEST_FILE])
    x_test = np.ascontiguousarray(x_test)  # a strided view of the file's bytes until now
    x_train, y_train = np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])
    for a in (x_train, y_train, x_test, y_test):
        a.setflags(write=False)  # shared through the per-process cache: nobody edits it in place
    real = SYNTHETIC_MARKER.encode() not in files.get(README_FILE, b"")
    return Cifar10(
        name=REAL_DIR if real else SYNTH_DIR,
        real=real,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        checksum=_checksum([x_train, y_train, x_test, y_test]),
        source=source,
    )


def _check_member(path: Path, m: tarfile.TarInfo) -> None:
    """Refuse what the "data" extraction filter refuses, and also absolute names, `..` and
    every link: this reader needs regular files and dirs only."""
    parts = m.name.replace("\\", "/").split("/")
    if m.name.startswith(("/", "\\")) or ".." in parts:
        raise KitError(
            f"{path}: member {m.name!r} has an absolute or `..` path: refused (not an archive the kit wrote or fetched)"
        )
    data_filter = getattr(tarfile, "data_filter", None)  # Python 3.11.4+ (Debian bookworm's 3.11.2 lacks it)
    if data_filter is not None:
        try:
            data_filter(m, str(path.parent / ".cifar10-extract"))  # the dest is never written: the check only
        except tarfile.FilterError as err:
            raise KitError(f"{path}: member {m.name!r} refused by the tar data filter ({type(err).__name__})") from None
    if not (m.isfile() or m.isdir()):
        raise KitError(f"{path}: member {m.name!r} is a link or special file: refused (only regular files are read)")


# CIFAR-10's binary archive is 163 MB, 185 MB unpacked in 8 members of at most 30.7 MB: an archive
# is read as a stream within these caps, each member's size checked from its header before it is read
ARCHIVE_CAPS = bounded.Caps(file_bytes=512 << 20, out_bytes=512 << 20)
MAX_MEMBER_BYTES = 64 << 20
MAX_MEMBERS = 256


def read_archive(path: str | os.PathLike) -> Cifar10:
    """Decode cifar-10-binary.tar.gz (or a synthetic one) in memory, streamed within ARCHIVE_CAPS;
    KitError (one line) on anything malformed or over a cap."""
    path = Path(path)
    wanted = {f"{BATCH_DIR}/{n}" for n in (*TRAIN_FILES, TEST_FILE, README_FILE)}
    files: dict[str, bytes] = {}
    if not os.path.lexists(path):
        raise KitError(f"{path}: no such file")
    try:
        with bounded.open_stream(path, ARCHIVE_CAPS, follow=True) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
            for n, m in enumerate(tar, 1):  # one pass in stream order
                if n > MAX_MEMBERS:
                    raise KitError(f"{path}: over {MAX_MEMBERS} members: not a CIFAR-10 archive")
                _check_member(path, m)
                name = m.name[2:] if m.name.startswith("./") else m.name
                if name in wanted and m.isfile():
                    if m.size > MAX_MEMBER_BYTES:
                        raise KitError(
                            f"{path}: member {m.name!r} is {m.size:,} bytes, over the {bounded.mib(MAX_MEMBER_BYTES)} one may have"
                        )
                    base = name.rsplit("/", 1)[1]
                    if base in files:
                        raise KitError(f"{path}: member {m.name!r} appears twice")
                    fh = tar.extractfile(m)
                    files[base] = fh.read() if fh else b""
            while raw.read(1 << 20):  # to the gzip trailer: its CRC and length are checked there
                pass
    except KitError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        broken = isinstance(err, (EOFError, zlib.error)) or "end of data" in str(err)  # mid-stream
        what = "truncated or corrupt" if broken else "not a gzip'd tar"
        raise KitError(f"{path}: {what} ({err}); delete it and fetch (or synthesize) it again") from None
    return _assemble(str(path), files, str(path))


def read_dir(path: str | os.PathLike) -> Cifar10:
    """Decode an extracted archive: PATH/cifar-10-batches-bin/*.bin (or PATH itself holding the .bin files)."""
    path = Path(path)
    d = path / BATCH_DIR if (path / BATCH_DIR).is_dir() else path
    files = {}
    for name in (*TRAIN_FILES, TEST_FILE, README_FILE):
        p = d / name
        if p.is_file():
            try:
                files[name] = bounded.read_bytes(p, bounded.Caps(file_bytes=MAX_MEMBER_BYTES), follow=True)
            except OSError as err:
                raise KitError(f"{p}: cannot read ({err.strerror})") from None  # KitError (a cap) passes as it is
    return _assemble(str(d), files, str(d))


def _stamp(p: Path) -> tuple:
    """What changes when the data on disk does: (name, inode, mtime_ns, size) of the file or the dir's files."""
    paths = [p] if p.is_file() else sorted(q for q in (p / BATCH_DIR if (p / BATCH_DIR).is_dir() else p).iterdir())
    return tuple((q.name, *((st := q.stat()).st_ino, st.st_mtime_ns, st.st_size)) for q in paths)


@functools.lru_cache(maxsize=4)
def _read_cached(path: str, stamp: tuple) -> Cifar10:
    p = Path(path)
    return read_archive(p) if p.is_file() else read_dir(p)


def read(path: Path) -> Cifar10:
    """read_archive or read_dir, decoded once per process while the files stay unchanged."""
    try:
        stamp = _stamp(path)
    except OSError as err:
        raise KitError(f"{path}: cannot read ({err.strerror})") from None
    return _read_cached(str(path.absolute()), stamp)


# ---- the synthetic set ------------------------------------------------------------------


def _wheel(h: np.ndarray) -> np.ndarray:
    """Hue in turns, shape S -> RGB in 0..1, shape S+(3,): a smooth colour wheel."""
    return 0.5 + 0.5 * np.cos(2 * np.pi * (h[..., None] - np.array([0.0, 1 / 3, 2 / 3])))


def _px(a: np.ndarray) -> np.ndarray:
    """(n,) -> (n,1,1): one value per image, broadcast over the 32x32 pixels."""
    return a[:, None, None]


# Class k's pattern: hue k/10 turns; texture stripes for k//2 even (k = 0,1,4,5,8,9), else a
# checker; angle (3k mod 10) x 18 degrees; frequency 2.2 / 3.2 / 4.4 cycles per 32 px for k mod 3.
def _disk(k: np.ndarray, hue: np.ndarray, amp: np.ndarray, cy, cx, r, rng, yy, xx) -> tuple[np.ndarray, np.ndarray]:
    """Per image a disk with class K's pattern: colour HUE (turns), texture amplitude AMP,
    centre (CY, CX) px, radius R px -> colour (n,32,32,3) in about 0..1, mask (n,32,32) in 0..1."""
    n = len(k)
    angle = ((k * 3) % 10) * np.pi / 10 + rng.normal(0, 0.15, n)  # radians
    freq = np.array([2.2, 3.2, 4.4])[k % 3] * rng.uniform(0.85, 1.15, n)  # cycles per 32 px
    phase = rng.uniform(0, 2 * np.pi, (n, 2))  # radians: along and across the stripes
    w = _px(freq) * 2 * np.pi / 32  # radians per px
    u = (xx * _px(np.cos(angle)) + yy * _px(np.sin(angle))) * w + _px(phase[:, 0])
    v = (-xx * _px(np.sin(angle)) + yy * _px(np.cos(angle))) * w + _px(phase[:, 1])
    texture = np.where(_px((k // 2) % 2 == 0), np.sin(u), 1.6 * np.sin(u) * np.sin(v))  # (n,32,32), about -1..1
    sat = rng.uniform(0.2, 0.8, n)  # 0 grey .. 1 the full wheel colour
    base = 0.5 + _px(sat)[..., None] * (_wheel(hue)[:, None, None, :] - 0.5)  # (n,1,1,3)
    colour = base * (1 + _px(amp)[..., None] * texture[..., None])  # (n,32,32,3)
    dist = np.sqrt((yy - _px(cy)) ** 2 + (xx - _px(cx)) ** 2)  # (n,32,32) px from the centre
    return colour, 1 / (1 + np.exp((dist - _px(r)) / 1.2))  # mask: 1 inside, 0 outside, 1.2 px soft edge


def _images(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Labels (n,) -> images uint8 (n,3,32,32). Every draw comes from RNG, in this fixed order."""
    n = len(labels)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float64)  # (32,32) pixel coordinates
    # the background: a random hue, weakly saturated, with a linear brightness gradient
    bg_sat, bg_hue = rng.uniform(0, 0.35, n), rng.uniform(0, 1, n)
    bg = 0.5 + _px(bg_sat)[..., None] * (_wheel(bg_hue)[:, None, None, :] - 0.5)  # (n,1,1,3)
    grad = rng.normal(0, 0.012, (n, 2))  # per px, along x and y
    img = bg * (1 + (xx - 16) * _px(grad[:, 0]) + (yy - 16) * _px(grad[:, 1]))[..., None]  # (n,32,32,3)
    # a distractor in half the images: a small disk with a random class's pattern, anywhere
    other = rng.integers(0, 10, n)
    hue, amp = other / 10 + rng.normal(0, 0.08, n), rng.uniform(0.15, 0.45, n)
    cy, cx, r = rng.uniform(0, 32, n), rng.uniform(0, 32, n), rng.uniform(3, 6, n)
    colour, mask = _disk(other, hue, amp, cy, cx, r, rng, yy, xx)
    mask *= _px(rng.uniform(0, 1, n) < 0.5)
    img = (1 - mask[..., None]) * img + mask[..., None] * colour
    # the object: the class's pattern on a disk of radius 6..13 px, centre shifted up to 4 px
    hue = labels / 10 + rng.normal(0, 0.08, n)  # turns; neighbouring classes are 0.1 apart
    amp = rng.uniform(0.15, 0.45, n)
    cy, cx, r = 16 + rng.uniform(-4, 4, n), 16 + rng.uniform(-4, 4, n), rng.uniform(6, 13, n)
    colour, mask = _disk(labels, hue, amp, cy, cx, r, rng, yy, xx)
    img = (1 - mask[..., None]) * img + mask[..., None] * colour
    img = img * _px(rng.uniform(0.7, 1.3, n))[..., None] + rng.normal(0, 0.1, img.shape)  # brightness, noise
    return np.clip(np.rint(img * 255), 0, 255).astype(np.uint8).transpose(0, 3, 1, 2)  # (n,3,32,32)


def _records(labels: np.ndarray, images: np.ndarray) -> bytes:
    """(n,) labels + (n,3,32,32) images -> n records of RECORD bytes."""
    rec = np.empty((len(labels), RECORD), np.uint8)
    rec[:, 0] = labels
    rec[:, 1:] = images.reshape(len(labels), -1)
    return rec.tobytes()


def _split(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Balanced labels (class counts differ by at most 1) in random order, and their images."""
    labels = rng.permutation(np.arange(n) % 10).astype(np.uint8)
    images = np.concatenate([_images(labels[i : i + 1000], rng) for i in range(0, n, 1000)])
    return labels, images


def _synthetic_members(n_train: int, n_test: int, seed: int) -> dict[str, bytes]:
    train_rng, test_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    y_tr, x_tr = _split(n_train, train_rng)
    y_te, x_te = _split(n_test, test_rng)
    members = {TEST_FILE: _records(y_te, x_te), META_FILE: "".join(f"{c}\n" for c in CLASSES).encode() + b"\n"}
    for name, idx in zip(TRAIN_FILES, np.array_split(np.arange(n_train), len(TRAIN_FILES))):
        members[name] = _records(y_tr[idx], x_tr[idx])
    members[README_FILE] = (
        f"<html><body><p>{SYNTHETIC_MARKER} (generator v{GENERATOR_VERSION}, seed {seed}, "
        f"{n_train} train + {n_test} test images): NOT the CIFAR-10 dataset.</p></body></html>\n"
    ).encode()
    return members


def write_synthetic(root: str | os.PathLike, n_train: int = 6000, n_test: int = 1200, seed: int = 0) -> Path:
    """Write the synthetic set in the official binary format to ROOT/cifar10-synthetic/cifar-10-binary.tar.gz,
    byte-identical for the same arguments (gzip and tar mtimes 0, sorted members, uid/gid 0)."""
    if n_train < 10 or n_test < 10:
        raise UsageError(
            f"a synthetic CIFAR-10 set needs at least 10 train and 10 test images (one per class), got {n_train} and {n_test}"
        )
    if seed < 0:
        raise UsageError(f"seed {seed}: use a seed >= 0")
    target = Path(root) / SYNTH_DIR
    made = not target.exists()  # a dir this made goes again if the write fails
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{ARCHIVE}.", suffix=".part", dir=target)  # before the work: writable?
    except OSError as err:
        raise KitError(f"cannot write into {target}: {err.strerror}; pass a writable --data-dir") from None
    try:
        members = _synthetic_members(n_train, n_test, seed)
        with (
            os.fdopen(fd, "wb") as fh,
            gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
        ):
            d = tarfile.TarInfo(BATCH_DIR)
            d.type, d.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(d)
            for name in sorted(members):
                info = tarfile.TarInfo(f"{BATCH_DIR}/{name}")
                info.size, info.mode = len(members[name]), 0o644  # mtime, uid, gid: 0; uname, gname: ""
                tar.addfile(info, io.BytesIO(members[name]))
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600: readable by a container's other uid too
        os.replace(tmp, target / ARCHIVE)
    except OSError as err:
        raise KitError(f"cannot write {target / ARCHIVE}: {err.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if made and target.is_dir() and not any(target.iterdir()):
            target.rmdir()
    return target / ARCHIVE


# ---- subsample, resolve, load -----------------------------------------------------------


def subsample(ds: Cifar10, n_train: int, n_test: int, seed: int) -> Cifar10:
    """N_TRAIN / N_TEST images, equal per class (N a multiple of 10), chosen and shuffled by SEED."""
    rng = np.random.default_rng(seed)
    parts = []
    for split, x, y, n in (("train", ds.x_train, ds.y_train, n_train), ("test", ds.x_test, ds.y_test, n_test)):
        if n <= 0 or n % 10:
            raise KitError(f"subsample: {split} size {n} must be a positive multiple of 10 (equal per class)")
        per = n // 10
        idx = []
        for k in range(10):
            have = np.flatnonzero(y == k)
            if len(have) < per:
                raise KitError(f"subsample: {ds.name} {split} has {len(have)} images of class {k} ({CLASSES[k]}), {per} needed")
            idx.append(rng.choice(have, per, replace=False))
        order = rng.permutation(np.concatenate(idx))
        parts += [x[order], y[order]]
    for a in parts:
        a.setflags(write=False)
    return replace(ds, x_train=parts[0], y_train=parts[1], x_test=parts[2], y_test=parts[3], checksum=_checksum(parts))


def _real_path(held: Path) -> Path | None:
    if (held / ARCHIVE).is_file():
        return held / ARCHIVE
    if (held / BATCH_DIR).is_dir():
        return held / BATCH_DIR
    return None


def _synthetic(root: Path) -> Cifar10:
    """The data dir's synthetic set, else the default one generated (once) into the cache."""
    if (root / SYNTH_DIR / ARCHIVE).is_file():
        return read(root / SYNTH_DIR / ARCHIVE)
    cache = cache_dir() / f"synthetic-v{GENERATOR_VERSION}"
    path = cache / SYNTH_DIR / ARCHIVE
    if path.is_file():
        try:
            return read(path)
        except KitError:
            pass  # a damaged cache entry: make it again
    t0 = time.perf_counter()
    write_synthetic(cache)
    ds = read(path)
    _say(
        f"cifar10: no {SYNTH_DIR}/ in {shown(root)}: generated the default synthetic set into {path} ({time.perf_counter() - t0:.1f} s)"
    )
    return ds


def cached_synthetic() -> list[Path]:
    """The default synthetic set a run generated into the cache dir (what _synthetic reads when the
    data dir has none), if there; creates nothing."""
    from bench.core.cache import existing_cache_dir

    cache = existing_cache_dir()
    path = cache / f"synthetic-v{GENERATOR_VERSION}" / SYNTH_DIR / ARCHIVE if cache else None
    return [path] if path is not None and path.is_file() else []


_SAID: set[str] = set()


def _say(line: str) -> None:
    """One line on stderr, once per process (stdout may be a protocol: the cell's READY/STEP/DONE)."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def _nonempty(d: Path) -> bool:
    try:
        return any(d.iterdir())
    except OSError:
        return True  # unreadable: let the reader say so


def load(data_dir: str | os.PathLike | None, dataset: str = "auto") -> Cifar10:
    """dataset: "auto" (CIFAR-10 if present in the data dir, else the synthetic set), "cifar10" (required), "cifar10-synthetic"."""
    if dataset not in DATASETS:
        raise KitError(f"unknown dataset {dataset!r}: choose {', '.join(DATASETS)}")
    root = resolve_data_dir(data_dir)
    named = data_dir_named(data_dir)
    if (named or dataset == REAL_DIR) and not root.is_dir():  # a typo never silently falls back
        raise KitError(
            f"data dir {shown(root)} does not exist; pass --data-dir, set KIT_DATA_DIR, or fetch it: {fetch_hint(REAL_DIR, root)}"
        )
    if root.is_dir() and not os.access(root, os.R_OK | os.X_OK):
        raise KitError(f"cannot read data dir {shown(root)} as uid {os.getuid()} (permission denied): make it readable")
    held = root / REAL_DIR
    # an empty cifar10/ (what an interrupted fetch could leave) in a dir nobody named holds nothing: as if absent
    if dataset == REAL_DIR or (dataset == "auto" and held.is_dir() and (named or _nonempty(held))):
        path = _real_path(held)
        if path is None:  # a partial cifar10/ is an error, never a silent fallback
            raise KitError(
                f"{shown(root)}: {REAL_DIR}/ lacks {ARCHIVE} (or {BATCH_DIR}/); fetch it: {fetch_hint(REAL_DIR, root)}"
            )
        ds = read(path)
        if not ds.real:
            raise KitError(
                f"{path} is the kit's synthetic set, not CIFAR-10: move it to {SYNTH_DIR}/, and fetch the real one: {fetch_hint(REAL_DIR, root)}"
            )
        return ds
    ds = _synthetic(root)
    if dataset == "auto":
        _say(f"cifar10: no CIFAR-10 in {shown(root)}: using the synthetic set {ds.source} (not CIFAR-10; rows say so)")
    return ds


def resolve(params: dict, data_dir: str | os.PathLike | None) -> dict:
    """The data identity a cell records: the concrete dataset (never 'auto') and the checksum
    of exactly the arrays it will train on, so other data is another cell."""
    ds = load(data_dir, params.get("dataset", "auto"))
    return {"dataset": ds.name, "dataset_sha256": ds.checksum}


def load_for_cell(params: dict, data_dir: str | os.PathLike | None) -> Cifar10:
    """The cell's dataset; a checksum other than the one the cell was resolved for is an error."""
    ds = load(data_dir, params.get("dataset", "auto"))
    check_resolved(ds.name, ds.source, ds.checksum, params.get("dataset_sha256"))
    return ds


# ---- fetch ------------------------------------------------------------------------------


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_cifar10(
    data_dir: Path, mirrors: tuple[str, ...] = MIRRORS, timeout_s: float = 60.0, progress=None, allow_http: bool = False
) -> list[Path]:
    """Fetch ARCHIVE into <data_dir>/cifar10/, MD5-checked and decoded before it is renamed into
    place; a valid archive already there is kept. Nothing unverified is ever left behind."""
    from bench.data.fetch import check_mirrors

    check_mirrors(tuple(mirrors), allow_http)
    target = Path(data_dir) / REAL_DIR
    final = target / ARCHIVE
    if final.is_file() and not final.is_symlink() and _md5(final) == ARCHIVE_MD5:
        return [final]
    from bench.data.fetch import fetch_target

    with fetch_target(target):
        return [_fetch_into(target, final, mirrors, timeout_s, progress)]


def _fetch_into(target: Path, final: Path, mirrors: tuple[str, ...], timeout_s: float, progress) -> Path:
    from bench.data.archive import download

    def decodes(path: Path, url: str) -> None:  # the right bytes are also a readable archive
        read_archive(path)

    urls = [m.rstrip("/") + "/" + ARCHIVE for m in mirrors]
    tmp = download(urls, target, ARCHIVE, f"md5:{ARCHIVE_MD5}", timeout_s, progress, check=decodes, dataset=REAL_DIR)
    try:
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final
