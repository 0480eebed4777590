"""Tiny-ImageNet (200 classes of 64x64 JPEGs): the official tree, its fetch, and a synthetic twin.

Layout, as unpacked from tiny-imagenet-200.zip:
    tiny-imagenet-200/
      wnids.txt                              the 200 wnids, one a line: label i = the i-th line
      words.txt                              wnid<TAB>names (every ImageNet synset; not read)
      train/<wnid>/images/<wnid>_<k>.JPEG    500 a class (100,000)
      train/<wnid>/<wnid>_boxes.txt          file<TAB>x0<TAB>y0<TAB>x1<TAB>y1 (not read)
      val/images/val_<k>.JPEG                10,000, 50 a class
      val/val_annotations.txt                file<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1: the val labels
      test/images/test_<k>.JPEG              10,000 without labels (counted, not indexed)
A few of the JPEGs are grayscale: load_image converts every image to RGB.

Real: <data dir>/tinyimagenet/tiny-imagenet-200/ (`python orchestrate.py data fetch tinyimagenet
--allow-http`: the official site is http only; the zip is MD5-checked and the tree validated).
Synthetic: <root>/tinyimagenet-synthetic/tiny-imagenet-200/ in exactly that layout, real JPEGs
(write_synthetic), so a run on it measures the same decode path. `auto` (the default) takes the
real tree when the data dir holds one, else the synthetic tree from the cache dir (images.cache_dir).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.core import bounded
from bench.core.errors import KitError, UsageError
from bench.data import fetch_hint, resolve_data_dir
from bench.data.archive import download, extract_zip
from bench.data.fetch import check_mirrors
from bench.data.images import (
    Entry,
    Family,
    ImageDataset,
    ImageIndex,
    TreeWalk,
    cached_trees,
    check_checksum,
    discard_tree,
    grating_image,
    load_image,
    make_index,
    missing_parents,
    new_tree,
    publish_tree,
    scan_images,
    select_cached,
    torch_dataset,
    write_jpeg,
)

REAL = "tinyimagenet"
SYNTHETIC = "tinyimagenet-synthetic"
TREE = "tiny-imagenet-200"
ARCHIVE = "tiny-imagenet-200.zip"
MIRRORS = ("http://cs231n.stanford.edu/",)  # the official site: plain http only
# MD5 of tiny-imagenet-200.zip: the widely quoted value (dataset loaders and tutorials print it);
# not verified here, as this kit was written without access to the download.
ARCHIVE_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
_WNID = re.compile(r"[A-Za-z0-9_-]+")

__all__ = ["load_image", "read_tree", "write_synthetic", "fetch_tinyimagenet", "resolve", "load_for_cell", "dataset"]


# ---- reading a tree -----------------------------------------------------------------------------


def _read_text(p: Path, what: str) -> str:
    if not p.is_file():
        raise KitError(f"{p}: missing ({what}); not a complete {TREE}/ tree")
    try:  # wnids.txt is 2 kB, val_annotations.txt 0.4 MB
        return bounded.read_bytes(p, bounded.Caps(file_bytes=16 << 20), follow=True).decode("utf-8")
    except bounded.TooBig:
        raise
    except (OSError, UnicodeDecodeError, KitError) as err:
        raise KitError(f"{p}: cannot read ({' '.join(str(err).split())})") from None


def _read_wnids(root: Path) -> tuple[str, ...]:
    p = root / "wnids.txt"
    seen: dict[str, int] = {}  # wnid -> line number
    for n, line in enumerate(_read_text(p, "the class list").splitlines(), 1):
        w = line.strip()
        if not w:
            continue
        if not _WNID.fullmatch(w):
            raise KitError(f"{p}:{n}: {w!r} is not a wnid")
        if w in seen:
            raise KitError(f"{p}: wnid {w} listed twice (lines {seen[w]} and {n})")
        seen[w] = n
    if not seen:
        raise KitError(f"{p}: lists no wnids")
    return tuple(seen)


def _train_entries(root: Path, wnids: tuple[str, ...], walk: TreeWalk) -> tuple[list[Entry], int]:
    train = root / "train"
    if not train.is_dir():
        raise KitError(f"{train}: missing; not a complete {TREE}/ tree")
    extra = sorted(e.name for e in os.scandir(train) if e.is_dir() and not e.name.startswith(".") and e.name not in wnids)
    if extra:
        raise KitError(f"{train / extra[0]}: a class dir not listed in wnids.txt ({len(extra)} such)")
    entries, skipped = [], 0
    for w in wnids:
        walk.add_class(train / w / "images", w)
    for label, w in enumerate(wnids):
        d = train / w / "images"
        if not d.is_dir():
            raise KitError(f"{d if (train / w).is_dir() else train / w}: missing (wnid {w} is listed in wnids.txt)")
        files, n_skipped = scan_images(d, walk=walk, label=w)
        if not files:
            raise KitError(f"{d}: no JPEG images (wnid {w})")
        entries += [(f"train/{w}/images/{rel}", label, size) for rel, size in files]
        skipped += n_skipped
    return entries, skipped


def _val_entries(root: Path, labels: dict[str, int], walk: TreeWalk) -> tuple[list[Entry], int]:
    ann, images = root / "val" / "val_annotations.txt", root / "val" / "images"
    text = _read_text(ann, "the val labels")
    if not images.is_dir():
        raise KitError(f"{images}: missing; not a complete {TREE}/ tree")
    files, skipped = scan_images(images, walk=walk)
    on_disk = dict(files)  # file name -> size, bytes
    entries: list[Entry] = []
    seen: dict[str, int] = {}  # file name -> line number
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) < 2:
            raise KitError(f"{ann}:{n}: expected file<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1")
        name, w = fields[0], fields[1]
        if w not in labels:
            raise KitError(f"{ann}:{n}: wnid {w} is not in wnids.txt")
        if name in seen:
            raise KitError(f"{ann}:{n}: {name} annotated twice (lines {seen[name]} and {n})")
        if name not in on_disk:
            raise KitError(f"{ann}:{n}: {images / name} does not exist")
        seen[name] = n
        entries.append((f"val/images/{name}", labels[w], on_disk[name]))
    if not entries:
        raise KitError(f"{ann}: no annotations")
    unlabelled = sorted(set(on_disk) - set(seen))
    if unlabelled:
        raise KitError(f"{images / unlabelled[0]}: not in {ann.name} ({len(unlabelled)} images without a label)")
    return entries, skipped


def read_tree(root: str | os.PathLike, synthetic: bool | None = None) -> ImageIndex:
    """Index a tiny-imagenet-200/ tree: train and val paths with int64 labels (classes in
    wnids.txt order; val labels from val_annotations.txt). SYNTHETIC: None infers it from where
    the tree sits (<...>/tinyimagenet-synthetic/tiny-imagenet-200). Each way the tree can be
    malformed is a one-line KitError naming the file, and so is a train image that really lives
    in another class's dir (a link) or a file whose header does not read (images.check_headers);
    pixels are checked when decoded (load_image)."""
    root = Path(root)
    if not root.is_dir():
        raise KitError(f"{root}: no such dir (expected an unpacked {TREE}/ tree)")
    wnids = _read_wnids(root)
    walk = TreeWalk()  # train's class dirs and val/images: each entered once (a link to one is refused)
    train, skipped_train = _train_entries(root, wnids, walk)
    val, skipped_val = _val_entries(root, {w: i for i, w in enumerate(wnids)}, walk)
    test = root / "test" / "images"
    n_test = len(scan_images(test)[0]) if test.is_dir() else 0
    first = root / min(train)[0]
    side = load_image(first).shape[1:]  # (H, W) of one image: the format has all 64x64
    if side[0] != side[1]:
        raise KitError(f"{first}: {side[1]}x{side[0]} px; Tiny-ImageNet images are square")
    if synthetic is None:
        synthetic = root.parent.name == SYNTHETIC
    return make_index(
        SYNTHETIC if synthetic else REAL,
        not synthetic,
        root,
        wnids,
        train,
        val,
        image_size=int(side[0]),
        skipped=skipped_train + skipped_val,
        extra={"n_test": n_test},
    )


class TinyImageNetDataset(ImageDataset):
    """Items (uint8 tensor (3,S,S), int label), S = the index's image size (64); see ImageDataset."""


def dataset(index: ImageIndex, split: str = "train", transform: Callable | None = None) -> TinyImageNetDataset:
    """A torch Dataset over SPLIT of INDEX (torch imported here, not at module import); every item is
    resized to the index's image size, so an off-size file cannot break a batch."""
    ds = torch_dataset(index, split, size=index.image_size, transform=transform, cls=TinyImageNetDataset)
    assert isinstance(ds, TinyImageNetDataset)
    return ds


# ---- the synthetic twin -------------------------------------------------------------------------

SYNTHETIC_VERSION = (
    2  # bump when write_synthetic's output (its files or their CONTENT list) changes: cached trees keyed by it are then remade
)
GRAY_FRACTION = 0.02  # share of images written as 1-channel JPEGs, as a few real ones are (exercises the RGB conversion)
NOISE_SD = 14.0  # Gaussian pixel noise, 0..255 units


def class_style(seed: int, c: int) -> tuple[float, float, float]:
    """(hue 0..1, grating angle deg, frequency cycles/px) of synthetic class C: hues spread by the
    golden ratio, angle and frequency drawn per class."""
    rng = np.random.default_rng([seed, 0, c])
    return (c * 0.6180339887) % 1.0, float(rng.uniform(0, 180)), float(rng.uniform(0.05, 0.25))


def _picture(rng: np.random.Generator, style: tuple[float, float, float], size: int):
    """A (size,size,3) picture of a class: its style jittered (hue +-0.02, angle +-8 deg, frequency +-10 %), and its box."""
    hue, angle, freq = style
    return grating_image(
        rng, size, size, hue + rng.uniform(-0.02, 0.02), angle + rng.uniform(-8, 8), freq * rng.uniform(0.9, 1.1), NOISE_SD
    )


def _save(rng: np.random.Generator, path: Path, img: np.ndarray) -> None:
    write_jpeg(path, img, gray=bool(rng.random() < GRAY_FRACTION))


def _box(box) -> str:
    return "\t".join(str(v) for v in box)


def write_synthetic(
    root: str | os.PathLike,
    n_classes: int = 200,
    n_train_per_class: int = 10,
    n_val_per_class: int = 5,
    n_test: int | None = None,
    size: int = 64,
    seed: int = 0,
    exist_ok: bool = False,
) -> Path:
    """Write ROOT/tinyimagenet-synthetic/tiny-imagenet-200/ in the official layout with real JPEGs
    (quality images.JPEG_QUALITY), deterministic in its arguments; returns the tree. Class c has
    its own hue and grating (angle, frequency); every picture draws its window's place and size,
    the grating's phase and pixel noise, so a small CNN learns it well above chance. Written into a
    temp dir and renamed: a failure leaves nothing. Defaults: 200 x (10 train + 5 val) + 200 test =
    3,200 JPEGs of 64x64 (about 7 MB); N_TEST None: one test image a class."""
    n_test = n_classes if n_test is None else n_test
    for arg, v, low in (("n_classes", n_classes, 1), ("n_train_per_class", n_train_per_class, 1)):
        if v < low:
            raise UsageError(f"{arg} must be at least {low}, not {v}")
    if n_val_per_class < 1 or n_test < 0 or size < 8:
        raise UsageError(f"need n_val_per_class >= 1, n_test >= 0 and size >= 8 px (got {n_val_per_class}, {n_test}, {size})")
    final = Path(root) / SYNTHETIC / TREE
    started = new_tree(final, exist_ok)
    if started is None:
        return final
    tmp, made = started
    try:
        _write_tree(tmp, n_classes, n_train_per_class, n_val_per_class, n_test, size, seed)
        publish_tree(tmp, final)
    except BaseException:
        discard_tree(tmp, made)
        raise
    return final


def _write_tree(tree: Path, n_classes: int, n_train: int, n_val: int, n_test: int, size: int, seed: int) -> None:
    wnids = [f"n99{c:06d}" for c in range(n_classes)]  # wnid-shaped ('n' + 8 digits); no real synset starts n99
    styles = [class_style(seed, c) for c in range(n_classes)]
    (tree / "wnids.txt").write_text("".join(w + "\n" for w in wnids))
    (tree / "words.txt").write_text(
        "".join(
            f"{w}\tsynthetic class {c}: hue {h:.3f}, grating at {a:.0f} deg, {f:.3f} cycles/px\n"
            for c, (w, (h, a, f)) in enumerate(zip(wnids, styles))
        )
    )
    for c, w in enumerate(wnids):
        images = tree / "train" / w / "images"
        images.mkdir(parents=True)
        rng = np.random.default_rng([seed, 1, c])
        boxes = []
        for k in range(n_train):
            img, box = _picture(rng, styles[c], size)
            _save(rng, images / f"{w}_{k}.JPEG", img)
            boxes.append(f"{w}_{k}.JPEG\t{_box(box)}\n")
        (tree / "train" / w / f"{w}_boxes.txt").write_text("".join(boxes))
    # val: n_val a class, in a shuffled order as in the real set (val_0 is of any class)
    (tree / "val" / "images").mkdir(parents=True)
    rng = np.random.default_rng([seed, 2])
    lines = []
    for k, c in enumerate(rng.permutation(np.repeat(np.arange(n_classes), n_val))):
        img, box = _picture(rng, styles[c], size)
        _save(rng, tree / "val" / "images" / f"val_{k}.JPEG", img)
        lines.append(f"val_{k}.JPEG\t{wnids[c]}\t{_box(box)}\n")
    (tree / "val" / "val_annotations.txt").write_text("".join(lines))
    (tree / "test" / "images").mkdir(parents=True)
    rng = np.random.default_rng([seed, 3])
    for k in range(n_test):
        img, _ = _picture(rng, styles[int(rng.integers(n_classes))], size)
        _save(rng, tree / "test" / "images" / f"test_{k}.JPEG", img)


# ---- the fetch ----------------------------------------------------------------------------------


def fetch_tinyimagenet(
    data_dir: Path, mirrors: tuple[str, ...] = MIRRORS, timeout_s: float = 60.0, progress=None, allow_http: bool = False
) -> list[Path]:
    """Download tiny-imagenet-200.zip (MIRRORS are base URLs) to a temp name, check its MD5, unpack
    it safely into a temp dir, validate the tree (read_tree) and rename it to
    <data_dir>/tinyimagenet/tiny-imagenet-200/. A valid tree already there is kept, not fetched
    again. A failure leaves nothing behind: no zip, no partial tree, no dir this fetch made."""
    mirrors = tuple(mirrors)
    if not allow_http and any(m.lower().startswith("http://") for m in mirrors):
        raise UsageError(
            f"{mirrors[0]} is plain http (the official Tiny-ImageNet site has no https): pass --allow-http "
            "(the zip is MD5-checked and its tree validated either way)"
        )
    check_mirrors(mirrors, allow_http)
    target = Path(data_dir) / REAL
    final = target / TREE
    if final.is_dir():
        try:
            read_tree(final, synthetic=False)
        except KitError as err:
            raise KitError(f"{final} is there but not a valid tree ({err}); delete it, then fetch again") from None
        return [final]
    made = missing_parents(target)  # innermost first: what a failure takes away again
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise KitError(f"cannot create {target}: {err.strerror}; pass a writable --data-dir") from None
    zip_path: Path | None = None
    unpack: Path | None = None
    try:
        if not os.access(target, os.W_OK | os.X_OK):
            raise KitError(f"cannot write into {target} (permission denied or read-only); pass a writable --data-dir")
        urls = [m.rstrip("/") + "/" + ARCHIVE for m in mirrors]
        zip_path = download(urls, target, ARCHIVE, f"md5:{ARCHIVE_MD5}", timeout_s, progress, dataset=REAL)
        unpack = Path(tempfile.mkdtemp(prefix=f".{TREE}.", suffix=".unpack", dir=target))
        extract_zip(zip_path, unpack)
        if not (unpack / TREE).is_dir():
            raise KitError(f"{ARCHIVE}: holds no {TREE}/ at its top")
        read_tree(unpack / TREE, synthetic=False)
        try:
            os.rename(unpack / TREE, final)
        except OSError as err:
            raise KitError(f"cannot move the unpacked tree to {final}: {err.strerror}") from None
        return [final]
    finally:
        if zip_path is not None:
            zip_path.unlink(missing_ok=True)
        if unpack is not None:
            shutil.rmtree(unpack, ignore_errors=True)
        if not final.is_dir():
            discard_tree(None, made)


# ---- what a cell trains on ----------------------------------------------------------------------

# cell parameter -> write_synthetic argument, for a synthetic tree other than the default (unused when the real tree is)
SYNTHETIC_PARAMS = {
    "synthetic_classes": "n_classes",
    "synthetic_train_per_class": "n_train_per_class",
    "synthetic_val_per_class": "n_val_per_class",
}


def _hint(root: Path) -> str:
    return f"fetch it: {fetch_hint(REAL, root)} with --allow-http (the official site is http only)"


FAMILY = Family(REAL, SYNTHETIC, SYNTHETIC_VERSION, lambda d: d / REAL / TREE, read_tree, write_synthetic, _hint)


def cached_synthetic() -> list[Path]:
    """The synthetic trees runs generated into the cache dir (bench.data.cached)."""
    return cached_trees(FAMILY)


def load_index(params: dict, data_dir: str | os.PathLike | None) -> ImageIndex:
    kw = {arg: int(params[p]) for p, arg in SYNTHETIC_PARAMS.items() if params.get(p) is not None}
    return select_cached(FAMILY, params.get("dataset", "auto"), data_dir, kw)


def resolve(params: dict, data_dir: str | os.PathLike | None) -> dict:
    """The data identity a cell records: {'dataset': 'tinyimagenet' | 'tinyimagenet-synthetic'
    (never 'auto'), 'dataset_sha256': the index checksum}, so other data is another cell."""
    ix = load_index(params, data_dir)
    return {"dataset": ix.name, "dataset_sha256": ix.checksum}


def load_for_cell(params: dict, data_dir: str | os.PathLike | None) -> ImageIndex:
    """The cell's index; a checksum other than the cell's dataset_sha256 (when set) is an error."""
    return check_checksum(load_index(params, data_dir), params.get("dataset_sha256"))


def real_dir(data_dir: str | os.PathLike | None) -> Path:
    """Where the real tree lives: <data dir>/tinyimagenet/tiny-imagenet-200/."""
    return resolve_data_dir(data_dir) / REAL / TREE
