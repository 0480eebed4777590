"""The roofline's arithmetic, plain Python (the report uses it too; no torch).

Bytes at any batch: bench.measure.bytecount counts at the dispatch level, where each op's
tensors are either batch-proportional (activations) or batch-independent (weights, BatchNorm
statistics, the optimizer-free gradient of a weight), so one step's traffic is affine in the
batch b: bytes(b) = a b + p. Two counts (b = 2 and 4) give a and p exactly (checked against a
third count in tests/test_roofline.py), so the intensity of every batch of the sweep costs two
small counting passes, not one at each size. Per sample: a + p / b.

The roof of a point: attainable(AI) = min(compute roof, bandwidth roof x AI). Its fraction is
achieved / attainable at the HIGH intensity (FLOPs over the compulsory bytes: weights, input,
output, gradients, each moved once), the highest ceiling any implementation could reach: a
fraction above 1 means a wrong count or a roof measured under load, and is flagged. The
binding roof at the LOW intensity (FLOPs over the unfused op-by-op traffic) is recorded too:
an unfused run of such a model is bandwidth-bound where that says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Affine:
    """bytes(b) = per_sample * b + per_batch (whole batch, bytes)."""

    per_sample: float
    per_batch: float

    @classmethod
    def fit(cls, b1: int, total1: float, b2: int, total2: float) -> Affine:
        a = (total2 - total1) / (b2 - b1)
        return cls(a, total1 - a * b1)

    def per_sample_at(self, batch: int) -> float:
        return self.per_sample + self.per_batch / batch

    def total_at(self, batch: int) -> float:
        return self.per_sample * batch + self.per_batch


def attainable(ai: float, compute: float, bandwidth: float) -> tuple[float, str]:
    """The roof at intensity AI (FLOP/B): (FLOP/s, 'compute' | 'bandwidth')."""
    mem = bandwidth * ai
    return (compute, "compute") if compute <= mem else (mem, "bandwidth")


def roof_fields(flop_per_s: float, ai_low: float, ai_high: float, compute: float | None, bandwidth: float | None) -> dict:
    """Row fields placing one measured point under the device's measured roofs."""
    if not compute or not bandwidth or not (flop_per_s > 0 and math.isfinite(flop_per_s)):
        return {"roof_bound": None, "roof_attainable_flop_per_s": None, "roof_fraction": None}
    top, bound = attainable(ai_high, compute, bandwidth)
    low, bound_low = attainable(ai_low, compute, bandwidth)
    return {
        "roof_bound": bound,
        "roof_attainable_flop_per_s": top,
        "roof_fraction": flop_per_s / top,
        "roof_bound_at_low_ai": bound_low,
        "roof_fraction_at_low_ai": flop_per_s / low,
        "ridge_flops_per_byte": compute / bandwidth,
    }


# ---- where the host sets the pace ----------------------------------------------------------------
HOST_PACED = 1.3  # a sweep step within this factor of the floor is host-paced


def host_floor(points: Sequence[tuple[float, float]]) -> dict | None:
    """POINTS: (batch, step ms) of one sweep, by batch. The floor is the median step of the three
    smallest batches, where the device has least to do; a batch whose step stays within HOST_PACED x
    the floor is host-paced (up to several times the images in about the same time: the device idled
    for most of the step, and Python, the dispatcher and the launches set its pace). None with fewer
    than three batches, or where the three smallest are not flat themselves (the step grew with the
    batch from the start: the device, not the host, set the pace there)."""
    if len(points) < 3:
        return None
    first = [ms for _, ms in points[:3]]
    if max(first) > HOST_PACED * min(first):
        return None
    floor = sorted(first)[1]
    paced = [b for b, ms in points if ms <= HOST_PACED * floor]
    upto = points[0][0]  # the largest batch of the unbroken host-paced run from the smallest batch up
    for b, ms in points:
        if ms > HOST_PACED * floor:
            break
        upto = b
    return {"floor_ms": floor, "host_paced_up_to": upto, "host_paced": paced, "points": points}
