#!/usr/bin/env bash
# Regenerate every hash-locked requirements/*.txt from its requirements/*.in.
#
#   requirements/lock.sh              # re-lock, keeping current pins where still valid
#   requirements/lock.sh --upgrade    # re-resolve everything to the newest allowed
#   requirements/lock.sh cpu cuda     # only these targets (dependents are redone too)
#
# Resolves against real PyPI (never a local mirror, so the locks install anywhere) with
# uv (`pip install uv`). Every lock starts with `# input: PATH sha256:HEX` lines naming
# the files it was resolved from; tests/test_locks.py recomputes them, offline, and
# fails when a lock is stale against its .in.
#
# Targets and what each lock is for:
#   host  host tools (orchestrate.py, report)   universal (Linux, macOS, Windows), python 3.11
#   dev   native runs + tests (CI)               linux x86_64 (manylinux_2_28), python 3.11
#   cuda  cuda image                             linux x86_64 (manylinux_2_28), python 3.11
#   cpu   cpu image, constrained to cuda.txt     linux x86_64, python 3.11  (cpu.txt is a subset of cuda.txt)
#   mps   native macOS arm64 (docker/mps/run.sh, setup.sh mps): bench + the host side, constrained to
#         cpu.txt pins; aarch64-apple-darwin (macOS 14+), wheels only; one lock per Python minor:
#         mps.txt (3.11) and mps-py3.12.txt ... (MPS_PYTHONS; a minor's pins can differ: setuptools on
#         3.12+, contourpy)
#   changepoint  signal-processing-algorithms alone, --no-deps (its pins conflict with numpy 2):
#         installed after dev.txt by scripts/setup.sh; linux x86_64, python 3.11
#   cpu-torchcpu  cpu image with torch's CPU wheel (build cpu --torch-cpu-only): only when named;
#         needs https://download.pytorch.org/whl/cpu (.github/workflows/lock-cpu-only.yml runs it)
set -euo pipefail

cd "$(dirname "$0")/.."
INDEX_URL="https://pypi.org/simple"
PYVER="3.11"   # every lock's Python, except the mps locks' extra minors
MPS_PYTHONS="3.11 3.12 3.13 3.14"   # torch 2.10.0 has macOS arm64 wheels for cp310-cp314; the kit needs >= 3.11
MPS_MACOS="14.0"   # oldest macOS the mps wheels must install on (torch 2.10.0's cp314 wheel is macosx_14_0)

UPGRADE=()
TARGETS=()
for a in "$@"; do
  case "$a" in
    -U|--upgrade) UPGRADE=(--upgrade) ;;
    -h|--help) awk 'NR > 1 && /^set -e/ { exit } NR > 1' "$0"; exit 0 ;;
    host|dev|cpu|cuda|mps|cpu-torchcpu|changepoint) TARGETS+=("$a") ;;
    *) echo "lock.sh: unknown argument '$a' (targets: host dev cpu cuda mps; --upgrade)" >&2; exit 2 ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(host dev cuda cpu mps changepoint)
# cpu depends on cuda.txt and mps on cpu.txt: redo dependents, in dependency order.
want() { local t; for t in "${TARGETS[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
want cuda && ! want cpu && TARGETS+=(cpu)
want cpu && ! want mps && TARGETS+=(mps)

if [ -n "${UV:-}" ]; then UVCMD=("$UV")
elif command -v uv >/dev/null 2>&1; then UVCMD=(uv)
elif [ -x .venv/bin/uv ]; then UVCMD=(.venv/bin/uv)
elif python3 -m uv --version >/dev/null 2>&1; then UVCMD=(python3 -m uv)
else echo "lock.sh: uv not found: pip install uv" >&2; exit 1; fi

# Nothing from this machine's pip/uv configuration (local mirrors, find-links) may
# reach a lock: no config files, no index/find-links environment.
unset UV_INDEX_URL UV_DEFAULT_INDEX UV_EXTRA_INDEX_URL UV_INDEX UV_FIND_LINKS UV_NO_INDEX \
      UV_CONSTRAINT UV_OVERRIDE UV_CONFIG_FILE PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL

# Files an .in pulls in with -r/-c, recursively (paths relative to the repo root).
includes() {
  local f="$1" dir line inc
  dir="$(dirname "$f")"
  echo "$f"
  while read -r line; do
    case "$line" in
      -r\ *|-c\ *|--requirement\ *|--constraint\ *)
        inc="${line#* }"; includes "$dir/$inc" ;;
    esac
  done < "$f"
}

lock() {  # [PYV=3.x OUT=FILE] lock TARGET PLATFORM-ARGS... [-- CONSTRAINT-FILE]
  local t="$1"; shift
  local pyv="${PYV:-$PYVER}"
  local in="requirements/$t.in" out="${OUT:-requirements/$t.txt}" constraint="" args=()
  [ -f "$in" ] || [ ! -f "requirements/variants/$t.in" ] || in="requirements/variants/$t.in"
  [ -f "$in" ] || { echo "lock.sh: $in missing: skipping $t" >&2; return 0; }
  while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then constraint="$2"; shift 2; else args+=("$1"); shift; fi
  done
  if [ -n "$constraint" ]; then args+=(--constraint "$constraint"); fi
  echo "lock.sh: $out <- $in ${args[*]}" >&2
  "${UVCMD[@]}" pip compile --quiet --no-config --index-url "$INDEX_URL" \
    --python-version "$pyv" --generate-hashes --no-strip-extras \
    --custom-compile-command "requirements/lock.sh" \
    "${UPGRADE[@]}" "${args[@]}" "$in" -o "$out"
  if grep -q 'file://' "$out"; then echo "lock.sh: $out names a file:// URL: refusing" >&2; exit 1; fi
  # Provenance header: which inputs, with their sha256, this lock was resolved from.
  local tmp; tmp="$(mktemp)"
  {
    sed -n '1,2p' "$out"
    echo "# lock-target: $t, python $pyv, ${args[*]}"
    { includes "$in"; if [ -n "$constraint" ]; then echo "$constraint"; fi; } | awk '!seen[$0]++' |
      while read -r f; do
        f="$(realpath --relative-to=. "$f")"
        echo "# input: $f sha256:$(sha256sum "$f" | cut -d' ' -f1)"
      done
    sed -n '3,$p' "$out"
  } > "$tmp"
  mv "$tmp" "$out"
}

for t in "${TARGETS[@]}"; do
  case "$t" in
    host) lock host --universal ;;
    dev)  lock dev --python-platform x86_64-manylinux_2_28 ;;
    # one package without its pinned dependencies (see changepoint.in), installed after dev.txt
    changepoint) lock changepoint --python-platform x86_64-manylinux_2_28 --no-deps ;;
    cuda) lock cuda --python-platform x86_64-manylinux_2_28 ;;
    cpu)  lock cpu --python-platform x86_64-manylinux_2_28 -- requirements/cuda.txt ;;
    mps)  # one lock per Python minor (3.11: mps.txt), checked for macOS MPS_MACOS arm64 wheels
      for v in $MPS_PYTHONS; do
        o=requirements/mps.txt; [ "$v" = "$PYVER" ] || o="requirements/mps-py$v.txt"
        MACOSX_DEPLOYMENT_TARGET="$MPS_MACOS" PYV="$v" OUT="$o" \
          lock mps --python-platform aarch64-apple-darwin --only-binary :all: -- requirements/cpu.txt
      done
      # a minor dropped from MPS_PYTHONS takes its lock with it
      for o in requirements/mps-py*.txt; do
        [ -e "$o" ] || continue
        v="${o#requirements/mps-py}"; v="${v%.txt}"
        case " $MPS_PYTHONS " in *" $v "*) ;; *) echo "lock.sh: removing $o ($v not in MPS_PYTHONS)" >&2; rm -f "$o" ;; esac
      done ;;
    # torch's CPU index first for torch/torchvision (+cpu local versions win), PyPI for the rest;
    # the index lines go into the lock, so pip in the image finds the +cpu wheels.
    cpu-torchcpu) lock cpu-torchcpu --python-platform x86_64-manylinux_2_28 \
      --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match \
      --emit-index-url -- requirements/cpu.txt ;;
  esac
done
echo "lock.sh: done: ${TARGETS[*]}" >&2
