#!/usr/bin/env bash
# Slurm smoke, called by .ci/run (also runnable by hand, as root, from the repo root):
#
#   bash .ci/slurm-smoke.sh
#
# 1. bring up a one-node Slurm on this host from Debian packages (.ci/slurm.sh up): each task
#    bound to its own core (the tests bring up two nodes for the cells that span nodes)
# 2. plan the smoke matrices of mlp-scratch and mnist-cnn, native, on real MNIST
#    ($KIT_CI_DATA_DIR) into the job dir results/ci-slurm (4 cells)
# 3. `orchestrate.py slurm --submit` (one job array), in the background; once the first
#    mnist-cnn task runs, `scancel` it: the follower writes its error row (Slurm's CANCELLED)
#    and exits 1, the other cells finish
# 4. `orchestrate.py slurm --submit` again: only the cancelled cell is submitted; it finishes
# 5. `orchestrate.py verify` on the job dir, strict: every cell must match a baseline entry,
#    and these match set ci-smoke's (the same configurations as the container smoke's, exactly;
#    not `--baseline ci-smoke`, which also asks for the three studies this smoke does not run);
#    then each cell's speed against ci-smoke's entries of its class (1 core, native: made from this
#    script's own runs): every cell must have such an entry, and one slower than its tolerance
#    fails (a cell flagged cpu-shared is not judged: .ci/run says why), after one recheck: a slow
#    cell's study runs again as 3 fresh repeats, their median held to the entry (.ci/speed-gate.sh)
# 6. stop the daemons step 1 started, by pid (.ci/slurm.sh down), also on a failure
# Measured on the project's 2-core VM: see the "slurm-smoke: done" line.
set -euo pipefail

cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
DATA_DIR="${KIT_CI_DATA_DIR:-$PWD/../shared/datasets}"
JOB="${KIT_CI_SLURM_JOB:-$PWD/results/ci-slurm}"
T0=$(date +%s)
say() { echo "::: slurm-smoke ($(( $(date +%s) - T0 ))s): $*"; }

[ -d "$DATA_DIR/mnist" ] || { echo "slurm-smoke: $DATA_DIR/mnist missing (set KIT_CI_DATA_DIR)" >&2; exit 1; }
started=0
STATE="${KIT_SLURM_STATE:-/tmp/cnn-bench-slurm}"
nodes=$({ timeout 5 sinfo -h -o %D 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
if [ "$nodes" != 0 ] && [ "$nodes" != 1 ] && [ -s "$STATE/started" ]; then
  # the kit's own test cluster (two nodes, .ci/slurm.sh), left by a test run that was killed: its
  # cells would be another machine class than ci-smoke's one-node entries; stop it, start ours
  say "the kit's $nodes-node test Slurm is still up ($STATE/started): stopping it for a one-node one"
  bash .ci/slurm.sh down
fi
if timeout 5 sinfo -h >/dev/null 2>&1; then
  say "a Slurm answers already: using it (and leaving it running)"
else
  trap 'bash .ci/slurm.sh down' EXIT  # only what this script started
  KIT_SLURM_NODES=1 bash .ci/slurm.sh up
  started=1
fi
say "slurm up (started here: $started)"

rm -rf "$JOB" "$JOB.log"
"$PY" orchestrate.py plan "$JOB" cpu --study mlp-scratch --study mnist-cnn --profile smoke --data-dir "$DATA_DIR"
victim=$("$PY" -c "import json, sys; m = json.load(open(sys.argv[1])); print(next(int(c['task']) for c in m['cells'] if c['study'] == 'mnist-cnn'))" "$JOB/manifest.json")

say "submit (the follower's log: $JOB.log)"
"$PY" orchestrate.py slurm "$JOB" --submit --cpus-per-task 1 --poll-s 1 > "$JOB.log" 2>&1 &
follower=$!
task=""
for _ in $(seq 1 240); do  # until the victim's task runs (its array job id is only known once submitted)
  task=$(squeue -h -r -t RUNNING -o '%F_%K' | grep "_${victim}\$" || true)
  [ -n "$task" ] && break
  sleep 0.5
done
[ -n "$task" ] || { cat "$JOB.log"; echo "slurm-smoke: task $victim never ran" >&2; exit 1; }
sleep 3
say "scancel $task (task $victim, running)"
scancel "$task"
rc=0; wait "$follower" || rc=$?
cat "$JOB.log"
[ "$rc" = 1 ] || { echo "slurm-smoke: the follower exited $rc, expected 1 (one cell cancelled)" >&2; exit 1; }
grep -q "CANCELLED" "$JOB"/task-"$(printf %04d "$victim")"/mnist-cnn/*/rows.jsonl \
  || { echo "slurm-smoke: the cancelled task has no error row naming CANCELLED" >&2; exit 1; }
say "the cancelled task is an error row with Slurm's state; resubmitting"

"$PY" orchestrate.py slurm "$JOB" --submit --cpus-per-task 1 --poll-s 1 | tee "$JOB.rerun.log"
grep -q "submitted job [0-9]*: 1 cpu task(s), array $victim " "$JOB.rerun.log" \
  || { echo "slurm-smoke: the rerun did not submit exactly the cancelled cell" >&2; exit 1; }
say "the rerun finished it"

"$PY" orchestrate.py verify "$JOB" --speed off | tee "$JOB.verify.log"
grep -q "4 cells: 4 ok, 0 FAIL, 0 without a baseline" "$JOB.verify.log" \
  || { echo "slurm-smoke: verify did not check all 4 cells against a baseline" >&2; exit 1; }
if ! "$PY" orchestrate.py verify "$JOB" > "$JOB.speed.log"; then
  # as .ci/speed-gate.sh: only a slow cell is rechecked; its study runs again as a job array of 3
  # fresh repeats, and each configuration's median over them is held to ci-smoke's entry
  grep -E "^FAIL|^verify" "$JOB.speed.log"
  ! grep -E "^FAIL" "$JOB.speed.log" | grep -vqE "x slower, beyond the tolerance" \
    || { echo "slurm-smoke: the speed check failed (above), not on a slow cell: no recheck" >&2; exit 1; }
  mapfile -t slow < <(grep -E "^FAIL" "$JOB.speed.log" | awk '{print $2}' | sort -u)
  args=(); for s in "${slow[@]}"; do args+=(--study "$s"); done
  say "recheck of ${slow[*]}: 3 fresh repeats as a job array, each configuration's median held to ci-smoke"
  rm -rf "$JOB-recheck"
  "$PY" orchestrate.py plan "$JOB-recheck" cpu "${args[@]}" --profile smoke --repeats 3 --data-dir "$DATA_DIR"
  "$PY" orchestrate.py slurm "$JOB-recheck" --submit --cpus-per-task 1 --poll-s 1 > "$JOB-recheck.log" 2>&1 \
    || { cat "$JOB-recheck.log"; echo "slurm-smoke: the recheck's job array failed" >&2; exit 1; }
  "$PY" orchestrate.py verify "$JOB-recheck" --speed off > "$JOB-recheck.verify.log" \
    || { grep -E "^FAIL|^verify" "$JOB-recheck.verify.log"; echo "slurm-smoke: a recheck repeat failed a check other than speed" >&2; exit 1; }
  "$PY" orchestrate.py verify "$JOB-recheck" --speed median > "$JOB.speed.log" \
    || { grep -E "^FAIL|^verify" "$JOB.speed.log"; echo "slurm-smoke: slower than ci-smoke beyond the tolerance at the median of 3 fresh repeats (above)" >&2; exit 1; }
fi
grep -oE "throughput [0-9.]+x the baseline's speed[^;]*|speed not judged: [^;]*|[0-9.]+x (slower|faster)[^;]*|^verify.*" "$JOB.speed.log" || true
! grep -q "no speed baseline for this class" "$JOB.speed.log" \
  || { echo "slurm-smoke: a cell had no speed baseline for its class (remake ci-smoke: results/reference/README.md)" >&2; exit 1; }
say "done: verify passed on $JOB"
