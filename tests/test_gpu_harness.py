"""lab/gpu_harness.py for real on the CPU, tiny (squeezenet1_1 at 32 px, batch 2): the in-process arms
with their paired ratios and the host profile, fresh processes with their candidates, the summary's
statistics, and bad input as one line. No mocks; no wall-clock bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--device", "cpu", "--precision", "fp32"]


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.gpu_harness", *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_inproc_times_every_arm_in_one_process_and_pairs_them_by_round(tmp_path: Path) -> None:
    r = harness("inproc", *TINY, "--configs", "squeezenet1_1:32:2", "--rounds", "2", "--block-steps", "1", "--profile-steps", "2",
                "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "gpu_harness-inproc.json").read_text())
    assert doc["meta"]["status"] == "ok"
    (c,) = doc["configs"]
    assert (c["model"], c["image_size"], c["batch"]) == ("squeezenet1_1", 32, 2)
    assert set(c["blocks_s"]) == {"bare", "kit-quiet", "kit", "kit-threads", "profile"}
    assert {"kit/kit-threads", "kit-threads/kit-quiet"} <= set(c["ratios"])
    assert all(len(v) == 2 and min(v.values()) > 0 for v in c["blocks_s"].values())
    for name, q in c["ratios"].items():
        num, den = name.split("/")
        blocks = c["blocks_s"]
        per = [blocks[num][k] / blocks[den][k] for k in blocks[num]]
        assert q["kind"] == "range" and q["lo"] == pytest.approx(min(per)) and q["hi"] == pytest.approx(max(per))
    for side in ("bare", "kit"):
        assert len(c["host_profile"][side]["host_step_us"]) == 2 and c["host_step_us_median"][side] > 0
    assert "squeezenet1_1 32px b2 fp32" in r.stdout and "kit/kit-quiet" in r.stdout


@pytest.mark.slow
def test_spread_runs_each_process_fresh_and_correlates_the_candidates(tmp_path: Path) -> None:
    r = harness("spread", *TINY, "--config", "squeezenet1_1:32:2", "--procs", "2", "--variants", "bench", "pinned",
                "--steps", "2", "--warmup", "1", "--out", str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "gpu_harness-spread-squeezenet1_1-b2.json").read_text())
    runs = doc["runs"]
    assert sorted(x["variant"] for x in runs) == ["bench", "bench", "pinned", "pinned"]
    assert len({x["pid"] for x in runs} | {os.getpid()}) == 5  # every run a process of its own
    assert all(x["img_per_s"] > 0 and x["cpu_probe"]["torch_op_us"] > 0 and x["host_cpu_ms_per_step"] > 0 for x in runs)
    assert {x["affinity"] for x in runs if x["variant"] == "pinned"} == {min(2, len(os.sched_getaffinity(0)))}
    s = doc["summary"]
    assert s["bench"]["n"] == 2 and s["pinned"]["n"] == 2
    assert s["_img_per_s_vs"]["host_cpu_ms_per_step"]["n"] == 4
    for x in runs:  # where each process spent its host time, and the profile that splits it by op
        assert x["threads"]["threads"] and x["profiled_self_cpu_us_per_step"] > 0
        assert any("conv" in k for k in x["profiled_top_ops"]) and min(x["profiled_top_ops"].values()) >= 1.0
        if x["variant"] == "pinned":  # every busy thread ran on the CPUs the process bound itself to
            assert {t["cpu_num"] for t in x["threads"]["threads"]} <= set(x["pinned_cpus"])
    assert {tuple(x["pinned_cpus"]) for x in runs if x["variant"] == "pinned"} == {tuple(pick_cores(2))}
    bench = [x for x in runs if x["variant"] == "bench"]
    slow, fast = min(bench, key=lambda x: x["img_per_s"]), max(bench, key=lambda x: x["img_per_s"])
    sf = s["bench"]["slow_vs_fast"]
    assert sf["step_ratio"] == pytest.approx(fast["img_per_s"] / slow["img_per_s"])
    op, got = next(iter(sf["op_ratios"].items()))
    assert got == pytest.approx(slow["profiled_top_ops"][op] / fast["profiled_top_ops"][op])
    assert set(sf["op_ratios"]) | set(sf["only_slow_us"]) == set(slow["profiled_top_ops"])


def pick_cores(n: int) -> list[int]:
    from lab.gpu_harness import pick_cores as pick

    return pick(n)


def test_pinning_takes_one_cpu_per_physical_core() -> None:
    from lab.gpu_harness import _cpu_range

    got = pick_cores(2)
    allowed = os.sched_getaffinity(0)
    assert len(got) == min(2, len(allowed)) and set(got) <= allowed and got == sorted(got)
    for cpu in got:  # no two of them hyperthread siblings
        sib = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        if sib.exists():
            sibs = {i for part in sib.read_text().strip().split(",") for i in _cpu_range(part)}
            assert not (sibs - {cpu}) & set(got)
    assert list(_cpu_range("3-5")) == [3, 4, 5] and list(_cpu_range("7")) == [7]


def test_the_probe_needs_a_cpu_of_its_own_and_never_outlives_its_block() -> None:
    from lab.gpu_harness import Probe

    with pytest.raises(RuntimeError, match="needs a CPU besides the training's"):
        Probe({0, 1}, {1})
    with Probe(set(os.sched_getaffinity(0)), set()) as p:
        import time

        time.sleep(0.3)
        ends = p.stop()
    assert len(ends) >= 2 and ends == sorted(ends) and p.proc.returncode == 0 and not p.dir.exists()
    with (
        pytest.raises(KeyError),
        Probe(set(os.sched_getaffinity(0)), set()) as p,
    ):  # the training raised: the loop is killed, its folder gone
        raise KeyError("the training failed")
    assert p.proc.poll() is not None and not p.dir.exists()


def test_co_wander_tells_a_host_that_slowed_from_a_training_that_did() -> None:
    """Step ends and probe ends over 4 s: when the steps slow, so does the probe (one host, rho near
    +1); a probe that kept its pace says the training slowed on its own (no rank correlation)."""
    from lab.gpu_harness import co_wander

    def ends(rate_of, t_end: float = 4.0) -> list[float]:
        t, out = 0.0, []
        while t < t_end:
            t += rate_of(t)
            out.append(t)
        return out

    slow = lambda t: 1.0 + (0.5 if int(t / 0.5) % 2 else 0.0) + t / 40  # noqa: E731 - slow halves, and a drift
    steps = ends(lambda t: 0.02 * slow(t))
    together = co_wander(steps, ends(lambda t: 0.002 * slow(t)))
    assert together["windows"] >= 12 and together["rho"] > 0.8
    assert together["step_wander"] == pytest.approx(together["probe_wander"], rel=0.25)
    apart = co_wander(steps, ends(lambda t: 0.002))
    assert apart["probe_wander"] < 0.05 and abs(apart["rho"]) < 0.5
    assert co_wander(steps[:20], ends(lambda t: 0.002)) == {"windows": 1}  # too short to rank


def test_the_spread_summary_ranks_each_candidate_against_img_per_s() -> None:
    from lab.gpu_harness import spread_summary

    def run(v: str, ips: float, cpu_ms: float, sig: str) -> dict:
        return {"variant": v, "img_per_s": ips, "host_cpu_ms_per_step": cpu_ms, "gpu_busy_ms_per_step": 5.0,
                "cpu_probe": {"torch_op_us": cpu_ms / 10, "python_loop_us": 0.05}, "nvml_after": {}, "warmup_s": 1.0,
                "kernel_sig": sig}  # fmt: skip

    runs = [run("bench", 4000 + 100 * i, 30 - i, "a" if i % 2 else "b") for i in range(6)]
    s = spread_summary(runs)
    assert s["bench"]["spread"] == pytest.approx(4500 / 4000 - 1)
    assert s["bench"]["kernel_sigs"] == {"b": 3, "a": 3} and s["bench"]["kind"] == "ci"
    assert s["_img_per_s_vs"]["host_cpu_ms_per_step"]["rho"] == pytest.approx(-1.0)
    assert "gpu_busy_ms_per_step" not in s["_img_per_s_vs"]  # one value: nothing to rank


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["inproc", "--configs", "resnet50:64"], "want model:px:batch"),
        (["spread", "--rounds", "0", "--device", "cpu"], "must be >= 1"),
        (["inproc", "--device", "cuda"], "torch sees no CUDA GPU"),
        (["inproc", "--step", "graph", "--device", "cpu"], "--step graph needs --device cuda"),
        (["sideways"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line(args: list[str], said: str, tmp_path: Path) -> None:
    import torch

    if args[-1] == "cuda" and torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = harness(*args, "--out", str(tmp_path))
    assert r.returncode == 2
    assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.glob("gpu_harness-*.json"))


def test_the_committed_h100_sweeps_show_the_issues_two_configurations_host_paced(tmp_path: Path, capsys) -> None:
    """lab/host_floor.py on the committed H100 roofline reference: ResNet-50 bf16-cl at batch 128 and
    MobileNetV2 bf16-cl at 256 step in about the time of batch 16 (the host sets the pace)."""
    from lab.host_floor import floor_of, main

    out = tmp_path / "floor.json"
    assert main([str(ROOT / "results/reference/H100-80GB-HBM3-roofline"), "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    (r50,) = [g for k, g in got.items() if "resnet50_bf16-cl_sweep" in k]
    (mnv2,) = [g for k, g in got.items() if "mobilenet_v2_bf16-cl_sweep" in k]
    assert 128 in r50["host_paced"] and 256 in mnv2["host_paced"] and 4096 not in r50["host_paced"]
    assert floor_of([(16, 10.0), (32, 10.0), (64, 10.0), (128, 12.0), (256, 20.0), (512, 13.0)]) == {
        "floor_ms": 10.0, "host_paced_up_to": 128, "host_paced": [16, 32, 64, 128, 512],
        "points": [(16, 10.0), (32, 10.0), (64, 10.0), (128, 12.0), (256, 20.0), (512, 13.0)],
    }  # fmt: skip
    assert floor_of([(16, 10.0), (32, 10.0)]) is None
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip().endswith("not a directory")


def test_the_committed_graph_blocks_decide_the_samplers_cost_under_one_percent() -> None:
    """The committed H100 on/off blocks with every step a CUDA graph (README there: "The samplers'
    cost at short GPU-paced steps"): the kit's samplers against none, and the profile sampler, each
    with an interval whose upper end is under 1 %, from blocks the kit's checked capture ran."""
    ref = ROOT / "results/reference/H100-80GB-HBM3-harness"
    for name in ("resnet50-224", "mobilenet_v2-224"):
        doc = json.loads((ref / f"gpu_harness-inproc-graph-{name}.json").read_text())
        assert doc["meta"]["status"] == "ok" and "--step graph" in doc["meta"]["command"]
        (cfg,) = doc["configs"]
        assert cfg["step"] == "graph" and cfg["graph_check"]["graph_check_loss_rel"] == 0.0
        assert 10 <= min(cfg["step_ms"].values()) and max(cfg["step_ms"].values()) <= 25  # the issue's short step
        for key in ("kit/kit-quiet", "profile/kit-quiet"):
            r = cfg["ratios"][key]
            assert r["kind"] == "ci" and r["n"] >= 30 and r["hi"] < 1.01 and r["lo"] > 0.99, (name, key, r)
