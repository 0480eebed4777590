"""The seed-000 CNN: one parameter layout that every mnist-cnn backend shares.

    x (N,1,28,28) -> conv1 8@3x3 + ReLU -> (N,8,26,26) -> maxpool 2 -> (N,8,13,13)
      -> conv2 16@3x3 + ReLU -> (N,16,11,11) -> maxpool 2 -> (N,16,5,5)
      -> flatten (C,H,W order, as torch) -> (N,400) -> fc1 128 + ReLU -> fc2 10 (logits)

Loss: mean softmax cross-entropy over the batch. Optimiser: SGD with momentum in torch's
form (v = m*v + g; p -= lr*v). Pooling is floor mode: 11 -> 5 (the last row
and column of conv2's output are dropped, exactly as torch's MaxPool2d(2) does).

Parameters are float32 numpy arrays with torch's shapes and names, so a state dict moves
between torch and the hand-written backends unchanged.
"""

from __future__ import annotations

import math

import numpy as np

# name -> shape, in torch's state_dict order
PARAM_SHAPES: dict[str, tuple[int, ...]] = {
    "conv1.weight": (8, 1, 3, 3),
    "conv1.bias": (8,),
    "conv2.weight": (16, 8, 3, 3),
    "conv2.bias": (16,),
    "fc1.weight": (128, 400),
    "fc1.bias": (128,),
    "fc2.weight": (10, 128),
    "fc2.bias": (10,),
}
PARAM_NAMES = tuple(PARAM_SHAPES)
N_CLASSES = 10
IMAGE_SHAPE = (1, 28, 28)

# MNIST normalisation used by every backend (the seed's torchvision constants)
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


def normalise_u8(x_u8: np.ndarray) -> np.ndarray:
    """uint8 (N,28,28) -> float32 (N,1,28,28), (x/255 - mean)/std: the same values ToTensor+Normalize give."""
    x = x_u8.astype(np.float32)[:, None] / np.float32(255.0)
    return (x - np.float32(MNIST_MEAN)) / np.float32(MNIST_STD)


def scale_u8(x_u8: np.ndarray, input_scale: str = "normalize") -> np.ndarray:
    """uint8 (N,28,28) -> float32 (N,1,28,28): `normalize` as normalise_u8; `div255` is x/255
    alone, in [0, 1], as seed 000 fed its Numba nets (data/preprocess.py: astype(float32) / 255.0)."""
    if input_scale == "normalize":
        return normalise_u8(x_u8)
    if input_scale == "div255":
        return x_u8.astype(np.float32)[:, None] / np.float32(255.0)
    raise ValueError(f"input_scale must be normalize or div255, not {input_scale!r}")


def init_params(seed: int, init: str = "kit") -> dict[str, np.ndarray]:
    """Initial weights for `seed`, drawn with NumPy so no backend needs torch to get them.

    init="kit": the same distribution as torch's defaults for Conv2d/Linear (kaiming_uniform
    with a=sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases alike).
    init="seed": seed 000's (its src/utils.py, initialize_cnn_weights_numpy): conv weights
    N(0,1) * 0.1, dense weights He normal N(0,1) * sqrt(2/fan_in), every bias 0. (The seed
    drew conv weights from RandomState(123) and dense ones from NumPy's unseeded global
    state; here all come from default_rng(seed), in this order.)
    Every backend loads these exact arrays, so runs with the same seed and init start from
    the same weights.
    """
    if init == "seed":
        return _init_seed000(seed)
    if init != "kit":
        raise ValueError(f"init must be kit or seed, not {init!r}")
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in PARAM_SHAPES.items():
        layer = name.split(".")[0]
        w_shape = PARAM_SHAPES[f"{layer}.weight"]
        fan_in = int(np.prod(w_shape[1:]))
        bound = 1.0 / math.sqrt(fan_in)
        params[name] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return params


def _init_seed000(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in PARAM_SHAPES.items():
        layer, kind = name.split(".")
        if kind == "bias":
            params[name] = np.zeros(shape, np.float32)
        elif layer.startswith("conv"):
            params[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        else:  # dense (out, in): He normal with fan_in = in
            params[name] = (rng.standard_normal(shape) * math.sqrt(2.0 / shape[1])).astype(np.float32)
    return params


DENSE_NAMES = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")  # what variant "seed" trains


def n_params() -> int:
    return int(sum(np.prod(s) for s in PARAM_SHAPES.values()))


def train_flops_per_sample() -> dict[str, int]:
    """Analytic FLOPs (not MACs: one multiply-add = 2 FLOPs) of one sample's training step.

    Forward counts the convolutions and dense layers (bias adds included, ReLU/pool/softmax
    left out as they are O(activations)); backward is taken as 2x forward (grad wrt input
    and wrt weights), the usual convention. Counter: analytic, this function.
    """
    conv1 = 2 * 8 * 26 * 26 * (1 * 3 * 3) + 8 * 26 * 26
    conv2 = 2 * 16 * 11 * 11 * (8 * 3 * 3) + 16 * 11 * 11
    fc1 = 2 * 400 * 128 + 128
    fc2 = 2 * 128 * 10 + 10
    fwd = conv1 + conv2 + fc1 + fc2
    return {"forward": fwd, "backward": 2 * fwd, "total": 3 * fwd}
