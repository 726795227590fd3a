# Classification on a GPU: MobileNetV4-s and ResNet-18 on coco128's box crops (`data crops`),
# graphed (cuda_graph=true: the whole network, the loss, then the optimizer step at scope=step)
# and eager from the same start train the same losses and weights (to 1e-3 of what training
# changed, deterministic kernels), each capture logged once; float16 AMP and float32. Skips (77)
# without a GPU or coco128.
. "$(dirname "$0")/../cli/lib.sh"
require_gpu coco128
python=${LIBREYOLO_PYTHON:-python3}
compare=$LIBREYOLO_SOURCE_ROOT/test/dist/compare_runs.py

expect_exit 0 data crops data=coco128 out=crops
for case in "mobilenetv4-s amp=true|captured training forward/backward at input shape 16x3x224x224" \
            "resnet-18 amp=false|captured training forward/backward at input shape 16x3x224x224" \
            "mobilenetv4-s amp=true cuda_graph_scope=step|captured the optimizer step"; do
  run=${case%%|*}; line=${case#*|}
  model=${run%% *}; args=${run#* }
  name=$(echo "$run" | tr ' =' '__')
  common="model=$model data=crops imgsz=224 batch=16 workers=4 device=0 val=false quiet=true deterministic=true project=$WORK/runs"
  expect_exit 0 train $common epochs=1 name="$name-warm"
  start="$WORK/runs/$name-warm/weights/last.pt"
  expect_exit 0 train $common pretrained="$start" epochs=3 warmup_epochs=0 $args name="$name-eager"
  expect_exit 0 train $common pretrained="$start" epochs=3 warmup_epochs=0 $args cuda_graph=true quiet=false name="$name-graph"
  expect_in "$WORK/err" "cuda_graph: $line"
  grep -q "falling back to eager" "$WORK/err" && fail "$run: the capture fell back: $(grep 'falling back' "$WORK/err")"
  "$python" "$compare" "$start" "$WORK/runs/$name-eager" "$WORK/runs/$name-graph" 1e-3 >"$name.parity" 2>&1 \
    || { fail "$run: graphed and eager training differ"; cat "$name.parity"; }
  sed "s/^/  $run: /" "$name.parity"
done
finish
