#!/usr/bin/env bash
# The harness at short steps and the spread between fresh processes, on one GPU (lab/gpu_harness.py
# and lab/peer_check.py), natively with the host's own packages, from the repo root. Two calls of
# under 8 minutes each:
#   bash scripts/gpu_harness.sh                     # nvml, inproc (3 configs), spread (bench nobench pinned)
#   HARNESS_PARTS=peer bash scripts/gpu_harness.sh  # kit / bare, fresh processes: ResNet-50 b128 and
#                                                   # MobileNetV2 b256, bf16-cl, 64 px, 6 interleaved pairs each
# HARNESS_PARTS (nvml inproc spread), INPROC_CONFIGS, INPROC_ROUNDS (10), INPROC_BLOCK (30),
# SPREAD_CONFIG (resnet50:64:128), SPREAD_VARIANTS (bench nobench pinned), SPREAD_PROCS (3), SPREAD_STEPS (300),
# PEER_STEPS (200), PEER_REPEATS (6), HARNESS_TIMEOUT (per part, 200 s; peer: per model, 220 s).
# Writes $OUT/gpu_harness-<part>.json and .log, $OUT/peer_check-bare-<model>.json and .log (default
# results/gpu-out); commit them under results/reference/<gpu>-harness/.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
quiet() { grep -v '^\(STAGE\|USDT\|ERROR\):'; }  # kineto's own log lines
for part in ${HARNESS_PARTS:-nvml inproc spread}; do
  echo "== $part"
  case $part in
    nvml) timeout "${HARNESS_TIMEOUT:-200}" python3 -m lab.gpu_harness nvml --out "$OUT" 2>&1 | quiet | tee "$OUT/gpu_harness-nvml.log" ;;
    # shellcheck disable=SC2086  # the lists split into arguments on purpose
    inproc) timeout "${HARNESS_TIMEOUT:-200}" python3 -m lab.gpu_harness inproc --out "$OUT" \
      --configs ${INPROC_CONFIGS:-resnet50:64:128 mobilenet_v2:64:256 resnet50:224:64} \
      --rounds "${INPROC_ROUNDS:-10}" --block-steps "${INPROC_BLOCK:-30}" 2>&1 | quiet | tee "$OUT/gpu_harness-inproc.log" ;;
    # shellcheck disable=SC2086
    spread) timeout "${HARNESS_TIMEOUT:-200}" python3 -m lab.gpu_harness spread --out "$OUT" \
      --config "${SPREAD_CONFIG:-resnet50:64:128}" --variants ${SPREAD_VARIANTS:-bench nobench pinned} \
      --procs "${SPREAD_PROCS:-3}" --steps "${SPREAD_STEPS:-300}" 2>&1 | quiet | tee "$OUT/gpu_harness-spread.log" ;;
    peer)
      for mb in resnet50:128 mobilenet_v2:256; do
        m=${mb%:*} b=${mb#*:}
        timeout "${PEER_TIMEOUT:-220}" python3 -m lab.peer_check --peer bare --models "$m" --batches "$b" \
          --precisions bf16-cl --steps "${PEER_STEPS:-200}" --repeats "${PEER_REPEATS:-6}" --device cuda \
          --out "/tmp/peer-$m" 2>&1 | tee "$OUT/peer_check-bare-$m.log" | tail -8
        cp "/tmp/peer-$m/peer_check.json" "$OUT/peer_check-bare-$m.json" 2>/dev/null || echo "no peer_check.json for $m"
      done ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
