# RT-DETR validation against libreyolo 1.6.0 (rtdetr_val.py): a LibreYOLO RT-DETR-r18 checkpoint
# loads here, and `libreyolo val` on coco8's val images, labelled by the model's own jittered
# detections, gives LibreYOLO's detections and mAP; a checkpoint our training writes loads in
# LibreYOLO and validates to our detections. Skips (77) without the test venv or coco8.
. "$(dirname "$0")/../cli/lib.sh"
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
oracle="$(dirname "$0")/rtdetr_val.py"
case "$oracle" in /*) ;; *) oracle="$OLDPWD/$oracle" ;; esac
coco8="${LIBREYOLO_DATASETS:-$LIBREYOLO_SOURCE_ROOT/../shared/datasets}/coco8"
[ -d "$coco8/images/val" ] || { echo "skipped: no coco8 at $coco8"; exit 77; }

"$python" "$oracle" "$WORK" "$coco8" >made.out 2>&1 || { cat made.out; fail "rtdetr_val.py write failed"; }
tail -1 made.out
"$LIBREYOLO" val model="$WORK/py-rtdetr-r18.pt" data="$WORK/ds.yaml" imgsz=640 batch=4 save_json=true \
  project="$WORK" name=ours exist_ok=true --json >ours.json 2>ours.err || { cat ours.err; fail "libreyolo val failed"; }
"$python" "$oracle" "$WORK" check expected.json ours.json ours/predictions.json \
  || fail "RT-DETR validation differs from libreyolo 1.6.0"

# the other way: a checkpoint `libreyolo train` writes, validated by LibreYOLO and by us
"$LIBREYOLO" train model=rtdetr-r18 data="$WORK/ds.yaml" imgsz=128 epochs=1 batch=2 workers=0 val=false \
  project="$WORK" name=trained quiet=true >train.out 2>&1 || { cat train.out; fail "libreyolo train failed"; }
"$python" "$oracle" "$WORK" reference trained/weights/last.pt "$WORK/trained.json" >reverse.out 2>&1 \
  || { cat reverse.out; fail "LibreYOLO could not validate our checkpoint"; }
"$LIBREYOLO" val model=trained/weights/last.pt data="$WORK/ds.yaml" imgsz=640 batch=4 save_json=true \
  project="$WORK" name=ours_trained exist_ok=true --json >ours_trained.json 2>ours.err || { cat ours.err; fail "libreyolo val failed"; }
"$python" "$oracle" "$WORK" check trained.json ours_trained.json ours_trained/predictions.json any-map \
  || fail "LibreYOLO reads our RT-DETR checkpoint into other outputs"
finish
