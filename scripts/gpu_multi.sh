#!/usr/bin/env bash
# Many GPUs on a GPU host, natively with the host's own packages (from the repo root):
#   bash scripts/gpu_multi.sh check   # one GPU: the profile cell at batch 128 as a world of one rank under
#                                     # the kit's torchrun beside the plain cell, 3 repeats interleaved
#                                     # (the harness's cost on one GPU), into $OUT/ranks1
#   bash scripts/gpu_multi.sh two     # two GPUs: profile's 1-GPU, one-rank and DDP cells at batch 128 per GPU,
#                                     # fp32 and bf16-cl, synthetic-gpu, 3 repeats in rounds; nn.DataParallel
#                                     # (cudnn.benchmark on, off) one repeat of fewer steps; into
#                                     # results/reference/<gpu>-x2-profile/ (a rerun resumes finished cells)
#   bash scripts/gpu_multi.sh two-rest  # roofline ResNet-50 scenario A at batch 256 per GPU, DDP vs 1 GPU (3
#                                       # repeats), the bare DDP loop beside the kit's DDP cell, the report
# Cells are shortened (epochs, steps, the sampler-cost and profiler steps) to fit a device call; rows say so.
# Wheels in ./.whl go first on PYTHONPATH. Output under $OUT (default results/gpu-out).
set -uo pipefail
mode=${1:?usage: gpu_multi.sh check|two|two-rest}
export PYTHONUNBUFFERED=1 KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then  # into a fresh target: a warm machine keeps what an earlier call put there
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt"
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'gpus', torch.cuda.device_count())"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
SHORT=(--set epochs=3 --set max_steps=6 --set idle_s=1.0 --set warmup_steps=2 --set overhead_blocks=1
       --set overhead_steps=2 --set prof_wait=0 --set prof_warmup=1 --set prof_active=2)
DP=(--set epochs=2 --set max_steps=3)  # nn.DataParallel collapsed to ~70 img/s on two H200s: fewer steps, one repeat
case "$mode" in
  check)
    timeout 400 python3 -m bench matrix profile --platform cuda --profile full --only pipeline=synthetic-gpu \
      --only batch_size=128 --only variant=finetune --only parallel=none --schedule interleaved --repeats 3 \
      "${SHORT[@]}" --out /tmp/ranks1 2>&1 | tee "$OUT/ranks1.log" | grep -v '^step' | tail -12
    tar czf "$OUT/ranks1.tgz" -C /tmp ranks1
    ;;
  two)
    ref=results/reference/$gpu-x2-profile
    # sequential in rounds (every cell's repeat 0, then 1, 2): an interleaved schedule would hold every
    # cell's DenseNet-121 on GPU 0 at once
    timeout 330 python3 -m bench matrix profile --platform cuda --profile full --only pipeline=synthetic-gpu \
      --only batch_size=128 --only 'parallel=none|ddp' --repeats 3 "${SHORT[@]}" --out "$ref" 2>&1 \
      | tee -a "$OUT/two.log" | grep -v '^step' | tail -24
    timeout 230 python3 -m bench matrix profile --platform cuda --profile full --only pipeline=synthetic-gpu \
      --only batch_size=128 --only parallel=dp --repeats 1 "${SHORT[@]}" "${DP[@]}" --out "$ref" 2>&1 \
      | tee -a "$OUT/two.log" | grep -v '^step' | tail -12
    find "$ref" -name '*.json.gz' -size +3M -delete
    tar czf "$OUT/two.tgz" "$ref"
    ;;
  two-rest)
    ref=results/reference/$gpu-x2-roofline
    timeout 300 python3 -m bench matrix roofline --platform cuda --profile default --only model=resnet50 --only scenario=A \
      --only pipeline=synthetic-gpu --only variant=fp32 --set batch_size=256 --set roof_sizes=quick --repeats 3 \
      --schedule interleaved --out "$ref/one" 2>&1 | tee -a "$OUT/roof.log" | grep -v '^step' | tail -6
    timeout 300 python3 -m bench matrix roofline --platform cuda --profile default --only model=resnet50 --only scenario=A \
      --only pipeline=synthetic-gpu --only variant=fp32 --set batch_size=256 --set roof_sizes=quick --repeats 3 \
      --set devices=0,1 --out "$ref/ddp" 2>&1 | tee -a "$OUT/roof.log" | grep -v '^step' | tail -6
    timeout 200 python3 -m lab.bare_loops ddp --repeats 3 --out "$OUT" 2>&1 | tail -6
    tar czf "$OUT/roof.tgz" "$ref"
    ;;
esac
