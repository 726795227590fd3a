# Option keys that change training, each shown by its effect on a one-epoch run, and the keys
# that are logged or refused.
. "$(dirname "$0")/lib.sh"
"$LIBREYOLO" data synth out=ds synth_images=8 synth_val_images=4 synth_size=64 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
C="model=yolo9-t data=ds/data.yaml epochs=1 batch=2 imgsz=64 workers=0 aux_weight=0 project=runs"

# refused keys: exit 2, one line that says why, no run folder
expect_exit 2 train $C compile=true name=refused
expect_in "$WORK/err" "compile=true is not supported"
expect_lines "$WORK/err" 1
expect_exit 2 train $C copy_paste=0.5 name=refused
expect_in "$WORK/err" "segment"
[ ! -e runs/refused ] || fail "a refused key left runs/refused"

# logged keys: the run goes on and says why, exactly once
expect_exit 0 train $C cuda_graph=true sync_bn=true name=logged
expect_in "$WORK/err" "cuda_graph=true ignored (device is not CUDA); training runs eager"
[ "$(grep -c 'cuda_graph=true ignored' "$WORK/err")" -eq 1 ] || fail "cuda_graph's line is not printed exactly once"
expect_in "$WORK/err" "sync_bn=true ignored"

# log_interval: with stderr not a terminal, a progress line every N batches (4 batches: N=1 -> 3 + the final one)
expect_exit 0 train $C log_interval=1 name=interval1
n1=$(grep -c ' 1/1 ' "$WORK/err")
expect_exit 0 train $C log_interval=10 name=interval10
n10=$(grep -c ' 1/1 ' "$WORK/err")
[ "$n1" -eq 4 ] && [ "$n10" -eq 1 ] || fail "log_interval: expected 4 and 1 progress lines, got $n1 and $n10"

# multi_scale: the Size column takes several multiples of 32 in [32, 96] over the epoch
expect_exit 0 train $C multi_scale=true log_interval=1 name=multi
sizes=$(grep ' 1/1 ' "$WORK/err" | awk '{sub(":", "", $7); print $7}' | sort -u | tr '\n' ' ')
[ "$(echo $sizes | wc -w)" -ge 2 ] || fail "multi_scale: one size only ($sizes)"
for s in $sizes; do [ $((s % 32)) -eq 0 ] && [ "$s" -ge 32 ] && [ "$s" -le 96 ] || fail "multi_scale: size $s"; done
expect_exit 0 train $C log_interval=1 name=single
[ "$(grep ' 1/1 ' "$WORK/err" | awk '{sub(":", "", $7); print $7}' | sort -u)" = 64 ] || fail "without multi_scale every batch is 64"

# single_cls: one class named item, in the checkpoint and the validation table
expect_exit 0 train $C single_cls=true name=onecls
expect_exit 0 info model=runs/onecls/weights/last.pt --json
expect_in "$WORK/out" '"nc":1'
expect_in runs/onecls/train.log "item"
# val reads single_cls from the checkpoint's config (as LibreYOLO's validator), and names it when
# the class counts disagree because of it
expect_exit 0 val model=runs/onecls/weights/last.pt data=ds/data.yaml imgsz=64
expect_in "$WORK/err" "the checkpoint was trained with single_cls=true: validating with the"
expect_exit 4 val model=runs/single/weights/last.pt data=ds/data.yaml imgsz=64 single_cls=true
expect_in "$WORK/err" "(single_cls=true merges the dataset's classes into one"

# pretrained=path: every tensor of the same architecture transfers; a missing file is exit 4
expect_exit 0 train $C pretrained=runs/single/weights/last.pt name=transfer
expect_in "$WORK/err" "transferred"
grep -Eq 'transferred ([0-9]+)/\1 tensors' "$WORK/err" || fail "pretrained=path: not every tensor transferred"
expect_exit 4 train $C pretrained=missing.pt name=nofile
# pretrained=true with an architecture name: from scratch, and said so (not said by default)
expect_exit 0 train $C pretrained=true name=scratch
expect_in "$WORK/err" "pretrained=true: model=yolo9-t is an architecture, not a weights file, so"
grep -q "is an architecture, not a weights file" runs/single/train.log && fail "the default pretrained= was said as given"

# freeze: the first two layer groups keep their weights (compared in the unit test), the log says how many
expect_exit 0 train $C freeze=2 name=frozen
expect_in "$WORK/err" "Freezing"
expect_in "$WORK/err" "backbone.conv0. backbone.conv1."
expect_exit 2 train $C freeze=99 name=frozen_bad
expect_in "$WORK/err" "out of range"

# val_loss, save_plots, average_best, precise_bn, best_metric in one two-epoch run
expect_exit 0 train $C epochs=2 eval_interval=1 val_loss=true save_plots=true plot_samples=4 average_best=2 precise_bn=4 \
  best_metric=metrics/mAP50 name=extras
expect_in runs/extras/results.csv "val/loss,val/box_loss,val/cls_loss,val/dfl_loss"
[ "$(sed -n 2p runs/extras/results.csv | grep -o ',metrics/mAP50,' | wc -l)" -eq 2 ] || fail "best_metric: current_metric_name and best_metric_name are not metrics/mAP50"
for f in PR_curve.svg F1_curve.svg P_curve.svg R_curve.svg confusion_matrix.svg val_batch_labels.jpg val_batch_pred.jpg; do
  [ -s "runs/extras/val/$f" ] || fail "save_plots: missing val/$f"
done
expect_in runs/extras/val/confusion_matrix.svg "background"
[ -s runs/extras/weights/average.pt ] && [ -s runs/extras/weights/average_pool.pt ] || fail "average_best: no average.pt"
expect_in "$WORK/err" "average_best: wrote"
expect_in "$WORK/err" "Precise BN: recomputed the BatchNorm statistics of 2 models (trained and EMA) from 4 training images"
expect_exit 0 info model=runs/extras/weights/average.pt --json
expect_in "$WORK/out" '"nc":4'
expect_exit 2 train $C best_metric=fitness name=badmetric
expect_in "$WORK/err" "best_metric"

# min_samples: an 8-image dataset drawn 20 times per epoch (batch 2: 10 batches); class_balanced logs its draw
expect_exit 0 train $C min_samples=20 log_interval=100 name=floor
expect_in "$WORK/err" "min_samples=20 epoch floor active: dataset has 8 images; drawing 20 samples per epoch"
expect_in "$WORK/err" "10/10"
expect_exit 0 train $C class_balanced=true name=balanced
expect_in "$WORK/err" "class_balanced sampling active: 8 images, drawing 8 samples per epoch"

# val writes the plots into its own run folder
expect_exit 0 val model=runs/extras/weights/best.pt data=ds/data.yaml imgsz=64 batch=4 save_plots=true project=runs name=valplots
[ -s runs/valplots/PR_curve.svg ] || fail "val save_plots: no PR_curve.svg"

finish
