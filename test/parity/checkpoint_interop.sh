# Checkpoint interop: Python writes, C++ reads and writes back, Python reads (see
# checkpoint_interop.py). Exit 77 (skipped) passes through when the oracle is unavailable.
#   checkpoint_interop.sh SCRIPT BINARY
set -u
script=$1; binary=$2
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_ckpt.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" "$script" "$work" write || exit $?
"$binary" "$work" || exit $?
"$python" "$script" "$work" check
