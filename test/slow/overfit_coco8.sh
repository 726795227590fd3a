# It learns: MODEL from scratch over-fits coco8 (the same 8 images to train and validate on,
# augmentation off) to mAP50 >= 0.5.   overfit_coco8.sh MODEL IMGSZ EPOCHS [KEY=VALUE...]
# (yolo9-t: 150 epochs; yolox-s: 300, it learns more slowly, in the reference too; rtdetr-r18:
# 100 epochs at lr0 = lr_backbone = 5e-4, its recipe's 1e-4 and 5e-6 being for a pretrained backbone;
# dfine-n: 100 epochs at 320 px, its two levels' 500 positions feeding 300 queries, lr0 5e-4 with the
# backbone at the same rate, the strong augmentations off (aug_stop_epoch_ratio=0); measured mAP50
# 0.87; deim-n: the same, and multi_scale=false, DEIM's collate resizing every size; yolo7-b: lr0 0.005,
# its recipe's 0.01 diverging at batch 2 in libreyolo 1.6.0 too, see test/meson.build)
# Skips (77) when ../shared/datasets/coco8 is absent.
. "$(dirname "$0")/overfit_coco8_settings.sh"  # before lib.sh, which moves to a work folder
. "$(dirname "$0")/../cli/lib.sh"
model=$1; imgsz=$2; epochs=$3; shift 3
coco8="${LIBREYOLO_DATASETS:-$LIBREYOLO_SOURCE_ROOT/../shared/datasets}/coco8"
[ -d "$coco8/images" ] || { echo "skipped: $coco8 not found"; exit 77; }
overfit_yaml "$coco8" "$LIBREYOLO_SOURCE_ROOT" > coco8_overfit.yaml
grep -q "^names:" coco8_overfit.yaml || { echo "no class names for coco8"; exit 1; }
start=$(date +%s)
expect_exit 0 train model="$model" data=coco8_overfit.yaml imgsz="$imgsz" epochs="$epochs" $OVERFIT_KEYS \
  project=runs name=overfit quiet=true "$@" --json
seconds=$(( $(date +%s) - start ))
map50=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["best_mAP50"])' "$WORK/out")
echo "$model coco8 over-fit: best mAP50 $map50 in ${seconds}s"
# For the record (the work folder goes when the test ends): each validation's mAP50, and any warning
# (CPU contention lowering the threads, a divergence's recovery at half the learning rate)
python3 -c 'import csv,sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("metrics/mAP50")]
print("mAP50 by epoch: " + " ".join("%s:%.3f" % (r["epoch"], float(r["metrics/mAP50"])) for r in rows))' \
  runs/overfit/results.csv || fail "no readable runs/overfit/results.csv"
grep -h "WARN" "$WORK/err" runs/overfit/train.log 2>/dev/null | sort -u | head -20
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.5 else 1)" "$map50" || fail "mAP50 $map50 < 0.5"
finish
