"""Backend registry: name -> module path, imported only when asked for.

Every mnist-cnn backend module exposes the same few things:
    NAME, PIPELINES (tuple), VARIANTS (tuple)
    available() -> str | None      None, or the reason it cannot run here
    create(cfg, params, data) -> a trainer with warmup(), train_epoch(order, timer),
                                 evaluate(), memory(), params()
A CPU-only host never imports CuPy or numba.cuda, because nothing imports a module
until a cell asks for it.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from bench.errors import KitError

# study -> backend name -> module
REGISTRY: dict[str, dict[str, str]] = {
    "mnist-cnn": {
        "torch-cpu": "bench.backends.torch_cnn_cpu",
        "numba-cpu": "bench.backends.numba_cpu",
        "torch-cuda": "bench.backends.torch_cnn_cuda",
        "numba-cuda": "bench.backends.numba_cuda",
        "torch-mps": "bench.backends.torch_cnn_mps",
    },
}
PLATFORM_BACKENDS = {
    "cpu": ("torch-cpu", "numba-cpu"),
    "cuda": ("torch-cuda", "numba-cuda"),
    "mps": ("torch-mps",),
}


def backend_names(study: str) -> list[str]:
    if study not in REGISTRY:
        raise KitError(f"unknown study {study!r}: choose one of {', '.join(REGISTRY)}")
    return list(REGISTRY[study])


def load(study: str, backend: str) -> ModuleType:
    names = backend_names(study)
    if backend not in names:
        raise KitError(f"unknown backend {backend!r} for {study}: choose one of {', '.join(names)}")
    return importlib.import_module(REGISTRY[study][backend])


def why_unavailable(study: str, backend: str) -> str | None:
    """None when the backend can run here, else the reason (import failures included)."""
    try:
        mod = load(study, backend)
    except KitError:
        raise
    except Exception as err:  # noqa: BLE001 - a missing package is a reason, not a crash
        return f"cannot import: {type(err).__name__}: {err}"
    try:
        return mod.available()
    except Exception as err:  # noqa: BLE001
        return f"availability check failed: {type(err).__name__}: {err}"
