"""The two-GPU reference's parts on the CPU: synthetic-gpu epochs as long as max_steps asks (profile
and roofline, as gloo ranks), per-GPU energy per image, per-step kernel counts from a trace,
lab/dp_collapse.py's tiny CPU mode, and scripts/gpu_multi.sh's plan resolved against the CUDA
matrix (every cell it names exists, with the protocol it says)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.resultset import collect

ROOT = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path) -> dict:
    e = {**os.environ, "KIT_CACHE_DIR": str(tmp_path / "cache")}
    e.pop("KIT_DATA_DIR", None)
    return e


def _matrix(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench", "matrix", *args, "--out", str(tmp_path / "r")],
        cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def test_synthetic_gpu_epochs_run_max_steps_whatever_the_trees_size():
    """One fixed batch on the device: no tree limits an epoch, so max_steps sets it (the tree's
    size only where max_steps is 0); the loader's epoch stays within its shard."""
    torch = pytest.importorskip("torch")
    from bench.studies.profile.config import Settings
    from bench.studies.profile.trainer import Batches

    class Index:  # an image tree's index as Batches reads it: 16 training images, 2 classes
        classes = ["cat", "dog"]

        def files(self, split: str) -> list[str]:
            return [f"{split}/{i}.jpg" for i in range(16 if split == "train" else 4)]

    def steps(**kw) -> int:
        cfg = Settings(pipeline="synthetic-gpu", image_size=32, **kw)
        b = Batches(cfg, Index(), torch.device("cpu"), 8, rank=0, world=2)
        return sum(1 for _ in b.train())

    assert steps(max_steps=30) == 30  # 16 images give 1 step of 8 x 2: the tree no longer caps it
    assert steps(max_steps=0) == 1
    from bench.studies.profile.config import cost

    long = cost(Settings(pipeline="synthetic-gpu", max_steps=30, devices=("0", "1"), device="cuda", batch_size=128), 2000)
    short = cost(Settings(pipeline="synthetic-gpu", max_steps=0, devices=("0", "1"), device="cuda", batch_size=128), 2000)
    assert long[2] > short[2]  # the estimate follows the steps that run


@pytest.mark.slow
def test_profile_and_roofline_ddp_cells_on_gloo_ranks_run_the_steps_asked_for(tmp_path):
    """A profile DDP cell and a roofline scenario-A DDP cell over two gloo ranks, synthetic-gpu, with
    more steps than the tiny tree holds: the rows say the steps that ran (max_steps, max_train_batches),
    the images are the world's, every GPU-less rank reports, and system.json holds the all-reduce."""
    r = _matrix(
        tmp_path, "profile", "--profile", "smoke", "--only", "variant=finetune", "--set", "pipeline=synthetic-gpu",
        "--set", "devices=cpu,cpu", "--set", "parallel=ddp", "--set", "num_workers=0", "--set", "image_size=32",
        "--set", "batch_size=4", "--set", "max_steps=9", "--set", "synthetic_train_per_class=4", "--repeats", "1",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    r = _matrix(
        tmp_path, "roofline", "--profile", "smoke", "--only", "scenario=A", "--only", "pipeline=synthetic-gpu",
        "--set", "devices=cpu,cpu", "--set", "num_workers=0", "--set", "max_train_batches=7", "--set", "max_val_batches=3",
        "--set", "batch_size=16", "--repeats", "1",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    cells, _, problems = collect([tmp_path / "r"])
    assert not problems and {c.study for c in cells} == {"profile", "roofline"}
    for c in cells:
        assert c.status == "ok", c.reason
        assert c.system["interconnect"]["allreduce_busbw_gb_per_s"] > 0
        if c.study == "profile":
            ep = [x for x in c.rows if x.get("phase") == "epoch"]
            assert ep and all(x["steps"] == 9 and x["samples"] == 9 * 4 * 2 for x in ep)  # 8 images: 1 step by the tree
        else:
            (train,) = [x for x in c.rows if x.get("phase") == "train"]
            (val,) = [x for x in c.rows if x.get("phase") == "val"]
            # the smoke tree: 20 classes x 8 = 160 training images, 5 steps of 16 x 2 by the tree
            assert (train["steps"], train["images"], val["steps"]) == (7, 7 * 16 * 2, 3)
    # the kit's DDP cell against a bare loop's line (lab/bare_ddp.py compare): paired by repeat, junk lines skipped
    (prof,) = [c for c in cells if c.study == "profile"]
    kit = statistics.median(x["samples_per_s"] for x in prof.rows if x.get("phase") == "epoch")
    bare = tmp_path / "bare.jsonl"
    bare.write_text("not json\n" + json.dumps({"tag": "r1", "world": 2, "img_per_s": kit / 2}) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "lab.bare_ddp", "compare", str(tmp_path / "r"), str(bare), "--out", str(tmp_path / "k.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "k.json").read_text())
    assert doc["repeats"] == [0] and doc["ratio"] == pytest.approx(2.0)
    r = subprocess.run(
        [sys.executable, "-m", "lab.bare_ddp", "compare", str(tmp_path / "r"), str(bare), "--world", "4"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 1 and "no repeat" in r.stderr


def test_energy_per_image_of_every_gpu():
    """gpu<i>_j_per_img: each GPU's net energy over the images it trained (the step split evenly)."""
    from bench.studies.profile.protocol import energy_fields

    summ = {"window_s": 2.0, "gpu0_energy_j": 500.0, "gpu1_energy_j": 300.0}
    f = energy_fields(summ, {"gpu0_idle_power_w": 70.0, "gpu1_idle_power_w": 160.0}, [0, 1], 100)
    assert f["gpu0_energy_net_j"] == pytest.approx(360.0) and f["gpu0_j_per_img"] == pytest.approx(7.2)
    assert f["gpu1_energy_net_j"] == pytest.approx(-20.0) and f["gpu1_j_per_img"] is None  # below its idle: no J/img
    assert f["j_per_img"] == pytest.approx(3.4)  # the cell's: both GPUs' net over every image
    one = energy_fields({"window_s": 2.0, "gpu0_energy_j": 500.0}, {"gpu0_idle_power_w": 70.0}, [0], 100)
    assert one["gpu0_j_per_img"] == pytest.approx(one["j_per_img"])


def test_kernels_are_counted_per_profiled_step():
    """The breakdown counts the kernels that start in each step's window, every stream merged."""
    from bench.measure.profiling import breakdown_from_events

    def ev(cat: str, name: str, ts: float, dur: float, **kw) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1, **kw}

    events = [ev("user_annotation", "ProfilerStep#1", 0, 100), ev("user_annotation", "ProfilerStep#2", 100, 100)]
    events += [ev("kernel", f"k{i}", 10 + i, 1, stream=7 + i % 2) for i in range(5)]  # step 1: 5 kernels, 2 streams
    events += [ev("kernel", "k", 150, 1), ev("gpu_memcpy", "m", 160, 1)]  # step 2: 1 kernel (a memcpy is no kernel)
    br = breakdown_from_events(events, gpu=True)
    assert [s["kernel_count"] for s in br["steps"]] == [5, 1] and br["mean_kernel_count"] == 3.0
    assert "kernel_count_share" not in br and "kernel_count" in br["method"]


@pytest.mark.slow
def test_dp_collapse_tiny_times_every_place_both_ways_and_counts_each_threads_operators(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "lab.dp_collapse", "--tiny", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "dp_collapse.json").read_text())
    assert doc["meta"]["options"]["device"] == "cpu" and "CUDA" in doc["meta"]["skipped"]["dp"]
    got = {(p["place"], p["cudnn_benchmark"]): p for p in doc["places"]}
    assert set(got) == {(p, b) for p in ("main", "fresh", "worker") for b in (True, False)}
    for p in got.values():
        assert len(p["step_ms"]) == 2 and all(t > 0 for t in p["step_ms"]) and p["first_step_ms"] > 0
        assert p["events_error"] is None and p["events"] == "aten operators"
    counts = {p["events_per_step"] for p in got.values()}
    assert len(counts) == 1 and counts.pop() > 50  # the same step counted in its own thread, wherever it ran
    assert "fresh" in r.stdout and "dp      skipped" in r.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "lab.dp_collapse", "--tiny", "--steps", "0"], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def _plan(mode: str, tmp_path: Path) -> list[list[str]]:
    """scripts/gpu_multi.sh MODE's steps (DRY=1: each step's argv, nothing run)."""
    import shlex

    r = subprocess.run(
        ["bash", "scripts/gpu_multi.sh", mode], cwd=ROOT, env={**os.environ, "DRY": "1", "OUT": str(tmp_path)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return [shlex.split(line)[1:] for line in r.stdout.splitlines() if line.startswith("RUN ")]


def _cells(argv: list[str]):
    """The cells a `python3 -m bench matrix ...` argv runs, resolved as the matrix resolves them."""
    from bench.core.request import RunRequest
    from bench.run.matrix import resolve

    assert argv[:4] == ["python3", "-m", "bench", "matrix"], argv
    studies, opts = [], {k: [] for k in ("--platform", "--profile", "--set", "--only", "--out", "--timeout-s", "--repeats")}
    it = iter(argv[4:])
    for a in it:
        if a.startswith("--"):
            opts[a].append(next(it))
        else:
            studies.append(a)
    (profile,) = opts["--profile"]
    repeats = int(opts["--repeats"][0]) if opts["--repeats"] else None
    req = RunRequest(
        studies=tuple(studies),
        platforms=tuple(opts["--platform"]),
        profile=profile,
        sets=tuple(opts["--set"]),
        only=tuple(opts["--only"]),
        repeats=repeats,
    )
    return resolve(req, resolve_data=False)


def test_the_device_script_plans_every_reference_cell_with_its_protocol(tmp_path):
    """two: fp32 and bf16-cl on one GPU, DDP over 2 and DataParallel off, 3 repeats of 3 epochs x 30
    steps a rank; DataParallel on, one repeat of the shorter protocol; roofline ResNet-50 at 256 a
    GPU over 1 and 2, 3 repeats; the bare DDP loop after each fp32 round; the lab script first.
    four: the profile's DDP cells over 1, 2 and 4 GPUs and roofline's, 3 repeats each."""
    steps = _plan("two", tmp_path)
    assert steps[0][:3] == ["python3", "-m", "lab.dp_collapse"]
    bare = [s for s in steps if "lab.bare_ddp" in s]
    assert [s[s.index("--tag") + 1] for s in bare] == ["r1", "r2", "r3"] and all("--nproc_per_node=2" in s for s in bare)
    assert steps.index(bare[0]) == 2  # right after the first fp32 round: kit and bare alternate
    seen: dict[tuple, set] = {}
    for argv in (s for s in steps if "bench" in s):
        for c in _cells(argv):
            p = c.params
            if c.study == "profile":
                key = (c.study, c.variant, p["parallel"], p["cudnn_benchmark"], tuple(c.devices))
                on = p["parallel"] == "dp" and p["cudnn_benchmark"]
                assert p["pipeline"] == "synthetic-gpu" and p["batch_size"] == 128
                assert (p["epochs"], p["max_steps"]) == ((2, 3) if on else (3, 30)), key  # >= 30 steps a rank
            else:
                key = (c.study, c.variant, p["model"], p["batch_size"], tuple(c.devices))
                assert p["scenario"] == "A" and p["pipeline"] == "synthetic-gpu" and p["max_train_batches"] >= 30
            seen.setdefault(key, set()).add(c.repeat)
    want = {("profile", v, par, b, d) for v in ("finetune", "finetune+bf16-cl") for par, b, d in (
        ("none", True, ()), ("ddp", True, ("0", "1")), ("dp", True, ("0", "1")), ("dp", False, ("0", "1")))}  # fmt: skip
    want |= {("roofline", "fp32", "resnet50", 256, d) for d in ((), ("0", "1"))}
    assert set(seen) == want
    for key, reps in seen.items():
        assert reps == ({0} if key[2] == "dp" and key[3] is True else {0, 1, 2}), key
    four: dict[tuple, set] = {}
    for argv in (s for s in _plan("four", tmp_path) if "bench" in s):
        for c in _cells(argv):
            four.setdefault((c.study, c.variant, len(c.devices)), set()).add(c.repeat)
    assert set(four) == {("profile", v, n) for v in ("finetune", "finetune+bf16-cl") for n in (0, 2, 4)} | {
        ("roofline", "fp32", n) for n in (0, 2, 4)
    }
    assert all(r == {0, 1, 2} for r in four.values())


def test_pack_results_splits_the_traces_under_the_limit_and_rebuilds_the_dir(tmp_path):
    import tarfile

    from lab.pack_results import pack

    src = tmp_path / "H-x2"
    for i, kb in enumerate((600, 500, 400, 2000)):  # the last one fits no archive of 1 MiB
        d = src / "profile" / f"cell{i}"
        (d / "trace").mkdir(parents=True)
        (d / "rows.jsonl").write_text("{}\n")
        (d / "trace" / "trace_0.json.gz").write_bytes(os.urandom(kb * 1024))
    (src / "lab").mkdir()
    (src / "lab" / "bare_ddp.jsonl").write_text("{}\n")
    got = pack(src, tmp_path / "out", "H-x2", max_mb=1.0, max_trace_files=6)
    names = [p.name for p in got]
    assert names == ["H-x2-results.tgz", "H-x2-traces-0.tgz", "H-x2-traces-1.tgz", "H-x2-left-out.txt"]
    assert all(p.stat().st_size <= 1.1 * 1024 * 1024 for p in got)
    assert "cell3/trace/trace_0.json.gz" in (tmp_path / "out" / "H-x2-left-out.txt").read_text()
    back = tmp_path / "back"
    for p in got[:-1]:
        with tarfile.open(p) as tar:
            tar.extractall(back, filter="data")
    want = sorted(str(p.relative_to(tmp_path)) for p in src.rglob("*") if p.is_file() and "cell3/trace" not in str(p))
    assert sorted(str(p.relative_to(back)) for p in back.rglob("*") if p.is_file()) == want
    assert (back / "H-x2/profile/cell0/trace/trace_0.json.gz").read_bytes() == (
        src / "profile/cell0/trace/trace_0.json.gz"
    ).read_bytes()
