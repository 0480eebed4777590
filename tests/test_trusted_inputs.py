"""Datasets and caches are untrusted input: each reproduced way they misled a run is now one line
(KitError naming the file) before any training, or is handled right.

- a symlink loop in an image tree (train/cat/loop -> ..) is refused; a link never gives an image
  another class's label;
- a file that is no image is named when the tree is indexed (its header read), not mid-training;
- 16-bit images scale to 8 bit instead of saturating at 255;
- roofline counts FLOPs and bytes at the size it trains (the tree's), not a fixed 64 px;
- a named KIT_CACHE_DIR that cannot be written is an error, never silently a temp dir;
- profile's `model` is checked up front, without importing torchvision;
- an epoch of 0 steps is an error, never an `ok` row (profile, roofline; mnist-cnn cannot run one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from bench.core.errors import KitError
from bench.core.registry import get_study
from bench.core.study import RunContext
from bench.data import imagefolder, images, tinyimagenet
from bench.data.images import cache_dir, load_image

ROOT = Path(__file__).resolve().parent.parent


def one_line(err: pytest.ExceptionInfo, *parts: object) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    for p in parts:
        assert str(p) in msg, msg
    return msg


def jpeg(path: Path, value: int, side: int = 20) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(value)
    Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path, quality=90)
    return path


def folder(root: Path, n: int = 12) -> Path:
    """An ImageFolder tree: train/cat and train/dog, N JPEGs each (no val/: a stratified split)."""
    for i, c in enumerate(("cat", "dog")):
        for k in range(n):
            jpeg(root / "train" / c / f"{c}.{k}.jpg", 100 * i + k)
    return root


@pytest.fixture
def iso(tmp_path, monkeypatch):
    """Generated trees and stamps cached under tmp_path/cache; no data dir named; no memo."""
    monkeypatch.chdir(tmp_path)
    for env in ("KIT_DATA_DIR", "KIT_DEFAULT_DATA_DIR", "KIT_RUNTIME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(images, "_MEMO", {})
    return tmp_path


# ---- 1. links: a loop is refused, a label is always the real class dir's ----------------------------


def test_a_symlink_loop_is_one_line_not_984_entries(iso):
    tree = folder(iso / "cd")
    ix = imagefolder.read_folder(tree)
    assert len(ix.train_files) + len(ix.val_files) == 24
    loop = tree / "train" / "cat" / "loop"
    loop.symlink_to("..")  # train/cat/loop -> train/: followed, it made 984 entries and 480 dogs labelled cat
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, loop, "again")


def test_a_link_never_gives_an_image_another_class_label(iso):
    tree = folder(iso / "cd")
    cat = tree / "train" / "cat"
    stray = cat / "stray.jpg"
    stray.symlink_to(tree / "train" / "dog" / "dog.0.jpg")  # a dog image under cat/
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, stray, "class dog")
    stray.unlink()
    dogs = cat / "dogs"
    dogs.symlink_to("../dog")  # a whole class under another
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, "class dog")
    dogs.unlink()
    # a link out of the tree (a pool of files) is followed once, and its images take the class dir's label
    pool = iso / "pool"
    for k in range(3):
        jpeg(pool / f"p{k}.jpg", 50 + k)
    (cat / "more").symlink_to(pool)
    ix = imagefolder.read_folder(tree)
    files = ix.train_files + ix.val_files
    labels = np.concatenate([ix.train_labels, ix.val_labels])
    assert len(files) == 27
    assert {int(lab) for f, lab in zip(files, labels) if "/more/" in f} == {ix.classes.index("cat")}
    (tree / "train" / "dog" / "more").symlink_to(pool)  # the same images under two classes: refused
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, tree / "train" / "dog" / "more", "again")


def test_tiny_imagenet_train_links_keep_their_class(iso):
    tree = tinyimagenet.write_synthetic(iso, n_classes=3, n_train_per_class=2, n_val_per_class=1, n_test=0, size=16)
    w0, w1 = tinyimagenet.read_tree(tree).classes[:2]
    stray = tree / "train" / w0 / "images" / f"{w0}_9.JPEG"
    stray.symlink_to(tree / "train" / w1 / "images" / f"{w1}_0.JPEG")
    with pytest.raises(KitError) as err:
        tinyimagenet.read_tree(tree)
    one_line(err, stray, f"class {w1}")


# ---- 2. a file that is no image: named at indexing -----------------------------------------------------


def test_a_file_that_is_no_image_is_one_line_when_indexed(iso):
    tree = folder(iso / "cd")
    for k in (3, 5):
        (tree / "train" / "dog" / f"dog.{k}.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG" + bytes(300))
    with pytest.raises(KitError) as err:  # before: indexed fine, found by a DataLoader worker mid-epoch
        imagefolder.read_folder(tree)
    one_line(err, tree / "train" / "dog" / "dog.3.jpg", "not a readable image", "1 more")
    tiny = tinyimagenet.write_synthetic(iso / "ti", n_classes=3, n_train_per_class=2, n_val_per_class=1, n_test=0, size=16)
    bad = tiny / "val" / "images" / "val_1.JPEG"
    bad.write_text("<html>404</html>")
    with pytest.raises(KitError) as err:
        tinyimagenet.read_tree(tiny)
    one_line(err, bad, "not a readable image")


def test_a_passed_header_check_is_remembered_but_never_for_changed_files(iso, monkeypatch):
    monkeypatch.setattr(images, "HEADER_STAMP_MIN_FILES", 1)  # the stamp is for big trees; make this one big
    tree = folder(iso / "cd", n=3)
    imagefolder.read_folder(tree)
    stamps = list((iso / "cache" / "image-checks").glob("*.ok"))
    assert len(stamps) == 1
    opened = []
    real_check = images._header_error
    monkeypatch.setattr(images, "_header_error", lambda p: opened.append(p) or real_check(p))
    imagefolder.read_folder(tree)
    assert opened == []  # the same files again: no header read
    victim = tree / "train" / "cat" / "cat.1.jpg"
    victim.write_bytes(b"x" * victim.stat().st_size)  # same size, other content (and mtime): checked again
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, victim, "not a readable image")


# ---- 3. 16-bit images --------------------------------------------------------------------------------


def _ramp16() -> np.ndarray:
    return (np.arange(32 * 32, dtype=np.int64).reshape(32, 32) * 64).astype(np.uint16)  # 0 .. 65472


def test_16_bit_images_scale_to_8_bit_instead_of_saturating(tmp_path):
    v = _ramp16()
    want = ((v.astype(np.int64) * 255 + 32767) // 65535).astype(np.uint8)
    png = tmp_path / "g16.png"
    Image.fromarray(v).save(png)  # a 16-bit grayscale PNG: Pillow opens it as I;16
    pgm = tmp_path / "g16.pgm"
    pgm.write_bytes(b"P5\n32 32\n65535\n" + v.astype(">u2").tobytes())  # Pillow opens it as I
    for path in (png, pgm):
        with Image.open(path) as im:
            assert im.mode in ("I;16", "I")  # what convert("RGB") clipped at 255
        x = load_image(path)
        assert x.shape == (3, 32, 32) and x.dtype == np.uint8
        assert (x == 255).mean() < 0.01, f"{path.name}: {(x == 255).mean():.1%} of pixels saturated"
        assert np.abs(x.astype(int) - want[None].astype(int)).max() <= 1
    eight = tmp_path / "g8.png"
    Image.fromarray((v >> 8).astype(np.uint8)).save(eight)  # 8-bit stays as it is
    assert np.array_equal(load_image(eight)[0], (v >> 8).astype(np.uint8))


def test_float_images_scale_by_their_range_instead_of_clipping(tmp_path):
    """A float TIFF (mode F) of 0..1, as image libraries write floats, and one of 0..4000 (a
    16-bit range): each scaled to 8 bit from its range; Pillow's convert clipped the first to
    0-1 (black) and the second to 255 (white). Not-a-number reads as 0."""
    ramp = np.linspace(0.0, 1.0, 32 * 32, dtype=np.float32).reshape(32, 32)
    cases = {"unit.tif": (ramp, np.rint(ramp * 255)), "wide.tif": (ramp * 4000, np.rint(ramp * 4000 * 255 / 65535))}
    holes = ramp.copy()
    holes[0, :4] = np.nan
    cases["nan.tif"] = (holes, np.rint(np.nan_to_num(holes) * 255))
    for name, (pixels, want) in cases.items():
        path = tmp_path / name
        Image.fromarray(pixels, mode="F").save(path)
        with Image.open(path) as im:
            assert im.mode == "F"
        x = load_image(path)
        assert x.shape == (3, 32, 32) and x.dtype == np.uint8
        assert np.abs(x[0].astype(int) - want.astype(int)).max() <= 1, name


def test_one_file_in_two_places_of_a_tree_is_one_line_when_indexed(iso):
    """The issue's form: a hard link between train/ and val/. Here: a hard link between two
    classes of train/ (one image, two labels), and a symlink to a file of the same class (one
    image counted twice): each names both paths."""
    tree = folder(iso / "cd", n=6)
    (tree / "val" / "cat").mkdir(parents=True)
    for k in range(3):
        jpeg(tree / "val" / "cat" / f"v{k}.jpg", 900 + k)
        jpeg(tree / "val" / "dog" / f"v{k}.jpg", 950 + k)
    os.link(tree / "train" / "cat" / "cat.0.jpg", tree / "train" / "dog" / "dog.extra.jpg")
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, "cat.0.jpg", "dog.extra.jpg", "one file")
    (tree / "train" / "dog" / "dog.extra.jpg").unlink()
    (tree / "train" / "cat" / "cat.again.jpg").symlink_to(tree / "train" / "cat" / "cat.1.jpg")
    with pytest.raises(KitError) as err:
        imagefolder.read_folder(tree)
    one_line(err, "cat.1.jpg", "cat.again.jpg", "one file")
    (tree / "train" / "cat" / "cat.again.jpg").unlink()
    assert len(imagefolder.read_folder(tree).files("train")) == 12


def test_a_file_changed_in_a_cached_synthetic_tree_is_one_line_when_read(iso):
    """The issue's form: an image swapped for another. Here: one keeping its size (a byte
    changed), one added, and the list beside the tree removed: each one line naming it."""
    kw = {"n_train_per_class": 3, "n_val_per_class": 2}
    ix = images.synthetic_cached(imagefolder.FAMILY, kw)
    victim = ix.root / ix.train_files[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(KitError) as err:
        images.synthetic_cached(imagefolder.FAMILY, kw)
    one_line(err, victim.name, "changed since the kit wrote", "delete")
    victim.write_bytes(bytes(data[: len(data) // 2]) + bytes([data[len(data) // 2] ^ 0xFF]) + bytes(data[len(data) // 2 + 1 :]))
    assert images.synthetic_cached(imagefolder.FAMILY, kw).checksum == ix.checksum  # restored: reads again
    jpeg(victim.parent / "planted.jpg", 7)
    with pytest.raises(KitError) as err:
        images.synthetic_cached(imagefolder.FAMILY, kw)
    one_line(err, "planted.jpg was added")
    (victim.parent / "planted.jpg").unlink()
    images.content_path(ix.root).unlink()
    with pytest.raises(KitError) as err:
        images.synthetic_cached(imagefolder.FAMILY, kw)
    one_line(err, ".sha256 beside it")


def test_an_imagefolder_tree_of_16_bit_pngs_trains_on_scaled_pixels(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841  (the dataset yields tensors)
    v = _ramp16()
    for c in ("cat", "dog"):
        for k in range(2):
            p = tmp_path / "cd" / "train" / c / f"{c}{k}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(v).save(p)
    ix = imagefolder.read_folder(tmp_path / "cd")
    x, _ = imagefolder.dataset(ix, "train", size=16)[0]
    assert float((x == 255).float().mean()) < 0.05 and 100 < float(x.float().mean()) < 155  # a ramp, not white


# ---- 4. roofline: counted at the size it trains ----------------------------------------------------------


def _fake_roofs():
    import torch

    from bench.measure.roofs import Roof, Roofs

    def roof(name, v, unit):
        return Roof(name, v, unit, 1.0, 1.0, [1.0], {})

    return Roofs(
        "test-device",
        {"type": "cpu"},
        torch.__version__,
        "now",
        {},
        {"gemm_fp32": roof("gemm_fp32", 1e11, "FLOP/s"), "copy": roof("copy", 2e10, "B/s")},
        {},
    )


def _tiny_imagenet_data(root: Path, size: int) -> Path:
    """A data dir whose tinyimagenet/tiny-imagenet-200 is a SIZE-px tree (as a real tree of that size would be)."""
    src = tinyimagenet.write_synthetic(root / "src", n_classes=4, n_train_per_class=4, n_val_per_class=2, n_test=0, size=size)
    data = root / "data"
    (data / "tinyimagenet").mkdir(parents=True)
    src.rename(data / "tinyimagenet" / "tiny-imagenet-200")
    return data


def _roofline_cell(study, **kw):
    base = dict(
        model="squeezenet1_1", scenario="A", pipeline="synthetic-gpu", batch_size=4, max_train_batches=1,
        max_val_batches=1, warmup_batches=0, threads=1, num_workers=0, dataset="tinyimagenet",
    )  # fmt: skip
    return study.cell("torch-cpu", "fp32", **{**base, **kw})


def test_roofline_counts_flops_and_bytes_at_the_trees_image_size(iso, monkeypatch):
    pytest.importorskip("torchvision")
    from bench.measure.flops import count_flops
    from bench.studies.roofline import protocol

    monkeypatch.setattr(protocol, "load_roofs", lambda device, sizes: _fake_roofs())
    study = get_study("roofline")
    data = _tiny_imagenet_data(iso, 32)
    ctx = RunContext(out=iso, cell_dir=iso / "c", data_dir=str(data), run_id="t", echo=lambda s: None)
    run = protocol.open_cell(study, _roofline_cell(study), ctx)
    assert run.dataset["image_size"] == 32  # what system.json says the data is
    fl = run.counts["flops"]
    at32 = count_flops(run.trainer.model, (3, 32, 32), 2)
    at64 = count_flops(run.trainer.model, (3, 64, 64), 2)
    assert fl.forward_flops == at32.forward_flops < at64.forward_flops / 3  # before: the 64-px count, ~4x
    assert run.trainer.side == 32
    row = run.step(0)[0]
    assert row["status"] == "ok" and row["image_size"] == 32
    assert row["achieved_flop_per_s"] == pytest.approx(row["img_per_s"] * fl.train_flops_used)
    assert run.system_extra()["image_size_counted"] == 32
    x, _ = run.trainer.fixed_batch(2)
    assert tuple(x.shape[2:]) == (32, 32)  # synthetic-gpu trains at the tree's size too


def test_roofline_on_a_tree_too_small_for_the_model_is_one_line(iso, monkeypatch):
    pytest.importorskip("torchvision")
    from bench.studies.roofline import protocol

    monkeypatch.setattr(protocol, "load_roofs", lambda device, sizes: _fake_roofs())
    study = get_study("roofline")
    data = _tiny_imagenet_data(iso, 16)  # SqueezeNet's pools shrink 16 px to nothing
    ctx = RunContext(out=iso, cell_dir=iso / "c", data_dir=str(data), run_id="t", echo=lambda s: None)
    with pytest.raises(KitError) as err:
        protocol.open_cell(study, _roofline_cell(study), ctx)
    one_line(err, "squeezenet1_1 cannot take 16x16 px")


# ---- 5. a named cache dir that cannot be written -----------------------------------------------------------


def test_a_named_cache_dir_that_cannot_be_written_is_one_line(iso, monkeypatch):
    blocker = iso / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("KIT_CACHE_DIR", str(blocker / "cache"))  # under a file: unwritable even for root
    with pytest.raises(KitError) as err:
        cache_dir()
    one_line(err, f"KIT_CACHE_DIR={blocker / 'cache'}")
    with pytest.raises(KitError) as err:  # what it used to feed: a synthetic tree silently in a temp dir
        tinyimagenet.resolve({"dataset": "tinyimagenet-synthetic", "synthetic_classes": 2}, None)
    one_line(err, "KIT_CACHE_DIR")
    monkeypatch.setenv("KIT_CACHE_DIR", str(blocker))  # a file, not a dir
    with pytest.raises(KitError) as err:
        cache_dir()
    one_line(err, f"KIT_CACHE_DIR={blocker}")
    monkeypatch.delenv("KIT_CACHE_DIR")  # not named: the fallback chain stays
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "xdg"))
    assert cache_dir().name.startswith("cnn-bench")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a 0555 dir; see the under-a-file case")
def test_a_read_only_named_cache_dir_is_one_line(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        monkeypatch.setenv("KIT_CACHE_DIR", str(ro))
        with pytest.raises(KitError) as err:
            cache_dir()
        one_line(err, f"KIT_CACHE_DIR={ro}", "not a writable dir")
    finally:
        ro.chmod(0o755)


# ---- 6. profile's model, checked up front ---------------------------------------------------------------


def test_profile_model_is_checked_up_front_in_one_line():
    study = get_study("profile")
    for bad, why in (("nonesuch_net", "unknown model 'nonesuch_net'"), ("squeezenet1_1", "conv classifier")):
        with pytest.raises(KitError) as err:
            study.validate(study.cell("torch-cpu", "finetune", model=bad))
        one_line(err, why)
    study.validate(study.cell("torch-cpu", "finetune", model="resnet50"))


@pytest.mark.parametrize(
    "model, size, why",
    [
        ("googlenet", 224, "auxiliary logits"),
        ("inception_v3", 299, "auxiliary logits"),
        ("vit_b_16", 64, "224 px images only"),
        ("vit_l_32", 256, "224 px images only"),
        ("maxvit_t", 160, "224 px images only"),
        ("alexnet", 48, "image_size >= 63"),
    ],
)
def test_a_profile_model_that_cannot_train_at_its_size_is_one_line_up_front(model, size, why):
    """Each of these passed validate and failed ~20 s into the cell (the model built, the data
    indexed, the first batch through it): now one line before any work."""
    study = get_study("profile")
    with pytest.raises(KitError) as err:
        study.validate(study.cell("torch-cpu", "finetune", model=model, image_size=size))
    one_line(err, model, why)


def _trains_on_meta(name: str, size: int) -> bool:
    """Whether torchvision's NAME, its head replaced as build_model does, takes one training
    step (forward + backward, batch 2) at SIZE px: on the meta device (shapes only, no memory)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    from bench.studies.profile.trainer import _head, _set_head

    try:
        with torch.device("meta"):
            model = torchvision.models.get_model(name, weights=None)
            head_name, head = _head(model)
            _set_head(model, head_name, torch.nn.Linear(head.in_features, 2))
            out = model.train()(torch.randn(2, 3, size, size))
            if not isinstance(out, torch.Tensor):
                return False
            out.sum().backward()
    except (RuntimeError, AssertionError, ValueError):
        return False
    return True


def test_the_profile_model_rules_are_what_torchvision_builds():
    """The rules validate applies (config.AUX_OUTPUTS, FIXED_SIZE, MIN_SIZE) against the models
    themselves: refused at the edge, trained just inside it."""
    import warnings

    from bench.studies.profile.config import AUX_OUTPUTS, FIXED_SIZE, MIN_SIZE

    warnings.filterwarnings("ignore", category=FutureWarning)  # googlenet/inception's init note
    for name in AUX_OUTPUTS:
        assert not _trains_on_meta(name, 299), name
    for name, size in [("vit_b_16", 224), ("maxvit_t", 224)]:
        assert FIXED_SIZE[name] == size and _trains_on_meta(name, size) and not _trains_on_meta(name, size + 32), name
    assert _trains_on_meta("alexnet", MIN_SIZE["alexnet"]) and not _trains_on_meta("alexnet", MIN_SIZE["alexnet"] - 1)
    for name in ("resnet18", "densenet121", "mobilenet_v3_small", "swin_t", "efficientnet_b0"):
        assert _trains_on_meta(name, 32), f"{name} at 32 px: the floor validate keeps for every other model"


def test_profile_validate_imports_no_torchvision():
    code = (
        "import sys\n"
        "from bench.core.registry import get_study\n"
        "s = get_study('profile')\n"
        "s.validate(s.cell('torch-cpu', 'finetune', model='efficientnet_b0'))\n"
        "print(sorted(m for m in ('torch', 'torchvision') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_static_model_list_is_torchvisions():
    torchvision = pytest.importorskip("torchvision")
    from bench.studies.profile.config import NO_LINEAR_HEAD, TORCHVISION_MODELS
    from bench.studies.profile.trainer import _head

    have = torchvision.models.list_models(module=torchvision.models)
    assert sorted(TORCHVISION_MODELS) == sorted(have), (
        f"torchvision {torchvision.__version__}: update TORCHVISION_MODELS in bench/studies/profile/config.py "
        f"(missing {sorted(set(have) - set(TORCHVISION_MODELS))}, gone {sorted(set(TORCHVISION_MODELS) - set(have))})"
    )
    for name in NO_LINEAR_HEAD:
        with pytest.raises(KitError, match="no Linear classifier"):
            _head(torchvision.models.get_model(name, weights=None))


# ---- 7. an epoch of 0 steps ----------------------------------------------------------------------------


def test_a_profile_epoch_of_zero_steps_is_an_error_before_any_work(iso, monkeypatch):
    from bench.measure import sampler
    from bench.studies.profile import protocol
    from bench.studies.profile.config import settings

    monkeypatch.setattr(sampler, "idle_baseline", lambda *a: pytest.fail("idle baseline measured before the check"))
    study = get_study("profile")
    cell = study.cell(
        "torch-cpu", "finetune", dataset="catsdogs-synthetic", synthetic_train_per_class=3, synthetic_val_per_class=1,
        batch_size=8, image_size=32, pipeline="loader",
    )  # fmt: skip
    cell = study.resolve(cell, None)
    ctx = RunContext(out=iso, cell_dir=iso / "c", data_dir=None, run_id="t", echo=lambda s: None)
    with pytest.raises(KitError) as err:  # 6 train images, a batch of 8, drop_last: every epoch 0 steps
        protocol.prepare(settings(cell), cell, ctx)
    one_line(err, "0 steps", "train has 6 images")


def test_a_profile_epoch_that_ran_no_step_raises_never_ok():
    torch = pytest.importorskip("torch")
    from bench.studies.profile.trainer import train_epoch

    tr = SimpleNamespace(train_mode=lambda: None, sync=lambda: None, step=lambda x, y: pytest.fail("no batch to step"))
    batches = SimpleNamespace(device=torch.device("cpu"), train=lambda: iter(()), batch=8, world=1, n_train=6)
    with pytest.raises(KitError) as err:
        train_epoch(tr, batches)
    one_line(err, "0 training steps")


def test_a_roofline_split_smaller_than_a_batch_is_an_error_before_the_model(iso, monkeypatch):
    pytest.importorskip("torch")
    from bench.studies.roofline import protocol

    study = get_study("roofline")
    monkeypatch.setattr(study, "load_backend", lambda name: pytest.fail("model built before the check"))
    cell = _roofline_cell(
        study, dataset="tinyimagenet-synthetic", synthetic_classes=2, synthetic_train_per_class=2,
        synthetic_val_per_class=1, batch_size=8, pipeline="loader",
    )  # fmt: skip
    ctx = RunContext(out=iso, cell_dir=iso / "c", data_dir=None, run_id="t", echo=lambda s: None)
    with pytest.raises(KitError) as err:
        protocol.open_cell(study, cell, ctx)
    one_line(err, "fewer than one batch of 8")


def test_mnist_cnn_epochs_never_have_zero_steps():
    """mnist-cnn refuses batch_size > the training set (open_cell), and an epoch of n >= batch samples
    keeps at least one whole batch whether the tail is dropped or padded: no 0-step epoch to guard."""
    from bench.studies.mnist_cnn.protocol import epoch_order

    for n in range(1, 24):
        for batch in range(1, n + 1):
            for last in ("drop", "pad"):
                assert len(epoch_order(n, batch, 0, 1, last)) >= batch
