"""The embedded default: scikit-learn's bundled handwritten digits, made to look like MNIST.

1,797 real 8x8 images (values 0..16) ship inside scikit-learn, so a fresh clone has data
without a download. Each is scaled to 0..255, resized to 20x20 (bilinear) and centred in
a 28x28 frame, as MNIST centres its 20x20 digits. Split: a fixed permutation (seed 0),
the first 1,497 for training, the last 300 for test. Not MNIST: every row says so.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

N_TEST = 300


@lru_cache(maxsize=1)
def load_digits_28():
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    from bench.data.mnist import Dataset, checksum

    d = load_digits()
    imgs8 = d.images.astype(np.float32) * (255.0 / 16.0)  # (1797,8,8) in 0..255
    big = zoom(imgs8, (1, 2.5, 2.5), order=1)  # (1797,20,20), bilinear
    out = np.zeros((len(big), 28, 28), np.uint8)
    out[:, 4:24, 4:24] = np.clip(np.rint(big), 0, 255).astype(np.uint8)
    labels = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(out))
    tr, te = perm[:-N_TEST], perm[-N_TEST:]
    return Dataset(
        name="digits-embedded",
        real_mnist=False,
        x_train=out[tr],
        y_train=labels[tr],
        x_test=out[te],
        y_test=labels[te],
        checksum=checksum([out[tr], labels[tr], out[te], labels[te]]),
        source="sklearn.datasets.load_digits (resized 8x8 -> 20x20 in 28x28)",
    )
