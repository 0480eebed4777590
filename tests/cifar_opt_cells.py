"""cifar-opt result cells built in a test: one epoch row and an inference row per deployment
form, 3 seeds a configuration (tests/test_cifar_opt_report.py, tests/test_cifar_opt_claims.py)."""

from __future__ import annotations

from pathlib import Path

from bench.core.resultset import ResultCell, group_repeats

GPU, CPU = "NVIDIA H100 80GB HBM3", "Intel Xeon, 16 cores"


def cell(
    backend, variant, model, repeat, run, device, img_s, lat=None, real=False, n_train=5000, acc=0.5, rss=1000.0, gpu_mb=None
):
    """One ok cell: one epoch row (epoch_s from img_s and n_train), one inference row per form in
    LAT (form -> (p50 ms, accuracy drop in points)). The host is what system.json would say of
    DEVICE: cells of one device are one host."""
    base = {
        "study": "cifar-opt",
        "backend": backend,
        "variant": variant,
        "seed": 0,
        "repeat": repeat,
        "status": "ok",
        "host": "h",
        "device": device,
        "model": model,
        "pipeline": "loader",
        "dataset": "cifar10" if real else "cifar10-synthetic",
        "dataset_real": real,
    }
    epoch = {
        **base,
        "phase": "epoch",
        "epoch": 1,
        "epoch_s": n_train / img_s,
        "samples_per_s": img_s,
        "test_acc": acc,
        "n_train": n_train,
        "rss_peak_mb": rss,
        "batch_size": 32,
    }
    if gpu_mb is not None:
        epoch["gpu_alloc_peak_mb"] = gpu_mb
    rows = [epoch]
    for form, (ms, drop) in (lat or {}).items():
        size = 11.0 if form.startswith("int8") else 44.8
        rows.append(
            {**base, "phase": "inference", "form": form, "latency_p50_ms": ms, "acc_drop_pts": drop, "model_size_mb": size}
        )
    params = {"model": model, "batch_size": 32, "pipeline": "loader", "n_train": n_train, "epochs": 1, "dataset": base["dataset"]}
    spec = {"study": "cifar-opt", "backend": backend, "variant": variant, "seed": 0, "repeat": repeat, "params": params}
    gpu = {} if backend == "torch-cpu" else {"gpu": {"name": device}, "gpu_count": 1}
    system = {"cpu_model": CPU, "cpu_logical_cores": 16, **gpu}
    return ResultCell(Path(f"/r/{run}/cifar-opt/{backend}_{model}_{variant}_{repeat}"), rows, system, spec=spec, origin=run)


def seeds(backend, variant, run, device, img_s, lat=None, model="resnet18", **kw):
    """3 seeds of one configuration, a little noise between them."""
    return [
        cell(
            backend,
            variant,
            model,
            r,
            run,
            device,
            img_s * (1 + 0.02 * r),
            {f: (ms * (1 - 0.02 * r), d) for f, (ms, d) in (lat or {}).items()},
            **kw,
        )
        for r in range(3)
    ]


def groups(*cells_lists):
    return group_repeats([c for cs in cells_lists for c in cs])
