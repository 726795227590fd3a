# COCO JSON datasets against pycocotools (coco_json.py): a synthetic dataset written as COCO JSON
# with sparse category ids, crowd regions, segment areas, an empty box and an image without
# annotations. Checks that
#  - `data check` prints pycocotools' image, annotation and category counts, for the JSON alone
#    and for LibreYOLO's `annotations:` YAML;
#  - a model trains on it, and `val save_json=true` writes predictions.json in the JSON's image and
#    category ids, whose COCOeval mAP (pycocotools, crowds and areas as written) equals ours.
# Skips (77) only when the test venv's python is absent.
. "$(dirname "$0")/../cli/lib.sh"
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
oracle="$(dirname "$0")/coco_json.py"
case "$oracle" in /*) ;; *) oracle="$OLDPWD/$oracle" ;; esac

"$LIBREYOLO" data synth out=ds synth_size=96 synth_images=16 synth_val_images=8 >/dev/null || fail "data synth failed"
"$python" "$oracle" make ds >made.out || { fail "coco_json.py make failed"; cat made.out; }
cat >ds/coco.yaml <<'YAML'
path: .
train: images/train
val: images/val
annotations:
  train: annotations/instances_train.json
  val: annotations/instances_val.json
YAML

# the counts, as pycocotools gives them
for split in train val; do
  "$python" "$oracle" counts ds/annotations/instances_$split.json >expected.$split || fail "coco_json.py counts failed"
  expect_exit 0 data check data=ds/annotations/instances_$split.json
  expect_in "$WORK/out" "$(cat expected.$split)"
done
expect_exit 0 data check data=ds/coco.yaml
expect_in "$WORK/out" "$(cat expected.train)"
expect_in "$WORK/out" "$(cat expected.val)"
expect_in "$WORK/out" "ds/coco.yaml (4 classes"
grep -q "cross" "$WORK/out" || fail "the JSON's category names are not the classes"

# train, then validate with predictions.json and compare with COCOeval on the same detections
timeout 300 "$LIBREYOLO" train model=yolo9-t data=ds/coco.yaml imgsz=96 batch=4 epochs=20 warmup_epochs=1 eval_interval=20 \
  aux_weight=0 mosaic=0 project=runs name=coco >train.out 2>&1 || { fail "training on COCO JSON exited $?"; tail -20 train.out; }
for split in train val; do
  expect_exit 0 val model=runs/coco/weights/last.pt data=ds/coco.yaml imgsz=96 split=$split save_json=true json=true \
    project=runs/val name=$split
  ours=$("$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["metrics/mAP50-95"], d["metrics/mAP50"])' "$WORK/out")
  predictions=runs/val/$split/predictions.json
  [ -s "$predictions" ] || { fail "no predictions.json for $split"; continue; }
  "$python" - "$predictions" <<'PY' || fail "$split: predictions.json does not use the JSON's ids"
import json, sys
rows = json.load(open(sys.argv[1]))
assert rows, "no detections"
assert {r["category_id"] for r in rows} <= {3, 7, 11, 90}, {r["category_id"] for r in rows}
assert all(r["image_id"] >= 1000 and (r["image_id"] - 1000) % 17 == 0 for r in rows)
PY
  theirs=$("$python" "$oracle" evaluate ds/annotations/instances_$split.json "$predictions")
  echo "$split: ours mAP50-95 mAP50 = $ours; pycocotools on our predictions.json = $theirs"
  # predictions.json holds the very detections, unrounded: equal to the printed digits
  "$python" -c 'import sys; a=[float(v) for v in sys.argv[1].split()]; b=[float(v) for v in sys.argv[2].split()]
sys.exit(0 if all(abs(x-y) <= 1e-9 + 1e-6 * abs(y) for x, y in zip(a, b)) and b[1] > 0 else 1)' "$ours" "$theirs" \
    || fail "$split: our mAP ($ours) is not pycocotools' ($theirs) on the same detections, or nothing was found"
done
finish
