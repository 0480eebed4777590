"""bench.measure.profiling: a real torch.profiler run on CPU (trace file, op table, step
breakdown), the interval arithmetic on hand-made GPU events, and the errors."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.errors import KitError
from bench.measure.profiling import StepProfiler, breakdown_from_events, parse_trace

ROOT = Path(__file__).resolve().parent.parent
STEPS = dict(wait=1, warmup=1, active=2, repeat=1)


def _train_under_profiler(trace_dir, device_type: str) -> StepProfiler:
    """A small conv net trained for total_steps batches from a real DataLoader (num_workers=0)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    device = torch.device(device_type)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).to(
        device
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(64, 3, 16, 16), torch.randint(0, 10, (64,)))
    loader = DataLoader(data, batch_size=8, num_workers=0)
    sp = StepProfiler(trace_dir, device_type, **STEPS)
    with sp:
        batches = iter(loader)
        for _ in range(sp.total_steps):
            x, y = next(batches)  # inside the step window, so the DataLoader annotation is in it
            x, y = x.to(device), y.to(device)
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
            sp.step()
    return sp


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    return _train_under_profiler(tmp_path_factory.mktemp("prof") / "trace", "cpu")


def test_importing_the_module_does_not_import_torch():
    code = "import sys, bench.measure.profiling; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_total_steps_is_one_call_per_scheduled_step(tmp_path):
    assert StepProfiler(tmp_path, "cpu", wait=2, warmup=1, active=3, repeat=2).total_steps == 12


def test_cpu_trace_is_gzipped_json_with_step_annotations(cpu_run):
    assert cpu_run.total_steps == 4
    [path] = cpu_run.trace_paths
    assert path.name == "trace_0.json.gz" and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["trace_0.json.gz"], "temporary files left behind"
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    steps = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3"}, "wait=1 warmup=1: steps 2 and 3 are the active ones"
    assert parse_trace(path) == doc["traceEvents"]


def test_cpu_op_table_sorted_by_self_cpu(cpu_run):
    rows = cpu_run.op_table(sort_by="self_cpu", k=50)
    keys = {"name", "calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "device_total_ms", "self_cpu_share"}
    keys |= {"self_device_share", "cpu_memory_mb", "device_memory_mb", "input_shapes", "sorted_by", "sort_note"}
    assert keys <= set(rows[0])
    convs = [r for r in rows if "conv" in r["name"]]  # aten::convolution, aten::_convolution, aten::mkldnn_convolution ...
    assert convs and all(r["self_cpu_ms"] >= 0 and r["cpu_total_ms"] > 0 and r["calls"] > 0 for r in convs)
    assert any(r["self_cpu_ms"] > 0 for r in convs)
    assert [r["self_cpu_ms"] for r in rows] == sorted((r["self_cpu_ms"] for r in rows), reverse=True)
    assert sum(r["self_cpu_share"] for r in rows) <= 1 + 1e-9
    assert all(r["self_device_ms"] == 0 and r["input_shapes"] == "" for r in rows)


def test_cpu_op_table_self_device_falls_back_to_self_cpu_and_says_so(cpu_run):
    rows = cpu_run.op_table(k=5)
    assert len(rows) == 5
    assert {r["sorted_by"] for r in rows} == {"self_cpu"}
    assert "CPU-only" in rows[0]["sort_note"]
    shaped = cpu_run.op_table(sort_by="self_cpu", k=200, group_by_input_shape=True)
    assert any(r["input_shapes"] for r in shaped if "conv" in r["name"])


def test_cpu_step_breakdown(cpu_run):
    b = cpu_run.step_breakdown()
    assert b["kind"] == "cpu" and b["n_steps"] == 2
    assert [s["step"] for s in b["steps"]] == ["ProfilerStep#2", "ProfilerStep#3"]
    for s in b["steps"]:
        assert s["step_ms"] > 0 and 0 < s["compute_ms"] <= s["step_ms"] and s["dataloader_ms"] > 0
        assert s["other_ms"] == pytest.approx(s["step_ms"] - s["compute_ms"] - s["dataloader_ms"])
        assert s["other_ms"] >= 0
    assert b["mean_step_ms"] == pytest.approx(sum(s["step_ms"] for s in b["steps"]) / 2)
    assert b["compute_share"] + b["dataloader_share"] + b["other_share"] == pytest.approx(1)
    assert {"step_ms", "compute_ms", "dataloader_ms", "other_ms"} <= set(b["method"])


def _x(cat, name, ts, dur, tid=1, **extra):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, **extra}


GPU_EVENTS = [
    # two steps on the CPU thread: [1000, 2000] and [2000, 3000] us
    _x("user_annotation", "ProfilerStep#5", 1000, 1000),
    _x("user_annotation", "ProfilerStep#6", 2000, 1000),
    _x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1000, 100),
    _x("cpu_op", "aten::stack", 1020, 60),  # collate, inside the DataLoader annotation: data, not compute
    _x("cpu_op", "aten::conv2d", 1100, 200),
    _x("cpu_op", "aten::convolution", 1150, 50),  # nested: adds nothing
    _x("cpu_op", "autograd::engine::evaluate_function: X", 1250, 150, tid=2),  # autograd thread: [1100, 1400] in all
    _x("cuda_runtime", "cudaLaunchKernel", 1210, 10),  # not GPU activity
    # GPU: kernels on two streams overlap in [1400, 1500]; one crosses into step 6
    _x("kernel", "k_a", 1200, 300, tid=7),
    _x("kernel", "k_b", 1400, 200, tid=8),
    _x("gpu_memcpy", "Memcpy HtoD", 1700, 50, tid=7),
    _x("kernel", "k_c", 1900, 200, tid=7),
    _x("gpu_user_annotation", "ProfilerStep#5", 1200, 900, tid=7),  # GPU-side copy: not activity, not a step
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1500},
]


def test_breakdown_from_hand_made_gpu_events():
    b = breakdown_from_events(GPU_EVENTS)
    assert b["kind"] == "gpu" and b["n_steps"] == 2
    s5, s6 = b["steps"]
    # step 5: kernels [1200,1600] u [1900,2000] = 500 us; memcpy 50 us; busy 550; idle 1000 - 550
    assert s5["step"] == "ProfilerStep#5" and s5["step_number"] == 5
    assert s5["step_ms"] == pytest.approx(1.0)
    assert s5["kernel_ms"] == pytest.approx(0.5)
    assert s5["memcpy_ms"] == pytest.approx(0.05)
    assert s5["memset_ms"] == 0
    assert s5["gpu_busy_ms"] == pytest.approx(0.55)
    assert s5["idle_ms"] == pytest.approx(0.45)
    assert s5["dataloader_ms"] == pytest.approx(0.1)
    assert s5["cpu_op_ms"] == pytest.approx(0.3)
    # step 6: only the tail of k_c, [2000, 2100]
    assert s6["kernel_ms"] == pytest.approx(0.1) and s6["idle_ms"] == pytest.approx(0.9)
    assert s6["dataloader_ms"] == 0 and s6["cpu_op_ms"] == 0
    assert b["mean_kernel_ms"] == pytest.approx(0.3) and b["kernel_share"] == pytest.approx(0.3)
    assert b["idle_share"] == pytest.approx(0.675)
    assert "union" in b["method"]["kernel_ms"]


def test_breakdown_cpu_kind_on_the_same_events_without_gpu_activity():
    cpu_only = [e for e in GPU_EVENTS if e["cat"] not in {"kernel", "gpu_memcpy", "gpu_user_annotation"}]
    s5 = breakdown_from_events(cpu_only)["steps"][0]
    assert s5["compute_ms"] == pytest.approx(0.3) and s5["dataloader_ms"] == pytest.approx(0.1)
    assert s5["other_ms"] == pytest.approx(0.6)


def test_breakdown_without_steps_or_with_negative_durations_is_refused():
    with pytest.raises(KitError, match="no ProfilerStep"):
        breakdown_from_events([_x("cpu_op", "aten::add", 0, 1)])
    with pytest.raises(KitError, match="negative duration"):
        breakdown_from_events([_x("user_annotation", "ProfilerStep#0", 0, 10), _x("kernel", "k", 1, -1)])


def test_unwritable_trace_dir_is_one_line_at_construction(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(KitError) as err:
        StepProfiler(blocker / "trace", "cpu")
    msg = str(err.value)
    assert "\n" not in msg and str(blocker / "trace") in msg


def test_bad_arguments_are_kit_errors(tmp_path, cpu_run):
    with pytest.raises(KitError, match="device_type"):
        StepProfiler(tmp_path, "mps")
    with pytest.raises(KitError, match="active"):
        StepProfiler(tmp_path, "cpu", active=0)
    with pytest.raises(KitError, match="sort_by"):
        cpu_run.op_table(sort_by="flops")
    with pytest.raises(KitError, match="nothing recorded"):
        StepProfiler(tmp_path, "cpu").step_breakdown()


def test_parse_trace_errors_name_the_file(tmp_path):
    with pytest.raises(KitError, match="does not exist"):
        parse_trace(tmp_path / "missing.json.gz")
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(KitError, match="bad.json.gz") as err:
        parse_trace(bad)
    assert "\n" not in str(err.value)


@pytest.mark.gpu
def test_cuda_run_records_kernels(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    sp = _train_under_profiler(tmp_path / "trace", "cuda")
    b = sp.step_breakdown()
    assert b["kind"] == "gpu" and b["n_steps"] == 2
    for s in b["steps"]:
        assert 0 < s["kernel_ms"] <= s["gpu_busy_ms"] <= s["step_ms"] and s["idle_ms"] >= 0
        assert s["memcpy_ms"] > 0  # the .to(device) copies and loss.item()
    rows = sp.op_table(k=200)
    assert rows[0]["sorted_by"] == "self_device" and rows[0]["self_device_ms"] > 0
    assert not [r for r in rows if r["device_type"] == "cuda" and r["name"].startswith("ProfilerStep")]
    kernel_rows = [r for r in rows if r["device_type"] == "cuda"]
    assert 0 < sum(r["self_device_share"] for r in kernel_rows) <= 1 + 1e-9


def test_two_cycles_give_two_traces_and_op_table_covers_both(tmp_path):
    import torch

    sp = StepProfiler(tmp_path, "cpu", wait=0, warmup=1, active=1, repeat=2, record_shapes=False, profile_memory=False)
    x = torch.randn(64, 64)
    with sp:
        for _ in range(sp.total_steps):
            torch.mm(x, x)
            sp.step()
    assert [p.name for p in sp.trace_paths] == ["trace_0.json.gz", "trace_1.json.gz"]
    assert [s["step"] for s in sp.step_breakdown()["steps"]] == ["ProfilerStep#1", "ProfilerStep#3"]
    [mm] = [r for r in sp.op_table(sort_by="self_cpu", k=100) if r["name"] == "aten::mm"]
    assert mm["calls"] == 2, "acc_events: both active steps, one per cycle"


def test_op_table_levels_keep_operators_and_kernels_apart(cpu_run):
    """level=op: the CPU-side rows without annotations (no ProfilerStep*: a range, not an
    operator); level=kernel: the device rows, none on a CPU run; all: both, as before."""
    ops = cpu_run.op_table(sort_by="self_cpu", k=500, level="op")
    every = cpu_run.op_table(sort_by="self_cpu", k=500)
    assert ops and {r["level"] for r in ops} == {"op"}
    assert not any(r["name"].startswith("ProfilerStep") for r in ops)
    assert any(r["name"].startswith("ProfilerStep") for r in every)
    assert [r["self_cpu_ms"] for r in ops] == sorted((r["self_cpu_ms"] for r in ops), reverse=True)
    assert cpu_run.op_table(sort_by="self_device", k=50, level="kernel") == []
    with pytest.raises(KitError, match="level must be one of"):
        cpu_run.op_table(level="aten")
