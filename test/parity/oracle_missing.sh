# A parity test whose oracle cannot be imported fails; it does not skip. Each reference script
# runs with the test venv's python, every oracle module shadowed by one that raises ImportError,
# and must exit with an error other than 77 (skipped) and say what to do.
set -u
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_oracle.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/shadow"
for module in torch numpy ultralytics pycocotools libreyolo safetensors yolov5; do
  echo "raise ImportError('$module is shadowed by oracle_missing.sh')" > "$work/shadow/$module.py"
done
failed=0
for script in "$(dirname "$0")"/make_*reference.py "$(dirname "$0")/torch_trace.py" "$(dirname "$0")/checkpoint_interop.py"; do
  PYTHONPATH="$work/shadow" "$python" "$script" "$work/out" write >"$work/log" 2>&1
  code=$?
  if [ "$code" -eq 0 ] || [ "$code" -eq 77 ]; then
    echo "FAIL: $(basename "$script") exited $code without its oracle"; failed=1
  elif ! grep -q "run scripts/setup.sh" "$work/log"; then
    echo "FAIL: $(basename "$script") did not say how to get the oracle back"; sed 's/^/  | /' "$work/log"; failed=1
  else
    echo "ok: $(basename "$script") exited $code"
  fi
done
exit "$failed"
