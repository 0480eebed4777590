#!/usr/bin/env bash
# Bootstrap a Debian bookworm base image from Debian packages alone, for hosts that
# reach a Debian mirror but no container registry (air-gapped clusters, this CI).
#
#   sudo docker/bootstrap-base.sh [--tag cnn-bench/base:bookworm] [--mirror URL] [--suite bookworm]
#
# What it makes: a minbase Debian root filesystem with python3 (3.11 on bookworm),
# python3-venv and ca-certificates, imported with `docker import` as TAG. Use it as
# the images' base:  python orchestrate.py build cpu --base-image cnn-bench/base:bookworm
# Needs: root, debootstrap, a running Docker engine. Measured on a 2-core CI VM: ~2-4 min.
set -euo pipefail

TAG="cnn-bench/base:bookworm"
SUITE="bookworm"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER="${KIT_DOCKER_CLI:-docker}"
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --mirror) MIRROR="$2"; shift 2 ;;
    --suite) SUITE="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bootstrap-base: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

[ "$(id -u)" = 0 ] || { echo "bootstrap-base: debootstrap needs root: rerun with sudo" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "bootstrap-base: debootstrap not installed: apt-get install -y debootstrap" >&2; exit 1; }
"$DOCKER" version >/dev/null 2>&1 || { echo "bootstrap-base: Docker daemon not running: start it (sudo systemctl start docker)" >&2; exit 1; }

ROOTFS="$(mktemp -d /tmp/cnn-bench-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

# minbase = essential + apt; python3-venv brings ensurepip's bundled pip wheel.
debootstrap --variant=minbase \
  --include=python3,python3-venv,ca-certificates \
  "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/cnn-bench-debootstrap.log 2>&1 \
  || { tail -20 /tmp/cnn-bench-debootstrap.log >&2; echo "bootstrap-base: debootstrap failed (log: /tmp/cnn-bench-debootstrap.log)" >&2; exit 1; }

# Same sources the official images use; drop caches and logs so the image is small
# and its content depends only on the package versions.
echo "deb $MIRROR $SUITE main" > "$ROOTFS/etc/apt/sources.list"
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/var/log/* "$ROOTFS"/tmp/* "$ROOTFS"/root/.cache
# `python` as in the official python images (Debian ships only python3).
ln -sf python3 "$ROOTFS/usr/bin/python"

# What made it: this script's hash and the suite (`orchestrate.py base` keeps an image with the same recipe).
RECIPE="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)-$SUITE"
PYVER="$(chroot "$ROOTFS" /usr/bin/python3 -c 'import platform; print(platform.python_version())')"
tar -C "$ROOTFS" --numeric-owner -c . | "$DOCKER" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.opencontainers.image.title=cnn-bench-base org.opencontainers.image.description=debootstrap-${SUITE}-minbase-python3 cnn-bench.base-python=${PYVER} cnn-bench.base-recipe=${RECIPE}" \
  - "$TAG" >/dev/null
echo "bootstrap-base: $TAG $("$DOCKER" image inspect -f '{{.Id}}' "$TAG") (python $PYVER)"
