#!/usr/bin/env bash
# Create ./.venv and install a hash-locked requirement set into it (default: dev).
#   bash scripts/setup.sh          # native runs + tests (requirements/dev.txt)
#   bash scripts/setup.sh host     # orchestrator and report only (requirements/host.txt)
# Idempotent: a second call with an unchanged lock does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-dev}
lock=requirements/$target.txt
[ -f "$lock" ] || { echo "error: no lock $lock (targets: $(ls requirements/*.txt | xargs -n1 basename | sed 's/.txt//' | tr '\n' ' '))" >&2; exit 2; }
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || { echo "error: $py is $("$py" --version 2>&1); cnn-bench needs Python >= 3.10" >&2; exit 2; }
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv || { echo "error: '$py -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 2; }
fi
stamp=.venv/.kit-lock-$target
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing $lock into .venv (hash-checked; torch is large, this takes a few minutes the first time)"
  # (this machine's pip.conf names local mirrors that warn on every package: keep them out of sight)
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r "$lock" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$want" > "$stamp"
fi
