"""Roofline building blocks on whatever device is here: the device's measured roofs (and its
datasheet peaks), then FLOPs, bytes and arithmetic intensity of the roofline study's four
models (torchvision resnet18, resnet50, mobilenet_v2, squeezenet1_1; 200 classes; 3x64x64).

    .venv/bin/python -m lab.roofs_check --device cuda --out roofs_check.json [--refresh] [--batch 128]

Order: roofs first (cached per device under $KIT_CACHE_DIR or ~/.cache/cnn-bench; --refresh
measures again), then per model the FLOP count (FlopCounterMode vs the analytic count, batch
2: exact per sample) and the byte count at --batch (bytes per sample depend on the batch).
Nothing here is timed but the roofs. Prints three tables and writes all of it, per-layer and
per-op breakdowns included, to --out.

On a GPU the CUDA roofs take about a minute (8192^3 GEMMs, a 256x256x56x56 conv, 1 GiB copies);
the byte counts run the models at --batch on the device. Expected on an H100 SXM (KINDS.md
saw 798 TFLOP/s bf16 GEMM and ~3.0 TB/s copy): gemm_bf16 ~ 650-800 TFLOP/s, copy ~ 3 TB/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1")
INPUT = (3, 64, 64)  # Tiny-ImageNet
CLASSES = 200


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--refresh", action="store_true", help="measure the roofs again even when cached")
    ap.add_argument("--batch", type=int, default=128, help="batch of the byte count (the seed's 128)")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--no-roofs", action="store_true", help="skip the roof measurement (counts only)")
    a = ap.parse_args(argv)

    import torch
    import torchvision

    from bench.measure.bytecount import arithmetic_intensity, count_bytes
    from bench.measure.flops import count_flops, format_table
    from bench.measure.roofs import format_roofs, get_roofs

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out: dict = {
        "device": device,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "input": INPUT,
        "classes": CLASSES,
    }

    roofs = None
    if not a.no_roofs:
        t0 = time.perf_counter()
        roofs = get_roofs(device, refresh=a.refresh)
        print(format_roofs(roofs))
        print(
            f"  ({'read from ' + str(roofs.cache_path) if roofs.from_cache else f'measured in {time.perf_counter() - t0:.1f} s'})\n"
        )
        out["roofs"] = roofs.to_json()

    flops, rows = [], []
    out["models"] = {}
    for name in a.models:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(num_classes=CLASSES).to(device)
        f = count_flops(model, INPUT, batch=2, name=name)
        b = count_bytes(model, INPUT, batch=a.batch, name=name)
        ai = arithmetic_intensity(f, b)
        flops.append(f)
        rows.append((name, f, b, ai))
        out["models"][name] = {"flops": f.to_json(), "bytes": b.to_json(), "intensity": ai.as_fields()}
        del model
        if device == "cuda":
            torch.cuda.empty_cache()

    print("FLOPs per sample, M (counter = FlopCounterMode; ana = Conv/Linear hooks):")
    print(format_table(flops))
    for f in flops:
        if f.why != "counter":
            print(f"  {f.model}: {f.why}")
    print(
        f"\nBytes per sample at batch {a.batch}, MB (upper: every aten op's inputs + outputs; lower: params + grads + input + output once)"
    )
    print(
        f"{'model':<16}{'fwd up':>9}{'fwd low':>9}{'trn up':>9}{'trn low':>9}{'params':>9}{'saved/smp':>10}   AI fwd (low-high)   AI train (low-high) FLOP/B"
    )
    for name, _, b, ai in rows:
        m = b.memory
        print(
            f"{name:<16}{b.forward_bytes / 1e6:>9.2f}{b.forward_bytes_lower / 1e6:>9.3f}{b.train_bytes / 1e6:>9.2f}{b.train_bytes_lower / 1e6:>9.3f}"
            f"{m.param_bytes / 1e6:>9.2f}{m.saved_activation_bytes / b.batch / 1e6:>10.2f}"
            f"   {ai.forward_low:>6.1f} - {ai.forward_high:<7.1f}    {ai.train_low:>6.1f} - {ai.train_high:<7.1f}"
        )
    bw = roofs.bandwidth() if roofs is not None else None
    if roofs is not None and bw is not None:
        out["ridge_flops_per_byte"] = {}
        for precision in ("fp32", "tf32", "bf16"):
            peak = roofs.compute(precision)
            if peak is None:
                continue
            ridge = peak.value / bw.value
            out["ridge_flops_per_byte"][precision] = ridge
            print(
                f"\n{precision}: ridge {peak.name} {peak.value / 1e12:.3g} TFLOP/s / {bw.name} {bw.value / 1e9:.4g} GB/s = {ridge:.1f} FLOP/B"
            )
            for name, _, _, ai in rows:
                low, high = (min(peak.value, bw.value * x) / 1e12 for x in (ai.train_low, ai.train_high))
                print(f"  {name:<16} train attainable {low:.3g} - {high:.3g} TFLOP/s")

    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_name(a.out.name + ".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=str))
    tmp.replace(a.out)
    print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
