#!/usr/bin/env bash
# Create ./.venv and install a hash-locked requirement set into it (default: dev).
#   bash scripts/setup.sh          # native runs + tests (requirements/dev.txt; Linux x86_64)
#   bash scripts/setup.sh host     # orchestrator and report only (requirements/host.txt; any OS)
#   bash scripts/setup.sh mps      # macOS arm64: orchestrator + bench with torch on MPS (requirements/mps*.txt)
# Python >= 3.11 (the locks' floor; $PYTHON picks the interpreter, default python3).
# Idempotent: a second call with an unchanged lock does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-dev}
py=${PYTHON:-python3}
if [ -x .venv/bin/python ]; then  # an existing venv decides (it may predate the 3.11 floor)
  .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || { echo "error: .venv is $(.venv/bin/python --version 2>&1); cnn-bench needs Python >= 3.11: remove .venv and rerun (PYTHON=python3.11 or newer)" >&2; exit 2; }
  py=.venv/bin/python
else
  command -v "$py" >/dev/null || { echo "error: $py not found: install Python >= 3.11 (or set PYTHON)" >&2; exit 2; }
  "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || { echo "error: $py is $("$py" --version 2>&1); cnn-bench needs Python >= 3.11 (set PYTHON=python3.11 or newer)" >&2; exit 2; }
fi
lock=requirements/$target.txt
if [ "$target" = mps ]; then  # one lock per Python minor: mps.txt (3.11), mps-py3.12.txt, ...
  minor=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [ "$minor" = 3.11 ] || lock=requirements/mps-py$minor.txt
  [ -f "$lock" ] || { echo "error: no mps lock for Python $minor (have: $(ls requirements/mps*.txt | xargs -n1 basename | tr '\n' ' ')); set PYTHON to one of those" >&2; exit 2; }
fi
[ -f "$lock" ] || { echo "error: no lock $lock (targets: $(ls requirements/*.txt | xargs -n1 basename | sed 's/.txt//' | grep -v '^mps-py' | tr '\n' ' '))" >&2; exit 2; }
case "$target:$(uname -s)/$(uname -m)" in
  dev:Darwin/*|cpu:Darwin/*|cuda:Darwin/*)
    echo "error: requirements/$target.txt is locked for Linux x86_64; on macOS: bash scripts/setup.sh mps (Apple silicon) or host" >&2; exit 2 ;;
  mps:Darwin/arm64) ;;
  mps:*) echo "error: the mps locks are for macOS on Apple silicon (this is $(uname -s)/$(uname -m)); here: bash scripts/setup.sh (dev) or host" >&2; exit 2 ;;
esac
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv || { echo "error: '$py -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 2; }
fi
stamp=.venv/.kit-lock-$(basename "$lock" .txt)  # host/export.py reads these: .kit-lock-NAME = requirements/NAME.txt
want=$( (sha256sum "$lock" 2>/dev/null || shasum -a 256 "$lock") | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  n=$(grep -c '^[A-Za-z0-9]' "$lock")
  case "$target" in
    dev|cpu|cuda) size="about 6.5 GB: PyPI's torch wheels are CUDA builds, 3.2 GB of it NVIDIA libraries even on a host with no GPU" ;;
    host) size="about 630 MB: the orchestrator and the report only, no torch" ;;
    *) size="about 1 GB: torch for Apple silicon" ;;
  esac
  case "$target" in dev|cpu|cuda) need_gb=9 ;; host) need_gb=1 ;; *) need_gb=2 ;; esac  # the install + pip's unpacking
  free_gb=$(df -Pk .venv | awk 'NR==2 {print int($4 / 1048576)}')
  if [ -n "$free_gb" ] && [ "$free_gb" -lt "$need_gb" ]; then
    echo "error: $free_gb GB free on the disk that holds .venv ($(df -P .venv | awk 'NR==2 {print $6}')); installing $lock needs about $need_gb GB: free some (an old Docker build cache: docker builder prune -af) and rerun" >&2
    exit 2
  fi
  echo "installing $lock into .venv: $n packages, hash-checked, $size (a few minutes the first time)"
  # first rich and what it imports, from the same lock (hash-checked, --no-deps: a few MB), so that
  # scripts/pip_progress.py can show the rest of the install: pip itself says nothing while it
  # unpacks (about 4 minutes for the dev lock). Without them, pip's own lines as they come.
  ui=$(mktemp)
  awk '/^(rich|markdown-it-py|mdurl|pygments)==/ {keep=1} /^[a-z]/ && !/^(rich|markdown-it-py|mdurl|pygments)==/ {keep=0} keep && !/^ *#/' "$lock" > "$ui"
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  set +e
  # (this machine's pip.conf names local mirrors that warn on every package: keep them out of sight)
  if [ "$(grep -c '==' "$ui")" = 4 ] && .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
      --require-hashes -r "$ui" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); then
    .venv/bin/python scripts/pip_progress.py "$site" --expect "$n" -- \
      .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --require-hashes -r "$lock" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    rc=$?
  else
    .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --require-hashes -r "$lock" \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) | grep --line-buffered -E "^(Collecting|Successfully installed)"
    rc=${PIPESTATUS[0]}
  fi
  set -e
  rm -f "$ui"
  [ "$rc" = 0 ] || { echo "error: pip could not install $lock (exit code $rc; its messages are above)" >&2; exit "$rc"; }
  echo "$want" > "$stamp"
fi
# dev: the run history's change-point detector, alone and without its dependencies (its metadata
# pins numpy<2; what it imports is in dev.txt: requirements/changepoint.in says why)
cp_lock=requirements/changepoint.txt cp_stamp=.venv/.kit-lock-changepoint
if [ "$target" = dev ] && [ "$(cat "$cp_stamp" 2>/dev/null)" != "$( (sha256sum "$cp_lock" 2>/dev/null || shasum -a 256 "$cp_lock") | cut -d' ' -f1)" ]; then
  echo "installing $cp_lock into .venv (signal-processing-algorithms, --no-deps)"
  set +e
  .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off --no-deps --require-hashes -r "$cp_lock" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) | grep --line-buffered -E "^(Collecting|Successfully installed)"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || { echo "error: pip could not install $cp_lock (exit code $rc; its messages are above)" >&2; exit "$rc"; }
  (sha256sum "$cp_lock" 2>/dev/null || shasum -a 256 "$cp_lock") | cut -d' ' -f1 > "$cp_stamp"
fi
