#!/usr/bin/env bash
# The harness at short steps and the spread between fresh processes, on one GPU (lab/gpu_harness.py
# and lab/peer_check.py), natively with the host's own packages, from the repo root. Two calls of
# under 8 minutes each:
#   bash scripts/gpu_harness.sh                     # nvml; inproc (3 configs); spread at batch 128 (host-paced:
#                                                   # cudnn.benchmark on and off) and 1024 (the GPU's pace)
#   HARNESS_PARTS=peer bash scripts/gpu_harness.sh  # kit / bare, fresh processes: ResNet-50 b128 and
#                                                   # MobileNetV2 b256, bf16-cl, 64 px, 6 interleaved pairs each
#   HARNESS_PARTS=short bash scripts/gpu_harness.sh # inproc in 24 short blocks: ResNet-50 224 px b64 (GPU busy
#                                                   # 18 ms a step) and 64 px b128, with the host's waits per step
#   HARNESS_PARTS=graph bash scripts/gpu_harness.sh # the kit's step=cuda-graph: its GPU tests (tests/test_roofline_graph.py),
#                                                   # then kit eager / kit graph, fresh processes (lab/peer_check.py --peer
#                                                   # kit-graph), GRAPH_CONFIGS (resnet50:128 mobilenet_v2:256) bf16-cl,
#                                                   # PEER_STEPS (300) steps, GRAPH_REPEATS (4) interleaved pairs
#   HARNESS_PARTS=graphsweep bash scripts/gpu_harness.sh  # roofline's batch sweep, ResNet-50 bf16-cl 64 px, eager
#                                                   # and cuda-graph, SWEEP_ROUNDS (2) interleaved rounds: the host-paced
#                                                   # batches with and without the graph (graphsweep.tar.gz: the results dirs)
#   HARNESS_PARTS=samplers bash scripts/gpu_harness.sh  # the samplers' cost with every arm's step a CUDA graph (the GPU
#                                                   # sets the pace): inproc --step graph, SAMPLER_CONFIGS (resnet50:224:auto
#                                                   # mobilenet_v2:224:auto: the batch nearest a 20 ms step), SAMPLER_ROUNDS (40)
#                                                   # x INPROC_BLOCK (30) steps, SAMPLER_TIMEOUT (240 s a config)
#   SPREAD_CONFIGS="resnet50:64:128=bench,pinned,graph mobilenet_v2:64:256=bench,pinned" HARNESS_PARTS=spread
#     bash scripts/gpu_harness.sh                   # what cuts the fresh-process spread: binding to fixed CPUs, a
#                                                   # CUDA graph (variants: lab/gpu_harness.py VARIANTS; probed adds
#                                                   # a pure-Python loop on a third CPU beside the training)
# HARNESS_PARTS (nvml inproc spread), SHORT_CONFIGS (model:px:batch:block-steps ...), INPROC_CONFIGS, INPROC_ROUNDS (8), INPROC_BLOCK (30),
# SPREAD_CONFIGS (resnet50:64:128=bench,nobench resnet50:64:1024=bench), SPREAD_PROCS (4), SPREAD_STEPS (300),
# PEER_STEPS (150), PEER_REPEATS (6), timeouts: INPROC_TIMEOUT (170 s), SPREAD_TIMEOUT (130 s a config),
# PEER_TIMEOUT (220 s a model). Writes under $OUT (default results/gpu-out) gpu_harness-<part>.json and .log
# (spread: one pair per config) and peer_check-bare-<model>.json and .log; commit them under
# results/reference/<gpu>-harness/.
# shellcheck disable=SC2086,SC2046  # the lists split into arguments on purpose
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
    nvml) timeout 60 python3 -m lab.gpu_harness nvml --out "$OUT" 2>&1 | quiet | tee "$OUT/gpu_harness-nvml.log" ;;
    inproc) timeout "${INPROC_TIMEOUT:-170}" python3 -m lab.gpu_harness inproc --out "$OUT" \
      --configs ${INPROC_CONFIGS:-resnet50:64:128 mobilenet_v2:64:256 resnet50:224:64} \
      --rounds "${INPROC_ROUNDS:-8}" --block-steps "${INPROC_BLOCK:-30}" 2>&1 | quiet | tee "$OUT/gpu_harness-inproc.log" ;;
    short)
      for c in ${SHORT_CONFIGS:-resnet50:224:64:8 resnet50:64:128:6}; do
        cfg=${c%:*} rest=${c#*:}
        tag="${c%%:*}-${rest%%:*}-b$(cut -d: -f2 <<<"$rest")"  # resnet50-224-b64
        timeout "${SHORT_TIMEOUT:-100}" python3 -m lab.gpu_harness inproc --out "$OUT" --configs "$cfg" --rounds 24 \
          --block-steps "${c##*:}" 2>&1 | quiet | tee "$OUT/gpu_harness-inproc-short-blocks-$tag.log"
        cp "$OUT/gpu_harness-inproc.json" "$OUT/gpu_harness-inproc-short-blocks-$tag.json"
      done ;;
    samplers)
      for c in ${SAMPLER_CONFIGS:-resnet50:224:auto mobilenet_v2:224:auto}; do
        tag="${c%%:*}-$(cut -d: -f2 <<<"$c")"  # resnet50-224
        timeout "${SAMPLER_TIMEOUT:-240}" python3 -m lab.gpu_harness inproc --step graph --out "$OUT" --configs "$c" \
          --rounds "${SAMPLER_ROUNDS:-40}" --block-steps "${INPROC_BLOCK:-30}" 2>&1 | quiet | tee "$OUT/gpu_harness-inproc-graph-$tag.log"
        cp "$OUT/gpu_harness-inproc.json" "$OUT/gpu_harness-inproc-graph-$tag.json"
      done ;;
    spread)
      for cv in ${SPREAD_CONFIGS:-resnet50:64:128=bench,nobench resnet50:64:1024=bench}; do
        c=${cv%=*} m=${c%%:*} b=${c##*:}
        timeout "${SPREAD_TIMEOUT:-130}" python3 -m lab.gpu_harness spread --out "$OUT" --config "$c" \
          --variants $(tr , ' ' <<<"${cv#*=}") --procs "${SPREAD_PROCS:-4}" --steps "${SPREAD_STEPS:-300}" 2>&1 \
          | quiet | tee "$OUT/gpu_harness-spread-$m-b$b.log"
      done ;;
    graph)
      if [ -z "${GRAPH_SKIP_TESTS:-}" ]; then
        timeout "${GRAPH_TEST_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider tests/test_roofline_graph.py 2>&1 \
          | quiet | tee "$OUT/roofline_graph-tests.log" | tail -15
      fi
      for mb in ${GRAPH_CONFIGS:-resnet50:128 mobilenet_v2:256}; do
        m=${mb%:*} b=${mb#*:}
        timeout "${GRAPH_TIMEOUT:-300}" python3 -m lab.peer_check --peer kit-graph --models "$m" --batches "$b" \
          --precisions bf16-cl --steps "${PEER_STEPS:-300}" --repeats "${GRAPH_REPEATS:-4}" --device cuda \
          --out "/tmp/graph-$m" 2>&1 | quiet | tee "$OUT/peer_check-kit-graph-$m.log" | tail -8
        cp "/tmp/graph-$m/peer_check.json" "$OUT/peer_check-kit-graph-$m.json" 2>/dev/null || echo "no peer_check.json for $m"
      done ;;
    graphsweep)  # SWEEP_ROUNDS (2) rounds of one eager and one cuda-graph sweep, each a fresh process, one results dir a round
      for r in $(seq "${SWEEP_ROUNDS:-2}"); do
        for step in eager cuda-graph; do
          KIT_CACHE_DIR=/tmp/graphsweep-cache timeout "${SWEEP_TIMEOUT:-150}" python3 -m bench matrix roofline --platform cuda \
            --profile default --repeats 1 --only model=resnet50 --only scenario=B --only variant=bf16-cl --set step=$step \
            --set dataset=tinyimagenet-synthetic --out "/tmp/graphsweep/round$r" 2>&1 | quiet \
            | tee "$OUT/graphsweep-round$r-$step.log" | tail -3
        done
      done
      tar -C /tmp -czf "$OUT/graphsweep.tar.gz" graphsweep ;;
    peer)
      for mb in resnet50:128 mobilenet_v2:256; do
        m=${mb%:*} b=${mb#*:}
        timeout "${PEER_TIMEOUT:-220}" python3 -m lab.peer_check --peer bare --models "$m" --batches "$b" \
          --precisions bf16-cl --steps "${PEER_STEPS:-150}" --repeats "${PEER_REPEATS:-6}" --device cuda \
          --out "/tmp/peer-$m" 2>&1 | tee "$OUT/peer_check-bare-$m.log" | tail -8
        cp "/tmp/peer-$m/peer_check.json" "$OUT/peer_check-bare-$m.json" 2>/dev/null || echo "no peer_check.json for $m"
      done ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
