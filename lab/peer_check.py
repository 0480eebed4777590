"""The kit's training cell against a peer's published training benchmark, each in its own process.

    python -m lab.peer_check [--models resnet18 resnet50] [--batches 128 512] [--precisions tf32 bf16-cl]
                             [--image-size 64] [--steps 50] [--warmup 10] [--repeats 3] [--device cuda|cpu]
                             [--out DIR]
    python -m lab.peer_check --tiny      (resnet18, 32 px, batch 4, 2 steps after 3 warm-up, CPU fp32, 1 repeat: CI)
    python -m lab.peer_check --peer bare (the other side: the kit's own training loop without the kit)
    python -m lab.peer_check --peer kit-graph (the other side: the same kit cell with step=cuda-graph)

kit: the roofline study's scenario A training cell for the same torchvision model, input size, batch
and precision, on synthetic-gpu data (one fixed batch on the device), run as a scheduled cell runs:
`python -m bench cell SPEC --out DIR` in a process of its own; its figure is the train row's
`img_per_s` (the pass timed as a whole, device synced at both ends; its sampler threads on).
peer: timm's `benchmark.py --bench train` (huggingface/pytorch-image-models at aa4b585, 2026-08; the
script is not in the timm wheel, so its train loop is restated here, line for line, and timm's own
optimizer factory is called), in a process of its own:
    L49-51    TF32 matmul on, cudnn.benchmark on (CUDA)
    L163-178  precision: float32 | amp_bfloat16 (autocast bf16, fp32 weights and input)
    L250-254  model.to(device, float32, channels_last when --channels-last)
    L286-290  input: torch.randn((b, 3, s, s)) on the device, channels_last when asked
    L378-393  model.train(); nn.CrossEntropyLoss(); create_optimizer_v2(model, opt="sgd", lr=1e-4)
              (timm's sgd: nesterov, momentum 0.9, no weight decay); a fresh random target each step
    L396-420  one step: zero_grad(); t0; autocast: forward, loss, backward; optimizer.step();
              t1 after torch.cuda.synchronize() (every step synced; no sync on CPU, L281-284)
    L426-431, L466-481  warm-up steps, then the timed steps: samples/s = images / (t_end - t_run_start)
Departures, so that only the harness differs: the model is torchvision's (the kit's), not
timm.create_model's; its classes are the kit tree's; warm-up and timed steps are the kit's counts
(--warmup, --steps); fp32 on CUDA turns TF32 off as the kit's fp32 does (benchmark.py has no IEEE
fp32 train mode). tf32 = `--precision float32` there; bf16-cl = `--amp --amp-dtype bfloat16
--channels-last`.

--peer bare: the other side is the kit's roofline training loop restated without the kit (no bench
import, no cell, no sampler threads, torch's own thread count): the same torchvision model, seeded
as the cell seeds it, SGD lr 0.01 momentum 0.9, TF32 as the cell sets it, cudnn.benchmark on, one
fixed batch on the device, the step of bench/studies/roofline/trainer.py (autocast, cross entropy,
backward, step, zero_grad(set_to_none), the loss summed on the device) and the pass timed as a whole
with one sync at each end. kit / bare is then what the harness costs, process against process.

--peer kit-graph: the other side is the kit's own cell again, with step=cuda-graph (the training
step captured once as a CUDA graph and replayed, checked against the eager step first): kit / peer
is then eager / graph, and each side's spread between its fresh processes is what the graph cuts.

Each repeat runs every configuration in turn, the order rotated, kit first on even repeats and peer
first on odd ones (A B, B A, ...); the table gives kit / peer per configuration with the interval of
bench.core.stats.ratio (paired by repeat). The synthetic tree (at --image-size) and the device's
measured roofs are cached under OUT/cache-<size>px (KIT_CACHE_DIR for the kit's cells). Writes
OUT/peer_check.json (options, versions, every repeat of both sides with its pid) and prints a table.

Measured (NVIDIA H100 80GB HBM3, torch 2.11, 64 px; results/reference/
H100-80GB-HBM3-peer-check-long/ has every pair and command): kit / timm 0.92-1.21 by
configuration at batch 128 and 512 (tf32 1.07-1.18, bf16-cl 0.92-1.21); kit / bare at bf16-cl
batch 128: ResNet-18 0.965 [0.855-1.042, 95 % bootstrap over 8 pairs], ResNet-50 0.939
[0.875-0.998, range of 4]. No lower end reaches 0.97: one side's own fresh processes differ
by 5-23 % at 400 timed steps (timm's and the bare loop's too), which is the noise floor of a
process-against-process comparison on that host; longer windows (400 steps against 50) did not
shrink it. The host-side suspects tested on the CPU (the RSS sampler, telemetry's process
scans; lab/sampler_cost.py) cost microseconds per second after the earlier fixes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_TAG = "PEER "
TINY = {"models": ["resnet18"], "batches": [4], "precisions": ["fp32"], "image_size": 32, "steps": 2, "warmup": 3}
TINY.update({"repeats": 1, "device": "cpu", "classes": 10})


@dataclass(frozen=True)
class Config:
    model: str  # torchvision name, weights=None
    batch: int  # images per step
    precision: str  # fp32 | tf32 | bf16-cl (the roofline study's variants)
    image_size: int  # px, square input
    steps: int  # timed training steps
    warmup: int  # untimed training steps first
    classes: int  # the head's outputs (the kit tree's classes)
    device: str  # cuda | cpu
    peer_kind: str = "timm"  # the other side: timm (benchmark.py's train loop) | bare (the kit's loop, no kit) | kit-graph

    @property
    def name(self) -> str:
        return f"{self.model} b{self.batch} {self.precision}"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # bad input: one line, exit 2
        fail(message)


def fail(msg: str, code: int = 2):
    print(f"peer_check: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


# ---- the peer (in its own process: python -m lab.peer_check --peer-child JSON) ----------------
def peer_run(cfg: Config) -> dict:
    """timm benchmark.py's TrainBenchmarkRunner.run() with detail=False (see the module docstring)."""
    from contextlib import suppress
    from functools import partial

    import timm
    import torch
    import torchvision
    from timm.optim import create_optimizer_v2

    cuda = cfg.device == "cuda"
    if cuda:  # L49-51; the kit's fp32 is IEEE fp32
        torch.backends.cuda.matmul.allow_tf32 = cfg.precision != "fp32"
        torch.backends.cudnn.allow_tf32 = cfg.precision != "fp32"
        torch.backends.cudnn.benchmark = True
    amp = cfg.precision == "bf16-cl"
    autocast = partial(torch.autocast, device_type=cfg.device, dtype=torch.bfloat16) if amp else suppress
    torch.manual_seed(0)
    model = torchvision.models.get_model(cfg.model, weights=None, num_classes=cfg.classes)
    model.to(device=cfg.device, dtype=torch.float32, **({"memory_format": torch.channels_last} if amp else {}))
    x = torch.randn((cfg.batch, 3, cfg.image_size, cfg.image_size), device=cfg.device, dtype=torch.float32)
    if amp:
        x = x.contiguous(memory_format=torch.channels_last)
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss().to(cfg.device)
    opt = create_optimizer_v2(model, opt="sgd", lr=1e-4)

    def now(sync: bool = False) -> float:  # cuda_timestamp / timestamp, L149-156
        if sync and cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def step() -> float:
        opt.zero_grad()
        t0 = now()
        with autocast():
            out = model(x)
            target = torch.empty((out.shape[0],), device=cfg.device, dtype=torch.long).random_(cfg.classes)
            loss_fn(out, target).backward()
        opt.step()
        return now(True) - t0

    for _ in range(cfg.warmup):
        step()
    total = 0.0
    t_run = now()
    for _ in range(cfg.steps):
        total += step()
    elapsed = now() - t_run
    return {
        "img_per_s": cfg.steps * cfg.batch / elapsed,
        "step_ms": 1e3 * total / cfg.steps,  # benchmark.py's step_time: mean of the per-step synced deltas
        "elapsed_s": elapsed,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "optimizer": f"{type(opt).__name__}(nesterov={opt.defaults.get('nesterov')}, momentum={opt.defaults.get('momentum')})",
    }


def bare_run(cfg: Config) -> dict:
    """The roofline cell's training pass with no kit around it (see the module docstring)."""
    import torch
    import torch.nn.functional as F
    import torchvision

    cuda = cfg.device == "cuda"
    torch.backends.cudnn.benchmark = True
    if cuda:  # set_tf32: on for tf32 only
        torch.backends.cuda.matmul.allow_tf32 = cfg.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = cfg.precision == "tf32"
    bf16 = cfg.precision == "bf16-cl"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    torch.manual_seed(0)  # the cell's seed
    model = torchvision.models.get_model(cfg.model, weights=None, num_classes=cfg.classes).to(cfg.device).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(cfg.batch, 3, cfg.image_size, cfg.image_size, generator=g).to(cfg.device).contiguous(memory_format=fmt)
    y = torch.randint(0, cfg.classes, (cfg.batch,), generator=g).to(cfg.device)
    loss_sum = torch.zeros((), device=cfg.device)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def step() -> None:
        with torch.autocast(cfg.device, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_sum.add_(loss.detach().float())

    model.train()
    for _ in range(cfg.warmup):
        step()
    sync()
    loss_sum.zero_()
    t0 = time.perf_counter()
    for _ in range(cfg.steps):
        step()
    loss = float(loss_sum.item()) / cfg.steps  # the one host sync, as the cell's
    elapsed = time.perf_counter() - t0
    return {
        "img_per_s": cfg.steps * cfg.batch / elapsed,
        "elapsed_s": elapsed,
        "train_loss": loss,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "optimizer": "SGD(lr=0.01, momentum=0.9)",
        "kit_imported": any(m == "bench" or m.startswith("bench.") for m in sys.modules),  # must stay False
    }


def _peer_child(spec: str) -> None:
    cfg = Config(**json.loads(spec))
    print(PEER_TAG + json.dumps(bare_run(cfg) if cfg.peer_kind == "bare" else peer_run(cfg)), flush=True)


# ---- the two sides, each a process of its own --------------------------------------------------
def _child(argv: list[str], env: dict[str, str]) -> tuple[int, str, int]:
    """(pid, stdout, returncode) of ARGV run from the repo root."""
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    if p.returncode != 0:
        last = next((line for line in reversed(err.strip().splitlines()) if line.strip()), f"exit code {p.returncode}")
        raise RuntimeError(f"{' '.join(argv[1:4])}: exit {p.returncode}: {last.strip()}")
    return p.pid, out, p.returncode


def run_peer(cfg: Config, env: dict[str, str]) -> dict:
    pid, out, _ = _child([sys.executable, "-m", "lab.peer_check", "--peer-child", json.dumps(asdict(cfg))], env)
    line = next((s for s in out.splitlines() if s.startswith(PEER_TAG)), None)
    if line is None:
        raise RuntimeError(f"peer {cfg.name}: no result line in its output")
    got = json.loads(line[len(PEER_TAG) :])
    return {**got, "process_pid": pid}


def tree_params(configs: list[Config]) -> dict[str, int]:
    """The synthetic tree every cell of this run reads (one for all): enough training images for the
    largest batch's steps and validation images for one batch (the cell checks both)."""
    classes = configs[0].classes
    return {
        "synthetic_classes": classes,
        "synthetic_train_per_class": max(math.ceil(c.steps * c.batch / classes) for c in configs),
        "synthetic_val_per_class": max(math.ceil(c.batch / classes) for c in configs),
    }


def kit_cell(cfg: Config, tree: dict[str, int], step: str = "eager"):
    """The roofline scenario A cell of CFG on the synthetic TREE with STEP (eager | cuda-graph),
    resolved (its data identity fixed)."""
    from bench.core.registry import get_study

    study = get_study("roofline")
    cell = study.cell(
        "torch-cuda" if cfg.device == "cuda" else "torch-cpu", cfg.precision, name=f"peer-check_{cfg.model}_{cfg.precision}_b{cfg.batch}",
        model=cfg.model, scenario="A", pipeline="synthetic-gpu", batch_size=cfg.batch, max_train_batches=cfg.steps,
        max_val_batches=1, warmup_batches=cfg.warmup, roof_sizes="quick", dataset="tinyimagenet-synthetic", step=step,
        **tree,
    )  # fmt: skip
    cell = study.resolve(cell, None)
    study.validate(cell)
    return cell


def run_kit(cfg: Config, cell, out: Path, env: dict[str, str]) -> dict:
    from bench.core.rows import read_rows

    pid, _, _ = _child([sys.executable, "-m", "bench", "cell", cell.to_json(), "--out", str(out)], env)
    rows = read_rows(cell.dir(out) / "rows.jsonl")
    train = next((r for r in rows if r.get("phase") == "train" and r.get("status") == "ok"), None)
    if train is None:
        why = next((r.get("reason") for r in rows if r.get("status") != "ok"), "no train row")
        raise RuntimeError(f"kit {cfg.name}: {why}")
    keep = ("img_per_s", "epoch_s", "steps", "images", "threads", "num_classes", "image_size", "batch_size", "warmup_s")
    keep += ("train_loss", "step", "graph_check_loss_rel", "graph_check_moved_rel")
    return {**{k: train.get(k) for k in keep}, "pid": pid, "cell": cell.id, "cell_dir": str(cell.dir(out))}


def write_tree(tree: dict[str, int], image_size: int) -> None:
    """Write TREE at IMAGE_SIZE px into KIT_CACHE_DIR under the key the kit computes for its
    generator arguments, where the cells find it (the kit writes 64 px trees; a cell trains and
    counts at its tree's size)."""
    import dataclasses
    import functools

    from bench.data import images, tinyimagenet

    fam = dataclasses.replace(
        tinyimagenet.FAMILY, write_synthetic=functools.partial(tinyimagenet.write_synthetic, size=image_size)
    )
    kw = {arg: tree[p] for p, arg in tinyimagenet.SYNTHETIC_PARAMS.items()}
    ix = images.synthetic_cached(fam, kw)
    if ix.image_size != image_size:
        fail(f"{ix.root}: a cached tree of {ix.image_size} px, not {image_size}: remove it", 1)


# ---- the run -----------------------------------------------------------------------------------
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = _Parser(prog="python -m lab.peer_check", description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18", "resnet50"], help="torchvision models (roofline's)")
    ap.add_argument("--batches", nargs="+", type=int, default=[128, 512], help="images per step")
    ap.add_argument("--precisions", nargs="+", default=None, help="fp32 | tf32 | bf16-cl (default: tf32 bf16-cl; cpu: fp32)")
    ap.add_argument("--image-size", type=int, default=64, help="px, square (default 64: Tiny-ImageNet's)")
    ap.add_argument("--steps", type=int, default=50, help="timed training steps, both sides")
    ap.add_argument("--warmup", type=int, default=10, help="untimed training steps first, both sides (timm's default 10)")
    ap.add_argument("--classes", type=int, default=200, help="the head's outputs (Tiny-ImageNet's 200)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh-process repeats of each side")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--peer", choices=("timm", "bare", "kit-graph"), default="timm", help="the other side (default timm)")
    ap.add_argument("--out", type=Path, default=Path("results/lab/peer_check"))
    ap.add_argument("--tiny", action="store_true", help="the CI preset: " + ", ".join(f"{k}={v}" for k, v in TINY.items()))
    ap.add_argument("--peer-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.tiny:
        for k, v in TINY.items():
            setattr(a, k, v)
    if a.precisions is None:
        a.precisions = ["tf32", "bf16-cl"] if a.device == "cuda" else ["fp32"]
    return a


def check(a: argparse.Namespace) -> list[Config]:
    from bench.studies.roofline.config import MODELS, VARIANTS

    for m in a.models:
        if m not in MODELS:
            fail(f"unknown model {m!r}: choose {', '.join(MODELS)} (the roofline study's)")
    for p in a.precisions:
        if p not in VARIANTS[a.device]:
            fail(f"precision {p!r} does not run on {a.device}: choose {', '.join(VARIANTS[a.device])}")
    for name, v, low in (("batches", min(a.batches), 1), ("image-size", a.image_size, 32), ("steps", a.steps, 1)):
        if v < low:
            fail(f"--{name} must be >= {low} (got {v})")
    for name, v, low in (("warmup", a.warmup, 0), ("classes", a.classes, 1), ("repeats", a.repeats, 1)):
        if v < low:
            fail(f"--{name} must be >= {low} (got {v})")
    if a.peer == "kit-graph" and a.device != "cuda":
        fail("--peer kit-graph captures the step as a CUDA graph: it needs --device cuda")
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            fail("--device cuda: torch sees no CUDA GPU here (use --device cpu, or --tiny)")
    return [
        Config(m, b, p, a.image_size, a.steps, a.warmup, a.classes, a.device, a.peer)
        for m in a.models
        for b in a.batches
        for p in a.precisions
    ]


def meta(a: argparse.Namespace, argv: list[str]) -> dict:
    import platform

    import torch

    from bench.core import provenance

    dev = torch.cuda.get_device_name(0) if a.device == "cuda" else provenance.device_name("cpu")
    return {
        "command": "python -m lab.peer_check " + " ".join(argv),
        "device": dev,
        "host": platform.node(),
        "torch": torch.__version__,
        "peer_source": {
            "timm": "timm benchmark.py --bench train @ huggingface/pytorch-image-models aa4b585 (restated; see lab/peer_check.py)",
            "bare": "bare: the kit's roofline training loop without the kit (lab/peer_check.py bare_run)",
            "kit-graph": "kit-graph: the same kit cell with step=cuda-graph (the step captured once and replayed)",
        }[a.peer],
        "options": {k: v for k, v in vars(a).items() if k not in ("out", "peer_child")},
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    if a.peer_child:
        _peer_child(a.peer_child)
        return
    configs = check(a)
    out = a.out.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"--out {a.out}: {err.strerror or err}")
    os.environ["KIT_CACHE_DIR"] = str(out / f"cache-{a.image_size}px")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    tree = tree_params(configs)
    write_tree(tree, a.image_size)
    cells = {c: kit_cell(c, tree) for c in configs}
    graphs = {c: kit_cell(c, tree, "cuda-graph") for c in configs} if a.peer == "kit-graph" else {}
    got: dict[Config, dict[str, dict[int, dict]]] = {c: {"kit": {}, "peer": {}} for c in configs}
    info = meta(a, argv)
    t0 = time.monotonic()
    try:
        for r in range(a.repeats):
            k = r % len(configs)
            for c in configs[k:] + configs[:k]:
                sides = ("kit", "peer") if r % 2 == 0 else ("peer", "kit")
                for side in sides:
                    if side == "kit":
                        got[c]["kit"][r] = run_kit(c, cells[c], out / "kit" / f"r{r}", env)
                    elif c in graphs:
                        got[c]["peer"][r] = run_kit(c, graphs[c], out / "kit-graph" / f"r{r}", env)
                    else:
                        got[c]["peer"][r] = run_peer(c, env)
                kit, peer = got[c]["kit"][r]["img_per_s"], got[c]["peer"][r]["img_per_s"]
                print(
                    f"repeat {r + 1}/{a.repeats} {c.name:<26} {'-'.join(sides):<9} kit {kit:>10,.1f}  peer {peer:>10,.1f} img/s"
                    f"  kit/peer {kit / peer:.3f}  [{time.monotonic() - t0:.0f} s]",
                    flush=True,
                )
                write(out, info, configs, got, None, done=False)  # a run cut short keeps every finished pair
    except RuntimeError as err:
        write(out, info, configs, got, str(err))
        fail(str(err), 1)
    table = write(out, info, configs, got, None)
    print(
        f"\n{info['device']}, {a.image_size} px, {a.steps} steps after {a.warmup} warm-up, {a.repeats} repeat(s); peer: {info['peer_source']}"
    )
    print(f"{'configuration':<26} {'kit img/s':>11} {'peer img/s':>11} {'kit/peer':>9}  {'interval':<24} spread (CV) kit | peer")
    for t in table:
        ks, ps = (
            f"{x['spread']:.1%} ({x['cv']:.1%})" if x["spread"] is not None else "-" for x in (t["kit_spread"], t["peer_spread"])
        )
        print(
            f"{t['config']:<26} {t['kit_img_per_s']:>11,.1f} {t['peer_img_per_s']:>11,.1f} {t['ratio']:>9.3f}  {t['interval']:<24} {ks} | {ps}"
        )
    print(f"\nwrote {out / 'peer_check.json'}")


def spread(values: list[float]) -> dict:
    """One side's fresh processes: their spread (max / min - 1) and coefficient of variation."""
    import statistics

    if len(values) < 2:
        return {"spread": None, "cv": None, "n": len(values)}
    return {"spread": max(values) / min(values) - 1, "cv": statistics.stdev(values) / statistics.mean(values), "n": len(values)}


def write(out: Path, info: dict, configs: list[Config], got: dict, error: str | None, done: bool = True) -> list[dict]:
    """OUT/peer_check.json, atomically: status ok (every pair ran), incomplete (written after each
    pair while the run goes on, so a run killed by a time limit keeps what it measured) or error."""
    import statistics

    from bench.core.rows import atomic_write_text
    from bench.core.stats import ratio

    table = []
    for c in configs:
        kit = {r: v["img_per_s"] for r, v in got[c]["kit"].items()}
        peer = {r: v["img_per_s"] for r, v in got[c]["peer"].items()}
        entry: dict = {"config": c.name, **asdict(c), "kit": got[c]["kit"], "peer": got[c]["peer"]}
        both = sorted(set(kit) & set(peer))
        if both:
            s = ratio({r: kit[r] for r in both}, {r: peer[r] for r in both})
            entry.update(
                kit_img_per_s=statistics.median(kit[r] for r in both),
                peer_img_per_s=statistics.median(peer[r] for r in both),
                ratio=s.median,
                lo=s.lo,
                hi=s.hi,
                interval_kind=s.kind,
                interval=s.interval("{:.3f}"),
                repeats=len(both),
                kit_spread=spread(list(kit.values())),
                peer_spread=spread(list(peer.values())),
            )
            table.append(entry)
    status = "error" if error else ("ok" if done else "incomplete")
    doc = {"meta": info, "status": status, "error": error, "configs": table}
    atomic_write_text(out / "peer_check.json", json.dumps(doc, indent=1) + "\n")
    return table


if __name__ == "__main__":
    main()
