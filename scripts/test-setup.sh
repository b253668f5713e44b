#!/usr/bin/env bash
# Runs before `npm test` (npm's pretest): on a fresh machine, installs what the tests need and the
# project's own dependencies. Debian's redis-server (the tests start their own), chromium (the
# account page's browser tests) and, as root, podman and its helpers (the container tests) come from
# apt-get when missing; this needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
# The container tests (test/deploy/container-image.test.ts) build and run the image with rootful podman
# (runc: crun refuses this kind of machine's hybrid cgroups), podman-compose, the CNI name plugin for
# compose's service names, and debootstrap for the base image where no registry is reachable. They
# run as root only, so only root installs them; GATEWAY_SKIP_CONTAINER_TESTS=1 leaves them out.
if [ "$(id -u)" -eq 0 ] && [ "$(uname -s)" = Linux ] && [ "${GATEWAY_SKIP_CONTAINER_TESTS:-0}" != 1 ]; then
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v podman-compose >/dev/null 2>&1 || missing+=(podman-compose)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  [ -x /usr/lib/cni/dnsname ] || missing+=(golang-github-containernetworking-plugin-dnsname)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "npm test needs ${missing[*]}: run it as root once, or install them: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d node_modules ]; then
  echo "installing the project's dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
