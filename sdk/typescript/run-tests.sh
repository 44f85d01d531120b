#!/usr/bin/env bash
# The TypeScript side's tests, in one go: the SDK's unit, vector and real-server tests,
# then the browser chat in headless Chromium (web/tests), then the React Native example's
# type check. Installs from the lockfiles when node_modules is missing or stale. Needs
# Node 20+, Debian's chromium, and python3 (the push test reads herald's store with it).
# Usage: sdk/typescript/run-tests.sh   (HERALD_BIN=path to test another build)
set -euo pipefail
sdk="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$sdk/../.." && pwd)"

step() { printf '\n--> %s\n' "$*"; }

node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node_major" -lt 20 ]; then
  echo "run-tests.sh needs Node.js 20 or newer (and npm); found: $(node --version 2>/dev/null || echo none)" >&2
  exit 1
fi

# npm ci when the lockfile changed since the last install (npm keeps a copy of it).
install() {
  local dir="$1"
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    step "npm ci in ${dir#"$root"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

if [ -z "${HERALD_BIN:-}" ]; then
  step "cargo build -p herald"
  (cd "$root" && cargo build -p herald --locked --quiet)
  export HERALD_BIN="$root/target/debug/herald"
fi

install "$sdk"
step "sdk/typescript: tsc"
(cd "$sdk" && rm -rf dist build && npx tsc -p tsconfig.json && npx tsc -p tsconfig.test.json)
step "sdk/typescript: node --test"
(cd "$sdk" && node --test build/test/*.test.js)

if [ -d "$root/web" ]; then
  install "$root/web"
  step "web: build and compare with the committed assets"
  (cd "$root/web" && npm run --silent check-dist)
  step "web: the browser chat in headless Chromium"
  if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
    echo "the browser test needs Debian's chromium (apt-get install chromium), or CHROMIUM=path" >&2
    exit 1
  fi
  (cd "$root/web" && npm run --silent test)
fi

if [ -d "$root/examples/react-native" ]; then
  install "$root/examples/react-native"
  step "examples/react-native: tsc --noEmit"
  (cd "$root/examples/react-native" && npx tsc --noEmit -p tsconfig.json)
fi
