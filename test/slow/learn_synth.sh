# It learns: YOLOv9-t from scratch on the synthetic shapes dataset (160 px, 240 train / 60 val
# images, trained at imgsz=192 as in the README's main job) reaches mAP50 >= 0.6 on the val split
# within 5 minutes of wall time on the CPU.
. "$(dirname "$0")/../cli/lib.sh"
"$LIBREYOLO" data synth out=ds synth_size=160 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
start=$(date +%s)
expect_exit 0 train model=yolo9-t data=ds/data.yaml imgsz=192 batch=8 epochs=20 warmup_epochs=1 no_aug_epochs=15 \
  eval_interval=5 aux_weight=0 workers=2 project=runs name=synth quiet=true --json
seconds=$(( $(date +%s) - start ))
cat "$WORK/out"
map50=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["best_mAP50"])' "$WORK/out")
echo "YOLOv9-t synthetic: best mAP50 $map50 in ${seconds}s"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.6 else 1)" "$map50" || fail "mAP50 $map50 < 0.6"
[ "$seconds" -le 300 ] || fail "took ${seconds}s (> 300 s)"
finish
