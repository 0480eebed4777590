"""numba-cuda: the seed CNN with hand-written numba.cuda kernels, everything on the GPU."""
NAME = "numba-cuda"
PIPELINES = ("resident",)
VARIANTS = ("default",)


def available() -> str | None:
    try:
        from bench.kernels import numba_cuda_cnn
    except Exception as err:  # noqa: BLE001
        return f"cannot import numba-cuda kernels: {type(err).__name__}: {err}"
    return numba_cuda_cnn.available()


def create(cfg, params, data):
    raise NotImplementedError("numba-cuda trainer is not wired yet")
