"""The numba-cuda kernel package (bench/studies/mnist_cnn/kernels/numba_cuda/) as the GPU check
finds it, without a GPU: the variants `scripts/gpu_run.sh numba` checks exist, the kernels its
Nsight Compute filter selects carry the names the filter matches (kernels built by the shared
per-sample factories are named explicitly), and a variant name is checked before any device
work. The kernels' results are tested under the CUDA simulator (tests/test_numba_cuda_sim.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
K = pytest.importorskip("bench.studies.mnist_cnn.kernels.numba_cuda")
from bench.studies.mnist_cnn.kernels.numba_cuda import v2_fast, v3_split, v4_tiled, v6_sparse, v7_unsigned, v8_uconv  # noqa: E402
from bench.studies.mnist_cnn.net import init_params  # noqa: E402

GPU_RUN = (ROOT / "scripts" / "gpu_run.sh").read_text()


def _name(kernel) -> str:
    """The Python name a kernel is compiled under (a dispatcher, the simulator's kernel, or the
    plain function where numba.cuda is missing)."""
    fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None) or kernel
    return fn.__name__


def test_the_variants_gpu_run_checks_exist_in_order():
    default = re.search(r"CHECK_VARIANTS:-([a-z,]+)", GPU_RUN)
    assert default, "scripts/gpu_run.sh no longer names its default CHECK_VARIANTS"
    checked = default.group(1).split(",")
    assert set(checked) <= set(K.VARIANTS), checked
    # variants 1 to 8, the registry keys
    assert K.VARIANTS == ("naive", "fast", "split", "tiled", "splitk", "sparse", "unsigned", "uconv")
    assert set(K.LAUNCHES_PER_STEP) == set(K.VARIANTS)
    for variant, cls in K.NETS.items():
        assert cls.VARIANT == variant


def test_the_kernels_ncu_selects_carry_their_names():
    ncu = re.search(r"-k 'regex:([^']+)'", GPU_RUN)
    assert ncu, "scripts/gpu_run.sh no longer filters kernels by name for ncu"
    pattern = re.compile(ncu.group(1))
    kernels = {
        "k_forward": v2_fast.k_forward,
        "k_backward": v2_fast.k_backward,
        "k3_conv_fwd": v3_split.k3_conv_fwd,
        "k3_fc1": v3_split.k3_fc1,
        "k3_head": v3_split.k3_head,
        "k3_dense_bwd": v3_split.k3_dense_bwd,
        "k3_conv_bwd": v3_split.k3_conv_bwd,
        "k4_conv_fwd": v4_tiled.k4_conv_fwd,
        "k4_conv_bwd": v4_tiled.k4_conv_bwd,
        "k6_conv_bwd": v6_sparse.k6_conv_bwd,
        "k7_fc1": v7_unsigned.k7_fc1,
        "k7_dense_bwd": v7_unsigned.k7_dense_bwd,
        "k8_conv_fwd": v8_uconv.k8_conv_fwd,
        "k8_conv_bwd": v8_uconv.k8_conv_bwd,
    }
    for attr, kernel in kernels.items():
        assert _name(kernel) == attr, f"{attr} is compiled as {_name(kernel)!r}"
        assert pattern.search(attr), f"ncu's filter {pattern.pattern!r} misses {attr}"
    assert v3_split.k3_conv_fwd is not v4_tiled.k4_conv_fwd  # the factory builds one kernel per call


def test_an_unknown_variant_is_refused_before_any_device_work():
    with pytest.raises(ValueError, match="variant must be one of"):
        K.DeviceNet(init_params(0), 4, "fused")
