"""numba-cuda kernel variant 1, "naive": the baseline. One thread per output element, one
kernel per op (conv, ReLU, pool, dense and their backwards; each weight gradient one thread
looping over the whole batch), one SGD launch per parameter: 30 launches per train_step.
Workspace: one array per intermediate, torch's layouts.

Measured with `python -m lab.check_numba_cuda` on one NVIDIA H100 80GB HBM3 (132 SMs, driver
13.0), Python 3.12.3, numba 0.68.0, numba-cuda 0.30.4, NumPy 2.4.6, batch 512, random
MNIST-like data; step = train_step between CUDA events, median of 5 repeats [spread]:
worst rel err 4.3e-06, first call 3.3 s, 53383 us/step [53370..53929], 9,591 samples/s
(forward 254 us, backward 53068 us, SGD 27 us, host enqueue 1156 us); 37.6 MiB of device
memory at batch 512.
"""

from __future__ import annotations

import math

import numpy as np

from bench.studies.mnist_cnn.kernels.numba_cuda.device_net import DeviceNet, flat_view
from bench.studies.mnist_cnn.kernels.numba_cuda.net import C1, C2, D1, H1, H2, N_P2, Q1, Q2, TPB, K, cuda, jit
from bench.studies.mnist_cnn.net import PARAM_NAMES, PARAM_SHAPES

LAUNCHES_PER_STEP = 30


@jit(device=True)
def unravel(i, d1, d2, d3):
    """Flat index i of a C-ordered (., d1, d2, d3) array -> (n, c, y, x)."""
    x = i % d3
    r = i // d3
    y = r % d2
    r = r // d2
    return r // d1, r % d1, y, x


@jit(device=True)
def row_max(logits, n):
    """The largest logit of row n and its class (first maximum wins)."""
    m = logits[n, 0]
    best = 0
    for c in range(1, logits.shape[1]):
        if logits[n, c] > m:
            m = logits[n, c]
            best = c
    return m, best


@jit
def nv_conv_fwd(x, w, b, out):
    """out[n,co,y,x] = b[co] + sum w[co,ci,ky,kx] x[n,ci,y+ky,x+kx]; one thread per output."""
    nb, co_n, ho, wo = out.shape
    for i in range(cuda.grid(1), nb * co_n * ho * wo, cuda.gridsize(1)):
        n, co, yo, xo = unravel(i, co_n, ho, wo)
        s = b[co]
        for ci in range(x.shape[1]):
            for ky in range(3):
                for kx in range(3):
                    s += w[co, ci, ky, kx] * x[n, ci, yo + ky, xo + kx]
        out[n, co, yo, xo] = s


@jit
def nv_relu(a):
    """In place on a flat view."""
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        if a[i] < 0:
            a[i] = 0


@jit
def nv_pool_fwd(inp, out, am):
    """2x2 max pool (floor), first max wins; one thread per pooled output."""
    nb, c_n, q, _ = out.shape
    for i in range(cuda.grid(1), nb * c_n * q * q, cuda.gridsize(1)):
        n, c, py, px = unravel(i, c_n, q, q)
        best = inp[n, c, 2 * py, 2 * px]
        arg = 0
        for a in range(1, 4):
            v = inp[n, c, 2 * py + a // 2, 2 * px + a % 2]
            if v > best:
                best = v
                arg = a
        out[n, c, py, px] = best
        am[n, c, py, px] = arg


@jit
def nv_dense_fwd(x, w, b, out):
    """out[n,o] = b[o] + sum_k w[o,k] x[n,k]; one thread per output."""
    nb, o_n = out.shape
    for i in range(cuda.grid(1), nb * o_n, cuda.gridsize(1)):
        o = i % o_n
        n = i // o_n
        s = b[o]
        for k in range(x.shape[1]):
            s += w[o, k] * x[n, k]
        out[n, o] = s


@jit
def nv_softmax_ce(logits, y, inv_n, dlog, loss_vec, loss_sum, preds):
    """One thread per sample: loss, dlogits = (softmax - onehot) * inv_n, argmax."""
    for n in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        m, best = row_max(logits, n)
        preds[n] = best
        se = np.float32(0.0)
        for c in range(logits.shape[1]):
            se += math.exp(logits[n, c] - m)
        yy = y[n]
        loss = m + math.log(se) - logits[n, yy]
        loss_vec[n] = loss
        cuda.atomic.add(loss_sum, 0, np.float64(loss))
        for c in range(logits.shape[1]):
            d = math.exp(logits[n, c] - m) / se
            if c == yy:
                d -= np.float32(1.0)
            dlog[n, c] = d * inv_n


@jit
def nv_argmax(logits, preds):
    for n in range(cuda.grid(1), logits.shape[0], cuda.gridsize(1)):
        _, best = row_max(logits, n)
        preds[n] = best


@jit
def nv_dense_bwd_x(dy, w, dx):
    """dx[n,k] = sum_o dy[n,o] w[o,k]; one thread per input element."""
    nb, k_n = dx.shape
    for i in range(cuda.grid(1), nb * k_n, cuda.gridsize(1)):
        k = i % k_n
        n = i // k_n
        s = np.float32(0.0)
        for o in range(dy.shape[1]):
            s += dy[n, o] * w[o, k]
        dx[n, k] = s


@jit
def nv_relu_bwd(g, act):
    """g *= (act > 0), flat views; act is the ReLU output."""
    for i in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        if act[i] <= 0:
            g[i] = 0


@jit
def nv_dense_wgrad(dy, x, gw, gb):
    """gw[o,k] = sum_n dy[n,o] x[n,k], gb[o] = sum_n dy[n,o]; one thread per weight, loops over n."""
    o_n, k_n = gw.shape
    for i in range(cuda.grid(1), o_n * (k_n + 1), cuda.gridsize(1)):
        o = i // (k_n + 1)
        k = i % (k_n + 1)
        s = np.float32(0.0)
        if k < k_n:
            for n in range(dy.shape[0]):
                s += dy[n, o] * x[n, k]
            gw[o, k] = s
        else:
            for n in range(dy.shape[0]):
                s += dy[n, o]
            gb[o] = s


@jit
def nv_pool_bwd(gp, am, gout):
    """gout[n,c,y,x] = gp[n,c,y//2,x//2] where (y,x) is the window's argmax, else 0."""
    nb, c_n, hh, ww = gout.shape
    q = gp.shape[2]
    for i in range(cuda.grid(1), nb * c_n * hh * ww, cuda.gridsize(1)):
        n, c, yy, xx = unravel(i, c_n, hh, ww)
        v = np.float32(0.0)
        py = yy // 2
        px = xx // 2
        if py < q and px < q:
            if am[n, c, py, px] == (yy % 2) * 2 + xx % 2:
                v = gp[n, c, py, px]
        gout[n, c, yy, xx] = v


@jit
def nv_conv_wgrad(x, gout, gw, gb):
    """gw[co,ci,ky,kx] = sum_{n,y,x} gout[n,co,y,x] x[n,ci,y+ky,x+kx]; gb[co] = sum gout.
    One thread per weight (then one per bias), each looping over the whole batch."""
    co_n, ci_n = gw.shape[0], gw.shape[1]
    nw = co_n * ci_n * 9
    nb, _, ho, wo = gout.shape
    for i in range(cuda.grid(1), nw + co_n, cuda.gridsize(1)):
        s = np.float32(0.0)
        if i < nw:
            kx = i % 3
            ky = (i // 3) % 3
            ci = (i // 9) % ci_n
            co = i // (9 * ci_n)
            for n in range(nb):
                for yy in range(ho):
                    for xx in range(wo):
                        s += gout[n, co, yy, xx] * x[n, ci, yy + ky, xx + kx]
            gw[co, ci, ky, kx] = s
        else:
            co = i - nw
            for n in range(nb):
                for yy in range(ho):
                    for xx in range(wo):
                        s += gout[n, co, yy, xx]
            gb[co] = s


@jit
def nv_conv_bwd_x(gout, w, gx):
    """gx[n,ci,y,x] = sum_{co,ky,kx} gout[n,co,y-ky,x-kx] w[co,ci,ky,kx]; one thread per input."""
    nb, ci_n, hi, wi = gx.shape
    ho, wo = gout.shape[2], gout.shape[3]
    for i in range(cuda.grid(1), nb * ci_n * hi * wi, cuda.gridsize(1)):
        n, ci, yy, xx = unravel(i, ci_n, hi, wi)
        s = np.float32(0.0)
        for co in range(gout.shape[1]):
            for ky in range(3):
                for kx in range(3):
                    yo = yy - ky
                    xo = xx - kx
                    if yo >= 0 and yo < ho and xo >= 0 and xo < wo:
                        s += gout[n, co, yo, xo] * w[co, ci, ky, kx]
        gx[n, ci, yy, xx] = s




@jit
def k_sgd(p, g, v, lr, mom):
    """v = mom*v + g; p -= lr*v; g = 0. Flat float32 arrays (one parameter: naive); lr, mom float32."""
    for i in range(cuda.grid(1), p.size, cuda.gridsize(1)):
        vi = mom * v[i] + g[i]
        v[i] = vi
        p[i] -= lr * vi
        g[i] = 0



class NaiveNet(DeviceNet):
    """Variant 1: one launch per op on the default stream."""

    VARIANT = "naive"

    def _allocate(self, samples_per_block: int) -> None:
        n, a, blocks = self.batch, self._alloc, self.blocks
        self.c1 = a((n, C1, H1, H1), np.float32)
        self.p1 = a((n, C1, Q1, Q1), np.float32)
        self.a1 = a((n, C1, Q1, Q1), np.int8)
        self.c2 = a((n, C2, H2, H2), np.float32)
        self.p2 = a((n, C2, Q2, Q2), np.float32)
        self.a2 = a((n, C2, Q2, Q2), np.int8)
        self.h = a((n, D1), np.float32)
        self.logits = a((n, K), np.float32)
        self.dlog = a((n, K), np.float32)
        self.dh = a((n, D1), np.float32)
        self.dp2 = a((n, C2, Q2, Q2), np.float32)
        self.dc2 = a((n, C2, H2, H2), np.float32)
        self.dp1 = a((n, C1, Q1, Q1), np.float32)
        self.dc1 = a((n, C1, H1, H1), np.float32)
        self.loss_vec = a(n, np.float32)
        self.preds = a(n, np.int32)
        # launch configs: one thread per output element, for the full batch
        self._nv_cfg = {
            "conv1": nv_conv_fwd[blocks(self.c1.size), TPB],
            "relu1": nv_relu[blocks(self.c1.size), TPB],
            "pool1": nv_pool_fwd[blocks(self.p1.size), TPB],
            "conv2": nv_conv_fwd[blocks(self.c2.size), TPB],
            "relu2": nv_relu[blocks(self.c2.size), TPB],
            "pool2": nv_pool_fwd[blocks(self.p2.size), TPB],
            "fc1": nv_dense_fwd[blocks(n * D1), TPB],
            "relu3": nv_relu[blocks(n * D1), TPB],
            "fc2": nv_dense_fwd[blocks(n * K), TPB],
            "loss": nv_softmax_ce[blocks(n, 128), 128],
            "argmax": nv_argmax[blocks(n, 128), 128],
            "fc2_dx": nv_dense_bwd_x[blocks(n * D1), TPB],
            "relu3_b": nv_relu_bwd[blocks(n * D1), TPB],
            "fc2_dw": nv_dense_wgrad[blocks(K * (D1 + 1)), TPB],
            "fc1_dx": nv_dense_bwd_x[blocks(n * N_P2), TPB],
            "fc1_dw": nv_dense_wgrad[blocks(D1 * (N_P2 + 1)), TPB],
            "pool2_b": nv_pool_bwd[blocks(self.c2.size), TPB],
            "relu2_b": nv_relu_bwd[blocks(self.c2.size), TPB],
            "conv2_dw": nv_conv_wgrad[blocks(C2 * C1 * 9 + C2), TPB],
            "conv2_dx": nv_conv_bwd_x[blocks(self.p1.size), TPB],
            "pool1_b": nv_pool_bwd[blocks(self.c1.size), TPB],
            "relu1_b": nv_relu_bwd[blocks(self.c1.size), TPB],
            "conv1_dw": nv_conv_wgrad[blocks(C1 * 9 + C1), TPB],
        }
        self._nv_sgd = [
            (k_sgd[blocks(int(np.prod(PARAM_SHAPES[k]))), TPB], flat_view(self.P, k), flat_view(self.G, k), flat_view(self.V, k))
            for k in PARAM_NAMES
        ]  # one launch per parameter
        self._nv_views = {self.batch: self._naive_views(self.batch)}

    def use_stream(self, stream) -> None:
        raise ValueError("the naive variant launches on the default stream only")

    def _naive_views(self, mm: int) -> dict:
        """Row-sliced views (first mm samples) of the naive buffers, plus flat views for ReLU."""
        names = ("c1", "p1", "a1", "c2", "p2", "a2", "h", "logits", "dlog", "dh", "dp2", "dc2", "dp1", "dc1", "loss_vec", "preds")
        v = {k: getattr(self, k)[:mm] for k in names}
        for k in ("c1", "c2", "h", "dc1", "dc2", "dh"):
            v[f"{k}_flat"] = v[k].reshape(v[k].size)
        v["f"] = v["p2"].reshape(mm, N_P2)
        v["df"] = v["dp2"].reshape(mm, N_P2)
        return v

    def _nview(self, mm: int) -> dict:
        v = self._nv_views.get(mm)
        if v is None:
            v = self._nv_views[mm] = self._naive_views(mm)
        return v

    def _launch_forward(self, x_dev, y_dev, mm: int, preds_out):
        v, c, p = self._nview(mm), self._nv_cfg, self.params
        c["conv1"](x_dev, p["conv1.weight"], p["conv1.bias"], v["c1"])
        c["relu1"](v["c1_flat"])
        c["pool1"](v["c1"], v["p1"], v["a1"])
        c["conv2"](v["p1"], p["conv2.weight"], p["conv2.bias"], v["c2"])
        c["relu2"](v["c2_flat"])
        c["pool2"](v["c2"], v["p2"], v["a2"])
        c["fc1"](v["f"], p["fc1.weight"], p["fc1.bias"], v["h"])
        c["relu3"](v["h_flat"])
        c["fc2"](v["h"], p["fc2.weight"], p["fc2.bias"], v["logits"])
        if y_dev is not None:
            self._launch_loss_head(y_dev, mm)
        elif preds_out is not None:
            c["argmax"](v["logits"], preds_out)
        return v["logits"]

    def _launch_loss_head(self, y_dev, mm: int) -> None:
        v = self._nview(mm)
        self._nv_cfg["loss"](v["logits"], y_dev, np.float32(1.0 / mm), v["dlog"], v["loss_vec"], self.loss_sum, v["preds"])

    def _launch_backward(self, mm: int) -> None:
        v, c, p, g = self._nview(mm), self._nv_cfg, self.params, self.grads
        c["fc2_dx"](v["dlog"], p["fc2.weight"], v["dh"])
        c["relu3_b"](v["dh_flat"], v["h_flat"])
        c["fc2_dw"](v["dlog"], v["h"], g["fc2.weight"], g["fc2.bias"])
        c["fc1_dx"](v["dh"], p["fc1.weight"], v["df"])
        c["fc1_dw"](v["dh"], v["f"], g["fc1.weight"], g["fc1.bias"])
        c["pool2_b"](v["dp2"], v["a2"], v["dc2"])
        c["relu2_b"](v["dc2_flat"], v["c2_flat"])
        c["conv2_dw"](v["p1"], v["dc2"], g["conv2.weight"], g["conv2.bias"])
        c["conv2_dx"](v["dc2"], p["conv2.weight"], v["dp1"])
        c["pool1_b"](v["dp1"], v["a1"], v["dc1"])
        c["relu1_b"](v["dc1_flat"], v["c1_flat"])
        c["conv1_dw"](self._x_last, v["dc1"], g["conv1.weight"], g["conv1.bias"])

    def _launch_sgd(self, lr32, m32) -> None:
        for cfg, p, g, v in self._nv_sgd:
            cfg(p, g, v, lr32, m32)

    def _host_losses(self, mm: int) -> np.ndarray:
        return self.loss_vec[:mm].copy_to_host()
