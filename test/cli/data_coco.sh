# Scan counts of the real coco8/coco128 copies in ../shared/datasets (skipped without them).
. "$(dirname "$0")/lib.sh"
shared="$LIBREYOLO_SOURCE_ROOT/../shared/datasets"
[ -d "$shared/coco8" ] && [ -d "$shared/coco128" ] || { echo "skipped: $shared not present"; exit 77; }

export LIBREYOLO_DATASETS="$shared"
expect_exit 0 data check data=coco8
expect_in "$WORK/out" "train: 4 images, 0 backgrounds, 0 corrupt"
expect_in "$WORK/out" "val: 4 images, 0 backgrounds, 0 corrupt"
expect_exit 0 data check data=coco128 json=true
expect_in "$WORK/out" '"backgrounds": 2'
expect_exit 0 data check data=coco128
# Ultralytics prints "126 images, 2 backgrounds, 0 corrupt" for coco128
expect_in "$WORK/out" "train: 126 images, 2 backgrounds, 0 corrupt"
expect_in "$WORK/out" "person         61        254"
finish
