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

# pretrained=path: every tensor of the same architecture transfers; a missing file is exit 4
expect_exit 0 train $C pretrained=runs/single/weights/last.pt name=transfer
expect_in "$WORK/err" "transferred"
grep -Eq 'transferred ([0-9]+)/\1 tensors' "$WORK/err" || fail "pretrained=path: not every tensor transferred"
expect_exit 4 train $C pretrained=missing.pt name=nofile

# freeze: the first two layer groups keep their weights (compared in the unit test), the log says how many
expect_exit 0 train $C freeze=2 name=frozen
expect_in "$WORK/err" "Freezing"
expect_in "$WORK/err" "backbone.conv0. backbone.conv1."
expect_exit 2 train $C freeze=99 name=frozen_bad
expect_in "$WORK/err" "out of range"

finish
