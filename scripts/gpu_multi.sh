#!/usr/bin/env bash
# The many-GPU reference on one GPU host, natively with the host's own packages (from the repo root):
#   bash scripts/gpu_multi.sh two    # two GPUs (or more), into results/multi/<gpu>-x<GPUs>/, in this order (on a host
#                                    # of 4 GPUs each round of DDP x2 is followed by DDP x4: the 1-2-4 curve on one host):
#        1 lab/dp_collapse.py: why nn.DataParallel collapses with cudnn.benchmark on (about 1 min)
#        2 profile DenseNet-121 fp32 at 128 a GPU, 3 rounds: one GPU, DDP over 2, then the bare DDP loop
#          (lab/bare_ddp.py) beside the kit's DDP cell
#        3 DataParallel with cudnn.benchmark on, fp32 and bf16-cl: one repeat of a shorter protocol (DP_ON)
#        4 DataParallel with cudnn.benchmark off, fp32, 3 rounds
#        5 bf16-cl: one GPU and DDP over 2, 3 rounds
#        6 DataParallel with cudnn.benchmark off, bf16-cl, 3 rounds
#        7 roofline ResNet-50 scenario A fp32 at 256 a GPU, synthetic-gpu: one GPU and DDP over 2, 3 rounds
#   bash scripts/gpu_multi.sh four   # four GPUs, into results/multi/<gpu>-x4/: profile fp32 then bf16-cl
#        rounds of one GPU, DDP over 2 and over 4; then roofline ResNet-50 at 256 a GPU over 1, 2 and 4
# Each call runs the steps in order while they fit in BUDGET_S seconds (default 510: a device call is at
# most 600): the first step whose estimate (each `go`'s first argument, in s: guesses for an H100 from the
# 2x H200 cells of 8826d01, not measured) does not fit waits, and every step after it; the call then says
# `pending`, and the same command again resumes (ok cells are reused; the lab steps are skipped once their
# file exists). On a fresh machine, unpack the last call's $OUT/*.tgz into results/multi/ first and carry
# results/multi.
# A round is one repeat of each of its cells (`--repeats 1`, then `--set repeat=K`): the cells compared
# alternate in time.
# Every profile cell: 3 epochs of 30 steps a rank (synthetic-gpu epochs run max_steps), 3 warm-up steps,
# the sampler's cost over 2 x 2 blocks of 10 steps, one profiled step; DataParallel with cudnn.benchmark
# on runs at about 1/20 of the others' speed, so its protocol is DP_ON (2 epochs of 3 steps, one repeat),
# which its rows carry (epochs, steps) and the report states.
# Output under $OUT (default results/gpu-out): <name>-results.tgz (the results dir without traces),
# <name>-traces-<k>.tgz (the profiler traces, at most 15 MiB each: lab/pack_results.py), <name>.log.
# DRY=1 prints each step's command (RUN ...) instead of running it, and touches no GPU (tests read it).
set -uo pipefail
mode=${1:?usage: gpu_multi.sh two|four}
export PYTHONUNBUFFERED=1 KIT_CACHE_DIR=${KIT_CACHE_DIR:-/tmp/kit-cache}
OUT=${OUT:-$PWD/results/gpu-out}
BUDGET_S=${BUDGET_S:-510}
DRY=${DRY:-}
start=$SECONDS
pending=0
if [[ -z $DRY ]]; then
  nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'gpus', torch.cuda.device_count())"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
  ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
else
  gpu=GPU
  ngpu=${DRY_GPUS:-2}
fi
case "$mode" in
  two) name=$gpu-x$ngpu ;;  # on a host of 4 GPUs, `two` also runs the DDP cells over 4 in its rounds (one host, 1-2-4)
  four) name=$gpu-x4 ;;
  *) echo "usage: gpu_multi.sh two|four" >&2; exit 2 ;;
esac
ref=results/multi/$name
log=$OUT/$name.log
[[ -n $DRY ]] || mkdir -p "$OUT" "$ref/lab"

# go EST LABEL CMD...: run CMD if no earlier step is pending and its estimate fits in what is left of
# BUDGET_S (SIGINT at the end of it: the matrix writes its running cell as interrupted, and the next call
# runs it again). Returns 1 when CMD was left for the next call or cut by the time limit, else 0 (a
# failed cell is in its rows).
go() {
  local est=$1 label=$2 left
  shift 2
  if [[ -n $DRY ]]; then printf 'RUN'; printf ' %q' "$@"; printf '\n'; return 0; fi
  left=$((BUDGET_S - (SECONDS - start)))
  if ((pending || left < est)); then  # in order: once one step waits, the later ones wait too
    echo "pending: $label (about $est s; $left s left in this call)" | tee -a "$log"
    pending=1
    return 1
  fi
  echo "== $label (about $est s; $left s left)" | tee -a "$log"
  timeout -s INT -k 30 "$left" "$@" 2>&1 | tee -a "$log" | grep -v '^step' | tail -n 25
  if ((PIPESTATUS[0] == 124)); then pending=1; return 1; fi
  return 0
}
round() { if (($1)); then R=(--set repeat="$1"); else R=(--repeats 1); fi; }  # --set repeat=0 would run them all
done_line() { [[ -z $DRY ]] && grep -qs "\"tag\": \"$2\", \"world\": $3," "$1"; }

PROF=(python3 -m bench matrix profile --platform cuda --profile default --only pipeline=synthetic-gpu --only batch_size=128)
COMMON=(--set epochs=3 --set max_steps=30 --set idle_s=1.0 --set warmup_steps=3 --set overhead_blocks=2
        --set overhead_steps=10 --set prof_wait=0 --set prof_warmup=1 --set prof_active=1 --out "$ref")
DP_ON=(--set epochs=2 --set max_steps=3 --set warmup_steps=1 --set overhead_blocks=1 --set overhead_steps=1
       --set prof_active=2 --timeout-s 400)
ROOF=(python3 -m bench matrix roofline --platform cuda --profile default --only model=resnet50 --only scenario=A
      --only pipeline=synthetic-gpu --only variant=fp32 --set batch_size=256 --set roof_sizes=quick
      --set max_val_batches=20 --out "$ref")
FP32=(--only variant=finetune)
BF16=(--only variant=finetune+bf16-cl)
ONE_DDP=(--only 'parallel=none|ddp')

case "$mode" in
  two)
    [[ -f $ref/lab/dp_collapse.json ]] || go 90 "dp_collapse" python3 -m lab.dp_collapse --out "$ref/lab"
    for r in 0 1 2; do
      round $r
      go 95 "fp32 round $r: one GPU, DDP x2" "${PROF[@]}" "${FP32[@]}" "${ONE_DDP[@]}" "${R[@]}" "${COMMON[@]}" || continue
      ((ngpu < 4)) || go 55 "fp32 round $r: DDP x4" "${PROF[@]}" "${FP32[@]}" --only parallel=ddp --set devices=0,1,2,3 \
        "${R[@]}" "${COMMON[@]}" || continue
      done_line "$ref/lab/bare_ddp.jsonl" r$((r + 1)) 2 || go 35 "bare DDP x2 round $r" python3 -m torch.distributed.run \
        --standalone --nproc_per_node=2 -m lab.bare_ddp --epochs 3 --steps 30 --batch 128 --tag r$((r + 1)) \
        --out "$ref/lab/bare_ddp.jsonl"  # right after the kit's round r: the two alternate
    done
    go 200 "DataParallel, cudnn.benchmark on (DP_ON)" "${PROF[@]}" --only parallel=dp --only cudnn_benchmark=True \
      --repeats 1 "${COMMON[@]}" "${DP_ON[@]}"
    for r in 0 1 2; do
      round $r
      go 75 "fp32 round $r: DataParallel, benchmark off" "${PROF[@]}" "${FP32[@]}" --only parallel=dp \
        --only cudnn_benchmark=False "${R[@]}" "${COMMON[@]}"
    done
    for r in 0 1 2; do
      round $r
      go 85 "bf16-cl round $r: one GPU, DDP x2" "${PROF[@]}" "${BF16[@]}" "${ONE_DDP[@]}" "${R[@]}" "${COMMON[@]}"
      ((ngpu < 4)) || go 55 "bf16-cl round $r: DDP x4" "${PROF[@]}" "${BF16[@]}" --only parallel=ddp --set devices=0,1,2,3 \
        "${R[@]}" "${COMMON[@]}"
    done
    for r in 0 1 2; do
      round $r
      go 70 "bf16-cl round $r: DataParallel, benchmark off" "${PROF[@]}" "${BF16[@]}" --only parallel=dp \
        --only cudnn_benchmark=False "${R[@]}" "${COMMON[@]}"
    done
    for r in 0 1 2; do
      round $r
      go 55 "roofline round $r: one GPU" "${ROOF[@]}" "${R[@]}"
      go 50 "roofline round $r: DDP x2" "${ROOF[@]}" --set devices=0,1 "${R[@]}"
      ((ngpu < 4)) || go 55 "roofline round $r: DDP x4" "${ROOF[@]}" --set devices=0,1,2,3 "${R[@]}"
    done
    [[ -n $DRY ]] || python3 -m lab.bare_ddp compare "$ref" "$ref/lab/bare_ddp.jsonl" --world 2 \
      --out "$ref/lab/kit_vs_bare_ddp.json" 2>&1 | tee -a "$log"
    ;;
  four)
    for v in FP32 BF16; do
      sel="$v[@]"
      for r in 0 1 2; do
        round $r
        go 95 "$v round $r: one GPU, DDP x2" "${PROF[@]}" "${!sel}" "${ONE_DDP[@]}" "${R[@]}" "${COMMON[@]}"
        go 55 "$v round $r: DDP x4" "${PROF[@]}" "${!sel}" --only parallel=ddp --set devices=0,1,2,3 "${R[@]}" \
          "${COMMON[@]}"
      done
    done
    for r in 0 1 2; do
      round $r
      go 55 "roofline round $r: one GPU" "${ROOF[@]}" "${R[@]}"
      go 50 "roofline round $r: DDP x2" "${ROOF[@]}" --set devices=0,1 "${R[@]}"
      go 55 "roofline round $r: DDP x4" "${ROOF[@]}" --set devices=0,1,2,3 "${R[@]}"
    done
    ;;
esac
[[ -n $DRY ]] && exit 0
python3 -m lab.pack_results "$ref" "$OUT" --name "$name" 2>&1 | tee -a "$log"
if ((pending)); then echo "pending: run the same command again (it resumes)"; else echo "all done: $ref"; fi
