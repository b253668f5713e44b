#!/usr/bin/env bash
# Runs before `npm test` (npm's pretest): on a fresh machine, installs what the tests need and the
# project's own dependencies. Debian's redis-server (the tests start their own) and chromium (the
# account page's browser tests) come from apt-get when missing; this needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)

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
