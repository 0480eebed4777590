"""torch-cuda variant strings, parsed without importing torch (validation runs before any import).

A variant combines options with '+': graphs (one CUDA graph per step), bf16 | fp16
(autocast), cl (channels_last), compile (torch.compile). `tuned` = TUNED, the combination
measured fastest on an H100 (results/reference/H100-80GB-HBM3/variant_sweep_3epochs.log).
"""

from __future__ import annotations

from bench.core.errors import KitError

TUNED = "compile+graphs"  # fastest fp32 combination in an H100 sweep (3 epochs, 2026-11-21): 1.14M samples/s
# vs graphs+bf16+cl 1.09M, graphs+bf16 1.06M, graphs 0.94M, eager 0.21M
OPTIONS = ("graphs", "bf16", "fp16", "cl", "compile")


def parse_variant(variant: str) -> set[str]:
    """The option set of VARIANT (empty for default); KitError for an impossible combination."""
    if variant == "default":
        return set()
    opts = set((TUNED if variant == "tuned" else variant).split("+"))
    bad = opts - set(OPTIONS)
    if bad:
        raise KitError(
            f"torch-cuda variant {variant!r}: unknown option(s) {', '.join(sorted(bad))}; "
            f"combine {', '.join(OPTIONS)} with '+' (or default, tuned)"
        )
    if {"bf16", "fp16"} <= opts:
        raise KitError("torch-cuda variant: choose one of bf16 or fp16")
    if "fp16" in opts and "graphs" in opts:
        raise KitError("torch-cuda variant: fp16 needs a GradScaler, which is not graph-safe here; use bf16 with graphs")
    return opts
