"""A bare DDP training loop beside the kit's DDP cell: DenseNet-121 (2 classes, Adam lr 0.003), one
fixed batch per GPU on the device, fp32, cudnn.benchmark on, torch's DDP defaults, no kit code at
all. Under torchrun:

    python -m torch.distributed.run --standalone --nproc_per_node 2 -m lab.bare_ddp \\
        --epochs 3 --steps 30 --batch 128 [--tag r1 --out FILE.jsonl]

3 warm-up steps, then EPOCHS epochs of STEPS steps, each timed between two barriers with the device
synced (the kit's DDP cell times its epochs the same way). Rank 0 prints `BARE DDP <img/s>` (the
whole world's, the median epoch) and appends one JSON line to FILE (tag, world, batch, steps, every
epoch's img/s).

    python -m lab.bare_ddp compare RESULTS_DIR FILE.jsonl [--world 2] [--out kit_vs_bare_ddp.json]

kit / bare per repeat: the kit's profile DDP cells of that world (finetune fp32, synthetic-gpu) in
RESULTS_DIR, each repeat's median epoch, against the bare line tagged r<repeat+1> (scripts/gpu_multi.sh
runs bare repeat r right after the kit's cells of round r: interleaved); the ratio of medians with
bench.core.stats.ratio's interval, paired by repeat. Measured: see results/reference/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def train(a: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    net = DistributedDataParallel(
        torchvision.models.get_model("densenet121", weights=None, num_classes=2).cuda(), device_ids=[local]
    )
    opt = torch.optim.Adam(net.parameters(), lr=0.003)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 2, (a.batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    world = dist.get_world_size()
    ips = []
    for _ in range(a.epochs):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        dist.barrier()
        ips.append(a.steps * a.batch * world / (time.perf_counter() - t0))
    if dist.get_rank() == 0:
        med = statistics.median(ips)
        print(f"BARE DDP {med:.1f}", flush=True)
        if a.out:
            line = {"tag": a.tag, "world": world, "batch": a.batch, "steps": a.steps, "epoch_img_per_s": ips, "img_per_s": med}
            with open(a.out, "a", encoding="utf-8") as f:
                f.write(json.dumps({**line, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}) + "\n")
    dist.destroy_process_group()


def compare(results: Path, bare_file: Path, world: int, out: Path | None) -> int:
    from bench.core.resultset import collect
    from bench.core.stats import ratio

    cells, _, _ = collect([results])
    kit: dict[int, float] = {}
    for c in cells:
        ep = [r for r in c.ok_rows if r.get("phase") == "epoch"]
        r0 = ep[0] if ep else {}
        if (c.study, r0.get("parallel"), r0.get("world_size"), r0.get("precision")) != ("profile", "ddp", world, "fp32"):
            continue
        if r0.get("pipeline") != "synthetic-gpu" or r0.get("transfer") != "finetune":
            continue
        kit[int(c.spec.get("repeat") or 0)] = statistics.median(float(r["samples_per_s"]) for r in ep)
    bare: dict[int, float] = {}
    for line in bare_file.read_text(encoding="utf-8").splitlines() if bare_file.is_file() else []:
        try:
            d = json.loads(line)
            tag, ips = str(d["tag"]), float(d["img_per_s"])
        except (ValueError, KeyError, TypeError):
            continue
        if d.get("world") == world and tag[:1] == "r" and tag[1:].isdigit() and ips > 0:
            bare[int(tag[1:]) - 1] = ips
    both = sorted(set(kit) & set(bare))
    if not both:
        print(f"error: no repeat with both a kit DDP cell over {world} GPUs and a bare line in {bare_file}", file=sys.stderr)
        return 1
    s = ratio({k: kit[k] for k in both}, {k: bare[k] for k in both})
    for k in both:
        print(f"repeat {k}: kit {kit[k]:,.0f}  bare {bare[k]:,.0f} img/s  kit/bare {kit[k] / bare[k]:.3f}")
    print(f"kit / bare over {world} GPUs: {s.median:.3f} {s.interval('{:.3f}')} ({len(both)} repeats)")
    if out is not None:
        doc = {"world": world, "repeats": both, "kit": kit, "bare": bare, "ratio": s.median, "lo": s.lo, "hi": s.hi}
        out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        ap = argparse.ArgumentParser(prog="python -m lab.bare_ddp compare")
        ap.add_argument("results", type=Path)
        ap.add_argument("bare", type=Path)
        ap.add_argument("--world", type=int, default=2)
        ap.add_argument("--out", type=Path)
        c = ap.parse_args(argv[1:])
        return compare(c.results, c.bare, c.world, c.out)
    ap = argparse.ArgumentParser(prog="python -m lab.bare_ddp")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", help="append rank 0's result as one JSON line")
    train(ap.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
