#!/bin/sh
# Makes the local base image cronsvc-base:bookworm once (skipped when it exists): a minimal
# Debian bookworm root filesystem made by debootstrap, with Debian's python3 (3.11, as in
# python:3.11-slim-bookworm), its venv module and CA certificates, imported into podman.
# Used where no image registry is reachable; docs/deploy.md. Needs root, debootstrap, podman.
#   scripts/build-base-image.sh [image name]   (MIRROR=http://... to use another Debian mirror)
set -eu
image=${1:-cronsvc-base:bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$(cd "$(dirname "$0")/.." && pwd)/deploy/podman/containers.conf}

if podman image exists "$image"; then
  exit 0
fi
rootfs=$(mktemp -d /var/tmp/cronsvc-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror"
# apt inside the image (the Dockerfile's apt-get install) reads the same mirror, with the
# bookworm updates and the security archive as the host's sources list them.
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
SOURCES
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | podman import --change 'CMD ["python3"]' - "$image"
