# CUDA-graph training on a GPU: graphed and eager runs from the same start train the same losses
# and weights (to 1e-3 of what training changed; both with deterministic=true, without which two
# eager float32 runs already differ), for
# YOLOv9-t with AMP and nbs accumulation, without AMP, and YOLOX-s with AMP, at each
# cuda_graph_scope (network; loss and step for YOLOv9, whose loss is captured; optimizer for YOLOX,
# whose loss stays eager), and RT-DETR-r18, whose graph holds the backbone and encoder while the
# decoder and the loss stay eager, and D-FINE-n likewise (AMP off, its default); each capture is
# logged once. GPU_GRAPH_CASE=text runs the cases that contain it. Skips (77) without a GPU or coco8.
. "$(dirname "$0")/../cli/lib.sh"
require_gpu coco8
python=${LIBREYOLO_PYTHON:-python3}
compare=$LIBREYOLO_SOURCE_ROOT/test/dist/compare_runs.py

# each case: model, arguments, then after "|" the capture lines the graphed run must log
for case in "yolo9-t amp=true nbs=4|captured training forward/backward at input shape 2x3x320x320" \
            "yolo9-t amp=false nbs=2|captured training forward/backward at input shape 2x3x320x320" \
            "yolox-s amp=true nbs=2|captured training forward/backward at input shape 2x3x320x320" \
            "yolo9-t amp=true nbs=4 cuda_graph_scope=step|captured the training step (forward, loss, backward) at 2x3x320x320, 300 label slots|captured the optimizer step" \
            "yolo9-t amp=false nbs=2 cuda_graph_scope=loss|captured the training step (forward, loss, backward) at 2x3x320x320, 300 label slots" \
            "yolox-s amp=true nbs=2 cuda_graph_scope=optimizer|captured training forward/backward at input shape 2x3x320x320|captured the optimizer step" \
            "rtdetr-r18 amp=false|the backbone and encoder's forward and backward are captured|captured training forward/backward at input shape 2x3x320x320" \
            "dfine-n multi_scale=false|the backbone and encoder's forward and backward are captured|captured training forward/backward at input shape 2x3x320x320"; do
  run=${case%%|*}; lines=${case#*|}
  case "$run" in *"${GPU_GRAPH_CASE:-}"*) ;; *) continue ;; esac  # GPU_GRAPH_CASE=rtdetr: the cases that name it
  model=${run%% *}; args=${run#* }
  name=$(echo "$run" | tr ' =' '__')
  # deterministic kernels: float32 cuDNN training does not repeat otherwise (two eager runs of
  # yolo9-t amp=false differed by 18% of what training changed on an H200)
  common="model=$model data=coco8 imgsz=320 batch=2 workers=2 device=0 val=false quiet=true plots=false deterministic=true project=$WORK/runs"
  expect_exit 0 train $common epochs=1 name="$name-warm"
  start="$WORK/runs/$name-warm/weights/last.pt"
  # 2 batches an epoch: 10 batches, captured on the 3rd, replayed 8 times
  expect_exit 0 train $common pretrained="$start" epochs=5 warmup_epochs=0 $args name="$name-eager"
  expect_exit 0 train $common pretrained="$start" epochs=5 warmup_epochs=0 $args cuda_graph=true quiet=false name="$name-graph"
  while [ -n "$lines" ]; do
    line=${lines%%|*}
    expect_in "$WORK/err" "cuda_graph: $line"
    [ "$line" = "$lines" ] && lines="" || lines=${lines#*|}
  done
  grep -q "falling back to eager" "$WORK/err" && fail "$run: the capture fell back: $(grep 'falling back' "$WORK/err")"
  "$python" "$compare" "$start" "$WORK/runs/$name-eager" "$WORK/runs/$name-graph" 1e-3 >"$name.parity" 2>&1 \
    || { fail "$run: graphed and eager training differ"; cat "$name.parity"; }
  sed "s/^/  $run: /" "$name.parity"
done
finish
