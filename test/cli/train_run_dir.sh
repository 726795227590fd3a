# train prepares project/name with auto-increment and writes train_config.yaml atomically;
# the file loads back with cfg= to the same values. (Short runs on 16 px images.)
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/tiny_dataset.sh"
make_tiny_dataset data
short="imgsz=32 batch=2 workers=1 quiet=true"
expect_exit 0 train model=yolo9-t data=data/data.yaml project=p epochs=7 $short
[ -f p/yolo9_exp/train_config.yaml ] || fail "p/yolo9_exp/train_config.yaml missing"
expect_in p/yolo9_exp/train_config.yaml "epochs: 7"
expect_in p/yolo9_exp/train_config.yaml "momentum: 0.937"
expect_in p/yolo9_exp/train_config.yaml "mosaic_scale: [0.5, 1.5]"
[ -s p/yolo9_exp/weights/last.pt ] || fail "no weights/last.pt"

# cfg= reproduces the run's values
expect_exit 0 cfg cfg=p/yolo9_exp/train_config.yaml
expect_in "$WORK/out" "epochs                   7                    cfg"
expect_in "$WORK/out" "scheduler                linear               cfg"

expect_exit 0 train model=yolo9-t data=data/data.yaml project=p epochs=1 $short
[ -d p/yolo9_exp2 ] || fail "second run did not get yolo9_exp2"
expect_exit 0 train model=yolo9-t data=data/data.yaml project=p epochs=1 $short
[ -d p/yolo9_exp3 ] || fail "third run did not get yolo9_exp3"
expect_exit 0 train model=yolo9-t data=data/data.yaml project=p name=yolo9_exp exist_ok epochs=2 $short
[ -d p/yolo9_exp4 ] && fail "exist_ok=true still incremented"
expect_in p/yolo9_exp/train_config.yaml "epochs: 2"  # rewritten in place
ls -a p/yolo9_exp p/yolo9_exp/weights | grep -q '\.tmp' && fail "a temporary file was left behind"

finish
