"""The seed's two models, as it built them: torchvision's own definitions with
num_classes=10, fed 32x32 images unchanged (no CIFAR stem), random init seeded.

`exportable(model)` gives a copy that torch.export + the x86 PT2E quantizer accept:
torchvision's BasicBlock calls one ReLU module twice and adds in place (`out += identity`),
and the quantizer's conv-add-relu pattern needs one output per source partition
("Input partition has more than one output node" otherwise, seen with torch 2.14 +
torchao 0.18). The copy computes the same function with a fresh ReLU per use.
"""

from __future__ import annotations

import copy
import io
import types

import torch
import torch.nn.functional as F
import torchvision

from bench.core.errors import KitError
from bench.studies.cifar_opt.config import MODELS


def build(name: str, seed: int, num_classes: int = 10) -> torch.nn.Module:
    if name not in MODELS:
        raise KitError(f"unknown model {name!r}: choose {', '.join(MODELS)}")
    torch.manual_seed(seed)
    return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)


def _basic_block_forward(self, x):  # torchvision BasicBlock, one ReLU call per use, add out of place
    identity = x if self.downsample is None else self.downsample(x)
    out = F.relu(self.bn1(self.conv1(x)))
    out = self.bn2(self.conv2(out))
    return F.relu(out + identity)


def exportable(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy, in eval mode, that the PT2E quantizer can annotate (same outputs)."""
    from torchvision.models.resnet import BasicBlock

    m = copy.deepcopy(model).eval()
    for mod in m.modules():
        if isinstance(mod, BasicBlock):
            mod.forward = types.MethodType(_basic_block_forward, mod)
        if isinstance(mod, (torch.nn.ReLU, torch.nn.ReLU6)):
            mod.inplace = False
    return m


def size_mb(module: torch.nn.Module) -> float:
    """Bytes of the serialised state_dict (torch.save), in MB (10^6): the model's size on disk."""
    buf = io.BytesIO()
    torch.save(module.state_dict(), buf)
    return len(buf.getvalue()) / 1e6


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
