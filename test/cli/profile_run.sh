# A real CPU profile of YOLOv9-t on coco8 writes all four files; every `profile` subcommand reads
# them back (profile.json and the raw trace); bad files and arguments exit 2. Skips without coco8.
. "$(dirname "$0")/lib.sh"
shared="$LIBREYOLO_SOURCE_ROOT/../shared/datasets"
[ -d "$shared/coco8" ] || { echo "skipped: $shared/coco8 not present"; exit 77; }
export LIBREYOLO_DATASETS="$shared"

expect_exit 0 profile run coco8 --batch 4 --imgsz 128 --workers 1 --steps 6 --warmup 2 --project prof
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
echo '{"hello": 1}' > not_a_trace.json
expect_exit 2 profile phases not_a_trace.json
expect_in "$WORK/err" "not a Chrome trace"
expect_exit 2 profile get "$run/profile.json" no_such_metric
expect_in "$WORK/err" "no_such_metric"
expect_exit 2 profile ops "$run/profile.json" --phase nowhere
expect_in "$WORK/err" "no such phase"
expect_exit 2 profile kernels "$run/profile.json" --sort sideways
expect_exit 2 profile run
expect_exit 2 profile

# train profile=true keeps training after the window
expect_exit 0 train model=yolo9-t data=coco8 imgsz=96 batch=4 epochs=4 profile=true profile_warmup=1 profile_steps=2 \
  val=false workers=1 project=runs name=t quiet=true --json
expect_in "$WORK/out" '"state":"completed"'
expect_in "$WORK/out" '"epochs_completed":4'
[ -s runs/t/profile.json ] || fail "train profile=true wrote no profile.json"
finish
