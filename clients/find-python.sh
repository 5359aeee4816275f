# Sourced by the clients' test scripts: `find_python` prints the path of a Python 3.12 or newer
# ($PYTHON first, then python3.14 .. python3, then pyenv's), or fails.
find_python() {
    local candidates=("${PYTHON:-}" python3.14 python3.13 python3.12 python3)
    candidates+=("$HOME"/.pyenv/versions/3.1[2-9]*/bin/python)
    for py in "${candidates[@]}"; do
        [[ -n "$py" ]] && command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    return 1
}
