#!/usr/bin/env bash
# The one-GPU reference (`orchestrate.py reference gpu`), made over device calls of under 10 minutes
# each: every call resumes the last one's results dir and ends cleanly before its limit.
#
#   KIT_GIT_SHA=<the clean commit> bash scripts/gpu_reference.sh      # on the lent GPU host, repo root
#
# MODE=main runs the README's main job instead (`orchestrate.py all`, no datasets: the embedded
# default and synthetic sets) into results/main-<GPU>, and `verify` on it once it is done: what a
# new user's GPU box does, resumed the same way (issue 53).
#
# In:  .whl/        wheels the host lacks (pydantic, optuna, torchao, ville, pooch; numpy < 2.4 for
#                   numba-cuda), installed into /tmp/site and put first on PYTHONPATH
#      .data/       the datasets dir (mnist/: the real MNIST, SHA-256 checked by the kit)
#      .refcarry/reference.tar.gz.part-*   the last call's $OUT/reference.tar.gz.part-* and
#                   $OUT/reference.tar.gz.sha256, if any (joined, checked against that sha256 and then
#                   against the dir's MANIFEST.sha256 before it is unpacked; a half-copied one stops here);
#                   a whole .refcarry/reference.tar.gz (an older call's) is read the same way
# Out: $OUT/reference.tar.gz.part-aa, -ab, ... (the archive of results/reference/<GPU>/ with a
#      MANIFEST.sha256, cut in 15 MiB parts: the device brings back no file over 16 MiB, and one
#      archive of profile cells with their traces passed that: 18 MB, lost), its .sha256,
#      $OUT/reference.log, $OUT/status (done | paused | failed)
# DEST (reference mode; default results/reference/<GPU>[-<STUDY>]): the folder to make or resume.
# STUDY (reference mode): only those studies' part of the preset, space-separated
#                   (`reference gpu --study S1 --study S2`); the default DEST ends in -S1-S2.
# STOP (default 8m): this call's --stop-after. Exit: 0 done, 75 paused (call again), else failed.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/results/gpu-out}
STOP=${STOP:-8m}
mkdir -p "$OUT"
: "${KIT_GIT_SHA:?set KIT_GIT_SHA to the clean commit this tree is (the device copy has no .git)}"
export KIT_GIT_SHA
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "failed" > "$OUT/status"; exit 1; }
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^NVIDIA //; s/[^A-Za-z0-9._-]/-/g')
MODE=${MODE:-reference}
case $MODE in
  reference) dest=${DEST:-results/reference/$gpu$(for s in ${STUDY:-}; do printf -- '-%s' "$s"; done)} ;;  # DEST: a new folder where one of this GPU class is committed
  main) dest=results/main-$gpu ;;
  *) echo "error: MODE is reference or main, not $MODE" | tee "$OUT/reference.log"; echo failed > "$OUT/status"; exit 2 ;;
esac
name=$(basename "$dest")
carried=
if ls .refcarry/reference.tar.gz.part-* >/dev/null 2>&1 && [ -f .refcarry/reference.tar.gz ]; then
  echo "error: .refcarry holds both parts (reference.tar.gz.part-*) and a whole reference.tar.gz: keep only the last call's files" | tee "$OUT/reference.log"
  echo "failed" > "$OUT/status"; exit 1
elif ls .refcarry/reference.tar.gz.part-* >/dev/null 2>&1; then
  carried=$(mktemp) && trap 'rm -f "$carried"' EXIT && cat .refcarry/reference.tar.gz.part-* > "$carried"
  want=$(cut -d' ' -f1 .refcarry/reference.tar.gz.sha256 2>/dev/null)
  if [ -z "$want" ] || [ "$(sha256sum "$carried" | cut -d' ' -f1)" != "$want" ]; then
    echo "error: .refcarry/reference.tar.gz.part-* do not join into the archive .refcarry/reference.tar.gz.sha256 names (a part missing or half-copied): bring back every part of the last call again" | tee "$OUT/reference.log"
    echo "failed" > "$OUT/status"; exit 1
  fi
elif [ -f .refcarry/reference.tar.gz ]; then
  carried=.refcarry/reference.tar.gz
fi
if [ -n "$carried" ]; then
  scratch=$(mktemp -d)
  if ! tar -xzf "$carried" -C "$scratch" 2>"$OUT/untar.err"; then
    echo "error: the carried archive is not a whole one ($(head -1 "$OUT/untar.err")): bring back the last call's files again" | tee "$OUT/reference.log"
    echo "failed" > "$OUT/status"; exit 1
  fi
  if ! (cd "$scratch/$name" && sha256sum -c --quiet MANIFEST.sha256) >"$OUT/manifest.err" 2>&1; then
    echo "error: the carried results dir does not match its MANIFEST.sha256 ($(head -1 "$OUT/manifest.err")): not resumed" | tee "$OUT/reference.log"
    echo "failed" > "$OUT/status"; exit 1
  fi
  rm -rf "$dest" && mkdir -p "$(dirname "$dest")" && mv "$scratch/$name" "$dest" && rm -f "$dest/MANIFEST.sha256"
  echo "resumed $dest: $(find "$dest" -name rows.jsonl | wc -l) cells from the last call"
fi
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
start=$(date +%s)
if [ "$MODE" = main ]; then
  empty=$(mktemp -d)  # no datasets: the README's main job on its embedded default
  KIT_DATA_DIR=$empty python3 orchestrate.py all --out "$dest" --stop-after "$STOP" 2>&1 | tee "$OUT/reference.log"
else
  study_args=()
  for s in ${STUDY:-}; do study_args+=(--study "$s"); done
  python3 orchestrate.py reference gpu "${study_args[@]}" --data-dir .data --out "$dest" --stop-after "$STOP" 2>&1 | tee "$OUT/reference.log"
fi
rc=${PIPESTATUS[0]}
echo "reference exit code $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/reference.log"
case $rc in 0) echo done > "$OUT/status" ;; 75) echo paused > "$OUT/status" ;; *) echo failed > "$OUT/status" ;; esac
if [ -d "$dest" ] && { [ "$MODE" = main ] || [ "$rc" = 0 ]; }; then
  extra=$([ "$MODE" = reference ] && echo --allow-unbaselined)  # a new reference's smaller amounts: no set yet
  python3 orchestrate.py verify "$dest" $extra 2>&1 | tee "$OUT/verify.log"
  echo "verify exit code ${PIPESTATUS[0]}" | tee -a "$OUT/verify.log"
fi
if [ -d "$dest" ]; then
  # the report is made again from the rows (here after every part, and by `orchestrate.py report`): not carried
  (cd "$dest" && find . -type f ! -name MANIFEST.sha256 ! -path './report/*' -print0 | sort -z | xargs -0 sha256sum > MANIFEST.sha256)
  rm -f "$OUT"/reference.tar.gz.part-* "$OUT"/reference.tar.gz.sha256  # an earlier call's parts would join this one's
  tar -czf "$OUT/reference.tar.gz" --exclude="$name/report" -C "$(dirname "$dest")" "$name"
  rm -f "$dest/MANIFEST.sha256"
  (cd "$OUT" && sha256sum reference.tar.gz > reference.tar.gz.sha256 && split -b 15M -a 2 reference.tar.gz reference.tar.gz.part- && rm reference.tar.gz)
  ls -la "$OUT"/reference.tar.gz.*
  total=$(cat "$OUT"/reference.tar.gz.part-* | wc -c)
  [ "$total" -le $((56 * 1048576)) ] || echo "warning: the archive is $((total / 1048576)) MiB: over what the device brings back with the logs (64 MiB) or carries beside the wheels; drop the traces first (reference-reports --drop-traces)" | tee -a "$OUT/reference.log"
fi
exit "$rc"
