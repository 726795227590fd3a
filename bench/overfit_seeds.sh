#!/bin/bash
# A coco8 over-fit (the settings of test/slow/overfit_coco8.sh: 8 images to train and validate on,
# augmentation off, batch 2), ours and libreyolo 1.6.0's (the test venv's CLI), over seeds; one JSON
# line per run with best.pt's mAP50 (the epoch of the best mAP50-95, on both sides) and wall seconds.
#
#     bench/overfit_seeds.sh [MODEL [IMGSZ [EPOCHS [KEY=VALUE...]]]]      (default: rtmdet-t 320 150)
#     (the keys go to both trainers: the slow test's per-model ones, e.g. yolo7-b's lr0=0.005)
#     env: SEEDS ("0 1 2"), IMPLS ("ours ref"), WORK (a temporary folder), LIBREYOLO_DATASETS
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-rtmdet-t}; imgsz=${2:-320}; epochs=${3:-150}
ours="$root/build/tools/libreyolo/libreyolo"
ref="$HOME/.local/share/libreyolo/venv/bin/libreyolo"
coco8="${LIBREYOLO_DATASETS:-$root/../shared/datasets}/coco8"
[ -d "$coco8/images" ] || { echo "no coco8 at $coco8" >&2; exit 1; }
work=${WORK:-$(mktemp -d)}; mkdir -p "$work"; cd "$work" || exit 1
. "$root/test/slow/overfit_coco8_settings.sh"
overfit_yaml "$coco8" "$root" > coco8_overfit.yaml
# shellcheck disable=SC2206  # words without spaces
keys=(imgsz="$imgsz" epochs="$epochs" $OVERFIT_KEYS "${@:4}")
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
