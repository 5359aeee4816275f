#!/usr/bin/env bash
# Creates benchmarks/langgraph/.venv with Python 3.12 or 3.13 and installs requirements.txt.
# Idempotent: a venv whose requirements have not changed since it was made is left as it is.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
stamp="$venv/.requirements"

# The newest pyenv 3.12 (or else 3.13) when pyenv has one, else whatever python3 is on the PATH.
find_python() {
    local root candidate
    root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
    for minor in 3.12 3.13; do
        candidate="$(ls -d "$root"/versions/"$minor".* 2>/dev/null | sort -V | tail -n 1 || true)"
        if [ -n "$candidate" ] && [ -x "$candidate/bin/python" ]; then
            echo "$candidate/bin/python"
            return
        fi
    done
    command -v python3
}

if [ -x "$venv/bin/python" ] && cmp -s "$here/requirements.txt" "$stamp"; then
    exit 0
fi

python="$(find_python)"
echo "setup.sh: creating $venv with $python ($("$python" --version 2>&1))"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
cp "$here/requirements.txt" "$stamp"
