#!/bin/bash
# A coco8 over-fit (the settings of test/slow/overfit_coco8.sh: 8 images to train and validate on,
# augmentation off, batch 2), ours and libreyolo 1.6.0's (the test venv's CLI), over seeds; one JSON
# line per run with best.pt's mAP50 (the epoch of the best mAP50-95, on both sides) and wall seconds.
#
#     bench/overfit_seeds.sh [MODEL [IMGSZ [EPOCHS]]]      (default: rtmdet-t 320 150)
#     env: SEEDS ("0 1 2"), IMPLS ("ours ref"), WORK (a temporary folder), LIBREYOLO_DATASETS
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-rtmdet-t}; imgsz=${2:-320}; epochs=${3:-150}
ours="$root/build/tools/libreyolo/libreyolo"
ref="$HOME/.local/share/libreyolo/venv/bin/libreyolo"
coco8="${LIBREYOLO_DATASETS:-$root/../shared/datasets}/coco8"
[ -d "$coco8/images" ] || { echo "no coco8 at $coco8" >&2; exit 1; }
work=${WORK:-$(mktemp -d)}; mkdir -p "$work"; cd "$work" || exit 1
{ echo "path: $coco8"; echo "train: [images/train, images/val]"; echo "val: [images/train, images/val]"
  sed -n '/^names:/,$p' "$root/share/libreyolo/datasets/coco8.yaml"; } > coco8_overfit.yaml
keys=(imgsz="$imgsz" batch=2 epochs="$epochs" mosaic=0 mixup=0 hsv_prob=0 flip_prob=0 degrees=0 translate=0
      shear=0 "mosaic_scale=(1,1)" warmup_epochs=2 no_aug_epochs=0 eval_interval=10 patience=0 workers=2)
for seed in ${SEEDS:-0 1 2}; do
  for impl in ${IMPLS:-ours ref}; do
    start=$(date +%s)
    if [ "$impl" = ours ]; then
      "$ours" train model="$model" data=coco8_overfit.yaml "${keys[@]}" seed="$seed" project="$work" name="ours_s$seed" \
        exist_ok=true quiet=true --json > "ours_s$seed.json" 2> "ours_s$seed.err" || { cat "ours_s$seed.err" >&2; exit 1; }
      map50=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["best_mAP50"])' "ours_s$seed.json")
    else
      "$ref" train model="$model" data=coco8_overfit.yaml "${keys[@]}" seed="$seed" device=cpu pretrained=false \
        project="$work" name="ref_s$seed" exist_ok=true > "ref_s$seed.log" 2>&1 || { tail "ref_s$seed.log" >&2; exit 1; }
      map50=$(python3 -c 'import json,sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(max((r["metrics/mAP50-95"], r["metrics/mAP50"]) for r in rows if "metrics/mAP50" in r)[1])' "ref_s$seed/metrics.jsonl")
    fi
    echo "{\"bench\": \"overfit_seeds\", \"impl\": \"$impl\", \"model\": \"$model\", \"seed\": $seed, \"best_mAP50\": $map50, \"wall_s\": $(( $(date +%s) - start ))}"
  done
done
