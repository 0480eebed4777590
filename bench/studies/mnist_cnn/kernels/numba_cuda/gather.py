"""Batch gather on the device for the numba-cuda backend (a module of its own so that it
imports numba.cuda only when a numba-cuda cell runs, and the simulator can patch it)."""
from numba import cuda


@cuda.jit
def gather(x_all, y_all, order, start, xb, yb):
    """xb[i] = x_all[order[start+i]], yb[i] = y_all[order[start+i]] for a (B,1,28,28)
    batch; one thread per pixel (B*784 threads), coalesced over the 784 pixels."""
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    n = xb.shape[0]
    if t < n * 784:
        i = t // 784
        p = t % 784
        src = order[start + i]
        xb[i, 0, p // 28, p % 28] = x_all[src, 0, p // 28, p % 28]
        if p == 0:
            yb[i] = y_all[src]
