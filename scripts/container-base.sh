#!/usr/bin/env bash
# Makes `debian:trixie-slim` available to podman on a machine that cannot reach a container registry:
# a minimal Debian trixie root file system from Debian's own archive (debootstrap --variant=minbase),
# trimmed the way Debian's official -slim images are (no documentation, manual pages, locales or apt
# caches), imported under the name the Dockerfile's FROM uses. Nothing is done when the image exists.
# Needs root, podman and debootstrap. Usage: scripts/container-base.sh [image-name]
set -euo pipefail
image=${1:-docker.io/library/debian:trixie-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if podman image exists "$image"; then exit 0; fi
root=$(mktemp -d /var/tmp/trixie-slim.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "making $image with debootstrap from $mirror"
debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# What Debian's -slim images leave out, kept out of later installs as well.
cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
tar -C "$root" -c . | podman import --quiet --change 'CMD ["bash"]' - "$image" >/dev/null
echo "made $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"
