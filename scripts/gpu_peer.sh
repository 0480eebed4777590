#!/usr/bin/env bash
# The kit's training cell against timm's benchmark.py train loop on a GPU host, natively with the
# host's own packages (from the repo root; timm's wheel in ./.whl: `pip download --no-deps timm==1.0.31 -d .whl`):
#   bash scripts/gpu_peer.sh   # resnet18 and resnet50 at 64 px, batch 128 (launch-bound), tf32 and bf16-cl,
#                              # 3 repeats, each side in its own process, interleaved (lab/peer_check.py)
#   PEER=bare bash scripts/gpu_peer.sh   # the same against the kit's loop without the kit (kit / bare: the
#                              # harness's cost; the target is >= 0.97 at batch 128 bf16-cl)
# PEER_MODELS, PEER_BATCHES (default 128), PEER_PRECISIONS (tf32 bf16-cl), PEER_STEPS (50), PEER_REPEATS (3),
# PEER_TIMEOUT (450 s).
# Writes $OUT/peer_check.json and $OUT/peer_check.log (default results/gpu-out); commit them under
# results/reference/<gpu>-peer-check/.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
python3 -c "import sys, torch, timm; print('python', sys.version.split()[0], 'torch', torch.__version__, 'timm', timm.__version__)"
name=peer_check${PEER:+-$PEER}
# shellcheck disable=SC2086  # the lists split into arguments on purpose
timeout "${PEER_TIMEOUT:-450}" python3 -m lab.peer_check --peer "${PEER:-timm}" --models ${PEER_MODELS:-resnet18 resnet50} \
  --batches ${PEER_BATCHES:-128} --precisions ${PEER_PRECISIONS:-tf32 bf16-cl} --steps "${PEER_STEPS:-50}" \
  --repeats "${PEER_REPEATS:-3}" --device cuda --out /tmp/peer 2>&1 | tee "$OUT/$name.log" | tail -20
cp /tmp/peer/peer_check.json "$OUT/$name.json" 2>/dev/null || echo "no peer_check.json (see the log)"
