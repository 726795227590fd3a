# Classification checkpoints both ways with libreyolo 1.6.0 (classify_val.py), for MobileNetV4-s
# and ResNet-18 on crops of a synthetic detection set (`data crops`): LibreYOLO's trained
# checkpoint validates here to its top-1, top-5 and macro P/R/F1, and predicts every image's
# top-5 as its predict() does; ours load in LibreYOLO and do the same there. Skips (77) without
# the test venv.
. "$(dirname "$0")/../cli/lib.sh"
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "skipped: no python at $python"; exit 77; }
oracle="$(dirname "$0")/classify_val.py"
case "$oracle" in /*) ;; *) oracle="$OLDPWD/$oracle" ;; esac

expect_exit 0 data synth out=synth synth_images=24 synth_val_images=8 synth_size=160 seed=11
expect_exit 0 data crops data=synth/data.yaml out=cls crop_min_size=12 val_fraction=0.3

# our val and predict of CHECKPOINT against LibreYOLO's figures in REFERENCE_JSON; TAG names the files
ours_match() {
  checkpoint=$1; reference=$2; tag=$3
  expect_exit 0 val model="$checkpoint" data=cls batch=8 imgsz=64 json=true
  cp "$WORK/out" "$tag.val.json"
  expect_exit 0 predict model="$checkpoint" source=cls/val imgsz=64 project=runs name="$tag" json=true
  cp "$WORK/out" "$tag.predict.json"
  "$python" "$oracle" check "$reference" "$tag.val.json" "$tag.predict.json"
}

for model in mobilenetv4:s resnet:18; do
  family=${model%%:*}; size=${model##*:}
  # theirs here
  "$python" "$oracle" train "$family" "$size" "$WORK/cls" "$WORK/$family" >"$family.train.out" 2>&1 \
    || { tail -20 "$family.train.out"; fail "libreyolo could not train $family-$size"; continue; }
  theirs="$WORK/$family/py/weights/best.pt"
  "$python" "$oracle" reference "$theirs" "$WORK/cls" "$family.theirs.json" >/dev/null 2>&1 || fail "libreyolo could not validate its $family"
  ours_match "$theirs" "$family.theirs.json" "$family-theirs" \
    || fail "libreyolo's $family-$size checkpoint validates or predicts otherwise here"
  # ours there
  expect_exit 0 train model="$family-$size" data=cls epochs=2 batch=8 imgsz=64 workers=2 ema=false project=runs name="$family"
  ours="$WORK/runs/$family/weights/best.pt"
  "$python" "$oracle" reference "$ours" "$WORK/cls" "$family.ours.json" >"$family.ref.out" 2>&1 \
    || { tail -5 "$family.ref.out"; fail "libreyolo could not read our $family checkpoint"; continue; }
  ours_match "$ours" "$family.ours.json" "$family-ours" \
    || fail "our $family-$size checkpoint validates or predicts otherwise in libreyolo"
done
finish
