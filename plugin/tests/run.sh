#!/usr/bin/env bash
# The Hermes plugin's checks against the real Hermes: type-check the plugin and its
# tests, then run the end-to-end suite against hermes-agent 0.19.0.
#
#   plugin/tests/run.sh [PYTEST ARGS...]
#
# HERMES_VENV  virtualenv to create or reuse (default plugin/.hermes-venv): it gets
#              hermes-agent 0.19.0, pytest, mypy and pocketsphinx
# HERALD_BIN   the herald binary (default the workspace's target/debug/herald,
#              which `cargo test` builds; built here only if it is missing)
set -euo pipefail
tests=$(cd "$(dirname "$0")" && pwd)
plugin=$(dirname "$tests")
repo=$(dirname "$plugin")
venv=${HERMES_VENV:-$plugin/.hermes-venv}
hermes_version=0.19.0
# Hermes installs nothing behind our back while the tests run.
export HERMES_DISABLE_LAZY_INSTALLS=1

has_hermes() {
    "$venv/bin/python" - "$hermes_version" <<'EOF' 2>/dev/null
import importlib.metadata, sys
sys.exit(importlib.metadata.version("hermes-agent") != sys.argv[1])
EOF
}

if ! has_hermes; then
    echo "==> installing hermes-agent $hermes_version into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "hermes-agent==$hermes_version"
fi
# pocketsphinx (with its English model) is the offline speech-to-text of test_voice.py.
if ! "$venv/bin/python" -c 'import pytest, mypy, pocketsphinx' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check pytest mypy pocketsphinx
fi
# test_voice.py speaks with espeak-ng (Debian: apt-get install espeak-ng).
command -v espeak-ng >/dev/null || { echo "espeak-ng is missing: apt-get install -y espeak-ng" >&2; exit 1; }

if [ -z "${HERALD_BIN:-}" ]; then
    HERALD_BIN=${CARGO_TARGET_DIR:-$repo/target}/debug/herald
    if [ ! -x "$HERALD_BIN" ]; then
        (cd "$repo" && cargo build --locked -p herald)
    fi
fi
export HERALD_BIN HERMES_VENV=$venv

cd "$plugin"
echo "==> mypy --strict (plugin, tests and bench)"
"$venv/bin/python" -m mypy herald tests bench

echo "==> pytest against hermes-agent $hermes_version"
status=0
"$venv/bin/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
    exit 1
fi
exit "$status"
