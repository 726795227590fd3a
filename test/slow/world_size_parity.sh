# One family's data-parallel contract (README: the same seed and global batch give the same
# training at any world size, within float rounding), on the CPU over Gloo, every rank on 127.0.0.1:
#   world_size_parity.sh MODEL IMGSZ [KEY=VALUE ...]
# A warm start (10 epochs in one process: an untrained head's near-ties flip on rounding alone;
# after 3, YOLOv9-t's 2 threads against 1 already differed by 1.2e-3), then one epoch from those
# weights three ways: one process on 2 threads, 2 processes of 1 thread each, one process on 1
# thread. 32 images at batch 8, nbs 24: windows of 3 batches, the epoch's 4th cut by its end. The
# figure is |w_two - w_one| / |w_one - w_start| over the trained weights (test/dist/compare_runs.py).
# The thread-count figure is float rounding alone, the contract's allowance: 2 processes against 1
# must stay within the larger of 1e-3 and 3x that figure.
. "$(dirname "$0")/../cli/lib.sh"
python=${LIBREYOLO_PYTHON:-python3}
"$python" -c 'import torch' 2>/dev/null || { echo "skipped: no torch in $python (compare_runs.py reads the checkpoints)"; exit 77; }
compare=${LIBREYOLO_SOURCE_ROOT:?}/test/dist/compare_runs.py
model=$1; imgsz=$2; shift 2
"$LIBREYOLO" data synth out=ds synth_images=32 synth_val_images=4 synth_size="$imgsz" quiet=true >/dev/null 2>&1 \
  || { echo "synth failed"; exit 1; }
common="model=$model data=ds/data.yaml imgsz=$imgsz workers=1 quiet=true project=runs $*"
OMP_NUM_THREADS=2 timeout 1800 "$LIBREYOLO" train $common epochs=10 batch=8 val=false name=warm >warm.out 2>&1 \
  || { cat warm.out; fail "the warm start exited $?"; finish; }
parity="$common pretrained=runs/warm/weights/last.pt batch=8 nbs=24 sync_bn=true mosaic=0 mixup=0 warmup_epochs=0 epochs=1 val=false"
OMP_NUM_THREADS=2 timeout 600 "$LIBREYOLO" train $parity name=one >one.out 2>&1 || { cat one.out; fail "one process exited $?"; }
OMP_NUM_THREADS=1 timeout 600 "$LIBREYOLO" train $parity name=two nproc_per_node=2 >two.out 2>&1 \
  || { tail -20 two.out; fail "2 processes exited $?"; }
OMP_NUM_THREADS=1 timeout 600 "$LIBREYOLO" train $parity name=thread >thread.out 2>&1 || { cat thread.out; fail "one thread exited $?"; }
"$python" "$compare" runs/warm/weights/last.pt runs/one runs/thread 1 >threads.txt 2>&1
sed "s/^/  $model, 1 thread against 2 (baseline): /" threads.txt
tolerance=$("$python" -c 'import re, sys
found = re.search(r"weights: .* = ([0-9.e+-]+)", open(sys.argv[1]).read())
print(max(1e-3, 3 * float(found.group(1))) if found else 1e-3)' threads.txt)
"$python" "$compare" runs/warm/weights/last.pt runs/one runs/two "$tolerance" >ranks.txt 2>&1 \
  || fail "$model: 2 processes differ from 1 by more than $tolerance of what training changed"
sed "s/^/  $model, 2 processes against 1 (tolerance $tolerance): /" ranks.txt
finish
