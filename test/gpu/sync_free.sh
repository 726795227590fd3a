# The training step holds no host sync on a GPU. CUDA's sync debug mode is on for the batches
# (LIBREYOLO_CUDA_SYNC_WARN=1: every synchronising operation warns), and YOLOv9-t trains one
# epoch of 32 batches with float16 AMP (the loss scaler's skip decided on the device), eager and
# with cuda_graph_scope=step. What may sync: the logged losses, read every 10 batches and at the
# epoch's end, and the captures, once; at most one sync per 4 batches passes (a step that synced,
# as before this test, makes 5 or more per batch: 4 target copies and the scaler's decision).
# Skips (77) without a GPU or coco128.
. "$(dirname "$0")/../cli/lib.sh"
require_gpu coco128

export LIBREYOLO_CUDA_SYNC_WARN=1
batches=32  # coco128 at batch 4, one epoch
allowed=$((batches / 4))
for mode in "cuda_graph=false" "cuda_graph=true cuda_graph_scope=step"; do
  name=$(echo "$mode" | tr ' =' '__')
  expect_exit 0 train model=yolo9-t data=coco128 imgsz=320 batch=4 nbs=8 epochs=1 workers=4 device=0 \
    amp=true val=false plots=false project="$WORK/runs" name="$name" $mode
  syncs=$(grep -c "called a synchronizing CUDA operation" "$WORK/err")
  echo "$mode: $syncs host syncs in $batches batches (at most $allowed allowed)"
  [ "$syncs" -le "$allowed" ] || { fail "$mode: $syncs syncs in $batches batches"; grep -m5 -B2 "synchronizing" "$WORK/err"; }
done
finish
