#!/usr/bin/env bash
# mps runs natively on macOS (Apple silicon): Docker on macOS runs a Linux VM that cannot
# reach the Apple GPU, so there is no mps image. This script is its stand-in: a venv built
# from the same kind of hash-locked lock (requirements/mps.txt: torch 2.10.0, the version
# the cpu and cuda images carry), then every study's mps matrix.
#
#   docker/mps/run.sh [--data-dir DIR] [--out DIR] [--smoke] [any `bench matrix` option]
#
# Needs: macOS 14+ on arm64, python3.11 (python.org or `brew install python@3.11`).
# The venv lives in .venv-mps/ (KIT_MPS_VENV to move it) and is rebuilt when mps.txt changes.
set -euo pipefail

cd "$(dirname "$0")/../.."
if [ "$(uname -s)" != Darwin ] || [ "$(uname -m)" != arm64 ]; then
  echo "error: mps needs macOS on Apple silicon (this is $(uname -s)/$(uname -m)); run cpu or cuda instead" >&2
  exit 2
fi
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || { echo "error: $PY not found: install Python 3.11 (brew install python@3.11)" >&2; exit 2; }
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "error: $PY is not Python 3.11: requirements/mps.txt is locked for 3.11" >&2; exit 2; }

VENV="${KIT_MPS_VENV:-.venv-mps}"
LOCK=requirements/mps.txt
HASH="$(shasum -a 256 "$LOCK" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.lock-hash" 2>/dev/null)" != "$HASH" ]; then
  echo "mps: building $VENV from $LOCK ($HASH)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --require-hashes --no-deps -r "$LOCK"
  echo "$HASH" > "$VENV/.lock-hash"
fi

DATA="${KIT_DATA_DIR:-data}"
OUT="results/$(hostname -s)"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) DATA="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
# Rows record how they ran: no image, but the lock this venv was built from.
export KIT_RUNTIME=native KIT_PLATFORM=mps KIT_LOCK_HASH="$HASH" KIT_IMAGE_REF="native:$LOCK"
export KIT_GIT_SHA="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
export PYTORCH_ENABLE_MPS_FALLBACK=0   # an op MPS lacks must fail, not silently run on the CPU
exec "$VENV/bin/python" -m bench matrix --platform mps --data-dir "$DATA" --out "$OUT" "${ARGS[@]}"
