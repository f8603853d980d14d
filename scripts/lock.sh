#!/usr/bin/env bash
# Re-resolve the dependencies of pyproject.toml in a throw-away venv and pin them in constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet -e '.[dev]'
{
  echo "# Pinned versions for a reproducible install: pip install -c constraints.txt -e '.[dev]'"
  echo "# Refresh with scripts/lock.sh after changing pyproject.toml."
  "$tmp/venv/bin/pip" freeze --exclude-editable | grep -v '^-e' | grep -vi '^gpucloud'
} > constraints.txt
rm -rf "$tmp"
echo "constraints.txt updated"
