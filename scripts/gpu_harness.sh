#!/usr/bin/env bash
# The harness at short steps and the spread between fresh processes, on one GPU (lab/gpu_harness.py),
# natively with the host's own packages, from the repo root:
#   bash scripts/gpu_harness.sh               # nvml, inproc (3 configs), spread (bench vs nobench)
#   HARNESS_PARTS="spread" SPREAD_VARIANTS="bench long" bash scripts/gpu_harness.sh
# HARNESS_PARTS (nvml inproc spread), INPROC_CONFIGS, INPROC_ROUNDS (10), INPROC_BLOCK (30),
# SPREAD_CONFIG (resnet50:64:128), SPREAD_VARIANTS (bench nobench), SPREAD_PROCS (4), SPREAD_STEPS (300),
# HARNESS_TIMEOUT (per part, 200 s). Writes $OUT/gpu_harness-<part>.json and .log (default results/gpu-out).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
for part in ${HARNESS_PARTS:-nvml inproc spread}; do
  case $part in
    nvml) args=() ;;
    # shellcheck disable=SC2206  # the lists split into arguments on purpose
    inproc) args=(--configs ${INPROC_CONFIGS:-resnet50:64:128 mobilenet_v2:64:256 resnet50:224:auto}
      --rounds "${INPROC_ROUNDS:-10}" --block-steps "${INPROC_BLOCK:-30}") ;;
    # shellcheck disable=SC2206
    spread) args=(--config "${SPREAD_CONFIG:-resnet50:64:128}" --variants ${SPREAD_VARIANTS:-bench nobench}
      --procs "${SPREAD_PROCS:-4}" --steps "${SPREAD_STEPS:-300}") ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
  echo "== $part"
  timeout "${HARNESS_TIMEOUT:-200}" python3 -m lab.gpu_harness "$part" "${args[@]}" --out "$OUT" 2>&1 \
    | grep -v '^\(STAGE\|USDT\|ERROR\):' | tee "$OUT/gpu_harness-$part.log"
done
