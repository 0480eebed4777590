"""numba.cuda launches recorded as one CUDA graph and replayed with a single host call.

numba-cuda 0.30 has no graph API of its own, so the capture goes through torch (always installed
beside the kit): torch.cuda.graph() puts a torch stream into capture mode, numba launches onto
the same stream (cuda.external_stream), and CUDAGraph.replay() runs the whole recording on
torch's current stream, which is the legacy default stream numba's own copies use, so replays
are ordered with them. Kernel arguments are recorded by value: a graph keeps reading the
buffers it was captured with (refill them between replays; never free them first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def unavailable() -> str | None:
    """None if torch can capture CUDA graphs on this host, else why not."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return f"torch cannot be imported ({type(exc).__name__}: {exc}): CUDA graphs are captured through torch"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device: no graph capture"
    return None


class CapturedLaunches:
    """enqueue(stream) launches numba kernels on the numba stream it is given; everything it
    launches is recorded once, here, and runs again on replay()."""

    def __init__(self, enqueue: Callable[[Any], None]):
        why = unavailable()
        if why is not None:
            raise RuntimeError(why)
        import torch
        from numba import cuda

        cuda.synchronize()  # numba's default-stream work is done before the capture starts
        self._torch_stream = torch.cuda.Stream()
        self.graph = torch.cuda.CUDAGraph()
        stream = cuda.external_stream(self._torch_stream.cuda_stream)
        with torch.cuda.graph(self.graph, stream=self._torch_stream, capture_error_mode="thread_local"):
            enqueue(stream)
        torch.cuda.synchronize()

    def replay(self) -> None:
        """Enqueue the recording (asynchronous, like the launches it stands for)."""
        self.graph.replay()
