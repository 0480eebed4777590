"""Does the kit's harness cost anything? The kit's own cells against bare training loops, side by
side in one process, interleaved, on synthetic-gpu data (one fixed batch on the device).

    python -m lab.bare_loops roofline [--repeats 3] [--batches 128] [--out DIR]
    python -m lab.bare_loops profile  [--repeats 3] [--out DIR]
    python -m lab.bare_loops ddp      [--repeats 3] [--out DIR]     (two GPUs)

roofline: per model and batch, a real roofline cell is opened in this process (bench's study
API: the very open() and step() a scheduled cell runs, its usage samplers included) and its
training pass is timed by the cell (`img_per_s` of its train row); the bare loop is the same
torchvision model (200 classes, SGD lr 0.01 momentum 0.9, fp32 with TF32 off as the cell's fp32)
stepping the same number of times on a fixed batch, timed with one sync at each end.
profile: a real profile cell (DenseNet-121, Adam) whose epochs run with the telemetry sampler
on, as a scheduled cell's do, against a bare Adam loop of the same model and batch (fp32 at
batch 64; bf16 autocast + channels_last at batch 128).
ddp: the kit's DDP cell over GPUs 0 and 1 (profile, DenseNet-121 fp32, batch 128 per GPU,
synthetic-gpu: `python -m bench matrix profile ...` in a process of its own, as a scheduled
cell runs, under the kit's torchrun) against lab/bare_ddp.py under a plain torchrun, each
timing its steps between barriers; the kit's figure is the median of its epochs.
Each repeat runs every pair in turn, the order rotated; the table gives kit / bare per pair
with the 95 % bootstrap interval over repeats (bench.core.stats.ratio, paired by repeat).
Writes <out>/bare_loops_<study>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.core.registry import get_study
from bench.core.stats import ratio
from bench.core.study import RunContext


def _ctx(root: Path, cell) -> RunContext:
    d = cell.dir(root)
    d.mkdir(parents=True, exist_ok=True)
    return RunContext(out=root, cell_dir=d, data_dir=None, run_id="lab-bare-loops", echo=lambda s: None)


def _bare(model, opt, x, y, steps: int, amp: bool) -> float:
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()

    def one():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        one()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        one()
    torch.cuda.synchronize()
    return steps * x.shape[0] / (time.perf_counter() - t0)


def roofline_pairs(root: Path, batches: list[int]):
    import torch
    import torchvision

    from bench.studies.roofline.trainer import set_tf32

    study = get_study("roofline")
    pairs = []
    for model in ("resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1"):
        for b in batches:
            cell = study.cell(
                "torch-cuda", "fp32", model=model, scenario="A", pipeline="synthetic-gpu", batch_size=b, max_val_batches=1,
                roof_sizes="quick", synthetic_train_per_class=32,  # quick roofs, a small tree: the pass's img/s is what counts
            )  # fmt: skip
            cell = study.resolve(cell, None)
            study.validate(cell)
            run = study.open(cell, _ctx(root, cell))
            steps = min(len(run.index.files("train")) // b, cell.params["max_train_batches"])
            set_tf32("fp32")
            torch.manual_seed(0)
            net = torchvision.models.get_model(model, weights=None, num_classes=200).cuda()
            opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
            x = torch.randn(b, 3, 64, 64, device="cuda")
            y = torch.randint(0, 200, (b,), device="cuda")

            def kit(run=run):
                return float(run.step(0)[0]["img_per_s"])

            def bare(net=net, opt=opt, x=x, y=y, steps=steps):
                return _bare(net, opt, x, y, steps, False)

            pairs.append((f"{model} b{b} fp32", kit, bare))
    return pairs


def profile_pairs(root: Path):
    import torch
    import torchvision

    from bench.measure.sampler import TelemetrySampler

    study = get_study("profile")
    pairs = []
    for variant, b in (("finetune", 64), ("finetune+bf16-cl", 128)):
        cell = study.cell("torch-cuda", variant, pipeline="synthetic-gpu", batch_size=b, epochs=1000, idle_s=0.5, num_workers=0)
        cell = study.resolve(cell, None)
        study.validate(cell)
        run = study.open(cell, _ctx(root, cell))
        run.sampler.stop()  # the cell's own sampler runs during its epochs only: one per kit epoch below
        amp = variant.endswith("bf16-cl")
        torch.manual_seed(0)
        net = torchvision.models.get_model("densenet121", weights=None, num_classes=2).cuda()
        x = torch.randn(b, 3, 224, 224, device="cuda")
        if amp:
            net = net.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        opt = torch.optim.Adam(net.parameters(), lr=0.003)
        y = torch.randint(0, 2, (b,), device="cuda")
        state = {"e": 0}

        def kit(run=run, state=state):
            state["e"] += 1
            run.sampler = TelemetrySampler(run.gpus, hz=run.cfg.telemetry_hz).start()
            try:
                return float(run.epoch(state["e"])["samples_per_s"])
            finally:
                run.sampler.stop()

        def bare(net=net, opt=opt, x=x, y=y, amp=amp, run=run):
            return _bare(net, opt, x, y, run.batches.steps_per_epoch(), amp)

        pairs.append((f"densenet121 b{b} {'bf16-cl' if amp else 'fp32'}", kit, bare))
    return pairs


def ddp_pairs(root: Path):
    import subprocess
    import sys

    steps = 30  # the kit cell's steps per epoch (synthetic-gpu runs max_steps) and the bare loop's
    state = {"r": 0}

    def kit() -> float:
        state["r"] += 1
        out = root / f"kit{state['r']}"
        cmd = [sys.executable, "-m", "bench", "matrix", "profile", "--platform", "cuda", "--profile", "full",
               "--only", "variant=finetune", "--only", "parallel=ddp", "--repeats", "1", "--set", "epochs=3",
               "--set", f"max_steps={steps}", "--set", "idle_s=0.5", "--set", "warmup_steps=3", "--out", str(out)]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        rows = [json.loads(line) for f in out.glob("profile/*/rows.jsonl") for line in f.read_text().splitlines()]
        ips = sorted(r["samples_per_s"] for r in rows if r.get("phase") == "epoch")
        return ips[len(ips) // 2]

    def bare() -> float:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "lab.bare_ddp",
               "--steps", str(steps), "--batch", "128"]  # fmt: skip
        got = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return float(next(line for line in got.splitlines() if line.startswith("BARE DDP")).split()[-1])

    return [("densenet121 b128x2 fp32 ddp", kit, bare)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", choices=("roofline", "profile", "ddp"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", default="128")
    ap.add_argument("--out", default="results/lab")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bare-loops-"))
    pairs = {
        "roofline": lambda: roofline_pairs(root, [int(b) for b in a.batches.split(",")]),
        "profile": lambda: profile_pairs(root),
        "ddp": lambda: ddp_pairs(root),
    }[a.study]()
    got: dict[str, dict[str, dict[int, float]]] = {name: {"kit": {}, "bare": {}} for name, _, _ in pairs}
    for r in range(a.repeats):
        k = r % len(pairs)
        for name, kit, bare in pairs[k:] + pairs[:k]:
            first, second = (("kit", kit), ("bare", bare)) if r % 2 == 0 else (("bare", bare), ("kit", kit))
            for side, fn in (first, second):
                got[name][side][r] = fn()
            print(
                f"repeat {r + 1}/{a.repeats} {name:<28} kit {got[name]['kit'][r]:>10,.0f}  bare {got[name]['bare'][r]:>10,.0f} img/s",
                flush=True,
            )
    table = []
    print(f"\n{'pair':<28} {'kit img/s':>11} {'bare img/s':>11} {'kit/bare':>9}  95% interval")
    for name, sides in got.items():
        s = ratio(sides["kit"], sides["bare"])
        kit_med = sorted(sides["kit"].values())[len(sides["kit"]) // 2]
        bare_med = sorted(sides["bare"].values())[len(sides["bare"]) // 2]
        print(f"{name:<28} {kit_med:>11,.0f} {bare_med:>11,.0f} {s.median:>9.3f}  {s.interval('{:.3f}')}")
        table.append({"pair": name, "kit": sides["kit"], "bare": sides["bare"], "ratio": s.median, "lo": s.lo, "hi": s.hi})
    import torch

    meta = {"study": a.study, "repeats": a.repeats, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    (out / f"bare_loops_{a.study}.json").write_text(json.dumps({"meta": meta, "pairs": table}, indent=1))


if __name__ == "__main__":
    main()
