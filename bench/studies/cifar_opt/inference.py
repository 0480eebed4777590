"""Inference of a trained model in its deployment forms: accuracy, batch-1 latency
(p50/p90/p99 over `latency_calls` synced calls after warm-up), batched throughput, size.

Forms (one row each, `form`):
    fp32-eager         the trained model as it is (CPU default, MPS)
    fp32-compiled      torch.compile, inductor with freezing (CPU compile, and int8's baseline)
    int8-dynamic       torch.ao.quantization.quantize_dynamic on Linear layers: the seed's
                       "quantized" (the convolutions stay fp32, so the net barely changes)
    int8-pt2e          torch.export -> torchao PT2E static int8 (X86InductorQuantizer,
                       per-channel weights, calibrated on training batches) -> torch.compile
                       with freezing: int8 convolutions through oneDNN
    eager / eager-<dt> the CUDA model in its training precision (autocast)
    graph-<dt>         a CUDA graph of the forward at batch 1 and at infer_batch, channels_last,
                       compiled when the variant compiles
Latency calls are interleaved across the forms of a cell (chunks of LAT_CHUNK calls in
turn), so the machine's drift lands on every form alike. Each call: copy one test image
in, run, synchronise, read the host clock (perf_counter): what a caller waits for.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from bench.core.errors import KitError
from bench.studies.cifar_opt.models import exportable, size_mb
from bench.studies.cifar_opt.trainer import Trainer, sync

LAT_CHUNK = 50


@dataclass
class Form:
    name: str
    fn: Callable[[torch.Tensor], torch.Tensor]  # normalised float batch (B,3,32,32) on the device -> logits
    size_mb: float
    prep_s: float = 0.0  # quantise / export / compile / capture, and its first calls
    path: str = ""  # which API ran
    latencies_s: list[float] = field(default_factory=list)


def _used_state(gm: torch.fx.GraphModule) -> dict[str, torch.Tensor]:
    """What a converted graph really uses (its get_attr tensors). The PT2E module keeps the
    original fp32 parameters as dead attributes; a deployment would not."""
    used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    return {k: v for k, v in gm.state_dict().items() if k in used}


def _state_mb(state: dict[str, torch.Tensor]) -> float:
    """STATE serialised (torch.save), MB."""
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    return len(buf.getvalue()) / 1e6


def int8_share(state: dict[str, torch.Tensor]) -> float:
    """The share of STATE's tensor bytes held as int8 (0.0 for an empty state). A PT2E model whose
    weights were folded to int8 holds most of its bytes so; the H200 host's torch 2.11 with
    torchao 0.18 kept them fp32 (44.72 of ResNet-18's 44.80 MB) and quantized at run time."""
    total = sum(t.numel() * t.element_size() for t in state.values())
    int8 = sum(t.numel() * t.element_size() for t in state.values() if t.dtype in (torch.int8, torch.uint8))
    return int8 / total if total else 0.0


@contextlib.contextmanager
def _freezing():
    import torch._inductor.config as ic

    with ic.patch(freezing=True):
        yield


def _compiled(model: torch.nn.Module, shapes: list[torch.Tensor]) -> Callable:
    """torch.compile with inductor freezing (weights folded and prepacked), compiled here for
    every shape it will see, so no call later compiles."""
    fn = torch.compile(model)
    with _freezing(), torch.no_grad():
        for x in shapes:
            fn(x)
    return fn


def int8_pt2e(model: torch.nn.Module, calib: list[torch.Tensor], shapes: list[torch.Tensor]) -> tuple[Callable, float, str]:
    """(compiled int8 fn, size MB, path). KitError (one line) when this torch/torchao cannot."""
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as err:
        raise KitError(f"int8 PT2E needs torchao (pip install torchao): {err}") from None
    import torchao

    m = exportable(model).cpu()
    batch = torch.export.Dim("batch", min=1, max=4096)
    try:
        gm = torch.export.export(m, (calib[0],), dynamic_shapes=({0: batch},)).module()
        q = xiq.X86InductorQuantizer()
        q.set_global(xiq.get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(gm, q)
        with torch.no_grad():
            for xb in calib:
                prepared(xb)
        converted = convert_pt2e(prepared)
    except Exception as err:  # noqa: BLE001 - an export/quantizer refusal is a reason, recorded
        raise KitError(f"int8 PT2E failed for this model: {type(err).__name__}: {str(err).splitlines()[0]}") from None
    fn = _compiled(converted, shapes)
    path = f"torchao {torchao.__version__} PT2E X86InductorQuantizer (static, per-channel weights) + inductor freezing"
    state = _used_state(converted)
    share = int8_share(state)
    if share < 0.5:  # the size is then fp32's: say so on the row, where the size and latency are read
        path += (
            f"; weights NOT folded to int8 ({share:.0%} of the stored bytes are int8: torch {torch.__version__} with "
            f"torchao {torchao.__version__} kept fp32 weights and quantize ops in the graph)"
        )
    return fn, _state_mb(state), path


def int8_dynamic(model: torch.nn.Module) -> tuple[Callable, float, str]:
    """The seed's quantize_dynamic on Linear layers (torch.ao.quantization; deprecated, kept
    because it is what the seed ran)."""
    import warnings

    quant = getattr(getattr(torch, "ao", None), "quantization", None)
    if quant is None or not hasattr(quant, "quantize_dynamic"):
        raise KitError(f"torch {torch.__version__} has no torch.ao.quantization.quantize_dynamic (the seed's quantizer)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qm = quant.quantize_dynamic(model.cpu().eval(), {torch.nn.Linear}, dtype=torch.qint8)
    return qm, size_mb(qm), f"torch.ao.quantization.quantize_dynamic (torch {torch.__version__}; Linear layers only)"


def cuda_graph_form(model, example: torch.Tensor, amp, fmt, batches: list[int]) -> tuple[Callable, list]:
    """A forward captured once per batch size; calling it copies the input in and replays."""
    graphs: dict[int, tuple] = {}
    side = torch.cuda.Stream()
    for b in batches:
        static = example[:1].repeat(b, 1, 1, 1).contiguous(memory_format=fmt)
        side.wait_stream(torch.cuda.current_stream())
        with (
            torch.cuda.stream(side),
            torch.no_grad(),
            torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None),
        ):
            for _ in range(3):
                model(static)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None), torch.cuda.graph(g):
            out = model(static)
        graphs[b] = (g, static, out)

    def run(x: torch.Tensor) -> torch.Tensor:
        g, static, out = graphs[x.shape[0]]
        static.copy_(x)
        g.replay()
        return out

    return run, list(graphs)


def forms_for(kind: str, trainer: Trainer, infer_batch: int, calib_batches: int) -> list[Form]:
    """The deployment forms of a trained cell (see the module docstring)."""
    dev, model = trainer.device, trainer.model.eval()
    x1, xb = trainer.x_eval[:1], trainer.x_eval[:1].repeat(infer_batch, 1, 1, 1)
    forms: list[Form] = []
    t0 = time.perf_counter()
    if dev.type == "cpu":
        if kind in ("train", "quant-dynamic", "optuna") and "compile" not in trainer.opts:
            forms.append(Form("fp32-eager", model, size_mb(model), path="eager"))
        if kind == "quant-dynamic":
            t0 = time.perf_counter()
            fn, mb, path = int8_dynamic(model)
            forms.append(Form("int8-dynamic", fn, mb, time.perf_counter() - t0, path))
        if kind == "int8" or "compile" in trainer.opts:
            t0 = time.perf_counter()
            plain = model.to(memory_format=torch.contiguous_format)
            forms.append(
                Form("fp32-compiled", _compiled(plain, [x1, xb]), size_mb(model), time.perf_counter() - t0, "inductor freezing")
            )
        if kind == "int8":
            t0 = time.perf_counter()
            fn, mb, path = int8_pt2e(model, trainer.calibration_batches(calib_batches), [x1, xb])
            forms.append(Form("int8-pt2e", fn, mb, time.perf_counter() - t0, path))
        return forms
    amp = trainer.amp
    dt = {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}[amp]
    if dev.type == "cuda" and "graphs" in trainer.opts:
        run, _ = cuda_graph_form(trainer.fwd, x1, amp, trainer.fmt, [1, infer_batch])
        forms.append(Form(f"graph-{dt}", run, size_mb(model), time.perf_counter() - t0, "CUDA graph replay of the forward"))
        return forms

    def eager(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(dev.type, dtype=amp or torch.float32, enabled=amp is not None):
            return trainer.fwd(x.contiguous(memory_format=trainer.fmt))

    forms.append(Form(f"eager-{dt}", eager, size_mb(model), 0.0, f"{dev.type} eager, autocast {dt}" if amp else "eager"))
    return forms


def measure(forms: list[Form], trainer: Trainer, calls: int, warmup: int, infer_batch: int) -> list[dict]:
    """Accuracy, batch-1 latency (interleaved across forms), batched throughput: one row per form."""
    dev = trainer.device
    xs = trainer.x_eval[:64]  # batch-1 inputs cycle through the first 64 test images
    rows = []
    with torch.no_grad():
        for f in forms:  # warm-up: every shape each form will see
            for i in range(warmup):
                f.fn(xs[i % len(xs)][None])
            f.fn(xs[:1].repeat(infer_batch, 1, 1, 1))
        sync(dev)
        for start in range(0, calls, LAT_CHUNK):
            for f in forms:
                for i in range(start, min(start + LAT_CHUNK, calls)):
                    x = xs[i % len(xs)][None]
                    t = time.perf_counter()
                    f.fn(x)
                    sync(dev)
                    f.latencies_s.append(time.perf_counter() - t)
        for f in forms:
            lat = np.array(f.latencies_s)
            assert (lat >= 0).all(), "negative latency: timer broken"
            rows.append(
                {
                    "phase": "inference",
                    "form": f.name,
                    "form_path": f.path,
                    "form_prep_s": f.prep_s,
                    "test_acc": _accuracy(f.fn, trainer, infer_batch),
                    "latency_p50_ms": float(np.percentile(lat, 50) * 1e3),
                    "latency_p90_ms": float(np.percentile(lat, 90) * 1e3),
                    "latency_p99_ms": float(np.percentile(lat, 99) * 1e3),
                    "latency_mean_ms": float(lat.mean() * 1e3),
                    "latency_calls": len(lat),
                    "infer_batch": infer_batch,
                    "infer_samples_per_s": _throughput(f.fn, trainer, infer_batch),
                    "model_size_mb": f.size_mb,
                }
            )
    return rows


def _accuracy(fn, trainer: Trainer, batch: int) -> float:
    """Top-1 on the scoring split through FN, in fixed batches (the last padded, pads ignored)."""
    x, y = trainer.x_eval, trainer.y_eval
    correct = 0
    for i in range(0, len(y), batch):
        xb = x[i : i + batch]
        n = len(xb)
        if n < batch:
            xb = torch.cat([xb, xb[:1].expand(batch - n, -1, -1, -1)])
        correct += int((fn(xb)[:n].argmax(1) == y[i : i + n]).sum().item())
    return correct / len(y)


def _throughput(fn, trainer: Trainer, batch: int, reps: int = 10) -> float:
    """Images/s of FN on one batch of BATCH test images, median of REPS synced passes."""
    xb = trainer.x_eval[:batch]
    if len(xb) < batch:
        xb = xb.repeat(-(-batch // len(xb)), 1, 1, 1)[:batch]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(xb)
        sync(trainer.device)
        times.append(time.perf_counter() - t)
    return batch / float(np.median(times))
