# Stop signals at awkward moments: during validation the epoch is validated, saved and the run
# stops with 143; during the final epoch's last batch the epoch still ends and the run is complete;
# a second Ctrl-C exits at once instead of waiting for the save, and says whether a last.pt exists.
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
"$LIBREYOLO" data synth out=ds synth_images=8 synth_val_images=60 synth_size=320 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }

# SIGTERM while epoch 1 is validated (its progress line is out, validation takes seconds)
"$LIBREYOLO" train model=yolo9-t data=ds/data.yaml epochs=2 batch=8 imgsz=320 workers=1 eval_interval=1 project=runs name=val \
  >"$WORK/out" 2>"$WORK/err" &
pid=$!
wait_for "$WORK/err" '1/2.*100%' && kill -TERM "$pid"
wait "$pid"; code=$?
[ "$code" -eq 143 ] || { fail "SIGTERM during validation exited $code, expected 143"; sed 's/^/  stderr: /' "$WORK/err"; }
expect_in "$WORK/err" "SIGTERM received after epoch 1: runs/val/weights/last.pt holds it"
expect_in "$WORK/err" "Validation - mAP50"
expect_in runs/val/status.json '"state": "interrupted"'
[ "$(grep -c '^1,' runs/val/results.csv)" -eq 1 ] || fail "results.csv should hold the validated epoch 1"
expect_exit 0 train model=runs/val/weights/last.pt resume=true
expect_in "$WORK/err" "Resuming from runs/val/weights/last.pt: epoch 2"
expect_in runs/val/status.json '"state": "completed"'
[ "$(grep -c '^2,' runs/val/results.csv)" -eq 1 ] || fail "the resumed run should add epoch 2"

# SIGINT while the final epoch trains its only batch (8 images, batch 8; a step at 320 takes about a
# second on one thread): the epoch still ends (validated, a results row, best.pt) and the run is complete
"$LIBREYOLO" train model=yolo9-t data=ds/data.yaml epochs=2 batch=8 imgsz=320 workers=1 eval_interval=1 project=runs name=last \
  >"$WORK/out" 2>"$WORK/err" &
pid=$!
wait_for "$WORK/err" 'Validation - mAP50' && sleep 0.3 && kill -INT "$pid"
wait "$pid"; code=$?
[ "$code" -eq 0 ] || { fail "SIGINT in the final epoch's last batch exited $code, expected 0 (complete)"; sed 's/^/  stderr: /' "$WORK/err"; }
expect_in runs/last/status.json '"state": "completed"'
[ "$(grep -c '^2,' runs/last/results.csv)" -eq 1 ] || fail "results.csv should hold the final epoch 2"
[ "$(grep -c 'Validation - mAP50' "$WORK/err")" -eq 2 ] || fail "the final epoch was not validated"
[ -e runs/last/weights/best.pt ] || fail "no best.pt after the interrupted final epoch"
expect_exit 2 train model=runs/last/weights/last.pt resume=true
expect_in "$WORK/err" "already"

# Ctrl-C twice: the second ends the process at once, last.pt is never half written
"$LIBREYOLO" train model=yolo9-t data=ds/data.yaml epochs=300 batch=8 imgsz=320 workers=1 val=false project=runs \
  name=twice >"$WORK/out" 2>"$WORK/err" &
pid=$!
# (the second 50 ms after the first, while the first waits for the step to end: a step at 320 takes
# about a second)
wait_for runs/twice/status.json '"running"' && sleep 0.3 && kill -INT "$pid" && sleep 0.05 && kill -INT "$pid"
wait "$pid"; code=$?
[ "$code" -eq 130 ] || { fail "two SIGINTs exited $code, expected 130"; sed 's/^/  stderr: /' "$WORK/err"; }
expect_in "$WORK/err" "second stop signal: exiting now without saving"
expect_in runs/twice/status.json '"state": "interrupted"'
expect_in runs/twice/status.json 'second stop signal: exited without saving'
ls runs/twice | grep -q 'tmp' && fail "a temporary file left in runs/twice: $(ls runs/twice)"
if [ -e runs/twice/weights/last.pt ]; then
  expect_exit 0 info model=runs/twice/weights/last.pt imgsz=64
else  # before the first save: nothing may claim a last.pt
  expect_in "$WORK/err" "no checkpoint had been saved yet"
  expect_in runs/twice/status.json "no checkpoint had been saved yet"
  grep -q "last completed save" "$WORK/err" runs/twice/status.json && fail "a missing last.pt was called the last completed save"
fi
finish
