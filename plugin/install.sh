#!/usr/bin/env bash
# For development: install the checkout's Herald plugin and herald binary into a Hermes
# home as a directory plugin. Hermes owners install the wheel instead (README, "With
# Hermes": `pip install` of herald-hermes into Hermes's Python environment).
#
#   plugin/install.sh [--hermes-home DIR] [--binary PATH]
#
# Builds herald (release) unless --binary names one, copies plugin/herald/ to
# $HERMES_HOME/plugins/herald/ with the binary in its bin/, and leaves enabling to
# Hermes:   hermes plugins enable herald
# On Hermes 0.22 this directory plugin wins over an installed wheel; on 0.19 and 0.20
# the wheel's entry point wins.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
home=${HERMES_HOME:-$HOME/.hermes}
binary=""
while [ $# -gt 0 ]; do
    case "$1" in
        --hermes-home) home=$2; shift 2 ;;
        --binary) binary=$2; shift 2 ;;
        *) echo "usage: $0 [--hermes-home DIR] [--binary PATH]" >&2; exit 2 ;;
    esac
done

if [ -z "$binary" ]; then
    (cd "$repo" && cargo build --locked --release -p herald)
    binary=${CARGO_TARGET_DIR:-$repo/target}/release/herald
fi
[ -x "$binary" ] || { echo "no herald binary at $binary" >&2; exit 1; }

dest=$home/plugins/herald
staging=$dest.new
rm -rf "$staging"
mkdir -p "$staging/bin"
cp -R "$repo/plugin/herald/." "$staging/"
find "$staging" -name __pycache__ -type d -prune -exec rm -rf {} +
install -m 0755 "$binary" "$staging/bin/herald"
rm -rf "$dest"
mv "$staging" "$dest"
echo "Installed the Herald plugin in $dest"
echo "Turn it on with:  hermes plugins enable herald"
