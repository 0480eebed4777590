"""A bare DDP training loop, for lab/bare_loops.py's `ddp` pair: DenseNet-121 (2 classes, Adam
lr 0.003), one fixed batch per GPU on the device, fp32, no kit code at all. Under torchrun:

    python -m torch.distributed.run --standalone --nproc_per_node 2 -m lab.bare_ddp --steps 20 --batch 128

Rank 0 prints one line `BARE DDP <img/s of the whole world>`, timed between two barriers after
3 warm-up steps (the kit's DDP cell times its epochs the same way).
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    import torch
    import torch.distributed as dist
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
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
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    secs = time.perf_counter() - t0
    if dist.get_rank() == 0:
        print(f"BARE DDP {a.steps * a.batch * dist.get_world_size() / secs:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
