# Checkpoint interop: Python writes, C++ reads and writes back, Python reads (see
# checkpoint_interop.py). Skips (77) only when the test venv's python is absent; an oracle that cannot be imported fails.
#   checkpoint_interop.sh SCRIPT BINARY
set -u
script=$1; binary=$2
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_ckpt.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" "$script" "$work" write || exit $?
"$binary" "$work" || exit $?
# model=path from the CLI: family, size and nc come from the file.
if [ -n "${LIBREYOLO:-}" ]; then
  "$LIBREYOLO" info model="$work/py-yolox-n.pt" nc=3 --json > "$work/info.json" || exit 1
  cat "$work/info.json"
  grep -q '"model":"YOLOX-n"' "$work/info.json" && grep -q '"nc":80' "$work/info.json" || { echo "info: wrong model"; exit 1; }
fi
"$python" "$script" "$work" check
