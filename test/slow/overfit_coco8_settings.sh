# The coco8 over-fit's settings, shared by test/slow/overfit_coco8.sh and bench/overfit_seeds.sh:
# `overfit_yaml COCO8 SOURCE_ROOT` prints the data YAML (the same 8 images to train and validate on),
# OVERFIT_KEYS the training keys (batch 2, augmentation off) beside imgsz and epochs.
overfit_yaml() {
  echo "path: $1"
  echo "train: [images/train, images/val]"
  echo "val: [images/train, images/val]"
  sed -n '/^names:/,$p' "$1/data.yaml" 2>/dev/null || sed -n '/^names:/,$p' "$2/share/libreyolo/datasets/coco8.yaml"
}
# POSIX sh (the test runs under sh): a list of words without spaces, expanded unquoted.
OVERFIT_KEYS="batch=2 mosaic=0 mixup=0 hsv_prob=0 flip_prob=0 degrees=0 translate=0 shear=0 mosaic_scale=(1,1)
warmup_epochs=2 no_aug_epochs=0 eval_interval=10 patience=0 workers=2"
