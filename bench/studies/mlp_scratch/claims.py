"""Seed 001's claims (Tables 3-5, Fig. 3 and its results), as data: bench.core.claims."""

from __future__ import annotations

from bench.core.claims import faster

# seed 001's Table 3: 500 iterations in 42.3 s (NumPy) and 15.1 s (CuPy); no hardware named
CLAIMS = (
    # NumPy's side: its runs inside the GPU cell, interleaved with CuPy's in one process (the CPU
    # platform's own NumPy cell is another process)
    faster(
        "cupy-over-numpy",
        "GPU (CuPy) over CPU (NumPy)",
        {"backend": "cupy"},
        {"backend": "numpy", "cell_platform": "cuda"},
        "Table 3",
        42.3 / 15.1,
        "42.3 s / 15.1 s",
    ),
    faster(
        "tuned-over-cupy",
        "CuPy tuned (fused, graphed) over CuPy as written",
        {"backend": "cupy-tuned"},
        {"backend": "cupy"},
        "the kit",
    ),
)
