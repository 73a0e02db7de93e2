#!/usr/bin/env bash
# The console against the newest Textual release, outside the tested pins: run it now and then
# (a scheduled job) to learn early what the next Textual major breaks. A venv of its own, in
# a temporary folder; nothing of the project's own environment is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# Everything as CI pins it, but Textual (and the snapshot plugin that follows it) the newest.
grep -v -i -E '^(textual|pytest-textual-snapshot)==' constraints.txt > "$venv/constraints.txt"
"$venv/bin/python" -m pip install --quiet -c "$venv/constraints.txt" -e ".[test]"
# Past the project's own pin (pip says so, and installs it all the same).
"$venv/bin/python" -m pip install --quiet --upgrade textual pytest-textual-snapshot || true
echo "Textual $("$venv/bin/python" -c 'import textual; print(textual.__version__)')"
"$venv/bin/python" -m pytest -q tests/tui "$@"
