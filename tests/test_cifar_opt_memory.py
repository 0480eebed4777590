"""cifar-opt's Tuned peak memory is the trained model's own, not the Optuna search's.

A search leaves memory behind: cuBLAS's workspaces (64 MiB each, one per (handle, stream),
allocated through torch's allocator and never freed) and the allocator's cached blocks. So the
trials' warm-ups share one stream, and after the search the cell collects garbage, frees those
workspaces and the cached blocks, zeroes the peak counters and trims the heap
(trainer.release_memory) before the picked model is built; the search's own peaks are reported
on its rows. Tested here with a fake
allocator standing in for CUDA's (no GPU on CI), and for real on the CPU."""

from __future__ import annotations

import types
import weakref

import numpy as np
import pytest

from bench.core.registry import get_study

torch = pytest.importorskip("torch")
pytest.importorskip("optuna")


@pytest.fixture(scope="module")
def study():
    return get_study("cifar-opt")


@pytest.fixture(scope="module")
def tiny():
    """300 train / 100 test uint8 images, 10 learnable classes."""
    rng = np.random.default_rng(0)
    y = np.arange(400) % 10
    x = rng.integers(0, 60, size=(400, 3, 32, 32), dtype=np.uint8)
    x[:, y % 3, :, :] += (y[:, None, None] * 19).astype(np.uint8)
    return x, y.astype(np.int64)


def _ctx(tmp_path):
    from bench.core.study import RunContext

    return RunContext(out=tmp_path, cell_dir=tmp_path, data_dir=None, run_id="test")


def _split(tiny):
    from bench.studies.cifar_opt.trainer import Split

    x, y = tiny
    return Split(x[:300], y[:300], x[300:], y[300:])


class FakeCuda:
    """CUDA's caching allocator as far as the peak counters see it: named live allocations (MB)."""

    def __init__(self):
        self.live: dict[str, float] = {}
        self.peak = 0.0
        self.calls: list[str] = []

    def alloc(self, key: str, mb: float) -> None:
        self.live[key] = mb
        self.peak = max(self.peak, sum(self.live.values()))

    def free(self, key: str) -> None:
        self.live.pop(key, None)

    # the torch.cuda functions the kit calls
    def memory_allocated(self, dev=None) -> float:
        return sum(self.live.values()) * 1e6

    def max_memory_allocated(self, dev=None) -> float:
        return self.peak * 1e6

    def reset_peak_memory_stats(self, dev=None) -> None:
        self.calls.append("reset")
        self.peak = sum(self.live.values())

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")

    def synchronize(self, dev=None) -> None:
        pass

    def clear_cublas_workspaces(self) -> None:
        self.calls.append("clear_workspaces")
        for k in [k for k in self.live if k.startswith("workspace")]:
            self.free(k)


class FakeTrainer:
    """A trainer on 'cuda' whose memory lives in FakeCuda: its model (freed with it), its warm-up
    stream's cuBLAS workspace (outlives it, as the real one does), activations during an epoch."""

    made = 0

    def __init__(self, cuda: FakeCuda, batch: int, lr: float):
        from bench.measure import torchdev

        FakeTrainer.made += 1
        self.n, self.cuda, self.torchdev = FakeTrainer.made, cuda, torchdev
        self.device = torch.device("cuda")
        self.batch, self.opt, self.pipe = (
            batch,
            types.SimpleNamespace(param_groups=[{"lr": lr}]),
            types.SimpleNamespace(workers=0),
        )
        self.model = torch.nn.Linear(4, 10)  # what the cell counts (n_params); its memory is FakeCuda's 100 MB
        cuda.alloc(f"model{self.n}", 100.0)
        weakref.finalize(self, cuda.free, f"model{self.n}")

    def warmup(self, steps: int = 3) -> float:
        self.cuda.alloc(f"workspace{self.n}", 64.0)
        return 0.0

    def train_epoch(self) -> dict:
        self.cuda.alloc("activations", 50.0)
        self.cuda.free("activations")
        return {"steps": 3, "samples": 3 * self.batch, "train_loss": 1.0}

    def evaluate(self, batch: int = 500) -> float:
        return 0.5

    def reset_peak(self) -> None:
        self.torchdev.reset_peak(self.device)

    def memory(self) -> dict:
        return self.torchdev.memory_peaks(self.device)

    def sync_device(self) -> None:
        pass

    def python_heap_peak_mb(self, steps: int = 4) -> float:
        return 0.1


def test_the_search_is_not_counted_in_the_tuned_models_peak(study, tiny, tmp_path, monkeypatch):
    from bench.studies.cifar_opt.config import settings
    from bench.studies.cifar_opt.protocol import CellRun
    from bench.studies.cifar_opt.search import Search

    cuda = FakeCuda()
    for name in ("memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "empty_cache", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", cuda.max_memory_allocated)
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", cuda.clear_cublas_workspaces, raising=False)
    cfg = settings(study.cell("torch-cuda", "optuna", n_train=300, n_test=100, epochs=1, trials=3, threads=1, num_workers=0))

    def make(split, bs, lr, variant=None):
        return FakeTrainer(cuda, bs, lr)

    x, y = tiny
    run = CellRun(cfg, _ctx(tmp_path), _split(tiny), {}, 1, 3, make, search=Search(cfg, x[:300], y[:300], tmp_path, make))
    rows = [r for i in range(4) for r in run.step(i)]
    trials = [r for r in rows if r.get("phase") == "trial"]
    assert len(trials) == 3 and all(r["trial_gpu_alloc_peak_mb"] >= 164 for r in trials)
    pick = next(r for r in rows if r.get("phase") == "search")
    assert pick["search_gpu_alloc_peak_mb"] >= 164 + 2 * 64, "the search's own peak: earlier trials' workspaces and all"
    epoch = next(r for r in rows if r.get("phase") == "epoch")
    # the picked model: its weights (100), its warm-up workspace (64), its activations (50); none of the 3 trials'
    assert epoch["gpu_alloc_peak_mb"] == pytest.approx(214.0), cuda.live
    assert epoch["after_search_gpu_alloc_before_mb"] == pytest.approx(3 * 64.0)
    assert epoch["after_search_gpu_alloc_after_mb"] == 0
    assert cuda.calls.index("clear_workspaces") < cuda.calls.index("empty_cache")
    assert run.released["gpu_alloc_before_mb"] == pytest.approx(192.0)  # system.json's released_after_search


def test_a_real_cpu_search_is_released_before_the_picked_model_trains(study, tiny, tmp_path, monkeypatch):
    """On the CPU, for real: the search's rows carry its RSS peaks, and release_memory runs after
    the last trial, before the picked model is built, its RSS before and after on epoch 1."""
    from bench.studies.cifar_opt import protocol
    from bench.studies.cifar_opt.config import settings
    from bench.studies.cifar_opt.search import Search
    from bench.studies.cifar_opt.trainer import Trainer

    torch.set_num_threads(1)
    cfg = settings(
        study.cell(
            "torch-cpu",
            "optuna",
            model="mobilenet_v2",
            n_train=300,
            n_test=100,
            epochs=1,
            trials=2,
            threads=1,
            num_workers=0,
            pipeline="resident",
        )
    )
    events: list[str] = []
    real_release = protocol.release_memory

    def release(device):
        events.append("release")
        return real_release(device)

    def make(split, bs, lr, variant=None):
        events.append("make")
        return Trainer(cfg, split, bs, lr, cfg.seed, variant)

    monkeypatch.setattr(protocol, "release_memory", release)
    x, y = tiny
    run = protocol.CellRun(
        cfg, _ctx(tmp_path), _split(tiny), {}, 1, 2, make, search=Search(cfg, x[:300], y[:300], tmp_path, make)
    )
    rows = [r for i in range(3) for r in run.step(i)]
    assert events == ["make", "make", "release", "make"], events
    trials = [r for r in rows if r.get("phase") == "trial"]
    assert all(r["trial_rss_peak_mb"] > 0 and r["trial_gpu_alloc_peak_mb"] is None for r in trials)
    pick = next(r for r in rows if r.get("phase") == "search")
    assert pick["search_rss_peak_mb"] == max(r["trial_rss_peak_mb"] for r in trials)
    epoch = next(r for r in rows if r.get("phase") == "epoch")
    assert epoch["after_search_rss_before_mb"] > 0 and epoch["after_search_rss_after_mb"] > 0
    assert epoch["gpu_alloc_peak_mb"] is None and epoch["rss_peak_mb"] > 0


def test_release_memory_on_the_cpu_reports_rss():
    from bench.studies.cifar_opt.trainer import release_memory

    out = release_memory("cpu")
    assert set(out) == {"rss_before_mb", "rss_after_mb"} and all(v > 0 for v in out.values())


def test_warm_ups_share_one_stream_per_gpu(monkeypatch):
    """A new stream per trainer left a cuBLAS workspace per trial behind."""
    from bench.studies.cifar_opt import trainer

    made = []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: made.append(device) or object())
    monkeypatch.setattr(trainer, "_WARMUP_STREAMS", {})
    a = trainer.warmup_stream(torch.device("cuda", 0))
    b = trainer.warmup_stream(torch.device("cuda", 0))
    c = trainer.warmup_stream(torch.device("cuda", 1))
    assert a is b and a is not c and made == [0, 1]
