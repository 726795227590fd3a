# The training step holds no host sync on a GPU. CUDA's sync debug mode is on for the batches
# (LIBREYOLO_CUDA_SYNC_WARN=1: every synchronising operation warns), and YOLOv9-t trains 24 batches
# with float16 AMP (the loss scaler's skip decided on the device), eager and with
# cuda_graph_scope=step. What may sync: the logged losses, read every 10 batches and at each
# epoch's end. Skips (77) without a GPU or coco8.
. "$(dirname "$0")/../cli/lib.sh"
require_gpu coco8

export LIBREYOLO_CUDA_SYNC_WARN=1
batches=24  # coco8 at batch 1, 3 epochs
allowed=$((batches / 10 + 3 * 2))
for mode in "cuda_graph=false" "cuda_graph=true cuda_graph_scope=step"; do
  name=$(echo "$mode" | tr ' =' '__')
  expect_exit 0 train model=yolo9-t data=coco8 imgsz=320 batch=1 nbs=2 epochs=3 workers=2 device=0 \
    amp=true val=false plots=false project="$WORK/runs" name="$name" $mode
  syncs=$(grep -c "called a synchronizing CUDA operation" "$WORK/err")
  echo "$mode: $syncs host syncs in $batches batches (at most $allowed allowed)"
  [ "$syncs" -le "$allowed" ] || { fail "$mode: $syncs syncs in $batches batches"; grep -m5 -B2 "synchronizing" "$WORK/err"; }
done
finish
