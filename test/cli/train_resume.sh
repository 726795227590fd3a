# Ctrl-C mid-epoch saves last.pt and exits 130; resuming from it gives the same per-epoch
# losses and metrics as a run that was never interrupted.
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
"$LIBREYOLO" data synth out=ds synth_images=48 synth_val_images=8 synth_size=64 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
args="model=yolo9-t data=ds/data.yaml epochs=3 batch=8 imgsz=64 workers=2 eval_interval=1 quiet=true project=runs"

expect_exit 0 train $args name=straight
# Ctrl-C once epoch 1 is in results.csv: it lands somewhere in epoch 2 or 3 (6 batches each)
"$LIBREYOLO" train $args name=cut >"$WORK/out" 2>"$WORK/err" &
pid=$!
wait_for runs/cut/results.csv '^1,' && kill -INT "$pid"
wait "$pid"; code=$?
[ "$code" -eq 130 ] || { fail "the interrupted run exited $code, expected 130"; sed 's/^/  stderr: /' "$WORK/err"; }
expect_in "$WORK/err" "SIGINT received"
expect_in runs/cut/status.json '"state": "interrupted"'
[ -s runs/cut/weights/last.pt ] || fail "no last.pt after SIGINT"
expect_exit 0 train model=runs/cut/weights/last.pt resume=true quiet=true
expect_in runs/cut/status.json '"state": "completed"'

# epoch, train/loss and the loss parts, validation metrics: equal to 1e-5
columns() { python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = ["train/loss", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/mAP50", "lr/group0"]
for r in rows:
    print(r["epoch"], " ".join(f"{float(r[k]):.5g}" if r.get(k) else "-" for k in keys))
PY
}
columns runs/straight/results.csv > straight.txt
columns runs/cut/results.csv > cut.txt
cat straight.txt
[ "$(wc -l < straight.txt)" -eq 3 ] || fail "results.csv of the uninterrupted run did not give 3 epochs (is python3 there?)"
if ! diff straight.txt cut.txt; then fail "resumed run differs from the uninterrupted one"; fi

# a resume's override holds for later resumes too: a run of 10 epochs resumed with epochs=3, then
# resumed again without it, ends at 3 (train_config.yaml keeps the override and the run's own model=)
expect_exit 0 train $args epochs=1 name=short
# what an epoch is (data, imgsz, batch) cannot change in a resume; anything else is said as it changes
expect_exit 2 train model=runs/short/weights/last.pt resume=true epochs=2 imgsz=96
expect_in "$WORK/err" "resume=true continues the run as it was, and imgsz=96 differs from its imgsz="
expect_exit 2 train model=runs/short/weights/last.pt resume=true epochs=2 data=coco8
expect_in "$WORK/err" "data=coco8 differs from its data=ds/data.yaml"
expect_exit 0 train model=runs/short/weights/last.pt resume=true epochs=2 lr0=0.02 quiet=true
expect_in "$WORK/err" "resume=true: lr0=0.02 replaces the run's 0.01 from here on"
expect_in runs/short/train_config.yaml "epochs: 2"
expect_in runs/short/train_config.yaml 'model: "yolo9-t"'
expect_in runs/short/train_config.yaml 'resume: "false"'
expect_exit 2 train model=runs/short/weights/last.pt resume=true quiet=true
expect_in "$WORK/err" "already finished all 2 epochs"
[ "$(tail -n +2 runs/short/results.csv | wc -l)" -eq 2 ] || fail "expected 2 epochs in runs/short/results.csv"
finish
