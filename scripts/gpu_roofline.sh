#!/usr/bin/env bash
# roofline (seed 003) on a GPU host, natively with the host's own packages (from the repo root):
#   bash scripts/gpu_roofline.sh check      # every CUDA code path once: resnet18 smoke cells (fp32 loader and
#                                           # synthetic-gpu, bf16-cl synthetic-gpu, the bf16-cl sweep), the device roofs
#   bash scripts/gpu_roofline.sh reference  # the study's cuda matrix, default profile, one repeat, into
#                                           # results/reference/<gpu>-roofline/ (a rerun resumes)
# Data: the synthetic Tiny-ImageNet tree (generated into $KIT_CACHE_DIR; no real tree here) unless
# $KIT_DATA_DIR holds tinyimagenet/tiny-imagenet-200. Output under $OUT (default results/gpu-out).
set -uo pipefail
mode=${1:?usage: gpu_roofline.sh check|reference}
export PYTHONUNBUFFERED=1 KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 -c "import sys, torch, torchvision; print('python', sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
python3 -c "import pynvml; pynvml.nvmlInit(); print('nvml ok')" || echo "no NVML: GPU utilisation will be recorded as not sampled"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
case "$mode" in
  check)
    timeout 300 python3 -m bench matrix roofline --platform cuda --profile smoke --out /tmp/rl-check 2>&1 | tail -25
    timeout 120 python3 orchestrate.py report /tmp/rl-check --out /tmp/rl-check/report 2>&1 | tail -3
    tar czf "$OUT/roofline-check.tgz" -C /tmp rl-check
    ;;
  reference)
    ref=results/reference/$gpu-roofline
    timeout "${REF_S:-540}" python3 -m bench matrix roofline --platform cuda --profile default --repeats 1 \
      --out "$ref" 2>&1 | tee -a "$OUT/roofline-reference.log" | grep -v '^step' | tail -40
    timeout 120 python3 orchestrate.py report "$ref" --out "$ref/report" 2>&1 | tail -3
    find "$ref" -name log.txt -size +200k -delete
    tar czf "$OUT/roofline-reference.tgz" "$ref"
    ;;
esac
