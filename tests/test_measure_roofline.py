"""Roofline building blocks: FLOP counts against hand counts, the depthwise-backward finding,
the byte counter on ops of known size, the memory model, and CPU roofs with their cache."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from bench.measure.bytecount import ByteCounter, arithmetic_intensity, count_bytes  # noqa: E402
from bench.measure.flops import count_flops, format_table  # noqa: E402
from bench.measure.roofs import (  # noqa: E402
    SIZES,
    RoofSizes,
    _fp32_precision,
    cache_dir,
    datasheet_peaks,
    device_id,
    device_info,
    get_roofs,
)

TINY = RoofSizes(gemm_n=64, conv=(1, 4, 8, 3), stream_mib=0.25, repeats=5, warmup=1)


@pytest.fixture(autouse=True)
def _a_quiet_machine(monkeypatch):
    """The load average the roofs see: quiet, so a cache written here is reused whatever the
    test machine's real load does between two calls (the test of a busy cache sets its own)."""
    import bench.measure.roofs as roofs_mod

    monkeypatch.setattr(roofs_mod, "_load_avg", lambda: 0.5)


# ---- FLOPs ---------------------------------------------------------------------------------


def test_tiny_conv_net_flops_match_hand_counts():
    # conv 3->4, 3x3, pad 1 on 8x8: 2 * 4*8*8 outputs * 3*9 MACs = 13,824 FLOPs per sample
    # linear 256->5: 2 * 256 * 5 = 2,560; forward 16,384
    # train: conv is the first layer (no grad-input): + 13,824 grad-weight;
    #        linear: + 2,560 grad-input + 2,560 grad-weight  -> 35,328
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5))
    c = count_flops(net, (3, 8, 8), batch=3)
    assert c.forward_flops == c.forward_flops_analytic == 16_384
    assert c.train_flops_counted == c.train_flops_analytic == 35_328
    assert c.train_flops_used == 35_328 and c.why == "counter"
    assert c.train_to_forward_counted == pytest.approx(35_328 / 16_384)
    first, last = c.layers
    assert (first.kind, first.grad_input, first.grad_weight) == ("Conv2d", 0.0, 13_824)
    assert (last.kind, last.forward, last.grad_input, last.grad_weight) == ("Linear", 2_560, 2_560, 2_560)
    assert last.counter_train == last.train  # the counter's per-module figure for the same layer
    assert c.by_module_forward["Global"] == {"aten.convolution": 13_824, "aten.addmm": 2_560}
    assert c.counter == "torch.utils.flop_counter.FlopCounterMode"
    fields = c.as_fields()
    assert fields["train_flops_per_sample"] == 35_328 and fields["train_flops_why"] == "counter"
    assert json.loads(json.dumps(c.to_json()))["layers"][0]["train"] == 2 * 13_824


def test_linear_alone_and_per_sample_is_batch_independent():
    # Linear(10, 7): forward 2*10*7 = 140 FLOPs per sample; the input needs no grad, so training
    # adds only grad-weight (140): train / forward = 2, not 3.
    lin = nn.Linear(10, 7)
    for batch in (1, 4):
        c = count_flops(lin, (10,), batch=batch)
        assert (c.forward_flops, c.train_flops_counted, c.train_flops_analytic) == (140, 280, 280)
        assert c.train_to_forward_analytic == 2.0


def test_depthwise_backward_is_overcounted_by_groups_and_the_analytic_count_is_used():
    # pointwise 3->8 then depthwise 8 channels (groups=8), 3x3, pad 1, on 10x10 (per sample):
    #   pw forward  2 * 8*100 * 3     =  4,800   (first layer: grad-weight only)
    #   dw forward  2 * 8*100 * 1*9   = 14,400   (grad-input 14,400 + grad-weight 14,400)
    # analytic train = 4,800 + 14,400 + 4,800 + 2 * 14,400 = 52,800
    # FlopCounterMode (torch <= 2.14 at least) counts the depthwise grad-weight x groups:
    #   aten.convolution_backward's formula ignores `groups` -> 8 * 14,400 = 115,200
    # If this fails because torch fixed flop_counter's conv_backward_flop, update the finding in
    # bench/measure/flops.py's docstring and this test.
    net = nn.Sequential(nn.Conv2d(3, 8, 1, bias=False), nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False))
    c = count_flops(net, (3, 10, 10), batch=2)
    assert c.forward_flops == c.forward_flops_analytic == 19_200
    assert c.train_flops_analytic == 52_800
    assert c.train_flops_counted == 52_800 - 14_400 + 8 * 14_400
    assert c.train_flops_corrected == 52_800  # the groups-aware formula agrees with the analytic count
    assert c.train_flops_used == 52_800
    assert c.why.startswith("analytic (FlopCounterMode overcounts grouped conv backward by 2.91x")
    dw = c.layers[1]
    assert (dw.groups, dw.counter_train, dw.train) == (8, 14_400 + 14_400 + 8 * 14_400, 3 * 14_400)
    assert "analytic" in format_table([c]).splitlines()[1]


def test_the_counter_counts_the_same_ops_a_depthwise_backward_dispatches():
    # evidence for the finding: one aten.convolution_backward with groups = channels
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "convolution" in str(func):
                seen.append((str(func), args[-2] if func is torch.ops.aten.convolution_backward.default else args[-1]))
            return func(*args, **(kwargs or {}))

    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)
    with Log():
        conv(x).sum().backward()
    assert seen == [("aten.convolution.default", 8), ("aten.convolution_backward.default", 8)]


@pytest.mark.slow
def test_torchvision_models_at_64px():
    torchvision = pytest.importorskip("torchvision")
    r18 = count_flops(torchvision.models.resnet18(num_classes=200), (3, 64, 64))
    assert r18.why == "counter" and r18.train_to_forward_counted == pytest.approx(2.93, abs=0.01)
    assert r18.forward_flops == pytest.approx(296.3e6, rel=1e-3)
    mb = count_flops(torchvision.models.mobilenet_v2(num_classes=200), (3, 64, 64))
    assert mb.train_to_forward_counted == pytest.approx(20.3, abs=0.1)  # the "20x"
    assert mb.train_to_forward_analytic == pytest.approx(2.96, abs=0.01)
    assert mb.train_flops_corrected == mb.train_flops_used == mb.train_flops_analytic


# ---- bytes -----------------------------------------------------------------------------------


def test_byte_counter_on_ops_of_known_size():
    a, b = torch.randn(1000), torch.randn(1000)  # 4,000 bytes each
    with ByteCounter() as bc:
        a + b
    assert (bc.read_bytes, bc.written_bytes) == (8000, 4000)
    with ByteCounter() as bc:
        a.view(10, 100).t()  # views cost nothing
        a.add_(b)  # reads both, writes a
        a.copy_(b)  # reads b only, writes a
        a + a  # the same tensor twice is read once
    assert bc.by_op["aten.view.default"] == [1, 0, 0] and bc.by_op["aten.t.default"] == [1, 0, 0]
    assert bc.by_op["aten.add_.Tensor"] == [1, 8000, 4000]
    assert bc.by_op["aten.copy_.default"] == [1, 4000, 4000]
    assert bc.by_op["aten.add.Tensor"] == [1, 4000, 4000]


def test_count_bytes_and_memory_model_of_a_linear():
    # Linear(10, 7), batch 3, float32: weight 70 + bias 7 floats = 308 bytes; input 3x10 = 120;
    # output 3x7 = 84. Eval forward: addmm reads bias 28 + input 120 + weight 280 = 428, writes 84.
    lin = nn.Linear(10, 7)
    b = count_bytes(lin, (10,), batch=3, loss_fn=lambda out: out.sum())
    m = b.memory
    assert (m.param_bytes, m.grad_bytes, m.input_bytes, m.output_bytes) == (308, 308, 120, 84)
    assert m.saved_activation_bytes == 120  # addmm saves its input for grad-weight; the weight is a parameter
    assert b.forward_read_bytes * 3 == 428 and b.forward_written_bytes * 3 == 84
    assert b.forward_bytes_lower == pytest.approx((308 + 120 + 84) / 3)
    assert b.train_bytes_lower == pytest.approx((308 + 308 + 120 + 84) / 3)
    assert b.forward_bytes == b.forward_bytes_lower  # one op: reads everything once, writes the output once
    assert b.train_bytes > b.forward_bytes
    f = count_flops(lin, (10,), batch=3)
    ai = arithmetic_intensity(f, b)
    assert ai.forward_low == pytest.approx(140 / b.forward_bytes)
    assert ai.train_high == pytest.approx(280 / b.train_bytes_lower)
    assert ai.train_low < ai.train_high and set(ai.as_fields()) == {
        "forward_low_flops_per_byte",
        "forward_high_flops_per_byte",
        "train_low_flops_per_byte",
        "train_high_flops_per_byte",
    }


# ---- roofs -----------------------------------------------------------------------------------


def test_cpu_roofs_are_positive_with_units_cached_and_refreshed(tmp_path):
    r = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    assert not r.from_cache and r.torch_version == torch.__version__
    assert {"gemm_fp32", "conv_fp32", "copy", "triad", "numpy_triad"} <= set(r.roofs)
    assert "gemm_tf32" in r.skipped
    for name, roof in r.roofs.items():
        assert math.isfinite(roof.value) and roof.value > 0, name
        assert roof.unit == ("B/s" if name in ("copy", "triad", "numpy_triad") else "FLOP/s")
        assert len(roof.samples_s) == TINY.repeats and min(roof.samples_s) >= 0
        assert roof.median_s == pytest.approx(roof.work / roof.value)
    assert r.roofs["gemm_fp32"].work == 2 * 64**3 and r.roofs["gemm_fp32"].sizes["n"] == 64
    assert r.roofs["copy"].work == 2 * 0.25 * 2**20  # read + write of a 256 KiB array
    assert r.compute("fp32") is not None and r.bandwidth() is not None

    again = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    assert again.from_cache and again.roofs == r.roofs and again.measured_at == r.measured_at
    fresh = get_roofs("cpu", sizes=TINY, directory=tmp_path, refresh=True)
    assert not fresh.from_cache and fresh.roofs["gemm_fp32"].samples_s != r.roofs["gemm_fp32"].samples_s

    # the test sizes never stand in for the real ones: their own file name
    assert r.cache_path and r.cache_path.endswith(".json") and r.cache_path != str(tmp_path / f"roofs-{r.device_id}.json")


def test_a_roof_measured_on_a_busy_machine_is_measured_again_when_quieter_keeping_the_higher(tmp_path, monkeypatch):
    import bench.measure.roofs as roofs_mod

    loads = iter([9.0, 9.1])  # the first measurement: load 9 on the test's CPUs, before and after
    monkeypatch.setattr(roofs_mod, "_load_avg", lambda: next(loads, 9.0))
    monkeypatch.setattr(roofs_mod.os, "cpu_count", lambda: 2)
    first = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    assert roofs_mod.busy(first.conditions) and not first.from_cache
    # as busy now as then: the cache stands
    assert get_roofs("cpu", sizes=TINY, directory=tmp_path).from_cache
    # plant a figure no quiet run can reach on one roof, and a tiny one on another
    data = json.loads(open(first.cache_path).read())
    data["roofs"]["copy"]["value"] = 1e18
    data["roofs"]["gemm_fp32"]["value"] = 1.0
    data["roofs"]["gemm_fp32"]["median_s"] = data["roofs"]["gemm_fp32"]["work"]
    open(first.cache_path, "w").write(json.dumps(data))
    monkeypatch.setattr(roofs_mod, "_load_avg", lambda: 0.2)  # quieter now
    again = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    assert not again.from_cache and not roofs_mod.busy(again.conditions)
    kept_now = again.conditions["kept"]  # (other tiny roofs may have measured higher the first time too)
    assert again.roofs["copy"].value == 1e18 and kept_now["copy"] == first.measured_at and "gemm_fp32" not in kept_now
    assert again.roofs["gemm_fp32"].value > 1.0  # the loaded figure gave way to the new one
    kept = json.loads(open(first.cache_path).read())
    assert kept["roofs"]["copy"]["value"] == 1e18 and kept["conditions"]["kept"] == kept_now
    # a quiet cache is reused from then on
    assert get_roofs("cpu", sizes=TINY, directory=tmp_path).from_cache


def test_a_corrupt_or_stale_cache_is_measured_again(tmp_path):
    r = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    path = r.cache_path
    assert path is not None
    with open(path, "w") as f:
        f.write("{not json")
    with pytest.warns(UserWarning, match="ignoring the roofs cache"):
        again = get_roofs("cpu", sizes=TINY, directory=tmp_path)
    assert not again.from_cache and again.roofs
    assert json.loads(open(path).read())["schema"] == 1  # rewritten whole

    data = json.loads(open(path).read())
    data["torch_version"] = "0.0.1"  # measured under another torch: measure again, no warning
    with open(path, "w") as f:
        json.dump(data, f)
    assert not get_roofs("cpu", sizes=TINY, directory=tmp_path).from_cache

    data["roofs"]["copy"]["value"] = -1.0
    with open(path, "w") as f:
        json.dump(data, f)
    with pytest.warns(UserWarning, match="not a positive finite"):
        assert not get_roofs("cpu", sizes=TINY, directory=tmp_path).from_cache


def test_cache_dir_order_and_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "kit"))
    assert cache_dir() == tmp_path / "kit"
    monkeypatch.delenv("KIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cnn-bench"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "xdg"))  # cannot be created: under a file; not named
    d = cache_dir()
    assert d != blocker / "xdg" / "cnn-bench" and d.is_dir() and d.name.startswith("cnn-bench-")


def test_cpu_device_id_and_default_sizes():
    info = device_info("cpu")
    assert info["threads"] == torch.get_num_threads()
    assert device_id(info).startswith("cpu-") and device_id(info).endswith(f"-{info['threads']}t")
    assert SIZES["cuda"].gemm_n == 8192 and SIZES["cuda"].conv == (256, 256, 56, 3) and SIZES["cpu"].repeats >= 5
    with pytest.raises(ValueError, match="not supported"):
        device_info("meta")


def test_datasheet_peaks_match_gpu_names():
    def sheet(name: str):
        peaks = datasheet_peaks(name)
        assert peaks is not None, name
        return peaks

    assert sheet("NVIDIA H100 80GB HBM3").product == "H100 SXM"  # what an H100 SXM calls itself
    assert sheet("NVIDIA H100 PCIe").product == "H100 PCIe"
    assert sheet("NVIDIA H200").mem_tb_per_s == 4.8
    assert sheet("NVIDIA A100-SXM4-80GB").mem_tb_per_s == 2.039
    assert sheet("Tesla T4").bf16_tflop_per_s is None
    assert sheet("NVIDIA L40S").product == "L40S"
    assert sheet("NVIDIA L4").product == "L4"
    for unknown in ("NVIDIA A10G", "NVIDIA H200 NVL", "NVIDIA H100 NVL", "AMD Instinct MI300X"):
        assert datasheet_peaks(unknown) is None, unknown


def test_tf32_switch_is_restored():
    mm = torch.backends.cuda.matmul
    before = getattr(mm, "fp32_precision", None)
    with _fp32_precision("ieee"):
        if before is not None:
            assert mm.fp32_precision == "ieee"
    assert getattr(mm, "fp32_precision", None) == before


def test_measuring_the_roofs_leaves_torchs_random_state_as_it_was(tmp_path):
    """A roof measured or read from the cache: what trains next draws the same random numbers
    (a roofline sweep's dropout masks, hence its losses, once differed between the two)."""
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    get_roofs("cpu", sizes=TINY, directory=tmp_path, refresh=True)
    assert torch.equal(torch.random.get_rng_state(), before)
