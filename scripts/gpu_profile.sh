#!/usr/bin/env bash
# profile (seed 004) on a GPU host, natively with the host's own packages (from the repo root):
#   bash scripts/gpu_profile.sh reference  # the study's cuda matrix, default profile, one repeat, into
#                                          # results/reference/<gpu>-profile/ (a rerun resumes; 2-GPU cells are
#                                          # skipped with the reason on a 1-GPU host), then the bare-loop checks:
#                                          # lab/bare_loops.py profile and roofline (kit vs bare, 3 interleaved repeats)
#   bash scripts/gpu_profile.sh reference-cpu  # the CPU cells (the CPU's default: 224 px, b64, a reduced protocol of
#                                          # 2 epochs x 3 steps that the report projects to the seed's 20 x 8,005
#                                          # images) into the same folder, then its report again: the CPU vs GPU table
#                                          # and the claims' verdicts. Estimated 4 min on the H100 host's 16 cores
#                                          # (at most 8 min 20 s: its timeouts; a rerun resumes the finished cells).
# Data: the synthetic cats-vs-dogs tree (generated into $KIT_CACHE_DIR) unless $KIT_DATA_DIR holds catsdogs/.
# Output under $OUT (default results/gpu-out).
set -uo pipefail
mode=${1:?usage: gpu_profile.sh reference | reference-cpu}
export PYTHONUNBUFFERED=1 KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch, torchvision; print('python', sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
case "$mode" in
  reference)
    ref=results/reference/$gpu-profile
    timeout "${REF_S:-330}" python3 -m bench matrix profile --platform cuda --profile default --repeats 1 \
      --out "$ref" 2>&1 | tee -a "$OUT/profile-reference.log" | grep -v '^step' | tail -30
    timeout 120 python3 orchestrate.py report "$ref" --out "$ref/report" 2>&1 | tail -3
    tar czf "$OUT/profile-reference.tgz" "$ref"
    timeout "${BARE_S:-90}" python3 -m lab.bare_loops profile --repeats 3 --out "$OUT" 2>&1 | tail -8
    timeout "${BARE_ROOF_S:-150}" python3 -m lab.bare_loops roofline --repeats 3 --batches 128 --out "$OUT" 2>&1 | tail -12
    ;;
  reference-cpu)
    ref=results/reference/$gpu-profile
    timeout "${REF_CPU_S:-400}" python3 -m bench matrix profile --platform cpu --profile default --repeats 1 \
      --out "$ref" 2>&1 | tee -a "$OUT/profile-reference-cpu.log" | grep -v '^step' | tail -30
    timeout 100 python3 orchestrate.py report "$ref" --out "$ref/report" 2>&1 | tail -3
    tar czf "$OUT/profile-reference.tgz" "$ref"
    ;;
esac
