# Validation against libreyolo 1.6.0 (rtdetr_val.py), for RT-DETR-r18, D-FINE-n, DEIM-n and
# RT-DETRv4-s, or the FAMILY SIZE TRAIN_IMGSZ triples given (YOLOX-s, YOLOv7-b and RTMDet-t:
# validated top-left, with LibreYOLO's postprocess): a
# LibreYOLO checkpoint loads here, and `libreyolo val` on coco8's val images, labelled by the model's
# own jittered detections, gives LibreYOLO's detections and mAP; a checkpoint our training writes
# loads in LibreYOLO and validates to our detections. Skips (77) without the test venv or coco8.
. "$(dirname "$0")/../cli/lib.sh"
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
oracle="$(dirname "$0")/rtdetr_val.py"
case "$oracle" in /*) ;; *) oracle="$OLDPWD/$oracle" ;; esac
coco8="${LIBREYOLO_DATASETS:-$LIBREYOLO_SOURCE_ROOT/../shared/datasets}/coco8"
[ -d "$coco8/images/val" ] || { echo "skipped: no coco8 at $coco8"; exit 77; }

# FAMILY SIZE TRAIN_IMGSZ: both directions in $WORK/FAMILY (D-FINE-n needs 288 px or more for its
# 300 queries from two levels)
both_ways() {
  family=$1; size=$2; train_imgsz=$3; dir="$WORK/$family"
  mkdir -p "$dir" && cd "$dir" || fail "no $dir"
  "$python" "$oracle" "$dir" "$coco8" "$family" "$size" >made.out 2>&1 || { cat made.out; fail "rtdetr_val.py write failed ($family)"; }
  tail -1 made.out
  "$LIBREYOLO" val model="$dir/py-$family-$size.pt" data="$dir/ds.yaml" imgsz=640 batch=4 save_json=true \
    project="$dir" name=ours exist_ok=true --json >ours.json 2>ours.err || { cat ours.err; fail "libreyolo val failed ($family)"; }
  "$python" "$oracle" "$dir" check expected.json ours.json ours/predictions.json \
    || fail "$family-$size validation differs from libreyolo 1.6.0"

  # the other way: a checkpoint `libreyolo train` writes from the fixture's weights (a step too
  # small to move them, so its mAP means something), validated by LibreYOLO and by us; then as
  # LibreYOLO reads its config: its CLI, its val() on the config's data, its resume's arguments
  # (at the validation's 640: the BatchNorm statistics the two steps update stay those of its scale)
  "$LIBREYOLO" train model="$dir/py-$family-$size.pt" data="$dir/ds.yaml" imgsz=640 epochs=1 batch=2 workers=0 \
    val=false lr0=1e-7 warmup_epochs=0 project="$dir" name=trained quiet=true >train.out 2>&1 \
    || { cat train.out; fail "libreyolo train failed ($family)"; }
  "$python" "$oracle" "$dir" reference trained/weights/last.pt "$dir/trained.json" >reverse.out 2>&1 \
    || { cat reverse.out; fail "LibreYOLO could not validate our $family checkpoint"; }
  "$LIBREYOLO" val model=trained/weights/last.pt data="$dir/ds.yaml" imgsz=640 batch=4 save_json=true \
    project="$dir" name=ours_trained exist_ok=true --json >ours_trained.json 2>ours.err || { cat ours.err; fail "libreyolo val failed"; }
  "$python" "$oracle" "$dir" check trained.json ours_trained.json ours_trained/predictions.json trained \
    || fail "LibreYOLO reads our $family checkpoint into other outputs"
  "$python" "$oracle" "$dir" interop trained/weights/last.pt ours_trained.json plain >interop.out 2>&1 \
    || { cat interop.out; fail "LibreYOLO reads our $family checkpoint's config otherwise"; }
  tail -2 interop.out
  [ -n "${single_done:-}" ] && return 0
  # once per run: a checkpoint trained with single_cls=true, whose config LibreYOLO's validator
  # acts on (it merges the dataset's classes), and so do we without being told
  single_done=1
  "$LIBREYOLO" train model="$family-$size" data="$dir/ds.yaml" imgsz="$train_imgsz" epochs=1 batch=2 workers=0 val=false \
    single_cls=true project="$dir" name=single quiet=true >single.out 2>&1 || { cat single.out; fail "single_cls training failed"; }
  "$LIBREYOLO" val model=single/weights/last.pt data="$dir/ds.yaml" imgsz=640 batch=4 --json >ours_single.json 2>ours_single.err \
    || { cat ours_single.err; fail "libreyolo val of a single_cls checkpoint failed"; }
  expect_in ours_single.err "the checkpoint was trained with single_cls=true"
  "$python" "$oracle" "$dir" interop single/weights/last.pt ours_single.json single >interop_single.out 2>&1 \
    || { cat interop_single.out; fail "LibreYOLO reads our single_cls checkpoint otherwise"; }
  tail -1 interop_single.out
  # ours without data=: the checkpoint's training data, as LibreYOLO's val()
  expect_exit 0 val model=trained/weights/last.pt imgsz=640 batch=4 --json
  expect_in "$WORK/err" "(the checkpoint's training data; give data= to validate on another)"
  "$python" -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:]); sys.exit(a["metrics/mAP50-95"] != b["metrics/mAP50-95"])' \
    "$WORK/out" ours_trained.json || fail "val without data= gave another mAP than with the checkpoint's data"
}

# arguments: FAMILY SIZE TRAIN_IMGSZ triples (parity_conv_val: YOLOX, YOLOv7, RTMDet); else the DETRs
if [ $# -gt 0 ]; then
  while [ $# -ge 3 ]; do both_ways "$1" "$2" "$3"; shift 3; done
else
  both_ways rtdetr r18 128
  both_ways dfine n 320
  both_ways deim n 320
  both_ways rtdetrv4 s 256
fi
finish
