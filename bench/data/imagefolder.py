"""ImageFolder trees (torchvision's layout), for the profile study's cats vs dogs.

Layout: <root>/<split>/<class>/**/<image>, splits train/ and val/. Classes are the sorted dir
names under train/ (label i = the i-th), as torchvision.datasets.ImageFolder orders them; hidden
dirs (.ipynb_checkpoints) are not classes. Images: the extensions ImageFolder reads (.jpg .jpeg
.png .ppm .bmp .pgm .tif .tiff .webp, any case); other files (Thumbs.db, .DS_Store, macOS's ._x.jpg)
are skipped and counted. No val/: a seeded stratified split of train/ (VAL_FRACTION of each class,
seed SPLIT_SEED), recorded in the index (`split`) and covered by its checksum.

Real data: <data dir>/catsdogs/ in this layout. There is no official archive with a published
checksum, so there is no fetcher: put the Kaggle "Dogs vs. Cats" or Microsoft "PetImages" pictures
there yourself, e.g. catsdogs/train/cat/*.jpg and catsdogs/train/dog/*.jpg (Kaggle's train.zip names
the class in the file name, cat.0.jpg: sort them into the two dirs; PetImages/Cat and PetImages/Dog
become train/cat and train/dog), plus val/cat and val/dog if you hold a split. A few files in the
Microsoft download are empty or not images: the reader names them when indexing (every file's
header is read once then; what only a full decode finds, when decoded); delete them.
Links: a link to a dir is followed once (torchvision follows them too); a link back to a dir
already walked (a loop such as train/cat/loop -> ..) or a second way to the same dir is an error
naming it, and so is an image or dir that really lives in another class's dir: an image's label
is always that of the class dir it really lives in.
Synthetic: <root>/catsdogs-synthetic/{train,val}/{cat,dog}/*.jpg, real JPEGs (write_synthetic).
`auto` (the default) takes the real tree when the data dir holds one, else the synthetic tree
from the cache dir (images.cache_dir).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.core.errors import KitError
from bench.data import resolve_data_dir
from bench.data.images import (
    AS_GIVEN,
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
    new_tree,
    publish_tree,
    scan_images,
    select_cached,
    torch_dataset,
    write_jpeg,
)

REAL = "catsdogs"
SYNTHETIC = "catsdogs-synthetic"
VAL_FRACTION = 0.2  # of each class, when the tree has no val/
SPLIT_SEED = 0

__all__ = ["load_image", "read_folder", "write_synthetic", "resolve", "load_for_cell", "dataset"]


def _class_dirs(d: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(d) if e.is_dir() and not e.name.startswith("."))


def _split_entries(d: Path, classes: list[str], walk: TreeWalk) -> tuple[list[Entry], int]:
    """Every image under D/<class>/ as (path relative to the tree, label, size); an empty class is an error."""
    entries, skipped = [], 0
    for label, c in enumerate(classes):
        files, n_skipped = scan_images(d / c, recursive=True, walk=walk, label=c)
        if not files:
            other = f"; {n_skipped} other files skipped" if n_skipped else ""
            raise KitError(f"{d / c}: no images (class {c}{other})")
        entries += [(f"{d.name}/{c}/{rel}", label, size) for rel, size in files]
        skipped += n_skipped
    return entries, skipped


def stratified_split(entries: list[Entry], n_classes: int, fraction: float, seed: int) -> tuple[list[Entry], list[Entry]]:
    """(train, val): of each class's entries (sorted by path), a seeded random FRACTION (at least
    one, and never all of a class of two or more) goes to val."""
    if not 0 < fraction < 1:
        raise KitError(f"val fraction must be between 0 and 1, not {fraction}")
    train: list[Entry] = []
    val: list[Entry] = []
    for c in range(n_classes):
        mine = sorted(e for e in entries if e[1] == c)
        n_val = min(max(1, round(fraction * len(mine))), len(mine) - 1)
        picked = set(np.random.default_rng([seed, c]).permutation(len(mine))[:n_val].tolist())
        for i, e in enumerate(mine):
            (val if i in picked else train).append(e)
    return train, val


def read_folder(
    root: str | os.PathLike, name: str | None = None, val_fraction: float = VAL_FRACTION, split_seed: int = SPLIT_SEED
) -> ImageIndex:
    """Index an ImageFolder tree: train and val paths with int64 labels. NAME: the dataset's name,
    default the dir's name (a name ending in -synthetic marks a generated tree). Each way the tree
    can be malformed is a one-line KitError naming the dir or file; pixels are checked when decoded."""
    root = Path(root)
    if not root.is_dir():
        raise KitError(f"{root}: no such dir (expected an ImageFolder tree: train/<class>/<images>)")
    train_dir, val_dir = root / "train", root / "val"
    if not train_dir.is_dir():
        raise KitError(f"{train_dir}: missing; an ImageFolder tree has train/<class>/<images> (and val/<class>/...)")
    classes = _class_dirs(train_dir)
    if not classes:
        raise KitError(f"{train_dir}: no class dirs (expected train/<class>/<images>)")
    walk = TreeWalk()  # one walk for the whole tree: each dir entered once, class dirs known up front
    split_dirs = [train_dir]
    if val_dir.is_dir():
        val_classes = _class_dirs(val_dir)
        if val_classes != classes:
            raise KitError(f"{val_dir}: classes {', '.join(val_classes) or 'none'} differ from train/'s {', '.join(classes)}")
        split_dirs.append(val_dir)
    for sd in split_dirs:
        for c in classes:
            walk.add_class(sd / c, c)
    train, skipped = _split_entries(train_dir, classes, walk)
    if val_dir.is_dir():
        val, skipped_val = _split_entries(val_dir, classes, walk)
        skipped += skipped_val
        split = AS_GIVEN
    else:
        train, val = stratified_split(train, len(classes), val_fraction, split_seed)
        if not val:
            raise KitError(f"{train_dir}: too few images to split a val set off (no val/ dir; one image a class)")
        split = f"no val/: val = a seeded stratified {val_fraction:.0%} of train/ (seed {split_seed})"
    name = name or root.name
    return make_index(
        name, not name.endswith("-synthetic"), root, classes, train, val, image_size=None, skipped=skipped, split=split
    )


class ImageFolderDataset(ImageDataset):
    """Items (uint8 tensor (3,H,W), int label); see ImageDataset."""


def dataset(
    index: ImageIndex, split: str = "train", size: int | None = None, transform: Callable | None = None
) -> ImageFolderDataset:
    """A torch Dataset over SPLIT of INDEX (torch imported here, not at module import). The images
    vary in size: pass SIZE (shorter side resized, centre crop; images.load_image) or a TRANSFORM
    that gives every item one shape before a DataLoader batches them."""
    ds = torch_dataset(index, split, size=size, transform=transform, cls=ImageFolderDataset)
    assert isinstance(ds, ImageFolderDataset)
    return ds


# ---- the synthetic twin -------------------------------------------------------------------------

SYNTHETIC_VERSION = (
    2  # bump when write_synthetic's output (its files or their CONTENT list) changes: cached trees keyed by it are then remade
)
GRAY_FRACTION = 0.02  # share of images written as 1-channel JPEGs (the real sets hold a few)
NOISE_SD = 16.0  # Gaussian pixel noise, 0..255 units


def class_style(i: int, n: int) -> tuple[float, float, float]:
    """(hue centre 0..1, grating angle centre deg, frequency centre cycles/px) of class I of N:
    neighbouring classes differ a little in each (hue by 0.1, angle by 180/N deg, frequency by
    0.02 cycles/px), and the per-image draws (_picture) overlap, so no single cue separates them."""
    return (0.05 + 0.1 * i) % 1.0, (45.0 + 180.0 * i / n) % 180.0, 0.05 + 0.02 * (i % 3)


def _picture(rng: np.random.Generator, style: tuple[float, float, float], size: int):
    """A picture of a class: (h,w,3) with h and w each 0.75..1.25 x SIZE, as the real photos vary;
    hue +-0.12, angle +-60 deg, frequency x 0.75..1.25 around the class's style."""
    hue, angle, freq = style
    h, w = (int(v) for v in rng.integers(round(0.75 * size), round(1.25 * size) + 1, 2))
    return grating_image(
        rng, h, w, hue + rng.uniform(-0.12, 0.12), angle + rng.uniform(-60, 60), freq * rng.uniform(0.75, 1.25), NOISE_SD
    )[0]


def write_synthetic(
    root: str | os.PathLike,
    classes: Sequence[str] = ("cat", "dog"),
    n_train_per_class: int = 100,
    n_val_per_class: int = 25,
    size: int = 160,
    seed: int = 0,
    exist_ok: bool = False,
) -> Path:
    """Write ROOT/catsdogs-synthetic/{train,val}/<class>/<class>.<k>.jpg, real JPEGs of about
    SIZE x SIZE px (each side 0.75..1.25 x SIZE), deterministic in its arguments; returns the tree.
    The classes differ in colour, stripe orientation and stripe width, with overlapping draws and
    pixel noise, so a small CNN learns them well above chance. Written into a temp dir and renamed:
    a failure leaves nothing. Defaults: 2 x (100 + 25) = 250 JPEGs of about 160x160 (about 2 MB)."""
    classes = tuple(classes)
    if len(classes) < 2 or len(set(classes)) != len(classes) or any(not c or c.startswith(".") or "/" in c for c in classes):
        raise KitError(f"need two or more distinct class names usable as dir names, not {classes!r}")
    if n_train_per_class < 1 or n_val_per_class < 1 or size < 8:
        raise KitError(
            f"need n_train_per_class >= 1, n_val_per_class >= 1 and size >= 8 px "
            f"(got {n_train_per_class}, {n_val_per_class}, {size})"
        )
    final = Path(root) / SYNTHETIC
    started = new_tree(final, exist_ok)
    if started is None:
        return final
    tmp, made = started
    try:
        for i, c in enumerate(classes):
            style = class_style(i, len(classes))
            for s, (split, n) in enumerate((("train", n_train_per_class), ("val", n_val_per_class))):
                d = tmp / split / c
                d.mkdir(parents=True)
                rng = np.random.default_rng([seed, s, i])
                for k in range(n):
                    write_jpeg(d / f"{c}.{k}.jpg", _picture(rng, style, size), gray=bool(rng.random() < GRAY_FRACTION))
        publish_tree(tmp, final)
    except BaseException:
        discard_tree(tmp, made)
        raise
    return final


# ---- what a cell trains on ----------------------------------------------------------------------

# cell parameter -> write_synthetic argument, for a synthetic tree other than the default (unused when the real tree is)
SYNTHETIC_PARAMS = {"synthetic_train_per_class": "n_train_per_class", "synthetic_val_per_class": "n_val_per_class"}


def _hint(root: Path) -> str:
    return (
        f"put the cats-vs-dogs images in {root / REAL}/ as train/<class>/*.jpg (and val/<class>/); "
        "there is no fetch (no official archive with a checksum)"
    )


FAMILY = Family(REAL, SYNTHETIC, SYNTHETIC_VERSION, lambda d: d / REAL, read_folder, write_synthetic, _hint)


def cached_synthetic() -> list[Path]:
    """The synthetic trees runs generated into the cache dir (bench.data.cached)."""
    return cached_trees(FAMILY)


def load_index(params: dict, data_dir: str | os.PathLike | None) -> ImageIndex:
    kw = {arg: int(params[p]) for p, arg in SYNTHETIC_PARAMS.items() if params.get(p) is not None}
    return select_cached(FAMILY, params.get("dataset", "auto"), data_dir, kw)


def resolve(params: dict, data_dir: str | os.PathLike | None) -> dict:
    """The data identity a cell records: {'dataset': 'catsdogs' | 'catsdogs-synthetic' (never
    'auto'), 'dataset_sha256': the index checksum}, so other data is another cell."""
    ix = load_index(params, data_dir)
    return {"dataset": ix.name, "dataset_sha256": ix.checksum}


def load_for_cell(params: dict, data_dir: str | os.PathLike | None) -> ImageIndex:
    """The cell's index; a checksum other than the cell's dataset_sha256 (when set) is an error."""
    return check_checksum(load_index(params, data_dir), params.get("dataset_sha256"))


def real_dir(data_dir: str | os.PathLike | None) -> Path:
    """Where the real tree lives: <data dir>/catsdogs/."""
    return resolve_data_dir(data_dir) / REAL
