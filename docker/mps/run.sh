#!/usr/bin/env bash
# mps runs natively on macOS (Apple silicon): Docker on macOS runs a Linux VM that cannot
# reach the Apple GPU, so there is no mps image. This script is its stand-in: a venv built
# from a hash-locked macOS arm64 lock (requirements/mps.txt for Python 3.11,
# requirements/mps-py3.X.txt for the newer ones: torch 2.10.0, the version the cpu and cuda
# images carry, plus the host side), then the mps matrix of every study that has an mps backend.
#
#   docker/mps/run.sh [--data-dir DIR] [--out DIR] [--smoke] [STUDY...] [any `bench matrix` option]
#
# Needs: macOS 14+ on arm64 and a CPython >= 3.11 with a lock here (python.org or brew).
# Python: $PYTHON, else the first of python3, python3.14 ... python3.11 that has a lock.
# Data: --data-dir DIR, else $KIT_DATA_DIR, else ./data when it holds the dataset, else the
# study's embedded default (as on Linux). Results: --out DIR, else results/<host>.
# The venv lives in .venv-mps/ (KIT_MPS_VENV to move it); rebuilt when its lock or Python changes.
#
# Test hooks (tests/test_mps_wrapper.py runs this on Linux): KIT_FAKE_UNAME_S, KIT_FAKE_UNAME_M
# and KIT_FAKE_MACOS stand in for `uname -s`, `uname -m` and `sw_vers -productVersion`.
set -euo pipefail

cd "$(dirname "$0")/../.."
MIN_PY="3.11"   # = pyproject's requires-python (tests/test_packaging.py); requirements/mps.txt is its lock
MIN_MACOS=14    # the locks are resolved for macOS 14+ (torch 2.10.0's newest wheels need it)
die() { echo "error: $*" >&2; exit 2; }

os_name="${KIT_FAKE_UNAME_S:-$(uname -s)}"
arch="${KIT_FAKE_UNAME_M:-$(uname -m)}"
if [ "$os_name" != Darwin ] || [ "$arch" != arm64 ]; then
  if [ "$os_name" = Darwin ]; then
    die "mps needs Apple silicon (this is $os_name/$arch: an Intel Mac, or a shell under Rosetta: then run 'arch -arm64 bash $0')"
  fi
  die "mps needs macOS on Apple silicon (this is $os_name/$arch); run cpu or cuda instead (python orchestrate.py all)"
fi
macos="${KIT_FAKE_MACOS:-$(sw_vers -productVersion 2>/dev/null || echo unknown)}"
case "${macos%%.*}" in
  ''|*[!0-9]*) die "cannot tell the macOS version (sw_vers says '$macos'); mps needs macOS $MIN_MACOS or newer" ;;
esac
[ "${macos%%.*}" -ge "$MIN_MACOS" ] || die "mps needs macOS $MIN_MACOS or newer (this is $macos): the locked torch wheels need it"

# ---- Python: any minor that has a lock ------------------------------------------------
lock_for() { if [ "$1" = "$MIN_PY" ]; then echo requirements/mps.txt; else echo "requirements/mps-py$1.txt"; fi; }
supported() {
  local f v out=""
  for f in requirements/mps.txt requirements/mps-py*.txt; do
    [ -f "$f" ] || continue
    case "$f" in requirements/mps.txt) v="$MIN_PY" ;; *) v="${f#requirements/mps-py}"; v="${v%.txt}" ;; esac
    out="$out $v"
  done
  echo "${out# }"
}
# "3.12", or "3.13t" for a free-threaded build (no lock: numba has no such wheels)
py_version() { "$1" -c 'import sys, sysconfig; print("%d.%d" % sys.version_info[:2] + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))' 2>/dev/null; }

if [ -n "${PYTHON:-}" ]; then candidates=("$PYTHON"); else candidates=(python3 python3.14 python3.13 python3.12 python3.11); fi
PY="" PYV="" tried=()
for c in "${candidates[@]}"; do
  command -v "$c" >/dev/null 2>&1 || continue
  v="$(py_version "$c")" || continue
  [ -n "$v" ] || continue
  tried+=("$c ($v)")
  if [ -f "$(lock_for "$v")" ]; then PY="$c" PYV="$v"; break; fi
done
if [ -z "$PY" ]; then
  found="none"; [ ${#tried[@]} -eq 0 ] || found="${tried[*]}"
  die "no Python with an mps lock (found: $found; locks for: $(supported)): install CPython $MIN_PY or newer (python.org, brew install python@3.13) or set PYTHON"
fi
LOCK="$(lock_for "$PYV")"

sha256() { if command -v shasum >/dev/null 2>&1; then shasum -a 256 "$1"; else sha256sum "$1"; fi | cut -d' ' -f1; }
VENV="${KIT_MPS_VENV:-.venv-mps}"
HASH="$(sha256 "$LOCK")"
STAMP="python $PYV $HASH"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.lock-hash" 2>/dev/null)" != "$STAMP" ]; then
  if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
    die "$VENV exists and is not a venv: not touching it (set KIT_MPS_VENV to another dir)"
  fi
  echo "mps: building $VENV with $PY (Python $PYV) from $LOCK ($HASH)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps --only-binary :all: -r "$LOCK"
  echo "$STAMP" > "$VENV/.lock-hash"
fi

# ---- arguments: the wrapper's own, the rest to `bench matrix` -------------------------
DATA="${KIT_DATA_DIR:-}"   # empty: bench falls back to ./data, else the embedded default
OUT=""
STUDIES=() ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) [ $# -ge 2 ] || die "--data-dir needs a value"; DATA="$2"; shift 2 ;;
    --data-dir=*) DATA="${1#*=}"; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --smoke) ARGS+=(--profile smoke); shift ;;
    # bench matrix's options that take a value: keep the value with its option
    -p|--platform|--profile|--set|--only|--schedule|--devices|--timeout-s|--repeats)
      [ $# -ge 2 ] || die "$1 needs a value"; ARGS+=("$1" "$2"); shift 2 ;;
    -*) ARGS+=("$1"); shift ;;
    *) STUDIES+=("$1"); shift ;;
  esac
done

# Every study with an mps backend (the registry: BackendSpec.platform == "mps"), unless named.
DISCOVER='from bench.core.registry import studies
print(" ".join(n for n, s in studies().items() if any(b.platform == "mps" for b in s.backends.values())))'
if [ ${#STUDIES[@]} -eq 0 ]; then
  found="$("$VENV/bin/python" -c "$DISCOVER")" || die "could not list the studies with $VENV/bin/python"
  read -r -a STUDIES <<< "$found"
  [ ${#STUDIES[@]} -gt 0 ] || die "no study has an mps backend (python -m bench list)"
  echo "mps: studies with an mps backend: ${STUDIES[*]}"
fi

MATRIX=(matrix "${STUDIES[@]}" --platform mps)
[ -z "$DATA" ] || MATRIX+=(--data-dir "$DATA")
[ -z "$OUT" ] || MATRIX+=(--out "$OUT")
# Rows record how they ran: no image, but the lock this venv was built from.
export KIT_RUNTIME=native KIT_PLATFORM=mps KIT_LOCK_HASH="$HASH" KIT_IMAGE_REF="native:$LOCK"
KIT_GIT_SHA="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
export KIT_GIT_SHA
export PYTORCH_ENABLE_MPS_FALLBACK=0   # an op MPS lacks must fail, not silently run on the CPU
exec "$VENV/bin/python" -m bench "${MATRIX[@]}" ${ARGS[@]+"${ARGS[@]}"}   # (bash 3.2, macOS's: no empty "${A[@]}" under set -u)
