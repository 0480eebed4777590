#!/usr/bin/env bash
# Container smoke test, called by .ci/run (also runnable by hand, as root, from the repo root):
#
#   bash .ci/docker-smoke.sh
#
# 1. apt-get install Debian's docker.io + debootstrap + docker-compose (+ docker-buildx where Debian has it)
# 2. start dockerd in the background unless an engine answers; wait for it
# 3. bootstrap cnn-bench/base:bookworm from Debian packages (no container registry here)
# 4. build the cpu image (pip reaches PyPI through the proxy CA: --ca-cert, a BuildKit secret)
# 5. run every study's cpu smoke matrix in it (orchestrate.py run cpu --runtime docker),
#    ../shared/datasets mounted read-only at /data
# 6. build the cuda image and run its selfcheck (no GPU here: must say so and exit 0)
# Prints each step's time, the image ids and sizes, and the containers' exit codes.
# Needs: root (apt, dockerd, debootstrap), Debian bookworm, PyPI + Debian mirrors.
# Measured on this project's 2-core VM, empty build cache (other jobs sharing the cores):
# apt 16 s, debootstrap 58-137 s, cpu build 242-486 s (3.3 GB of wheels, pip cache cold),
# cpu smoke 51-124 s, cuda build 24-63 s (one 444 MB layer on the cpu venv), selfcheck 3-16 s:
# 6-15 min in all; a rerun with the build cache warm takes ~2 min.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"
PYTHON="${PYTHON:-python3}"
DATA_DIR="${KIT_CI_DATA_DIR:-$REPO/../shared/datasets}"
OUT="${KIT_CI_RESULTS_DIR:-$REPO/results/ci-container}"
CA_CERT="${KIT_CI_CA_CERT:-/etc/ssl/certs/ca-certificates.crt}"
BASE_TAG="cnn-bench/base:bookworm"
SUMMARY=()
T0=$(date +%s)

step() {  # step NAME CMD...: run, time, record; returns CMD's exit code (also under `step ... || rc=$?`)
  local name="$1"; shift
  local s=$(date +%s) rc=0
  echo "::: docker-smoke: $name"
  "$@" || rc=$?
  local d=$(( $(date +%s) - s ))
  SUMMARY+=("$(printf '%-34s %5ds' "$name" "$d")")
  echo "::: docker-smoke: $name done in ${d}s (exit code $rc)"
  return $rc
}

install_packages() {
  local pkgs=()
  command -v dockerd >/dev/null || pkgs+=(docker.io)
  command -v debootstrap >/dev/null || pkgs+=(debootstrap)
  [ -x /usr/bin/docker ] || pkgs+=(docker.io)
  # the README's compose commands: Debian ships compose v1 (docker-compose 1.29) as a package
  docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || pkgs+=(docker-compose)
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" iptables ca-certificates
  fi
  # buildx is packaged from Debian trixie on; use it where the mirror has it.
  if ! docker buildx version >/dev/null 2>&1 && apt-cache show docker-buildx >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-buildx || true
  fi
}

start_engine() {
  if docker version >/dev/null 2>&1; then echo "engine already answering"; return 0; fi
  echo "starting dockerd (log: /tmp/dockerd.log)"
  nohup dockerd >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker version >/dev/null 2>&1 && { docker version --format 'engine {{.Server.Version}} (client {{.Client.Version}})'; return 0; }
    sleep 1
  done
  tail -20 /tmp/dockerd.log >&2
  echo "docker-smoke: dockerd did not answer within 60 s" >&2
  return 1
}

python_env() {
  # orchestrate.py runs from a venv of requirements/host.txt alone: the proof that the host
  # side needs no torch, numba or scikit-learn (images carry those). Reused while host.txt is unchanged.
  local venv=/tmp/cnn-bench-host-venv want
  want=$(sha256sum requirements/host.txt | cut -d' ' -f1)
  if [ "$(cat "$venv/.lock" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes -r requirements/host.txt \
      2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    echo "$want" > "$venv/.lock"
  fi
  PYTHON=$venv/bin/python
  "$PYTHON" -c "import importlib.util as u; bad = [m for m in ('torch', 'numba', 'sklearn') if u.find_spec(m)]; assert not bad, bad"
}

run_in_image() {  # run_in_image PLATFORM GPU ARGS...: python -m bench ARGS in the image
  local plat="$1" gpu="$2"; shift 2
  "$PYTHON" - "$plat" "$gpu" "$DATA_DIR" "$OUT" "$@" <<'EOF'
import sys
from bench.core.errors import KitError
from host import engine
plat, gpu, data, out, args = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5:]
try:
    code, image_id = engine.run(plat, data, out, args, gpu=gpu)
except KitError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
print(f"CONTAINER {plat} {' '.join(args[:2])}: image {image_id} exit code {code}")
sys.exit(code)
EOF
}

image_line() {
  local plat="$1" ref
  ref="$("$PYTHON" -c "from host.images import image_ref; print(image_ref('$plat'))")"
  docker image inspect -f "IMAGE $plat: $ref {{.Id}} {{.Size}} bytes (lock {{index .Config.Labels \"cnn-bench.lock-hash\"}})" "$ref"
}

step "install docker.io + debootstrap" install_packages
step "start dockerd" start_engine
free_gb_under() { df -Pk "$1" | awk 'NR==2 {print int($4 / 1048576)}'; }
disk_room() {  # the cpu and cuda images take about 9 GB, their build cache as much again; the cuda
  # build's runtime stage copies the 8 GB venv once more, so a warm-cache rebuild still writes ~10 GB
  local root free_gb
  root=$(docker info --format '{{.DockerRootDir}}')
  free_gb=$(free_gb_under "$root")
  echo "$free_gb GB free under $root"
  if [ "$free_gb" -lt 24 ]; then
    # The build cache, untagged images and this kit's cpu/cuda images are remade by the builds
    # that follow; the base stays (debootstrap is the slow part). The kit's images go with the
    # cache: a cpu image kept across a pruned cache would not share its venv layer with the
    # cuda image rebuilt from the new one (tests/test_docker.py checks that they share it).
    echo "under 24 GB: pruning the engine's build cache, dangling images and this kit's cpu/cuda images (a slower, cold build follows)"
    docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^cnn-bench/(cpu|cuda)[^/:]*:' \
      | xargs -r docker rmi >/dev/null || true
    docker builder prune -af >/dev/null || true
    docker image prune -f >/dev/null || true
    free_gb=$(free_gb_under "$root")
    echo "$free_gb GB free under $root after pruning"
  fi
  [ "$free_gb" -ge 20 ] || { echo "docker-smoke: $free_gb GB free under $root, the images and their build need about 20 GB: free some (docker image prune -af removes this kit's images too) and rerun" >&2; return 1; }
}
step "disk room for the images" disk_room
step "host python env" python_env
[ -d "$DATA_DIR/mnist" ] || { echo "docker-smoke: $DATA_DIR/mnist missing (set KIT_CI_DATA_DIR)" >&2; exit 1; }
mkdir -p "$OUT"
# keeps a base made by this checkout's bootstrap script, bootstraps one otherwise (the README
# test's `base` then finds the same image, and the cpu build reuses its layers)
step "bootstrap base (debootstrap, unless this recipe's image exists)" "$PYTHON" orchestrate.py base
step "build cpu image" "$PYTHON" orchestrate.py build cpu --base-image "$BASE_TAG" --ca-cert "$CA_CERT"
CPU_RC=0
step "cpu smoke matrix in container" "$PYTHON" orchestrate.py run cpu --runtime docker --profile smoke \
  --data-dir "$DATA_DIR" --out "$OUT" --ca-cert "$CA_CERT" || CPU_RC=$?
step "build cuda image" "$PYTHON" orchestrate.py build cuda --base-image "$BASE_TAG" --ca-cert "$CA_CERT"
CUDA_RC=0
step "cuda selfcheck in container (no GPU)" run_in_image cuda 0 selfcheck || CUDA_RC=$?

echo "::: docker-smoke summary"
printf '%s\n' "${SUMMARY[@]}"
echo "total $(( $(date +%s) - T0 ))s"
image_line cpu
image_line cuda
echo "CONTAINER EXIT CODES: cpu smoke matrix $CPU_RC, cuda selfcheck $CUDA_RC"
echo "results: $OUT"
[ "$CPU_RC" = 0 ] && [ "$CUDA_RC" = 0 ]
