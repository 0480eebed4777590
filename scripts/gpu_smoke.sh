#!/usr/bin/env bash
# Every study's cuda smoke matrix and the GPU tests, on a GPU host, natively with the host's own
# packages (from the repo root): the check that every GPU code path still runs after a change.
#   bash scripts/gpu_smoke.sh
# Wheels in ./.whl (numpy<2.4 for numba-cuda on a numpy-2.5 host, optuna, pytest, ...) go first
# on PYTHONPATH. Data: $KIT_DATA_DIR (default ./.data, a dir holding mnist/); the other studies'
# synthetic sets are generated into $KIT_CACHE_DIR. Output under $OUT (default results/gpu-out).
set -uo pipefail
export PYTHONUNBUFFERED=1 KIT_DATA_DIR=${KIT_DATA_DIR:-$PWD/.data} KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then  # into a fresh target: a warm machine keeps what an earlier call put there
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys, numpy, torch, numba; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'numba', numba.__version__)"
# 1. the GPU-marked tests and the backend conformance (a smoke cell of every backend that runs here)
timeout "${TESTS_S:-240}" python3 -m pytest -q -p no:cacheprovider --all tests/test_backends.py -k "cuda or cupy or tuned" 2>&1 \
  | tee "$OUT/tests.log" | tail -6
# 2. every study's cuda smoke matrix; a cell naming its GPU (devices=0) binds it
timeout "${SMOKE_S:-300}" python3 -m bench matrix --platform cuda --profile smoke --out /tmp/smoke 2>&1 \
  | tee "$OUT/smoke.log" | grep -v '^step' | tail -25
timeout 120 python3 -m bench matrix profile --platform cuda --profile smoke --set devices=0 --only pipeline=synthetic-gpu \
  --out /tmp/smoke-dev0 2>&1 | tee "$OUT/smoke-dev0.log" | grep -v '^step' | tail -4
tar czf "$OUT/smoke.tgz" -C /tmp smoke smoke-dev0 2>/dev/null
