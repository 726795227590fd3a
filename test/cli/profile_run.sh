# A real CPU profile of YOLOv9-t on a synthetic dataset writes all four files; every `profile`
# subcommand reads them back (profile.json and the raw trace); bad files and arguments exit 2.
. "$(dirname "$0")/lib.sh"
"$LIBREYOLO" data synth out=ds synth_images=16 synth_val_images=4 synth_size=128 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }

expect_exit 0 profile run ds/data.yaml --batch 4 --imgsz 128 --workers 1 --steps 6 --warmup 2 --project prof
run=prof/prof
for f in profile.json profile_summary.json profile_trace.json timeline.html; do
  [ -s "$run/$f" ] || fail "missing $run/$f"
done
expect_in "$WORK/out" "img/s:"
expect_in "$WORK/out" "next: libreyolo profile summary $run/profile.json"
expect_in "$WORK/err" "LibreYOLO training profile — YOLOv9-t"
expect_in "$WORK/err" ">> VERDICT:"
expect_in "$WORK/err" "CPU util"
expect_in "$run/profile.json" '"schema": "libreyolo.profile.analysis/v1"'
expect_in "$run/profile_summary.json" '"real_steps": 3'
expect_in "$run/profile_trace.json" '"cat":"cpu_op"'
expect_in "$run/profile_trace.json" 'ProfilerStep#6'

# --amp_dtype reaches the trainer: CPU autocast where the CPU has native bfloat16, float32 otherwise (one line says which)
expect_exit 0 profile run ds/data.yaml --batch 4 --imgsz 64 --workers 1 --steps 2 --warmup 0 --amp_dtype bfloat16 --project prof_bf16
if grep -q -e avx512_bf16 -e amx_bf16 /proc/cpuinfo; then
  expect_in prof_bf16/prof/train.log "Using CPU mixed precision (autocast bfloat16)"
else
  expect_in prof_bf16/prof/train.log "amp_dtype=bfloat16: this CPU has no native bfloat16"
fi

# the verdict is one of the CPU ones, with a utilisation figure behind it
bound=$("$LIBREYOLO" profile get "$run/profile.json" bound)
case "$bound" in compute|"host / launch"|dataloader) ;; *) fail "unexpected verdict '$bound'" ;; esac
util=$("$LIBREYOLO" profile get "$run/profile.json" cpu_util)
python3 -c "import sys; u=float(sys.argv[1]); sys.exit(0 if 0 < u <= 1 else 1)" "$util" || fail "cpu_util $util not in (0, 1]"

for source in "$run/profile.json" "$run/profile_trace.json" "$run"; do
  expect_exit 0 profile summary "$source"
  expect_in "$WORK/out" ">> VERDICT:"
  expect_exit 0 profile summary "$source" --json
  expect_in "$WORK/out" '"bound"'
  expect_exit 0 profile phases "$source"
  expect_in "$WORK/out" "forward"
  expect_in "$WORK/out" "backward"
  expect_exit 0 profile ops "$source" --top 5 --phase forward
  expect_in "$WORK/out" "aten::"
  expect_exit 0 profile kernels "$source" --top 5
  expect_in "$WORK/err" "no GPU kernels in this profile"
  expect_exit 0 profile get "$source"
  expect_in "$WORK/out" "forward_wall_ms"
  expect_exit 0 profile compare "$source" "$run/profile.json"
  expect_in "$WORK/out" "img/s"
done
expect_exit 0 profile ops "$run/profile.json" top=3 --json
python3 -c "import json,sys; rows=json.load(open(sys.argv[1])); sys.exit(0 if len(rows) == 3 else 1)" "$WORK/out" || fail "ops top=3 --json"

# bad input: exit 2 with the file or the argument named
mkdir -p empty_run
expect_exit 2 profile summary empty_run
expect_in "$WORK/err" "without profile.json"
expect_exit 2 profile summary no_such_profile.json
expect_in "$WORK/err" "no_such_profile.json"
echo '[]' > empty_trace.json
expect_exit 2 profile summary empty_trace.json
expect_in "$WORK/err" "empty_trace.json: a trace without any complete"
echo '{"hello": 1}' > not_a_trace.json
expect_exit 2 profile phases not_a_trace.json
expect_in "$WORK/err" "not a Chrome trace"
# a profile.json of another schema, or with values of the wrong type or out of range: exit 2, named
sed 's|"libreyolo.profile.analysis/v1"|"libreyolo.profile.analysis/v9"|' "$run/profile.json" > v9.json
for command in summary phases kernels ops get; do
  expect_exit 2 profile $command v9.json
  expect_in "$WORK/err" 'v9.json: schema "libreyolo.profile.analysis/v9" is not one this build reads'
done
echo '{"schema": "other.tool/v1", "metrics": 5}' > other.json
expect_exit 2 profile get other.json
expect_in "$WORK/err" 'schema "other.tool/v1" is not one this build reads'
python3 - "$run/profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["metrics"]["img_per_s"] = -5.0
json.dump(p, open("negative.json", "w"))
p = json.load(open(sys.argv[1]))
p["kernels"] = [{"kernel": 7, "ms_per_step": 1.0}]
json.dump(p, open("typed.json", "w"))
PY
expect_exit 2 profile get negative.json img_per_s
expect_in "$WORK/err" "metrics.img_per_s is -5.0, not a measurement"
expect_exit 2 profile kernels typed.json
expect_in "$WORK/err" "kernels[0].kernel is 7, not a name"
# a trace path that is null reads as no trace; a number, or a step time given as text, is refused by name
python3 - "$run/profile.json" <<'PY'
import json, sys
for name, key, value in [("null_trace", "trace", None), ("number_trace", "trace", 5), ("text_step", "step_ms", "12.5")]:
    p = json.load(open(sys.argv[1]))
    p[key] = value
    json.dump(p, open(name + ".json", "w"))
PY
expect_exit 0 profile summary null_trace.json
expect_in "$WORK/out" "LibreYOLO training profile"
expect_exit 2 profile summary number_trace.json
expect_in "$WORK/err" 'number_trace.json: "trace" is 5, not the path of a trace file'
expect_exit 2 profile summary text_step.json
expect_in "$WORK/err" 'text_step.json: "step_ms" is "12.5", not a number'
# absurd trace values: a duration of 1e308 us, a timestamp that is text, a negative time
for event in '"ts": 5, "dur": 1e308' '"ts": "abc", "dur": 1' '"ts": -3, "dur": 1'; do
  echo "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"step/forward\", $event}]}" > absurd.json
  expect_exit 2 profile summary absurd.json
  expect_in "$WORK/err" 'absurd.json: event 0 ("step/forward"): '
done
# a summary beside a trace claiming a negative step time
mkdir -p bad_summary && cp "$run/profile_trace.json" bad_summary/
python3 -c "
import json, sys; s = json.load(open(sys.argv[1])); s['real']['step_ms'] = -1.0; json.dump(s, open('bad_summary/profile_summary.json', 'w'))
" "$run/profile_summary.json"
expect_exit 2 profile summary bad_summary/profile_trace.json
expect_in "$WORK/err" '"step_ms" is -1.0; expected a measurement from 0 to 1e+09'
expect_exit 2 profile get "$run/profile.json" no_such_metric
expect_in "$WORK/err" "no_such_metric"
expect_exit 2 profile ops "$run/profile.json" --phase nowhere
expect_in "$WORK/err" "no such phase"
expect_exit 2 profile kernels "$run/profile.json" --sort sideways
expect_exit 2 profile run
expect_exit 2 profile

# train profile=true keeps training after the window
expect_exit 0 train model=yolo9-t data=ds/data.yaml imgsz=96 batch=4 epochs=4 profile=true profile_warmup=1 profile_steps=2 \
  val=false workers=1 project=runs name=t quiet=true --json
expect_in "$WORK/out" '"state":"completed"'
expect_in "$WORK/out" '"epochs_completed":4'
[ -s runs/t/profile.json ] || fail "train profile=true wrote no profile.json"
finish
