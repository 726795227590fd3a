# `libreyolo profile summary|phases|ops|kernels|get` read a trace written by torch.profiler
# (the Python oracle) and find the window, steps and operator figures the trace implies.
set -u
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_parity.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" "$(dirname "$0")/torch_trace.py" "$work" || exit $?
trace="$work/torch_trace.json"
failed=0
for command in summary phases ops kernels get; do
  "$LIBREYOLO" profile "$command" "$trace" >"$work/$command.out" 2>"$work/$command.err" || { echo "FAIL: profile $command exited $?"; cat "$work/$command.err"; failed=1; }
done
grep -q ">> VERDICT:" "$work/summary.out" || { echo "FAIL: no verdict"; failed=1; }
grep -q "^forward" "$work/phases.out" && grep -q "^backward" "$work/phases.out" || { echo "FAIL: phases"; cat "$work/phases.out"; failed=1; }
"$LIBREYOLO" profile summary "$trace" --json >"$work/profile.json" || failed=1
"$LIBREYOLO" profile ops "$trace" --top 100 --json >"$work/ops.json" || failed=1
"$python" - "$work" <<'PY' || failed=1
import json, sys
work = sys.argv[1]
expected = json.load(open(f"{work}/expected.json"))
profile = json.load(open(f"{work}/profile.json"))
ops = {row["op"]: row for row in json.load(open(f"{work}/ops.json"))}
checks = [
    ("step_ms", profile["step_ms"], expected["step_ms"], 1e-3),
    ("conv2d per step", ops["aten::conv2d"]["count_per_step"], expected["conv2d_per_step"], 0),
    ("conv2d ms per step", ops["aten::conv2d"]["ms_per_step"], expected["conv2d_ms_per_step"], 1e-3),
]
bad = [c for c in checks if abs(c[1] - c[2]) > c[3] + 1e-9]
for name, got, want, tol in checks:
    print(f"{name}: libreyolo {got}  torch trace {want}")
if profile["bound"] not in ("compute", "host / launch", "dataloader"):
    bad.append(("bound", profile["bound"], "a CPU verdict", 0))
sys.exit(1 if bad else 0)
PY
[ "$failed" -eq 0 ] && echo ok
exit "$failed"
