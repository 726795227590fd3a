# Classification end to end on crops of a synthetic detection set: `data crops` builds the
# ImageFolder set, `data check` counts it, train (task implied by the model) writes results.csv
# and checkpoints chosen by top-1, `val` and `predict` read them, resume goes on, and what the
# task refuses says why.
. "$(dirname "$0")/lib.sh"

expect_exit 0 data synth out=synth synth_images=24 synth_val_images=6 synth_size=160 seed=5
expect_exit 0 data crops data=synth/data.yaml out=cls crop_min_size=12 val_fraction=0.3 json=true
expect_in "$WORK/out" '"classes"'
[ -d cls/train ] && [ -d cls/val ] || fail "data crops wrote no train/ and val/"
[ "$(ls cls/train)" = "$(ls cls/val)" ] || fail "train and val hold different class folders"
expect_exit 3 data crops data=synth/data.yaml out=cls
expect_in "$WORK/err" "not empty"

expect_exit 0 data check data=cls
expect_in "$WORK/out" "train:"
expect_in "$WORK/out" "classes"
mkdir -p bad/train/a bad/train/b bad/val/a
cp "$(find cls/train -name '*.jpg' | head -1)" bad/train/a/
cp "$(find cls/train -name '*.jpg' | head -1)" bad/train/b/
cp "$(find cls/train -name '*.jpg' | head -1)" bad/val/a/
expect_exit 3 data check data=bad task=classify
expect_in "$WORK/err" "lacks the class folder(s) b"

expect_exit 0 cfg model=mobilenetv4-s
grep -Eq "^task +classify" "$WORK/out" || fail "cfg: the model does not imply task=classify"
grep -Eq "^optimizer +adamw" "$WORK/out" || fail "cfg: not libreyolo's AdamW"
grep -Eq "^crop_pct +0.875" "$WORK/out" || fail "cfg: not mobilenetv4-s's crop_pct"

expect_exit 0 train model=mobilenetv4-s data=cls epochs=2 batch=8 imgsz=64 workers=2 project=runs name=m seed=1
[ -f runs/m/weights/best.pt ] || fail "no best.pt"
head -1 runs/m/results.csv | grep -q "metrics/accuracy_top1" || fail "results.csv lacks metrics/accuracy_top1"
[ "$(wc -l < runs/m/results.csv)" -eq 3 ] || fail "results.csv should hold 2 epochs"
expect_in "$WORK/err" "Best metrics/accuracy_top1"

expect_exit 0 val model=runs/m/weights/best.pt data=cls batch=4 json=true
expect_in "$WORK/out" '"metrics/accuracy_top1"'
expect_in "$WORK/err" "top-1 accuracy"
expect_exit 0 predict model=runs/m/weights/best.pt source=cls/val project=runs name=p json=true
expect_in "$WORK/out" '"top5"'
[ -f runs/p/predictions.json ] || fail "predict wrote no predictions.json"
expect_exit 2 predict model=runs/m/weights/best.pt source=cls/val task=detect
expect_in "$WORK/err" "trained for task 'classify'"

expect_exit 0 train model=runs/m/weights/last.pt data=cls epochs=3 resume=true
[ "$(wc -l < runs/m/results.csv)" -eq 4 ] || fail "resume should add epoch 3"

expect_exit 0 train model=resnet-18 data=cls epochs=1 batch=8 imgsz=64 workers=2 project=runs name=r val=false
[ -f runs/r/weights/last.pt ] || fail "no resnet last.pt"
expect_exit 2 train model=resnet-18 data=cls epochs=1 batch=8 imgsz=64 mixup=0.5 project=runs name=x
expect_in "$WORK/err" "mixup=0.5: not built for classification"
# an unreadable image is named and left out before training, not met mid-epoch
cp -r cls broken && echo "not a jpeg" > "$(ls -d broken/train/*/ | head -1)zz.jpg"
expect_exit 0 train model=resnet-18 data=broken epochs=1 batch=8 imgsz=64 workers=2 val=false project=runs name=broken
expect_in "$WORK/err" "zz.jpg: cannot identify image file"
expect_in "$WORK/err" "skipped"
expect_exit 3 train model=resnet-18 data=synth/data.yaml epochs=1 project=runs name=y
expect_in "$WORK/err" "ImageFolder"

# the profiler names the data pipeline when it bounds a classifier: 4000 px photos decoded on the
# training thread (workers=0) for 32 px inputs (about 45% of the step waits on data here; the
# verdict's line is 20%)
expect_exit 0 data synth out=big synth_images=8 synth_val_images=2 synth_size=4000 seed=1
for split in train val; do
  i=0
  for image in big/images/$split/*.jpg; do
    mkdir -p "photos/$split/c$((i % 2))" && ln -s "$PWD/$image" "photos/$split/c$((i % 2))/" && i=$((i + 1))
  done
done
expect_exit 0 profile run photos --model mobilenetv4-s --batch 4 --imgsz 32 --workers 0 --no-amp --steps 4 --warmup 1 --project prof
expect_in "$WORK/err" "DATALOADER-BOUND"
summary=$(find prof -name profile_summary.json | head -1)
[ -n "$summary" ] || fail "profile run wrote no profile_summary.json"
grep -q '"bound": *"dataloader"' "$summary" || fail "profile_summary.json: the bound is not dataloader"
finish
