#!/usr/bin/env bash
# The Hermes plugin's checks against the real Hermes: type-check the plugin and its
# tests, then run the end-to-end suite against one tested Hermes line.
#
#   plugin/tests/run.sh [PYTEST ARGS...]
#   plugin/tests/run.sh --prepare     (only make the line's virtualenv ready)
#
# The tests run in a random order (pytest-randomly), a new one each run; the seed is
# printed, and --randomly-seed=SEED runs that order again (-p no:randomly: file order).
#
# HERMES_LINE  the Hermes line to test: 0.19 (default), 0.20 or 0.22 (hermes_lines.py
#              says which package brings each)
# HERMES_VENV  virtualenv to create or reuse (default plugin/.hermes-venv for 0.19,
#              plugin/.hermes-venv-LINE for the others): it gets that Hermes, pytest,
#              pytest-randomly, mypy, pocketsphinx and maturin
# HERALD_BIN   the herald binary (default the workspace's target/debug/herald,
#              which `cargo test` builds; built here only if it is missing)
# HERALD_WHEEL the herald-hermes wheel test_wheel.py installs (default: built there,
#              with maturin, from this checkout)
set -euo pipefail
tests=$(cd "$(dirname "$0")" && pwd)
plugin=$(dirname "$tests")
repo=$(dirname "$plugin")
line=${HERMES_LINE:-0.19}
read -r requirement command < <(python3 "$tests/hermes_lines.py" "$line")
if [ "$line" = 0.19 ]; then default_venv=$plugin/.hermes-venv; else default_venv=$plugin/.hermes-venv-$line; fi
venv=${HERMES_VENV:-$default_venv}
# Hermes installs nothing behind our back while the tests run.
export HERMES_DISABLE_LAZY_INSTALLS=1

if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; p, v = sys.argv[1].split("=="); sys.exit(m.version(p) != v)' \
    "$requirement" 2>/dev/null || [ ! -x "$venv/bin/$command" ]; then
    echo "==> installing $requirement into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement"
fi
# pocketsphinx (with its English model) is the offline speech-to-text of test_voice.py;
# maturin builds the wheel test_wheel.py installs into a fresh Hermes.
if ! "$venv/bin/python" -c 'import pytest, pytest_randomly, mypy, pocketsphinx, maturin' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        pytest 'pytest-randomly>=3.16' mypy pocketsphinx 'maturin>=1.16,<2'
fi
if [ "${1:-}" = --prepare ]; then
    exit 0
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
"$venv/bin/python" -m mypy --cache-dir "$venv/.mypy_cache" herald tests bench

# A random order unless the arguments choose one (a seed, or -p no:randomly).
order=()
seed=
case " $* " in
    *randomly*) ;;
    *) seed=$(python3 -c 'import random; print(random.randrange(1, 2**31))')
       order=(-p randomly "--randomly-seed=$seed") ;;
esac
echo "==> pytest against $requirement${seed:+, in the order of seed $seed}"
status=0
"$venv/bin/python" -m pytest -o cache_dir="$venv/.pytest_cache" ${order[@]+"${order[@]}"} "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests" >&2
    exit 1
fi
if [ "$status" -ne 0 ] && [ -n "$seed" ]; then
    echo "the same order again: HERMES_LINE=$line plugin/tests/run.sh --randomly-seed=$seed [the same arguments]" >&2
fi
exit "$status"
