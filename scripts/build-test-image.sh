#!/usr/bin/env bash
# Builds pier's local base image from a Debian rootfs, for machines that cannot
# reach Docker Hub. The image has what pier's sandboxes and checks rely on:
# bash, coreutils, python3 (+pip), git, curl, ca-certificates, procps.
# Reused when present; pass --force to rebuild.
set -euo pipefail

TAG="${PIER_TEST_IMAGE:-pier-base:bookworm}"
SUITE="${PIER_TEST_SUITE:-bookworm}"
MIRROR="${PIER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# PIER_TEST_PACKAGES: another package set, e.g. the installers' conformance bases
# (tests/integration/test_installer_bases.py): python3,curl,git without python3-venv.
PACKAGES="${PIER_TEST_PACKAGES:-python3,python3-pip,python3-venv,git,curl,ca-certificates,procps,xz-utils,unzip}"

if [[ "${1:-}" != "--force" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "image $TAG already present"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }
root="$(mktemp -d /tmp/pier-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT

echo "debootstrap $SUITE (minbase + $PACKAGES) into $root"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >/tmp/pier-debootstrap.log 2>&1 \
  || { tail -20 /tmp/pier-debootstrap.log >&2; exit 1; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
# Sources so that `apt-get install` works inside images built on this base.
echo "deb $MIRROR $SUITE main" > "$root/etc/apt/sources.list"

tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["bash"]' \
  - "$TAG"
echo "built $TAG"
