# data synth / preview / bench work end to end on a small synthetic dataset.
. "$(dirname "$0")/lib.sh"

expect_exit 0 data synth out=synth synth_images=8 synth_val_images=2 synth_size=96 seed=3
[ -f synth/data.yaml ] || fail "synth wrote no data.yaml"
[ "$(ls synth/images/train | wc -l)" -eq 8 ] || fail "expected 8 training images"
expect_exit 0 data synth out=synth2 synth_images=8 synth_val_images=2 synth_size=96 seed=3
cmp -s synth/labels/train/000005.txt synth2/labels/train/000005.txt || fail "synth is not deterministic"

expect_exit 0 data synth --help
expect_in "$WORK/out" "synth_images="
expect_exit 0 data check data=synth/data.yaml
expect_in "$WORK/out" "train: 8 images, 0 backgrounds, 0 corrupt"

for model in yolo9-t yolox-s; do
  expect_exit 0 data preview data=synth/data.yaml model=$model imgsz=96 preview_images=4 out=preview_$model.png
  head -c 8 preview_$model.png | od -An -c | grep -q "P   N   G" || fail "preview_$model.png is not a PNG"
done
expect_exit 2 data preview data=synth/data.yaml out=preview.gif
expect_in "$WORK/err" "use .jpg or .png"

expect_exit 0 data bench data=synth/data.yaml model=yolo9-t imgsz=96 batch=4 workers=2 repeat=1 bench_batches=2 quiet=true
expect_in "$WORK/out" '"images_per_second_median"'
expect_in "$WORK/out" '"single_thread_decode_ms_per_image"'
expect_exit 2 data frobnicate
finish
