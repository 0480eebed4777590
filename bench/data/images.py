"""What the image-file datasets share (Tiny-ImageNet, ImageFolder trees such as cats vs dogs):
the index a reader returns and its checksum, JPEG decode, a torch Dataset over an index, the
cache dir for generated trees, the synthetic image generator, and the real-vs-synthetic choice.

numpy, Pillow and the standard library only: torch is imported by `torch_dataset` and on a
Dataset's first item, never at import.
"""

from __future__ import annotations

import colorsys
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from bench.core.cache import cache_dir  # noqa: F401  (re-exported: images.cache_dir)
from bench.core.errors import KitError
from bench.data import check_resolved, data_dir_named, resolve_data_dir, shown

# what torchvision.datasets.ImageFolder reads (IMG_EXTENSIONS), compared lower-case
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
JPEG_QUALITY = 90  # every synthetic JPEG: fixed quality, 4:2:0 chroma, so a tree is byte-for-byte repeatable
SPLITS = ("train", "val")

# (relative path, label, size in bytes) of one indexed image
Entry = tuple[str, int, int]
AS_GIVEN = "train/ and val/ as given"  # ImageIndex.split of a tree whose val split is its own val dir


@dataclass(frozen=True, eq=False)
class ImageIndex:
    """The files of one image dataset and their labels; the images stay on disk (load_image)."""

    name: str  # "tinyimagenet" | "tinyimagenet-synthetic" | "catsdogs" | "catsdogs-synthetic" | another tree's name
    real: bool
    root: Path  # the tree every path below is relative to
    classes: tuple[str, ...]  # label i is classes[i]
    train_files: tuple[str, ...]  # relative paths, sorted
    train_labels: np.ndarray  # int64 (N_train,)
    val_files: tuple[str, ...]
    val_labels: np.ndarray  # int64 (N_val,)
    image_size: int | None  # side in px when the format has every image square and one size (Tiny-ImageNet: 64), else None
    checksum: str  # see index_checksum: which files, their labels and byte sizes (not their pixels)
    n_bytes: int  # total size of the indexed image files, bytes
    skipped: int = 0  # files seen and left out as not images (Thumbs.db, .DS_Store, ...)
    split: str = AS_GIVEN  # how the val split was made
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific counts (Tiny-ImageNet: n_test)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def files(self, split: str) -> tuple[str, ...]:
        return self.train_files if split == "train" else self.val_files

    def labels(self, split: str) -> np.ndarray:
        return self.train_labels if split == "train" else self.val_labels

    def describe(self) -> dict:
        return {
            "name": self.name,
            "real": self.real,
            "kind": "real" if self.real else "synthetic",
            "n_classes": self.n_classes,
            "n_train": len(self.train_files),
            "n_val": len(self.val_files),
            "image_size": self.image_size,
            "n_bytes": self.n_bytes,
            "skipped_files": self.skipped,
            "split": self.split,
            "sha256": self.checksum,
            "sha256_covers": "sorted relative paths, labels and byte sizes of the indexed files, and the class list (not pixels)",
            "source": str(self.root),
            **self.extra,
        }


def make_index(name: str, real: bool, root: Path, classes, train: list[Entry], val: list[Entry], **kw) -> ImageIndex:
    """An index over TRAIN and VAL entries, each sorted by path, with its checksum; every file's
    header read once first (check_headers), so a file that is no image is one line now, not
    mid-training, and so is an image of a val dir whose bytes are a train image's (a copy, not a
    link: one image in both splits; a split the kit makes from train/ alone is left as it is)."""
    train, val = sorted(train), sorted(val)
    given = kw.get("split", AS_GIVEN) == AS_GIVEN  # a val dir of its own, not a split the kit made of train/
    check_headers(Path(root), [e[0] for e in train] + [e[0] for e in val], val_from=len(train) if given else None)
    return ImageIndex(
        name=name,
        real=real,
        root=Path(root),
        classes=tuple(classes),
        train_files=tuple(e[0] for e in train),
        train_labels=np.array([e[1] for e in train], np.int64),
        val_files=tuple(e[0] for e in val),
        val_labels=np.array([e[1] for e in val], np.int64),
        checksum=index_checksum(classes, {"train": train, "val": val}),
        n_bytes=sum(e[2] for e in train) + sum(e[2] for e in val),
        **kw,
    )


def index_checksum(classes, splits: dict[str, list[Entry]]) -> str:
    """sha256 over the class names in label order, then one line `split<TAB>path<TAB>label<TAB>size`
    per file, each split's files sorted by path. It covers which files there are, where they sit
    (relative to the tree, so moving the data dir keeps it), their labels and byte sizes; not their
    pixels: an edit that keeps a file's size goes unseen (a fetched archive's content is pinned by
    its own hash). A synthetic tree's sizes come from the JPEG encoder, so another Pillow/libjpeg
    may give other bytes and so another checksum."""
    h = hashlib.sha256()
    h.update(("\n".join(classes) + "\n\n").encode())
    for split, entries in splits.items():
        for rel, label, size in sorted(entries):
            h.update(f"{split}\t{rel}\t{label}\t{size}\n".encode())
    return h.hexdigest()


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


class TreeWalk:
    """What the walks of one tree have seen. Every dir is entered once (by its real path): a link
    back to a dir already entered (a loop such as train/cat/loop -> .., or a second way to the same
    images, from another class or split) is a KitError naming the link, never followed again. Class
    dirs are known by their real paths: an image (or a dir) that really lives in another class's
    dir is a KitError, so a link can never give an image a label other than its own class dir's."""

    def __init__(self) -> None:
        self.entered: dict[str, Path] = {}  # real path -> the path it was first entered by
        self.classes: dict[str, str] = {}  # real path of a class dir -> its class
        self.files: dict[tuple[int, int], Path] = {}  # (device, inode) of every image file -> its first path

    def add_file(self, path: Path, st: os.stat_result) -> None:
        """One file, one place: a second path to the same file (a hard link, or a link to a file,
        between train/ and val/ or two classes) would put one image in two splits or under two
        labels: KitError naming both."""
        first = self.files.setdefault((st.st_dev, st.st_ino), path)
        if first != path:
            raise KitError(
                f"{path} and {first} are one file (a hard link or a link): an image may sit in one place of a tree only; "
                "copy it or remove one"
            )

    def add_class(self, d: Path, label: str) -> None:
        self.classes[os.path.realpath(d)] = label

    def owner(self, real: str) -> tuple[str, str] | None:
        """(class, its dir's real path) of the class dir REAL lies in, the innermost; None when in none."""
        p = Path(real)
        for q in (p, *p.parents):
            label = self.classes.get(str(q))
            if label is not None:
                return label, str(q)
        return None

    def check_owner(self, path: Path, real: str, label: str | None) -> None:
        own = self.owner(real) if label is not None else None
        if own is not None and own[0] != label:
            raise KitError(
                f"{path}: really {real}, in the dir of class {own[0]} ({own[1]}), not of class {label}: "
                "a link may not move images between classes; remove it"
            )

    def enter(self, path: Path, real: str, label: str | None) -> None:
        first = self.entered.get(real)
        if first is not None:
            raise KitError(
                f"{path}: leads to {first} again (a link loop, or a second way to the same images); "
                "remove the link: a link to a dir is followed once"
            )
        self.entered[real] = path
        self.check_owner(path, real, label)


def scan_images(
    d: Path, recursive: bool = False, walk: TreeWalk | None = None, label: str | None = None
) -> tuple[list[tuple[str, int]], int]:
    """Image files under D as (path relative to D, size in bytes), and how many other files were
    skipped (wrong extension, or hidden: .DS_Store, macOS's ._x.jpg; hidden dirs are not entered).
    RECURSIVE: subdirs too, links to dirs followed once each (WALK: the tree's walk, shared by every
    class and split of one tree; see TreeWalk). LABEL: D's class, checked against where each file
    really lives (WALK's class dirs). An empty image file, an unreadable dir, a dangling link, a
    link loop or a link into another class's dir is a KitError naming it."""
    walk = walk if walk is not None else TreeWalk()
    found: list[tuple[str, int]] = []
    skipped = 0
    try:
        todo = [(Path(d), os.path.realpath(d), "")]  # (dir, its real path, its path relative to D)
        while todo:
            top, real, rel = todo.pop()
            walk.enter(top, real, label)
            subdirs = []
            for e in sorted(os.scandir(top), key=lambda e: e.name):
                p = Path(e.path)
                if e.is_dir():
                    if recursive and not e.name.startswith("."):
                        sub_real = os.path.realpath(p) if e.is_symlink() else os.path.join(real, e.name)
                        subdirs.append((p, sub_real, f"{rel}{e.name}/"))
                    continue
                if e.name.startswith(".") or not e.name.lower().endswith(IMAGE_EXTENSIONS):
                    skipped += 1
                    continue
                if e.is_symlink():
                    walk.check_owner(p, os.path.realpath(p), label)
                st = e.stat()
                walk.add_file(p, st)
                size = st.st_size
                if size == 0:
                    raise KitError(f"{p}: empty file (0 bytes), not an image; delete it (or fetch the dataset again)")
                found.append((f"{rel}{e.name}", size))
            todo.extend(reversed(subdirs))
    except OSError as err:
        raise KitError(f"{err.filename or d}: cannot read ({err.strerror or err})") from None
    return found, skipped


# header check: trees of this many files or more remember a passed check in the cache dir
HEADER_STAMP_MIN_FILES = 2000


def _header_error(path: Path) -> str | None:
    """Why PATH is not a readable image, from its header alone (None: it reads)."""
    try:
        with Image.open(path) as im:  # parses the header only (a JPEG: its markers up to the scan)
            im.verify()  # PNG: every chunk's CRC; no pixel is decoded
            if im.width < 1 or im.height < 1:
                return f"{im.width}x{im.height} px"
    except Exception as err:  # noqa: BLE001 - whatever the file makes Pillow raise, it is not a readable image
        return _one_line(err)
    return None


def _stamp_key(root: Path, rels: list[str]) -> str:
    """sha256 of every file's path in the tree, size, mtime, ctime and identity (device, inode): the
    same files, even after the tree was renamed (fetch_tinyimagenet renames the tree it checked).
    The ctime is what an edit in place cannot set back (`touch -d` sets the mtime back, and
    changes the ctime doing it), so an edited file is checked again."""
    h = hashlib.sha256(b"header-check v2\n")
    for rel in rels:
        st = os.stat(root / rel)
        h.update(f"{rel}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ctime_ns}\t{st.st_dev}\t{st.st_ino}\n".encode())
    return h.hexdigest()


def _copy_between(root: Path, train: list[str], val: list[str]) -> tuple[str, str] | None:
    """(a VAL file, a TRAIN file) of ROOT whose bytes are the same, else None: files are known by
    content too, not only by (device, inode). Only files of a size both splits hold are hashed."""
    sizes: dict[int, list[str]] = {}
    for rel in train:
        sizes.setdefault(os.stat(root / rel).st_size, []).append(rel)
    by_hash: dict[str, str] = {}  # sha256 -> the train file that holds it
    hashed: set[int] = set()
    for rel in val:
        n = os.stat(root / rel).st_size
        if n not in sizes:
            continue
        if n not in hashed:
            for t in sizes[n]:
                by_hash.setdefault(_sha256_file(root / t), t)
            hashed.add(n)
        first = by_hash.get(_sha256_file(root / rel))
        if first is not None:
            return rel, first
    return None


def check_headers(root: Path, rels: list[str], val_from: int | None = None) -> None:
    """Open every file of RELS (relative to ROOT) once and read its header (Pillow's Image.open,
    then verify(): no pixels decoded, about 0.1 ms an image): a file that is not a readable image
    is a one-line KitError naming it and counting the others, before any training. What only a
    full decode finds (a JPEG cut short after its header) is still named when decoded
    (load_image). VAL_FROM: RELS[:VAL_FROM] are the train split, the rest val; a val file whose
    bytes are a train file's (a byte copy: one image in both splits) is a KitError naming both. A
    tree of HEADER_STAMP_MIN_FILES files or more remembers a passed check in the cache dir, keyed
    by every file's path, size, mtime, ctime and inode (_stamp_key), so reading the same files
    again (every cell reads its index) skips it; a changed file is checked again."""
    stamp = None
    if len(rels) >= HEADER_STAMP_MIN_FILES:
        try:
            key = _stamp_key(root, rels) + (f"\tsplit at {val_from}" if val_from is not None else "")
            stamp = cache_dir() / "image-checks" / f"{hashlib.sha256(key.encode()).hexdigest()}.ok"
        except OSError as err:
            raise KitError(f"{err.filename or root}: cannot read ({err.strerror or err})") from None
        if stamp.is_file():
            return
    bad = []
    for rel in rels:
        why = _header_error(root / rel)
        if why is not None:
            bad.append((rel, why))
    if bad:
        rel, why = bad[0]
        more = f"; {len(bad) - 1} more files of this tree are not readable images either" if len(bad) > 1 else ""
        raise KitError(f"{root / rel}: not a readable image ({why}){more}; delete or replace it")
    if val_from is not None:
        try:
            copy = _copy_between(root, rels[:val_from], rels[val_from:])
        except OSError as err:
            raise KitError(f"{err.filename or root}: cannot read ({err.strerror or err})") from None
        if copy is not None:
            raise KitError(
                f"{root / copy[0]} holds the same bytes as {root / copy[1]}: one image in val and train "
                "(the model is tested on what it trained on); remove one"
            )
    if stamp is not None:
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        except OSError:
            pass  # a stamp is only a shortcut


def load_image(path: str | os.PathLike, size: int | None = None) -> np.ndarray:
    """Decode PATH to uint8 (3,H,W) RGB: grayscale (a few Tiny-ImageNet JPEGs), palette, CMYK and
    alpha images are converted. With SIZE: the shorter side resized to SIZE (bilinear), then the
    centre SIZE x SIZE cropped; a no-op for an image already SIZE x SIZE. 16-bit images are
    scaled to 8 bit (to_rgb). A file that does not decode (corrupt, truncated, not an image) is a
    KitError naming it."""
    try:
        with Image.open(path) as src:
            im = to_rgb(src)  # decodes every pixel: a truncated JPEG fails here
        if size and im.size != (size, size):
            w, h = im.size
            scale = size / min(w, h)
            nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
            im = im.resize((nw, nh), Image.Resampling.BILINEAR)
            left, top = (nw - size) // 2, (nh - size) // 2
            im = im.crop((left, top, left + size, top + size))
        hwc = np.asarray(im)  # (H,W,3) uint8
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise KitError(f"{path}: cannot decode image ({_one_line(err)})") from None
    return np.ascontiguousarray(hwc.transpose(2, 0, 1))


WIDE_INT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")  # one channel, 16-bit range (Pillow opens 16-bit PGMs as I)
INT32_MODES = ("I",)  # of those, 32-bit signed: a 16-bit image opened as I, or a 32-bit integer TIFF
FLOAT_MODES = ("F",)  # one channel, 32-bit float (a float TIFF)
FLOAT_RANGES = (1.0, 255.0, 65535.0)  # a float image's range: the first of these its largest value fits


def to_rgb(src: Image.Image) -> Image.Image:
    """SRC as 8-bit RGB, every mode scaled by its range. Pillow's convert("RGB") clips a 16-bit
    or float image at 255 (a 16-bit PNG turns almost all white, a float TIFF of 0..1 all black),
    so those modes are scaled here: 16-bit (WIDE_INT_MODES) from 0..65535, v8 = round(v16 x 255 /
    65535); a 32-bit integer image (mode I) whose values pass 65535 from 0 to its own largest value
    (never clipped at 65535), below 0 as 0; float (FLOAT_MODES) from 0..R, R the first of
    FLOAT_RANGES (0..1 as image libraries write floats, else 0..255, else 0..65535) that holds its
    largest value, else the image's own largest, below 0 and not-a-number as 0. Every other
    mode (L, P, LA, RGBA, CMYK, ...) converts as Pillow does; 16-bit RGB PNGs Pillow already
    opens as 8-bit RGB."""
    if src.mode in WIDE_INT_MODES:
        v = np.clip(np.asarray(src).astype(np.int64), 0, None)
        most = int(v.max(initial=0)) if src.mode in INT32_MODES else 0
        wide = most if most > 65535 else 65535  # 16-bit data (a PGM opened as I) keeps its 16-bit range
        return Image.fromarray(((v * 255 + wide // 2) // wide).astype(np.uint8)).convert("RGB")  # 2-D uint8: mode L
    if src.mode in FLOAT_MODES:
        f = np.nan_to_num(np.asarray(src, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
        top = float(f.max(initial=0.0))
        span = next((r for r in FLOAT_RANGES if top <= r), top)
        return Image.fromarray(np.rint(f * (255.0 / span)).clip(0, 255).astype(np.uint8)).convert("RGB")
    return src.convert("RGB")


class ImageDataset:
    """A map-style torch Dataset over one split of an index: item i is (uint8 tensor (3,H,W),
    int label), TRANSFORM applied to the tensor when given (e.g. torchvision.transforms.v2).
    A plain module-level class, not a torch.utils.data.Dataset subclass (that base adds nothing a
    DataLoader needs): it imports no torch until its first item, and DataLoader workers can pickle
    it under spawn and forkserver as well as fork. Build it with torch_dataset()."""

    def __init__(self, index: ImageIndex, split: str, size: int | None = None, transform: Callable | None = None):
        self.root = index.root
        self.files = index.files(split)
        self.labels = index.labels(split)
        self.size = size  # px, see load_image; None: as stored
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        import torch

        x = torch.from_numpy(load_image(self.root / self.files[i], self.size))
        return (self.transform(x) if self.transform is not None else x), int(self.labels[i])


def torch_dataset(
    index: ImageIndex,
    split: str = "train",
    size: int | None = None,
    transform: Callable | None = None,
    cls: type[ImageDataset] = ImageDataset,
) -> ImageDataset:
    """CLS over SPLIT ('train' | 'val') of INDEX; KitError when torch is missing here."""
    if split not in SPLITS:
        raise KitError(f"unknown split {split!r}: choose {' or '.join(SPLITS)}")
    try:
        import torch  # noqa: F401  (the items are torch tensors)
    except ImportError:
        raise KitError("torch is not installed here: the image datasets yield torch tensors (pip install torch)") from None
    return cls(index, split, size=size, transform=transform)


# ---- generated trees: where they are cached, how they are written --------------------------------


def new_tree(final: Path, exist_ok: bool) -> tuple[Path, list[Path]] | None:
    """A fresh temp dir beside FINAL to write a tree into, and the dirs made for it (innermost
    first, for discard_tree); None when FINAL exists and EXIST_OK."""
    if final.exists():
        if exist_ok:
            return None
        raise KitError(f"{final} exists: delete it to write a new one")
    made = missing_parents(final.parent)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    except OSError as err:
        discard_tree(None, made)
        raise KitError(f"cannot write into {final.parent}: {err.strerror}") from None
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; the tree must be readable like any data dir
    return tmp, made


def content_path(tree: Path) -> Path:
    """Where the kit keeps what it wrote into TREE: `<tree>.sha256` beside it (the sha256 of every
    file, as sha256sum writes it), so the tree itself holds exactly its format's files."""
    return tree.with_name(tree.name + ".sha256")


def _tree_files(root: Path) -> list[str]:
    """Every regular file under ROOT (relative, sorted)."""
    out = []
    for here, _dirs, files in os.walk(root):
        out += [os.path.relpath(os.path.join(here, n), root) for n in files]
    return sorted(out)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_content(tree: Path, to: Path) -> None:
    """TO: the sha256 of every file of TREE, a tree the kit wrote (written under a temp name)."""
    from bench.core.rows import atomic_write_text
    from bench.core.text import manifest_line

    atomic_write_text(to, "".join(manifest_line(_sha256_file(tree / rel), rel) for rel in _tree_files(tree)))


def check_content(tree: Path) -> None:
    """KitError (one line) when TREE, a tree the kit wrote and cached, is not what it wrote: a
    file changed, swapped, added or gone since (content_path), or that list missing. A tree of
    HEADER_STAMP_MIN_FILES files or more remembers a passed check in the cache dir, keyed by the
    list and every file's path, size, mtime, ctime and inode: a swapped file, or one edited in place
    with its mtime set back, is hashed again."""
    fix = f"delete {tree} and it is written again"
    manifest = content_path(tree)
    if not manifest.is_file() or manifest.is_symlink():
        raise KitError(f"{tree}: no {manifest.name} beside it (not a tree this kit wrote and cached, or one cut short): {fix}")
    text = manifest.read_text(encoding="utf-8", errors="replace")
    rels = _tree_files(tree)
    stamp = None
    if len(rels) >= HEADER_STAMP_MIN_FILES:
        key = hashlib.sha256((_stamp_key(tree, rels) + text).encode()).hexdigest()
        stamp = cache_dir() / "content-checks" / f"{key}.ok"
        if stamp.is_file():
            return
    want = {rel: digest for digest, _, rel in (line.partition("  ") for line in text.splitlines())}
    if set(want) != set(rels):
        extra, gone = sorted(set(rels) - set(want)), sorted(set(want) - set(rels))
        what = f"{extra[0]} was added" if extra else f"{gone[0]} is gone"
        raise KitError(f"{tree}: {what} since the kit wrote this cached tree: {fix}")
    for rel in rels:
        if _sha256_file(tree / rel) != want[rel]:
            raise KitError(
                f"{tree / rel}: changed since the kit wrote this cached tree (not the sha256 {manifest.name} holds): {fix}"
            )
    if stamp is not None:
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        except OSError:
            pass  # a stamp is only a shortcut


def publish_tree(tmp: Path, final: Path) -> None:
    """Write what TMP holds beside FINAL (content_path), then rename the finished TMP to FINAL;
    when another writer got there first, theirs stands (the same files: the writers are
    deterministic)."""
    write_content(tmp, content_path(final))
    try:
        os.rename(tmp, final)
    except OSError as err:
        if not final.is_dir():
            raise KitError(f"cannot move the written tree to {final}: {err.strerror}") from None
        shutil.rmtree(tmp, ignore_errors=True)


def discard_tree(tmp: Path | None, made: list[Path]) -> None:
    """After a failure: TMP goes, and so does every dir of MADE (innermost first) left empty."""
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    for d in made:
        try:
            d.rmdir()
        except OSError:
            pass


def missing_parents(p: Path) -> list[Path]:
    """P's dirs that do not exist yet, innermost first (what a failed write must take away again)."""
    out = []
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def grating_image(rng: np.random.Generator, h: int, w: int, hue: float, angle_deg: float, freq: float, noise_sd: float):
    """One synthetic picture, uint8 (h,w,3): a sinusoidal grating (ANGLE_DEG, FREQ cycles/px,
    random phase) in a Gaussian window (sigma 0.2..0.4 of the shorter side) at a random centre,
    in a bright and a dark colour of HUE (0..1) on a pale background of HUE, plus Gaussian pixel
    noise (NOISE_SD, 0..255 units). Also the window's box (x0, y0, x1, y1) in px, inclusive."""
    xx = np.arange(w, dtype=np.float32)[None, :]  # (1,w) px
    yy = np.arange(h, dtype=np.float32)[:, None]  # (h,1) px
    cx, cy = rng.uniform(0.25, 0.75) * w, rng.uniform(0.25, 0.75) * h
    sigma = rng.uniform(0.2, 0.4) * min(h, w)
    a = np.deg2rad(angle_deg)
    phase = rng.uniform(0, 2 * np.pi)
    wave = np.sin(np.float32(2 * np.pi * freq) * ((xx - cx) * np.cos(a) + (yy - cy) * np.sin(a)) + np.float32(phase))
    window = np.exp(((xx - cx) ** 2 + (yy - cy) ** 2) * np.float32(-0.5 / sigma**2))[..., None]  # (h,w,1) 0..1
    bright = 255 * np.array(colorsys.hsv_to_rgb(hue % 1.0, 0.75, 0.95), np.float32)
    dark = 255 * np.array(colorsys.hsv_to_rgb((hue + 0.1) % 1.0, 0.8, 0.35), np.float32)
    pale = 255 * np.array(colorsys.hsv_to_rgb(hue % 1.0, 0.3, 0.65), np.float32)
    t = (0.5 + 0.5 * wave)[..., None]  # (h,w,1) 0..1
    img = pale + window * (dark - pale + t * (bright - dark))  # (h,w,3) 0..255
    img += rng.standard_normal(img.shape, dtype=np.float32) * np.float32(noise_sd)
    box = (max(0, int(cx - sigma)), max(0, int(cy - sigma)), min(w - 1, int(cx + sigma)), min(h - 1, int(cy + sigma)))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8), box


def write_jpeg(path: Path, img: np.ndarray, gray: bool = False) -> None:
    """IMG uint8 (h,w,3) as a JPEG (JPEG_QUALITY, 4:2:0); GRAY: as a 1-channel JPEG."""
    im = Image.fromarray(img)
    if gray:
        im = im.convert("L")
    im.save(path, format="JPEG", quality=JPEG_QUALITY, subsampling="4:2:0")


# ---- real or synthetic: what a cell trains on ----------------------------------------------------


@dataclass(frozen=True)
class Family:
    """A dataset the user provides under <data dir>/<real>/, and its synthetic twin the kit writes."""

    real: str  # "tinyimagenet"
    synthetic: str  # "tinyimagenet-synthetic"
    version: int  # of the generator: a change to its output bumps it, so old cached trees are not reused
    real_tree: Callable[[Path], Path]  # data dir -> the tree read_real takes
    read: Callable[[Path], ImageIndex]  # a tree (real or synthetic) -> its index
    write_synthetic: Callable[..., Path]  # (root, exist_ok=..., **kw) -> the synthetic tree under root
    hint: Callable[[Path], str]  # how to get the real data into a data dir


def _nonempty(d: Path) -> bool:
    try:
        return any(d.iterdir())
    except OSError:
        return True  # unreadable: let the reader say so


def synthetic_cached(fam: Family, kw: dict) -> ImageIndex:
    """FAM's synthetic tree for the generator arguments KW, written once into the cache dir and
    checked against what was written (check_content) each time it is read."""
    key = "-".join([fam.synthetic, f"v{fam.version}", *(f"{k}{kw[k]}" for k in sorted(kw))])
    tree = fam.write_synthetic(cache_dir() / "synthetic" / key, exist_ok=True, **kw)
    check_content(tree)
    return fam.read(tree)


def cached_trees(fam: Family) -> list[Path]:
    """FAM's synthetic trees of the current generator version that runs wrote into the cache dir
    (one per set of generator arguments); creates nothing."""
    from bench.core.cache import existing_cache_dir

    cache = existing_cache_dir()
    base = cache / "synthetic" if cache else None
    if base is None or not base.is_dir():
        return []
    key = f"{fam.synthetic}-v{fam.version}"
    return sorted(p for p in base.iterdir() if p.is_dir() and (p.name == key or p.name.startswith(key + "-")))


def select(fam: Family, dataset: str, data_dir: str | os.PathLike | None, kw: dict) -> ImageIndex:
    """dataset: 'auto' (the real tree when the data dir holds it, else the synthetic one), the real
    name (required), or the synthetic name. 'auto' on a named data dir without the real data
    falls back to the synthetic tree and says so on stderr (as cifar10 does): one data dir
    serves every study, and rows record which data ran."""
    if dataset not in ("auto", fam.real, fam.synthetic):
        raise KitError(f"unknown dataset {dataset!r}: choose auto, {fam.real} or {fam.synthetic}")
    if dataset == fam.synthetic:
        return synthetic_cached(fam, kw)
    root = resolve_data_dir(data_dir)
    named = data_dir_named(data_dir)
    if (named or dataset == fam.real) and not root.is_dir():
        raise KitError(f"data dir {shown(root)} does not exist; pass --data-dir, set KIT_DATA_DIR, or {fam.hint(root)}")
    if root.is_dir() and not os.access(root, os.R_OK | os.X_OK):
        raise KitError(f"cannot read data dir {shown(root)} as uid {os.getuid()} (permission denied): make it readable")
    held = root / fam.real
    if dataset == fam.real or (held.is_dir() and (named or _nonempty(held))):
        if not held.is_dir():
            raise KitError(f"data dir {shown(root)} holds no {fam.real}/: {fam.hint(root)}")
        tree = fam.real_tree(root)
        if not tree.is_dir():
            raise KitError(f"{shown(root)}: {fam.real}/ lacks {tree.relative_to(held)}/; {fam.hint(root)}")
        return fam.read(tree)  # a partial or broken tree is an error, never a silent fallback
    if named:  # one data dir serves every study (it may hold mnist/ only): say so, then the synthetic tree
        import sys

        print(
            f"{fam.real}: no {fam.real}/ in {shown(root)}: using the synthetic tree (not {fam.real}; rows say so); {fam.hint(root)}",
            file=sys.stderr,
        )
    return synthetic_cached(fam, kw)  # nothing real to read: the synthetic tree (rows and the report say so)


_MEMO: dict[tuple, ImageIndex] = {}


def select_cached(fam: Family, dataset: str, data_dir: str | os.PathLike | None, kw: dict) -> ImageIndex:
    """select(), once per (family, resolved dir, dataset, generator arguments) in this process."""
    key = (fam.real, str(resolve_data_dir(data_dir).absolute()), dataset, tuple(sorted(kw.items())))
    if key not in _MEMO:
        _MEMO[key] = select(fam, dataset, data_dir, kw)
    return _MEMO[key]


def check_checksum(index: ImageIndex, want: str | None) -> ImageIndex:
    """INDEX, when WANT (a cell's dataset_sha256) is unset or equal to its checksum."""
    check_resolved(index.name, index.root, index.checksum, want)
    return index
