"""Tiny-ImageNet and ImageFolder (cats vs dogs) trees: synthetic round trips in the official
layouts, every malformed tree as a one-line KitError naming the file, the val labels, the
real/synthetic/cached choice, and the zip fetch against a local HTTP server."""

import functools
import hashlib
import http.server
import os
import pickle
import stat
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.core.errors import KitError
from bench.data import PLACED, SYNTHESIZERS, fetch_dataset, imagefolder, images, present, synthesize_dataset, tinyimagenet
from bench.data.images import cache_dir, load_image

ROOT = Path(__file__).resolve().parent.parent
SMALL = dict(n_classes=3, n_train_per_class=2, n_val_per_class=2, n_test=2, size=16)  # 3x2 + 6 + 2 = 14 JPEGs
SMALL_CD = dict(n_train_per_class=4, n_val_per_class=2, size=24)  # 2x(4+2) = 12 JPEGs


def tiny(root: Path, **kw) -> Path:
    return tinyimagenet.write_synthetic(root, **{**SMALL, **kw})


def catsdogs(root: Path, **kw) -> Path:
    return imagefolder.write_synthetic(root, **{**SMALL_CD, **kw})


def one_line_naming(err: pytest.ExceptionInfo, *parts: str) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    for p in parts:
        assert str(p) in msg, msg
    return msg


@pytest.fixture
def iso(tmp_path, monkeypatch):
    """No data dir named, ./data absent, generated trees cached under tmp_path/cache, no memo."""
    monkeypatch.chdir(tmp_path)
    for env in ("KIT_DATA_DIR", "KIT_DEFAULT_DATA_DIR", "KIT_RUNTIME"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "_MEMO", {})
    return tmp_path


# ---- Tiny-ImageNet: the synthetic tree in the official layout ------------------------------------


def test_synthetic_tiny_imagenet_has_the_official_layout(tmp_path):
    tree = tiny(tmp_path)
    assert tree == tmp_path / "tinyimagenet-synthetic" / "tiny-imagenet-200"
    assert sorted(p.name for p in tree.parent.iterdir()) == ["tiny-imagenet-200", "tiny-imagenet-200.sha256"]  # no temp dir left
    assert sorted(p.name for p in tree.iterdir()) == ["test", "train", "val", "wnids.txt", "words.txt"]
    wnids = (tree / "wnids.txt").read_text().split()
    assert len(wnids) == 3 and all(w.startswith("n") and len(w) == 9 and w[1:].isdigit() for w in wnids)
    assert [line.split("\t")[0] for line in (tree / "words.txt").read_text().splitlines()] == wnids
    for w in wnids:
        assert sorted(p.name for p in (tree / "train" / w).iterdir()) == sorted([f"{w}_boxes.txt", "images"])
        assert sorted(p.name for p in (tree / "train" / w / "images").iterdir()) == [f"{w}_0.JPEG", f"{w}_1.JPEG"]
        boxes = [line.split("\t") for line in (tree / "train" / w / f"{w}_boxes.txt").read_text().splitlines()]
        assert [b[0] for b in boxes] == [f"{w}_0.JPEG", f"{w}_1.JPEG"] and all(len(b) == 5 for b in boxes)
    ann = [line.split("\t") for line in (tree / "val" / "val_annotations.txt").read_text().splitlines()]
    assert [a[0] for a in ann] == [f"val_{k}.JPEG" for k in range(6)] and all(len(a) == 6 and a[1] in wnids for a in ann)
    assert sorted(p.name for p in (tree / "val" / "images").iterdir()) == sorted(a[0] for a in ann)
    assert sorted(p.name for p in (tree / "test" / "images").iterdir()) == ["test_0.JPEG", "test_1.JPEG"]
    for p in tree.rglob("*.JPEG"):
        with Image.open(p) as im:
            assert im.format == "JPEG" and im.size == (16, 16) and im.mode in ("RGB", "L")


def test_read_tree_labels_follow_wnids_and_val_annotations(tmp_path):
    tree = tiny(tmp_path)
    ix = tinyimagenet.read_tree(tree)
    wnids = (tree / "wnids.txt").read_text().split()
    assert (ix.name, ix.real, ix.n_classes, ix.image_size, ix.classes) == ("tinyimagenet-synthetic", False, 3, 16, tuple(wnids))
    assert ix.train_labels.dtype == np.int64 and ix.val_labels.dtype == np.int64
    assert [wnids[y] for y in ix.train_labels] == [f.split("/")[1] for f in ix.train_files]
    ann = dict(line.split("\t")[:2] for line in (tree / "val" / "val_annotations.txt").read_text().splitlines())
    assert [wnids[y] for y in ix.val_labels] == [ann[f.rsplit("/", 1)[1]] for f in ix.val_files]
    d = ix.describe()
    assert (d["n_train"], d["n_val"], d["n_test"], d["kind"], d["sha256"]) == (6, 6, 2, "synthetic", ix.checksum)
    # the label order is wnids.txt's: reversing it reverses every label
    (tree / "wnids.txt").write_text("".join(w + "\n" for w in reversed(wnids)))
    again = tinyimagenet.read_tree(tree)
    assert list(again.train_labels) == [2 - y for y in ix.train_labels] and again.checksum != ix.checksum
    # val labels come from val_annotations.txt, line by line
    lines = (tree / "val" / "val_annotations.txt").read_text().splitlines()
    lines[0] = "\t".join([lines[0].split("\t")[0], wnids[0], "0", "0", "1", "1"])
    (tree / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    assert tinyimagenet.read_tree(tree).val_labels[0] == 2  # wnids[0] is the last line of the reversed list


def test_synthetic_trees_are_deterministic(tmp_path):
    a, b = tiny(tmp_path / "a"), tiny(tmp_path / "b")
    ia, ib = tinyimagenet.read_tree(a), tinyimagenet.read_tree(b)
    assert ia.checksum == ib.checksum and len(ia.checksum) == 64
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in ia.train_files + ia.val_files)
    assert tinyimagenet.read_tree(tiny(tmp_path / "c", seed=1)).checksum != ia.checksum
    # the checksum is of the tree, not of where it sits
    a.parent.rename(tmp_path / "moved")
    assert tinyimagenet.read_tree(tmp_path / "moved" / "tiny-imagenet-200", synthetic=True).checksum == ia.checksum


def test_load_image_gives_rgb_uint8_even_for_grayscale(tmp_path):
    p = tmp_path / "gray.JPEG"
    Image.fromarray(np.full((10, 14), 77, np.uint8)).save(p, format="JPEG")
    x = load_image(p)
    assert x.shape == (3, 10, 14) and x.dtype == np.uint8 and x.flags.c_contiguous and abs(int(x[0, 5, 5]) - 77) <= 2
    assert load_image(p, 8).shape == (3, 8, 8)  # shorter side to 8, centre crop


def test_write_synthetic_refuses_an_existing_tree_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    tree = tiny(tmp_path)
    with pytest.raises(KitError, match="exists: delete it"):
        tiny(tmp_path)
    assert tiny(tmp_path, exist_ok=True) == tree
    calls = []

    def broken(path, img, gray=False):
        calls.append(path)
        if len(calls) > 3:
            raise OSError(28, "No space left on device")
        images.write_jpeg(path, img, gray)

    monkeypatch.setattr(tinyimagenet, "write_jpeg", broken)
    with pytest.raises(OSError):
        tiny(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()


# ---- Tiny-ImageNet: every malformed tree is one line naming the file ----------------------------


def _corrupt_first_train_jpeg(tree):
    p = next(iter(sorted((tree / "train").glob("*/images/*.JPEG"))))
    p.write_bytes(p.read_bytes()[:40])  # truncated: header survives, pixels do not
    return p


def _break(tree: Path, how: str) -> str:
    """Damage TREE one way; returns what the error must name."""
    wnids = (tree / "wnids.txt").read_text().split()
    ann = tree / "val" / "val_annotations.txt"
    if how == "no wnids.txt":
        (tree / "wnids.txt").unlink()
        return str(tree / "wnids.txt")
    if how == "duplicate wnid":
        (tree / "wnids.txt").write_text("\n".join([*wnids, wnids[1]]) + "\n")
        return f"wnid {wnids[1]} listed twice (lines 2 and 4)"
    if how == "class dir missing":
        os.rename(tree / "train" / wnids[2], tree / "elsewhere")
        return str(tree / "train" / wnids[2])
    if how == "class dir not in wnids.txt":
        (tree / "train" / "n12345678" / "images").mkdir(parents=True)
        return str(tree / "train" / "n12345678")
    if how == "unknown wnid in val":
        ann.write_text(ann.read_text().replace(wnids[0], "n00000042", 1))
        return "n00000042 is not in wnids.txt"
    if how == "val file missing":
        (tree / "val" / "images" / "val_3.JPEG").unlink()
        return str(tree / "val" / "images" / "val_3.JPEG")
    if how == "val image without a label":
        (tree / "val" / "images" / "val_9.JPEG").write_bytes((tree / "val" / "images" / "val_0.JPEG").read_bytes())
        return str(tree / "val" / "images" / "val_9.JPEG")
    if how == "no val_annotations.txt":
        ann.unlink()
        return str(ann)
    if how == "empty image file":
        p = tree / "val" / "images" / "val_1.JPEG"
        p.write_bytes(b"")
        return str(p)
    if how == "corrupt first JPEG":  # read_tree decodes one image for the size
        return str(_corrupt_first_train_jpeg(tree))
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "no wnids.txt",
        "duplicate wnid",
        "class dir missing",
        "class dir not in wnids.txt",
        "unknown wnid in val",
        "val file missing",
        "val image without a label",
        "no val_annotations.txt",
        "empty image file",
        "corrupt first JPEG",
    ],
)
def test_malformed_tiny_imagenet_is_one_line_naming_the_file(tmp_path, how):
    tree = tiny(tmp_path)
    named = _break(tree, how)
    with pytest.raises(KitError) as err:
        tinyimagenet.read_tree(tree)
    one_line_naming(err, named)


def test_a_corrupt_jpeg_is_named_when_decoded(tmp_path):
    tree = tiny(tmp_path)
    ix = tinyimagenet.read_tree(tree)
    bad = tree / ix.val_files[2]
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG\n at all" + bytes(200))
    with pytest.raises(KitError) as err:
        load_image(bad)
    one_line_naming(err, bad, "cannot decode image")
    truncated = tree / ix.val_files[3]
    truncated.write_bytes(truncated.read_bytes()[:-60])
    with pytest.raises(KitError) as err:
        tinyimagenet.dataset(ix, "val")[3]
    one_line_naming(err, truncated)


# ---- the torch Dataset ----------------------------------------------------------------------------


def test_torch_dataset_items_transforms_pickling_and_workers(tmp_path):
    torch = pytest.importorskip("torch")
    ix = tinyimagenet.read_tree(tiny(tmp_path))
    ds = tinyimagenet.dataset(ix, "train")
    x, y = ds[3]
    assert len(ds) == 6 and x.dtype == torch.uint8 and tuple(x.shape) == (3, 16, 16) and y == ix.train_labels[3]
    scaled = tinyimagenet.dataset(ix, "val", transform=lambda t: t.float() / 255)
    assert scaled[0][0].dtype == torch.float32 and float(scaled[0][0].max()) <= 1.0
    assert len(pickle.loads(pickle.dumps(ds))) == 6  # what spawn/forkserver workers need
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3, 16, 16), (2, 3, 16, 16)]
    assert torch.equal(torch.cat([b[1] for b in batches]), torch.from_numpy(ix.train_labels))
    with pytest.raises(KitError, match="unknown split 'test'"):
        tinyimagenet.dataset(ix, "test")


def test_modules_import_no_torch():
    code = "import sys, bench.data.tinyimagenet, bench.data.imagefolder; assert 'torch' not in sys.modules, 'torch imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


# ---- ImageFolder: cats vs dogs ----------------------------------------------------------------------


def test_synthetic_catsdogs_layout_and_labels(tmp_path):
    tree = catsdogs(tmp_path)
    assert tree == tmp_path / "catsdogs-synthetic"
    assert sorted(str(p.relative_to(tree)) for p in tree.glob("*/*")) == ["train/cat", "train/dog", "val/cat", "val/dog"]
    assert sorted(p.name for p in (tree / "train" / "dog").iterdir()) == [f"dog.{k}.jpg" for k in range(4)]
    sizes = set()
    for p in tree.rglob("*.jpg"):
        with Image.open(p) as im:
            assert im.format == "JPEG"
            sizes.add(im.size)
            assert all(18 <= s <= 30 for s in im.size)  # 0.75..1.25 x 24 px
    assert len(sizes) > 3  # the sizes vary, as real photos do
    ix = imagefolder.read_folder(tree)
    assert (ix.name, ix.real, ix.classes, ix.image_size) == ("catsdogs-synthetic", False, ("cat", "dog"), None)
    assert [ix.classes[y] for y in ix.val_labels] == [f.split("/")[1] for f in ix.val_files] and len(ix.val_files) == 4
    assert ix.checksum == imagefolder.read_folder(catsdogs(tmp_path / "again")).checksum
    torch = pytest.importorskip("torch")
    x, y = imagefolder.dataset(ix, "train", size=20)[5]
    assert tuple(x.shape) == (3, 20, 20) and x.dtype == torch.uint8 and y == 1


def test_no_val_dir_is_a_seeded_stratified_split_recorded(tmp_path):
    tree = catsdogs(tmp_path, n_train_per_class=10)
    import shutil

    shutil.rmtree(tree / "val")
    ix = imagefolder.read_folder(tree)
    assert "seeded stratified 20% of train/ (seed 0)" in ix.split and ix.describe()["split"] == ix.split
    assert np.bincount(ix.val_labels).tolist() == [2, 2] and np.bincount(ix.train_labels).tolist() == [8, 8]
    assert not set(ix.val_files) & set(ix.train_files) and all(f.startswith("train/") for f in ix.val_files)
    assert imagefolder.read_folder(tree).val_files == ix.val_files  # seeded
    other = imagefolder.read_folder(tree, split_seed=1)
    assert other.val_files != ix.val_files and other.checksum != ix.checksum  # the split is in the checksum


def test_imagefolder_skips_and_counts_non_image_files(tmp_path):
    tree = catsdogs(tmp_path)
    (tree / "train" / "cat" / "Thumbs.db").write_bytes(b"x")
    (tree / "train" / "dog" / ".DS_Store").write_bytes(b"x")
    (tree / "val" / "dog" / "notes.txt").write_text("x")
    (tree / "train" / ".ipynb_checkpoints").mkdir()  # a hidden dir is not a class
    ix = imagefolder.read_folder(tree)
    assert ix.skipped == 3 and ix.classes == ("cat", "dog") and len(ix.train_files) == 8
    assert ix.checksum == imagefolder.read_folder(catsdogs(tmp_path / "clean")).checksum


def _break_folder(tree: Path, how: str) -> str:
    import shutil

    if how == "no train dir":
        shutil.rmtree(tree / "train")
        return str(tree / "train")
    if how == "no class dirs":
        for c in ("cat", "dog"):
            shutil.rmtree(tree / "train" / c)
        return str(tree / "train")
    if how == "empty class":
        for p in (tree / "train" / "dog").iterdir():
            p.unlink()
        (tree / "train" / "dog" / "readme.txt").write_text("no pictures")
        return f"{tree / 'train' / 'dog'}: no images (class dog; 1 other files skipped)"
    if how == "val classes differ":
        (tree / "val" / "dog").rename(tree / "val" / "horse")
        return str(tree / "val")
    if how == "empty image file":
        (tree / "train" / "cat" / "cat.2.jpg").write_bytes(b"")
        return str(tree / "train" / "cat" / "cat.2.jpg")
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["no train dir", "no class dirs", "empty class", "val classes differ", "empty image file"])
def test_malformed_imagefolder_is_one_line_naming_the_dir(tmp_path, how):
    tree = catsdogs(tmp_path)
    named = _break_folder(tree, how)
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line_naming(err, named)


def test_unreadable_imagefolder_image_is_named_when_decoded(tmp_path):
    tree = catsdogs(tmp_path)
    bad = tree / "train" / "dog" / "dog.1.jpg"
    good = bad.read_bytes()
    bad.write_text("<html>404 not found</html>")
    with pytest.raises(KitError) as err:  # indexing reads every header: no image at all is named there
        imagefolder.read_folder(tree)
    one_line_naming(err, bad, "not a readable image")
    bad.write_bytes(good[:-60])  # a header that reads, pixels cut short: found when decoded
    ix = imagefolder.read_folder(tree)
    with pytest.raises(KitError) as err:
        imagefolder.dataset(ix, "train", size=16)[ix.train_files.index("train/dog/dog.1.jpg")]
    one_line_naming(err, bad, "cannot decode image")


# ---- real, synthetic or cached: what a cell trains on -----------------------------------------------

FAMILIES = {
    "tinyimagenet": (tinyimagenet, dict(synthetic_classes=3, synthetic_train_per_class=2, synthetic_val_per_class=1)),
    "catsdogs": (imagefolder, dict(synthetic_train_per_class=3, synthetic_val_per_class=1)),
}


def _place_real(name: str, data: Path, tmp: Path) -> Path:
    """A (synthetic) tree moved to where the real one lives: <data>/tinyimagenet/tiny-imagenet-200 or <data>/catsdogs."""
    if name == "tinyimagenet":
        src, dest = tiny(tmp / "src"), data / "tinyimagenet" / "tiny-imagenet-200"
    else:
        src, dest = catsdogs(tmp / "src"), data / "catsdogs"
    dest.parent.mkdir(parents=True, exist_ok=True)
    src.rename(dest)
    return dest


@pytest.mark.parametrize("name", FAMILIES)
def test_auto_is_the_synthetic_tree_generated_once_into_the_cache(iso, name):
    mod, small = FAMILIES[name]
    got = mod.resolve({"dataset": "auto", **small}, None)
    assert got["dataset"] == f"{name}-synthetic" and len(got["dataset_sha256"]) == 64
    trees = list((iso / "cache" / "synthetic").iterdir())
    assert len(trees) == 1 and trees[0].name.startswith(f"{name}-synthetic-v")
    stamp = {p: p.stat().st_mtime_ns for p in trees[0].rglob("*")}
    images._MEMO.clear()
    ix = mod.load_for_cell({"dataset": f"{name}-synthetic", **small, **got}, None)  # read again, not rewritten
    assert ix.checksum == got["dataset_sha256"] and {p: p.stat().st_mtime_ns for p in trees[0].rglob("*")} == stamp
    assert not (iso / "data").exists()  # nothing is written into a data dir
    with pytest.raises(KitError, match="resolved for"):
        mod.load_for_cell({"dataset": "auto", **small, "dataset_sha256": "0" * 64}, None)


@pytest.mark.parametrize("name", FAMILIES)
def test_auto_takes_the_real_tree_when_present(iso, name):
    mod, small = FAMILIES[name]
    _place_real(name, iso / "data", iso)
    got = mod.resolve({"dataset": "auto", **small}, None)
    assert got["dataset"] == name
    ix = mod.load_for_cell({"dataset": name, **got}, iso / "data")
    assert ix.real and ix.checksum == got["dataset_sha256"] and name in present(iso / "data")
    assert not (iso / "cache").exists()


@pytest.mark.parametrize("name", FAMILIES)
def test_a_named_data_dir_without_the_real_tree_falls_back_to_synthetic_and_says_so(iso, name, monkeypatch, capsys):
    mod, small = FAMILIES[name]
    (iso / "named").mkdir()
    for data_dir in (iso / "named", None):
        if data_dir is None:
            monkeypatch.setenv("KIT_DATA_DIR", str(iso / "named"))
        got = mod.resolve({"dataset": "auto", **small}, data_dir)
        assert got["dataset"] == f"{name}-synthetic"
        said = capsys.readouterr().err
        if data_dir is not None:  # said once: the second lookup of the same dir is memoised
            assert str(iso / "named") in said and "synthetic" in said
        with pytest.raises(KitError) as err:  # asking for the real data by name is still an error
            mod.resolve({"dataset": name, **small}, data_dir)
        msg = one_line_naming(err, iso / "named")
        assert ("data fetch tinyimagenet" in msg) if name == "tinyimagenet" else ("there is no fetch" in msg)
    monkeypatch.delenv("KIT_DATA_DIR")
    monkeypatch.setattr(images, "_MEMO", {})  # a new process: the fallback above was memoised
    (iso / "named" / name).mkdir()  # there, but not a tree
    with pytest.raises(KitError) as err:
        mod.resolve({"dataset": "auto", **small}, iso / "named")
    one_line_naming(err, "tinyimagenet/ lacks tiny-imagenet-200/" if name == "tinyimagenet" else "train: missing")
    with pytest.raises(KitError) as err:  # asked for by name: required even in the unnamed default dir
        mod.resolve({"dataset": name}, None)
    one_line_naming(err, "does not exist")
    with pytest.raises(KitError, match="unknown dataset 'imagenet'"):
        mod.resolve({"dataset": "imagenet"}, None)


def test_cache_dir_order_and_the_tempdir_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "kit"))
    assert cache_dir() == tmp_path / "kit"
    monkeypatch.delenv("KIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cnn-bench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "cnn-bench"
    (tmp_path / "a-file").write_text("x")  # not a dir: cannot be made writable
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file" / "cache"))  # unnamed: the fallback chain goes on
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    fallback = cache_dir()
    assert fallback == tmp_path / "tmp" / f"cnn-bench-{os.getuid()}" and stat.S_IMODE(fallback.stat().st_mode) == 0o700


def test_registries_present_and_synthesize(tmp_path):
    assert {"tinyimagenet", "catsdogs"} <= set(SYNTHESIZERS) and "catsdogs" in PLACED
    tree = synthesize_dataset("tinyimagenet", tmp_path, **SMALL)
    assert tree == tmp_path / "tinyimagenet-synthetic" / "tiny-imagenet-200"
    assert synthesize_dataset("catsdogs", tmp_path, **SMALL_CD) == tmp_path / "catsdogs-synthetic"
    with pytest.raises(KitError, match="unknown dataset 'mnist' to synthesize"):
        synthesize_dataset("mnist", tmp_path)
    (tmp_path / "catsdogs").mkdir()
    assert present(tmp_path) == ["catsdogs", "catsdogs-synthetic", "tinyimagenet-synthetic"]


# ---- the zip fetch ------------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path):
    """Serves tmp_path/www on an ephemeral loopback port; yields (base URL, www dir)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", www
    httpd.shutdown()


def _serve_zip(tmp_path, www, monkeypatch, extra=(), top="tiny-imagenet-200", patch_md5=True, tree=None):
    """tiny-imagenet-200.zip of a small synthetic tree (plus EXTRA members) in WWW; the pinned MD5 becomes its MD5."""
    tree = tree or tiny(tmp_path / "src")
    out = www / "tiny-imagenet-200.zip"
    with zipfile.ZipFile(out, "w") as zf:
        for p in sorted(tree.rglob("*")):
            arc = f"{top}/{p.relative_to(tree).as_posix()}"
            zf.writestr(arc + "/", b"") if p.is_dir() else zf.write(p, arc)
        for info, data in extra:
            zf.writestr(info, data)
    if patch_md5:
        monkeypatch.setattr(tinyimagenet, "ARCHIVE_MD5", hashlib.md5(out.read_bytes()).hexdigest())
    return tree


def test_fetch_unpacks_validates_and_renames(server, tmp_path, monkeypatch):
    url, www = server
    src = _serve_zip(tmp_path, www, monkeypatch)
    paths = fetch_dataset("tinyimagenet", tmp_path / "data", mirrors=(url,), allow_http=True)  # through FETCHERS
    final = tmp_path / "data" / "tinyimagenet" / "tiny-imagenet-200"
    assert paths == [final] and sorted(p.name for p in final.parent.iterdir()) == ["tiny-imagenet-200"]
    ix = tinyimagenet.read_tree(final)
    assert ix.name == "tinyimagenet" and ix.real and ix.checksum == tinyimagenet.read_tree(src).checksum
    (www / "tiny-imagenet-200.zip").unlink()  # a valid tree there is not fetched again
    assert tinyimagenet.fetch_tinyimagenet(tmp_path / "data", mirrors=(url,), allow_http=True) == [final]


def _left(tmp_path) -> list[str]:
    data = tmp_path / "data"
    return sorted(str(p.relative_to(tmp_path)) for p in data.rglob("*")) if data.exists() else []


def _symlink_member():
    info = zipfile.ZipInfo("tiny-imagenet-200/link")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, "/etc/passwd"


@pytest.mark.parametrize(
    "case, extra, patch_md5, expect",
    [
        ("md5 mismatch", (), False, "MD5 mismatch"),
        ("dotdot", (("tiny-imagenet-200/../../evil", b"x"),), True, "has `..` in its path"),
        ("absolute", (("/tmp/cnn-bench-test-evil", b"x"),), True, "has an absolute path"),
        ("symlink", (_symlink_member(),), True, "is a symlink"),
    ],
)
def test_a_bad_archive_leaves_nothing_behind(server, tmp_path, monkeypatch, case, extra, patch_md5, expect):
    url, www = server
    _serve_zip(tmp_path, www, monkeypatch, extra=extra, patch_md5=patch_md5)
    with pytest.raises(KitError) as err:
        tinyimagenet.fetch_tinyimagenet(tmp_path / "data", mirrors=(url,), allow_http=True)
    one_line_naming(err, expect)
    assert _left(tmp_path) == [] and not (tmp_path / "data").exists()
    assert not (tmp_path / "evil").exists() and not Path("/tmp/cnn-bench-test-evil").exists()


def test_an_archive_without_a_valid_tree_leaves_nothing_and_keeps_existing_dirs(server, tmp_path, monkeypatch):
    url, www = server
    tree = tiny(tmp_path / "src")
    (tree / "wnids.txt").unlink()
    _serve_zip(tmp_path, www, monkeypatch, tree=tree)
    (tmp_path / "data" / "tinyimagenet").mkdir(parents=True)  # there before: stays
    with pytest.raises(KitError) as err:
        tinyimagenet.fetch_tinyimagenet(tmp_path / "data", mirrors=(url,), allow_http=True)
    one_line_naming(err, "wnids.txt: missing")
    assert _left(tmp_path) == ["data/tinyimagenet"]
    _serve_zip(tmp_path, www, monkeypatch, top="other-name", tree=tiny(tmp_path / "src2"))
    with pytest.raises(KitError, match="holds no tiny-imagenet-200/ at its top"):
        tinyimagenet.fetch_tinyimagenet(tmp_path / "data", mirrors=(url,), allow_http=True)
    assert _left(tmp_path) == ["data/tinyimagenet"]


def test_fetch_needs_allow_http_and_refuses_a_broken_present_tree(tmp_path):
    with pytest.raises(KitError) as err:
        tinyimagenet.fetch_tinyimagenet(tmp_path / "data")
    one_line_naming(err, "--allow-http")
    assert not (tmp_path / "data").exists()
    final = tmp_path / "data" / "tinyimagenet" / "tiny-imagenet-200"
    final.mkdir(parents=True)
    with pytest.raises(KitError) as err:
        tinyimagenet.fetch_tinyimagenet(tmp_path / "data", mirrors=("http://127.0.0.1:9/",), allow_http=True)
    one_line_naming(err, "is there but not a valid tree", "delete it")


# ---- learnable: a small CNN does well above chance ------------------------------------------------


def _train_small_cnn(ds_train, ds_val, n_classes: int, epochs: int) -> float:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    xs = [torch.stack([ds[i][0] for i in range(len(ds))]).float() / 255 for ds in (ds_train, ds_val)]
    ys = [torch.tensor([ds[i][1] for i in range(len(ds))]) for ds in (ds_train, ds_val)]
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, n_classes),
    )  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), 3e-3)
    for _ in range(epochs):
        for b in torch.randperm(len(ys[0])).split(32):
            opt.zero_grad()
            nn.functional.cross_entropy(net(xs[0][b]), ys[0][b]).backward()
            opt.step()
    with torch.no_grad():
        return float((net(xs[1]).argmax(1) == ys[1]).float().mean())


@pytest.mark.slow  # trains two small CNNs on CPU (about a minute on 2 cores)
def test_synthetic_trees_are_learnable(tmp_path):
    ix = tinyimagenet.read_tree(tiny(tmp_path, n_classes=20, n_train_per_class=40, n_val_per_class=10, n_test=0, size=32))
    acc = _train_small_cnn(tinyimagenet.dataset(ix, "train"), tinyimagenet.dataset(ix, "val"), 20, 8)
    assert acc > 0.3, acc  # chance is 0.05 (0.73 here, torch 2.14 CPU)
    ix = imagefolder.read_folder(catsdogs(tmp_path, n_train_per_class=150, n_val_per_class=50, size=48))
    acc = _train_small_cnn(imagefolder.dataset(ix, "train", size=48), imagefolder.dataset(ix, "val", size=48), 2, 6)
    assert acc > 0.62, acc  # chance is 0.5 (0.76 here, torch 2.14 CPU)
