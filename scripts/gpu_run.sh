#!/usr/bin/env bash
# Run on a GPU host from the repo root, natively with the host's own packages:
#   bash scripts/gpu_run.sh check      # numba-cuda kernel variants vs reference (lab/) + torch-cuda variants, 3 epochs
#   bash scripts/gpu_run.sh reference  # orchestrate.py reference gpu: every cell, cpu+cuda, full, 3 repeats, interleaved
#   bash scripts/gpu_run.sh numba      # numba-cuda variants 2-5 (fast, split, tiled, splitk): ncu summary of 2 and 5,
#                                      # check + timing (lab/check_numba_cuda), then the mnist-cnn cells default and
#                                      # graph on real MNIST, 10 epochs, 3 repeats interleaved
#   bash scripts/gpu_run.sh warm       # torch cells started warm (forked, bench/run/warm.py) and cold
#                                      # (KIT_WARM_START=0), passes alternating, each cell's wall and start_s
#   bash scripts/gpu_run.sh epoch      # where the graph cell's epoch goes (lab/numba_epoch), then ncu's source page
#                                      # of the $NCU_KERNELS (default: the dense kernels k3_fc1|k3_head|k3_dense_bwd)
#                                      # of variant 6, summed per Python line (lab/ncu_source)
# Data: $KIT_DATA_DIR (default ./.data, a copy of the dir holding mnist/). Output: $OUT
# (default ./results/gpu-out); the reference run also leaves results/reference/<gpu-name>/.
# Wheels in ./.whl (e.g. numpy<2.4 for numba-cuda on a numpy-2.5 host) are put first on
# PYTHONPATH; every version actually used lands in each cell's system.json.
set -uo pipefail
mode=${1:?usage: gpu_run.sh check|reference|numba|epoch|warm}
export PYTHONUNBUFFERED=1 KIT_DATA_DIR=${KIT_DATA_DIR:-$PWD/.data}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 - <<'PY'
import sys, numpy, torch, numba
print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda, "numba", numba.__version__)
from numba import cuda; print("numba.cuda available:", cuda.is_available())
import cupy; print("cupy", cupy.__version__)
PY
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
case "$mode" in
  check)
    timeout 150 python3 -m lab.check_numba_cuda --out "$OUT/numba_cuda_check.json" 2>&1 | tee "$OUT/numba_cuda_check.log"
    timeout 330 python3 -m bench matrix mnist-cnn --platform cuda --profile full --only backend=torch-cuda \
      --set epochs=3 --schedule interleaved --out /tmp/sweep 2>&1 | tee "$OUT/sweep.log"
    tar czf "$OUT/sweep.tgz" -C /tmp sweep
    ;;
  numba)
    for v in ${NCU_VARIANTS-fast splitk}; do
      timeout 90 ncu --target-processes all -k 'regex:k_forward|k_backward|k3_|k4_|k6_|k7_|k8_' --launch-count 7 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        python3 -m lab.check_numba_cuda --variants "$v" --steps 2 --warmup 1 --repeats 1 > "$OUT/ncu-$v.txt" 2>&1 \
        || echo "ncu $v: exit $? (see ncu-$v.txt)"
    done
    timeout 150 python3 -m lab.check_numba_cuda --variants "${CHECK_VARIANTS:-fast,split,tiled,splitk}" --out "$OUT/numba_cuda_check.json" 2>&1 | tee "$OUT/numba_cuda_check.log"
    timeout "${CELLS_TIMEOUT:-300}" python3 -m bench matrix mnist-cnn --platform cuda --profile full --only backend=numba-cuda \
      --only 'variant=default|graph' --set dataset=mnist --repeats 3 --schedule interleaved --data-dir "$KIT_DATA_DIR" \
      --out /tmp/numba 2>&1 | tee "$OUT/numba_cells.log"
    tar czf "$OUT/numba_cells.tgz" -C /tmp numba
    ;;
  epoch)
    timeout 120 python3 -m lab.numba_epoch --out "$OUT/numba_epoch.json" 2>&1 | tee "$OUT/numba_epoch.log"
    KIT_NUMBA_LINEINFO=1 timeout 150 ncu --target-processes all -k "regex:${NCU_KERNELS:-k3_fc1|k3_head|k3_dense_bwd}" \
      --launch-count 6 --section SourceCounters --section WarpStateStats --import-source yes --page source \
      --print-source cuda,sass --csv --log-file "$OUT/ncu-source.csv" \
      python3 -m lab.check_numba_cuda --variants sparse --steps 2 --warmup 1 --repeats 1 > "$OUT/ncu-run.log" 2>&1 \
      || echo "ncu: exit $? (see ncu-run.log)"
    python3 -m lab.ncu_source "$OUT/ncu-source.csv" --top 20 2>&1 | tee "$OUT/ncu-source.txt"
    gzip -f "$OUT/ncu-source.csv"
    ;;
  warm)
    # the same torch cells warm and cold, alternating passes (W C W C) while ${WARM_S:-150} s allow
    pass=0; mkdir -p /tmp/no-data  # no MNIST: mnist-cnn on the embedded default
    for mode in 1 0 1 0; do
      [ "$SECONDS" -lt "${WARM_S:-150}" ] || break
      pass=$((pass + 1)); o=/tmp/warm-$pass-$mode; t0=$SECONDS
      KIT_WARM_START=$mode python3 -m bench matrix roofline mnist-cnn -p cpu -p cuda --profile answer --rerun \
        --repeats 1 \
        --only roofline.model=squeezenet1_1 --only 'mnist-cnn.backend=torch-cpu|torch-cuda' --only mnist-cnn.variant=default \
        --only mnist-cnn.pipeline=resident --data-dir /tmp/no-data --out "$o" > "$OUT/warm-$pass-$mode.log" 2>&1
      echo "pass $pass warm=$mode: exit $? in $((SECONDS - t0)) s"
      grep -E '^(ok|error)' "$OUT/warm-$pass-$mode.log"
      python3 - "$o" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*/system.json")):
    fc = json.load(open(f)).get("fixed_costs") or {}
    print(f"  {f.split('/')[-2][:48]:<48} start_s {fc.get('start_s') or 0:6.2f} imports_s {fc.get('imports_s') or 0:5.2f} "
          f"total_s {fc.get('total_s') or 0:6.2f} {'warm' if 'forked' in str(fc.get('notes')) else 'cold'}")
PY
    done
    ;;
  reference)
    # orchestrate.py reference gpu: every cell (cpu + cuda, profile full), 3 repeats, interleaved,
    # real data, native; refuses an unclean tree (KIT_GIT_SHA names the commit of a tree without .git)
    ref=results/reference/$gpu
    find "$ref" -mindepth 1 -maxdepth 1 ! -name 'variant_sweep_*.log' -exec rm -rf {} + 2>/dev/null
    python3 orchestrate.py reference "${PRESET:-gpu}" --data-dir "$KIT_DATA_DIR" --out "$ref" 2>&1 | tee "$OUT/reference.log"
    find "$ref" -name log.txt -size +200k -delete
    tar czf "$OUT/reference.tgz" "$ref"
    ;;
esac
