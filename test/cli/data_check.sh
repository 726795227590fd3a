# `libreyolo data check` reports Ultralytics' counts; a dataset without valid images is exit 3.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tiny_dataset.sh"

make_tiny_dataset ds
expect_exit 0 data check data=ds/data.yaml
expect_in "$WORK/out" "train: 3 images, 1 backgrounds, 1 corrupt"
expect_in "$WORK/out" "exceeds dataset class count 2"
expect_in "$WORK/out" "square"
[ -f ds/labels/train.libreyolo.cache ] || fail "no label cache beside the labels folder"
expect_exit 0 data check data=ds/data.yaml
expect_in "$WORK/out" "(from cache)"
expect_exit 0 data check data=ds/data.yaml json=true
expect_in "$WORK/out" '"corrupt": 1'

# train reads the same scan (one short epoch on the tiny images)
expect_exit 0 train model=yolox-n data=ds/data.yaml project=p epochs=1 imgsz=32 batch=2 workers=1
expect_in "$WORK/err" "train: Scanning"
expect_in "$WORK/err" "3 images, 1 backgrounds, 1 corrupt"

# only corrupt images: data error
mkdir -p bad/images/train bad/labels/train
echo "not an image" >bad/images/train/x.jpg
printf 'train: images/train\nnames: [a]\n' >bad/data.yaml
expect_exit 3 data check data=bad/data.yaml
expect_in "$WORK/err" "no valid image"
expect_exit 3 train data=bad/data.yaml
expect_in "$WORK/err" "no valid image in the 'train' split"
# a split without any image: said so with its folder, no empty "Scanning" line
mkdir -p empty/images/train
printf 'train: images/train\nnames: [a]\n' >empty/data.yaml
expect_exit 3 train data=empty/data.yaml
expect_in "$WORK/err" "the 'train' split ("
expect_in "$WORK/err" "empty/images/train) holds no images"
grep -q "Scanning" "$WORK/err" && fail "an empty split logged a Scanning line"
# a folder given as data=: named as a folder
expect_exit 3 data check data=empty
expect_in "$WORK/err" "data=empty is a folder: give its dataset YAML, e.g. data=empty/data.yaml"

# YAML and built-in mistakes
expect_exit 3 data check data=ds/missing.yaml
export LIBREYOLO_DATASETS="$WORK/none"
expect_exit 3 data check data=coco8
expect_in "$WORK/err" "coco8.zip"
finish
