# Data-parallel on GPUs over c10d's NCCL backend. One GPU: a world-size-1 group whose CUDA tensors
# (all-reduce, broadcast, the Reducer's buckets, GradientSync, SyncBatchNorm) go through NCCL and
# whose CPU tensors (the gathered validation) through Gloo, all checked against their definitions
# (test/dist/dist_selftest.cpp). Two or more GPUs: the same with two ranks, and a short
# `libreyolo train device=0,1` run on coco8 that must leave one normal run folder. Skips (77)
# without a GPU.
. "$(dirname "$0")/../cli/lib.sh"
: "${DIST_SELFTEST:?}"
require_gpu
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

port=$(free_port)
DIST_SELFTEST_DEVICE=cuda RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  timeout 120 "$DIST_SELFTEST" 60 >one.out 2>&1 || { cat one.out; fail "NCCL self-test, one rank"; }
expect_in one.out "rank 0/1 ok (torchrun, local rank 0, master 127.0.0.1:$port; nccl on cuda:0"

if [ "$gpus" -ge 2 ]; then
  port=$(free_port)
  for r in 0 1; do
    DIST_SELFTEST_DEVICE=cuda RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$DIST_SELFTEST" 60 >two.$r 2>&1 &
  done
  wait
  for r in 0 1; do expect_in two.$r "rank $r/2 ok"; expect_in two.$r "nccl on cuda:$r"; done
  shared="${LIBREYOLO_DATASETS:-$LIBREYOLO_SOURCE_ROOT/../shared/datasets}"
  if [ -d "$shared/coco8" ]; then
    export LIBREYOLO_DATASETS="$shared"
    expect_exit 0 train data=coco8 model=yolo9-t epochs=1 batch=8 imgsz=160 workers=2 device=0,1 project="$WORK/runs" name=ddp json=true
    expect_in "$WORK/err" "2 processes (torchrun), nccl backend"
    [ -f "$WORK/runs/ddp/weights/last.pt" ] || fail "device=0,1 left no last.pt"
  fi
else
  echo "one GPU: the two-rank NCCL checks need two (skipped inside this test)"
fi
finish
