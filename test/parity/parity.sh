# Runs a parity test: the Python oracle writes reference files, the C++ binary compares.
#   parity.sh REFERENCE_SCRIPT BINARY ARGS...   (ARGS go to both)
# Skips (77) only when the test venv's python is absent; an oracle that cannot be imported fails.
set -u
script=$1; binary=$2; shift 2
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_parity.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" "$script" "$work" "$@" || exit $?
"$binary" "$work" "$@"
