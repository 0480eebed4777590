"""What one rank of a many-device cell knows and does (RunContext.dist; None in a one-process cell).

A cell whose Study.world_size(cell) is N runs as N processes under torchrun (bench/run/ranks.py),
one per device its Cell.devices name (GPU ids: NCCL; cpu ranks: gloo). Each rank calls the
study's own open()/step(); the study asks `ctx.dist` for what differs:

    dist.device                   torch.device of this rank (cuda:<local rank> or cpu)
    dist.wrap(model)              DistributedDataParallel with the cell's DDP options
    dist.shard(n)                 this rank's share of n items (an index range)
    dist.barrier()                every rank meets (around timed regions)
    dist.gather(obj)              every rank's OBJ, on every rank (per-GPU memory, ...)
    dist.is_main                  rank 0: the one whose rows the cell keeps

torch is imported inside the methods (this module is imported by studies' packages).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

# DDP options a cell's params may set (keys of the study's Config), with the kit's defaults
DDP_DEFAULTS = {"ddp_bucket_mb": 25.0, "ddp_grad_as_bucket_view": True, "ddp_static_graph": False}


@dataclass
class Dist:
    rank: int
    world: int
    local_rank: int
    comm: str  # the collectives library: nccl | gloo (not a kit backend)
    options: dict = field(default_factory=lambda: dict(DDP_DEFAULTS))

    @classmethod
    def from_env(cls, params: dict) -> Dist:
        """This rank as torchrun's environment describes it (RANK, WORLD_SIZE, LOCAL_RANK)."""
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
        gpu = os.environ.get("KIT_RANK_DEVICE", "cpu") == "cuda"
        opts = {k: params.get(k, v) for k, v in DDP_DEFAULTS.items()}
        return cls(rank, world, local, "nccl" if gpu else "gloo", opts)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", self.local_rank) if self.comm == "nccl" else torch.device("cpu")

    def barrier(self) -> None:
        import torch.distributed as tdist

        if self.comm == "nccl":
            tdist.barrier(device_ids=[self.local_rank])
        else:
            tdist.barrier()

    def gather(self, obj: Any) -> list:
        import torch.distributed as tdist

        out: list[Any] = [None] * self.world
        tdist.all_gather_object(out, obj)
        return out

    def wrap(self, model: Any) -> Any:
        """MODEL in DistributedDataParallel; a world of one rank has nothing to reduce: the model
        itself (on an H100, DDP's reducer alone cost a one-rank DenseNet-121 cell 7% of its img/s)."""
        from torch.nn.parallel import DistributedDataParallel

        if self.world == 1:
            return model
        o = self.options
        ids = [self.local_rank] if self.comm == "nccl" else None
        return DistributedDataParallel(
            model,
            device_ids=ids,
            bucket_cap_mb=float(o["ddp_bucket_mb"]),
            gradient_as_bucket_view=bool(o["ddp_grad_as_bucket_view"]),
            static_graph=bool(o["ddp_static_graph"]),
        )

    def shard(self, n: int) -> range:
        """This rank's share of N items, every WORLD-th from its rank (a class-sorted set stays
        balanced): every rank the same count, the tail that does not divide evenly dropped, as
        DistributedSampler(drop_last=True) does."""
        per = n // self.world
        return range(self.rank, per * self.world, self.world)
