#!/usr/bin/env bash
# The references the seeds' CPU-vs-GPU questions need, on a GPU host, natively with the host's own
# packages (from the repo root; KIT_GIT_SHA names the commit where the copy has no .git):
#   bash scripts/gpu_fidelity.sh seeds    # mnist-cnn: seed 000's own Numba setups (variant seed) on the
#                                         # CPU and the GPU, 10 epochs, 3 repeats interleaved, real MNIST;
#                                         # mlp-scratch float64 (the seed's likely dtype) numpy + cupy +
#                                         # cupy-tuned, 3 repeats (a rerun resumes finished cells)
#   bash scripts/gpu_fidelity.sh roofline # seed 003's Table 8 cells (scenario A, fp32, both pipelines,
#                                         # the four models) with 3 repeats, interleaved, 40 training and
#                                         # 10 validation batches a pass (the default profile's 100/40 do
#                                         # not fit a device call); a rerun resumes finished cells
# Data: $KIT_DATA_DIR (default ./.data: the dir holding mnist/). Results: results/reference/<gpu>-*;
# logs and tarballs under $OUT (default results/gpu-out).
set -uo pipefail
mode=${1:?usage: gpu_fidelity.sh seeds|roofline}
export PYTHONUNBUFFERED=1 KIT_DATA_DIR=${KIT_DATA_DIR:-$PWD/.data} KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then  # into a fresh target: a warm machine keeps what an earlier call put there
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
run() {  # timeout, then a bench matrix command line; its summary lines land in the log
  local t=$1 log=$2; shift 2
  timeout "$t" python3 -m bench matrix "$@" 2>&1 | tee -a "$OUT/$log" | grep -v '^step' | tail -14
}
case "$mode" in
  seeds)
    ref=results/reference/$gpu-seed-setups
    run 200 seeds.log mnist-cnn -p cpu -p cuda --profile full --only variant=seed --set dataset=mnist \
      --repeats 3 --schedule interleaved --data-dir "$KIT_DATA_DIR" --out "$ref"
    run 330 seeds.log mlp-scratch -p cuda --profile default --only dtype=float64 --set dataset=mnist \
      --repeats 3 --schedule interleaved --data-dir "$KIT_DATA_DIR" --out "$ref"
    timeout 60 python3 orchestrate.py report "$ref" --out "$ref/report" 2>&1 | tail -2
    find "$ref" -name log.txt -size +200k -delete
    tar czf "$OUT/seeds.tgz" "$ref"
    ;;
  roofline)
    ref=results/reference/$gpu-roofline-table8
    run "${REF_S:-540}" roofline.log roofline -p cuda --profile default --only scenario=A --only variant=fp32 \
      --set max_train_batches=40 --set max_val_batches=10 --repeats 3 --schedule interleaved --out "$ref"
    timeout 60 python3 orchestrate.py report "$ref" --out "$ref/report" 2>&1 | tail -2
    find "$ref" -name log.txt -size +200k -delete
    tar czf "$OUT/roofline.tgz" "$ref"
    ;;
esac
