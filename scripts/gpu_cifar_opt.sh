#!/usr/bin/env bash
# cifar-opt on a GPU host, natively with the host's own packages (from the repo root):
#   bash scripts/gpu_cifar_opt.sh check      # every CUDA code path once (mobilenet_v2, 1 epoch), then the
#                                            # speed benchmark (lab/cifar_opt_sweep.py) and the device roofs
#   bash scripts/gpu_cifar_opt.sh reference  # the study's cuda matrix, default profile, 3 repeats (= 3 seeds),
#                                            # into results/reference/<gpu>-cifar-opt/ (a rerun resumes)
# Wheels in ./.whl (optuna and what it needs, when the host lacks them) go first on PYTHONPATH.
# Data: the synthetic CIFAR-10 set (no real CIFAR-10 here); output under $OUT (default results/gpu-out).
set -uo pipefail
mode=${1:?usage: gpu_cifar_opt.sh check|reference}
export PYTHONUNBUFFERED=1 KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch, torchvision, optuna; print('python', sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'optuna', optuna.__version__)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
case "$mode" in
  check)
    timeout 200 python3 -m bench matrix cifar-opt --platform cuda --profile default --only model=mobilenet_v2 \
      --set epochs=1 --set n_train=640 --set trials=2 --set latency_calls=100 --repeats 1 --out /tmp/check 2>&1 | tail -25
    tar czf "$OUT/check.tgz" -C /tmp check
    python3 -c "from bench.data import cifar10; cifar10.write_synthetic('/tmp/data', n_train=30000, n_test=1200)"
    timeout "${SWEEP_S:-330}" python3 -m lab.cifar_opt_sweep --data-dir /tmp/data --out /tmp/sweep 2>&1 | tee "$OUT/sweep.log" | tail -22
    tar czf "$OUT/sweep.tgz" -C /tmp sweep
    timeout 90 python3 -m lab.roofs_check --device cuda --out "$OUT/roofs_$gpu.json" 2>&1 | tail -25
    ;;
  reference)
    ref=results/reference/$gpu-cifar-opt
    timeout "${REF_S:-540}" python3 -m bench matrix cifar-opt --platform cuda --profile default --repeats 3 \
      --out "$ref" 2>&1 | tee -a "$OUT/reference.log" | grep -v '^step' | tail -40
    find "$ref" -name log.txt -size +200k -delete
    tar czf "$OUT/reference.tgz" "$ref"
    ;;
esac
