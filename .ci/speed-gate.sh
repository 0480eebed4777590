#!/usr/bin/env bash
# The container smoke's speed gate, called by .ci/run after the smoke (runnable by hand, as root,
# from the repo root, once .ci/docker-smoke.sh has filled the results dir):
#
#   bash .ci/speed-gate.sh [RESULTS_DIR]        (default results/ci-container)
#
# 1. each cell's speed against ci-smoke's entries for this machine class (results/reference/README.md,
#    ci-smoke), or, on a CPU class with no entry of its own (CI's VMs come in more than one type),
#    against the slowest of the other classes' entries at the tolerance times the gap measured
#    between them (host/speed.py, held cross-class): every cell must be held one way or the other.
#    A cell that ran beside other work (its cpu-shared flag) is not judged, and its line says so.
# 2. where a cell is slower than its entry by more than the tolerance, the recheck: its study's
#    smoke runs twice more, each in a fresh container and results dir (the same cells: studies
#    whose repeats change the seed would not match the entry's loss curve), each checked on its own,
#    and each configuration's median over the 3 runs is held to the entry's median at the same
#    tolerance (`verify --speed median --speed-peers`).
#    The entry is itself a median of 3 containers; one repeat on a shared 2-core VM is not. A real
#    slowdown slows every repeat and still fails; a slow moment in one container does not.
#    Only speed failures are rechecked: the smoke's other checks ran before (verify --speed off).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-results/ci-container}"
PY="${PYTHON:-.venv/bin/python}"
DATA_DIR="${KIT_CI_DATA_DIR:-$PWD/../shared/datasets}"
CA_CERT="${KIT_CI_CA_CERT:-/etc/ssl/certs/ca-certificates.crt}"
LOG="$DIR.speed.log"
show() {
  grep -oE "^ok +[a-z-]+ [^(]*|throughput [0-9.]+x the baseline's speed[^;]*|speed not judged: [^;]*|[0-9.]+x (slower|faster)[^;]*|^verify.*" "$LOG" || true
  ! grep -q "no speed baseline for this class" "$LOG" \
    || { echo "speed-gate: a smoke cell had no speed baseline for CI's machine class (remake ci-smoke: results/reference/README.md)" >&2; exit 1; }
}
echo "speed-gate: $DIR against ci-smoke (load $(cut -d' ' -f1-3 /proc/loadavg))"
if "$PY" orchestrate.py verify "$DIR" --baseline ci-smoke > "$LOG"; then
  show
  exit 0
fi
grep -E "^FAIL|^verify" "$LOG"
if grep -E "^FAIL" "$LOG" | grep -vqE "x slower, beyond the tolerance"; then
  echo "speed-gate: a failure above is not a slow cell; no recheck" >&2
  exit 1
fi
mapfile -t studies < <(grep -E "^FAIL" "$LOG" | awk '{print $2}' | sort -u)
args=()
for s in "${studies[@]}"; do args+=(--study "$s"); done
echo "speed-gate: recheck of ${studies[*]}: the same cells twice more in fresh containers, each configuration's median of 3 held to ci-smoke (load $(cut -d' ' -f1-3 /proc/loadavg))"
t0=$(date +%s)
peers=()
for i in 1 2; do
  again="$DIR.recheck-$i"
  rm -rf "$again"
  "$PY" orchestrate.py run cpu --runtime docker --profile smoke "${args[@]}" \
    --data-dir "$DATA_DIR" --out "$again" --ca-cert "$CA_CERT" > "$again.log" 2>&1 \
    || { tail -20 "$again.log"; echo "speed-gate: the recheck's run $i failed (log: $again.log)" >&2; exit 1; }
  "$PY" orchestrate.py verify "$again" --speed off > "$again.verify.log" \
    || { grep -E "^FAIL|^verify" "$again.verify.log"; echo "speed-gate: the recheck's run $i failed a check other than speed (above)" >&2; exit 1; }
  peers+=(--speed-peers "$again")
done
echo "speed-gate: recheck ran in $(( $(date +%s) - t0 ))s (load $(cut -d' ' -f1-3 /proc/loadavg))"
if ! "$PY" orchestrate.py verify "$DIR" --baseline ci-smoke --speed median "${peers[@]}" > "$LOG"; then
  grep -E "^FAIL|^verify" "$LOG"
  echo "speed-gate: slower than ci-smoke beyond the tolerance at the median of 3 containers (above)" >&2
  exit 1
fi
show
