import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def mnist_dir() -> Path | None:
    d = os.environ.get("KIT_DATA_DIR")
    if d and (Path(d) / "mnist").is_dir():
        return Path(d)
    shared = ROOT.parent / "shared" / "datasets"
    return shared if (shared / "mnist").is_dir() else None


@pytest.fixture
def real_mnist_dir() -> Path:
    d = mnist_dir()
    if d is None:
        pytest.skip("real MNIST not found (set KIT_DATA_DIR to a dir holding mnist/; CI uses ../shared/datasets)")
    return d


@pytest.fixture
def golden():
    import numpy as np

    return np.load(Path(__file__).parent / "golden" / "mnist_cnn_torch.npz")
