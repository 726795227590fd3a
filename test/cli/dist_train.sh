# Data-parallel training on the CPU (Gloo), every process on 127.0.0.1:
#  - gradient parity: 2 ranks x 4 images give the losses, weights and BatchNorm statistics of one
#    process x 8 on the same samples (sync_bn=true, per-sample augmentation), without and with
#    accumulation (nbs), to a relative 1e-3 (measured: about 1e-5); over 3 epochs with windows cut
#    by the epoch's end, and resumed in 1 process after 2 epochs on 2, to the larger of 1e-4 and 3x
#    one process's 2 threads against 1;
#  - the distributed validation's mAP equals `libreyolo val` of the same weights in one process;
#  - the four launches (nproc_per_node, torchrun, two "nodes", Slurm) each leave one normal run folder;
#    cache=ram with two ranks on a machine holds one copy in shared memory;
#  - the profiler: `profile run --nproc_per_node 2` and under torchrun, one profile with every
#    rank's step time and the time in collectives;
#  - RT-DETR with a rank whose batch holds no target (a parameter without a gradient there);
#  - the failures: an indivisible batch, missing GPUs, a port in use, a rank killed mid-epoch,
#    Ctrl-C to the launcher then resume (same world size and another).
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
python=${LIBREYOLO_PYTHON:-python3}
compare=${LIBREYOLO_SOURCE_ROOT:?}/test/dist/compare_runs.py
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rows() { tail -n +2 "$1/results.csv" | wc -l; }
column() {  # column RUN NAME : the last row's value
  "$python" -c 'import csv, sys; print(list(csv.DictReader(open(sys.argv[1] + "/results.csv")))[-1][sys.argv[2]])' "$1" "$2"
}

"$LIBREYOLO" data synth out=ds synth_images=32 synth_val_images=8 synth_size=64 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
common="model=yolo9-t data=ds/data.yaml imgsz=64 workers=1 quiet=true project=runs"
# A start whose class scores are apart: an untrained head's near-equal scores let the label
# assignment (top-k) flip on float rounding, and the runs would part for that reason alone.
expect_exit 0 train $common epochs=10 batch=8 val=false name=warm
parity="$common pretrained=runs/warm/weights/last.pt batch=8 sync_bn=true mosaic=0 mixup=0 warmup_epochs=0"

# 1. parity without accumulation (one step per batch), 2. with it (nbs=16: two batches a step)
for case in "plain nbs=8 epochs=1 val=false" "accumulated nbs=16 epochs=2 eval_interval=1"; do
  name=${case%% *}; args=${case#* }
  expect_exit 0 train $parity $args name="$name-one"
  timeout 180 "$LIBREYOLO" train $parity $args name="$name-two" nproc_per_node=2 quiet=false >"$name.out" 2>&1 \
    || { fail "$name: the 2-rank run exited $?"; sed 's/^/  | /' "$name.out" | tail -20; }
  "$python" "$compare" runs/warm/weights/last.pt "runs/$name-one" "runs/$name-two" 1e-3 >"$name.parity" 2>&1 \
    || { fail "$name: 2 ranks x 4 differ from 1 x 8"; cat "$name.parity"; }
  sed "s/^/  $name: /" "$name.parity"
done
# 3. across epoch boundaries: 3 epochs of 4 batches, nbs=24 (windows of 3 batches: each epoch's 4th
#    batch is a window of its own, cut short by the epoch's end, as LibreYOLO's), 6 optimizer steps;
#    4. resume across world sizes: 2 epochs, then resumed for a 3rd (epochs=3), first in 1 process then
#    with 2 processes for the first 2 epochs. One world size repeats itself exactly; another differs by
#    float rounding alone (the order of the sums), which these 6 steps amplify as they amplify a
#    thread count's: measured 9.8e-6 of the change training made on an Intel Xeon (2 threads against
#    1: 8.4e-6), and on a 2-core AMD EPYC 4.0e-5 with the unfused sync_bn, 1.0e-4 with the fused
#    one, against 1.6e-3 for 2 threads against 1. The tolerance is the larger of 1e-4 and 3x this
#    run's own thread figure (as test/slow/world_size_parity.sh); a defect (a per-rank normaliser,
#    an unsynced norm) is 1e-2 to 1. (From an untrained start the same rounding grows into 1e-2
#    within 3 steps, a thread count as much as a world size: the assignment's near-ties flip, hence
#    the warm start.)
boundary="$parity nbs=24 val=false"
expect_exit 0 train $boundary epochs=3 name=boundary-one
OMP_NUM_THREADS=2 "$LIBREYOLO" train $boundary epochs=3 name=boundary-threads >/dev/null 2>&1 \
  || fail "boundary: the 2-thread run exited $?"
"$python" "$compare" runs/warm/weights/last.pt runs/boundary-one runs/boundary-threads 1 >threads.parity 2>&1
sed "s/^/  boundary, 2 threads against 1 (baseline): /" threads.parity
tolerance=$("$python" -c 'import re, sys
found = re.search(r"weights: .* = ([0-9.e+-]+)", open(sys.argv[1]).read())
print(max(1e-4, 3 * float(found.group(1))) if found else 1e-4)' threads.parity)
timeout 180 "$LIBREYOLO" train $boundary epochs=3 name=boundary-two nproc_per_node=2 >boundary.out 2>&1 \
  || { fail "boundary: the 2-rank run exited $?"; tail -20 boundary.out; }
"$python" "$compare" runs/warm/weights/last.pt runs/boundary-one runs/boundary-two "$tolerance" >boundary.parity 2>&1 \
  || { fail "boundary: 2 ranks x 4 differ from 1 x 8 over 3 epochs"; cat boundary.parity; }
sed "s/^/  boundary: /" boundary.parity
for world in 1 2; do
  timeout 180 "$LIBREYOLO" train $boundary epochs=2 name=resumed-$world nproc_per_node=$world >resumed-$world.out 2>&1 \
    || { fail "resume parity: the first 2 epochs in $world process(es) exited $?"; tail -20 resumed-$world.out; }
  expect_exit 0 train model=runs/resumed-$world/weights/last.pt resume=true epochs=3 nproc_per_node=1
  [ "$(rows runs/resumed-$world)" -eq 3 ] || fail "resume parity: expected 3 epochs in runs/resumed-$world/results.csv"
done
"$python" "$compare" runs/warm/weights/last.pt runs/resumed-1 runs/resumed-2 "$tolerance" >resumed.parity 2>&1 \
  || { fail "resume parity: 2 epochs on 2 ranks then 1 process differ from 1 process throughout"; cat resumed.parity; }
sed "s/^/  resumed across world sizes: /" resumed.parity

expect_in accumulated.out "Data-parallel training: 2 processes (torchrun), gloo backend, 4 images per process"
expect_in accumulated.out "sync_bn: "
expect_in accumulated.out "Gradient sync: "
grep -q '^\[rank 1\]' accumulated.out && { fail "rank 1 printed to the console"; grep '^\[rank 1\]' accumulated.out | head -5; }
[ -d runs/accumulated-two2 ] && fail "rank 1 made a run folder of its own"
expect_in runs/accumulated-two/status.json '"world_size": 2'

# the sharded validation, gathered, equals one process validating the same weights
"$LIBREYOLO" val model=runs/accumulated-two/weights/last.pt data=ds/data.yaml imgsz=64 batch=8 iou=0.65 json=true \
  quiet=true >val.json 2>val.err || { fail "val exited $?"; cat val.err; }
"$python" - runs/accumulated-two val.json <<'PY' || fail "the distributed validation differs from one process's"
import csv, json, sys
row = list(csv.DictReader(open(sys.argv[1] + "/results.csv")))[-1]
val = json.load(open(sys.argv[2]))
for key in ("metrics/mAP50-95", "metrics/mAP50", "metrics/precision", "metrics/recall"):
    a, b = float(row[key]), val[key]
    print(f"  validation {key}: 2 ranks {a}, one process {b}")
    if abs(a - b) > 1e-6:
        sys.exit(1)
PY
# (this tiny model's mAP may be 0; dist_selftest compares the gathered detections one by one)

short="$common epochs=1 batch=4 val=false"
# torchrun (the test venv's), two "nodes" of one rank each, and Slurm's variables: one run folder each
torchrun=$(dirname "$python")/torchrun
if [ -x "$torchrun" ]; then
  port=$(free_port)
  timeout 120 "$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no-python \
    "$LIBREYOLO" train $short name=torchrun >torchrun.out 2>&1 || { fail "torchrun exited $?"; tail -20 torchrun.out; }
  [ "$(rows runs/torchrun)" -eq 1 ] || fail "torchrun: expected one epoch in results.csv"
else
  fail "no torchrun next to $python: the test venv is incomplete (scripts/setup.sh)"
fi
port=$(free_port)
timeout 120 "$LIBREYOLO" train $short name=nodes nnodes=2 node_rank=1 master_port="$port" >node1.out 2>&1 & n1=$!
timeout 120 "$LIBREYOLO" train $short name=nodes nnodes=2 node_rank=0 master_port="$port" quiet=false >node0.out 2>&1 \
  || { fail "node 0 exited $?"; tail -20 node0.out; }
wait "$n1" || { fail "node 1 exited $?"; tail -20 node1.out; }
[ "$(rows runs/nodes)" -eq 1 ] || fail "two nodes: expected one epoch in results.csv"
expect_in node0.out "world size 2, node 0 of 2"
port=$(free_port)
for r in 1 0; do
  env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST=127.0.0.1 \
    MASTER_PORT=$port timeout 120 "$LIBREYOLO" train $short name=slurm quiet=false cache=ram >slurm$r.out 2>&1 &
  eval "s$r=\$!"
done
wait "$s0" || { fail "Slurm task 0 exited $?"; tail -20 slurm0.out; }
wait "$s1" || { fail "Slurm task 1 exited $?"; tail -20 slurm1.out; }
expect_in slurm0.out "2 processes (slurm)"
# cache=ram: two ranks on one machine share one copy in /dev/shm; local rank 0 says so, once, and
# nothing of it is left behind
expect_in slurm0.out "in shared memory, one copy for the 2 processes on this machine"
grep -q "one copy for the 2 processes" slurm1.out && fail "local rank 1 repeated the cache=ram line"
ls /dev/shm | grep -q '^libreyolo-' && fail "cache=ram left shared memory behind: $(ls /dev/shm | grep '^libreyolo-')"
[ "$(rows runs/slurm)" -eq 1 ] || fail "Slurm: expected one epoch in results.csv"
ls runs | grep -Eq '^(torchrun|nodes|slurm)[0-9]' && fail "a rank made a run folder of its own: $(ls runs)"

# the profiler under DDP: every rank profiles the same window, rank 0 writes one profile with every
# rank's step time and the collectives' time (sync_bn=true: two all-reduces per BatchNorm and pass)
expect_exit 0 profile run ds/data.yaml --nproc_per_node 2 --batch 4 --imgsz 64 --workers 1 --steps 4 --warmup 1 \
  --sync_bn true --project prof --json
cp "$WORK/out" prof.json
"$python" - prof.json <<'PY' || fail "the data-parallel profile lacks its ranks or collectives"
import json, sys
p = json.load(open(sys.argv[1]))
d = p["distributed"]
print("  profile:", {k: d[k] for k in ("world_size", "rank_spread_pct", "collective_ms_per_step", "collective_frac")}, p["bound"])
assert d["world_size"] == 2 and [r["rank"] for r in d["ranks"]] == [0, 1], d
assert all(r["step_ms"] > 0 for r in d["ranks"]), d["ranks"]
assert d["slowest_rank"]["step_ms"] >= d["fastest_rank"]["step_ms"] > 0, d
assert d["collective_ms_per_step"] > 0 and d["collectives_from"].startswith("Gloo"), d
assert p["config"]["world_size"] == 2 and p["config"]["batch"] == 4 and p["config"]["batch_per_process"] == 2, p["config"]
assert p["bound"] in ("communication", "compute", "host / launch", "dataloader"), p["bound"]
assert p["metrics"]["collective_frac"] == d["collective_frac"]
PY
[ "$(ls prof)" = "prof" ] || fail "the data-parallel profile made more than one folder: $(ls prof)"
expect_exit 0 profile summary prof/prof
expect_in "$WORK/out" "2 ranks: slowest rank"
expect_in "$WORK/out" "collectives in flight"
if [ -x "$torchrun" ]; then  # under torchrun every rank runs `profile run`; rank 0 alone prints
  port=$(free_port)
  timeout 120 "$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no-python \
    "$LIBREYOLO" profile run ds/data.yaml --batch 4 --imgsz 64 --workers 1 --steps 4 --warmup 1 --sync_bn false \
    --project tprof >tprof.out 2>&1 || { fail "profile run under torchrun exited $?"; tail -20 tprof.out; }
  [ "$(grep -c '^img/s:' tprof.out)" -eq 1 ] || fail "profile run under torchrun: expected one img/s line (rank 0's)"
  expect_in tprof/prof/profile.json '"world_size": 2'
fi

# failures: exit 2 before any process starts, a clear line each
expect_exit 2 train $short batch=5 nproc_per_node=2 name=odd
expect_in "$WORK/err" "batch=5 must be a multiple of the 2 data-parallel processes"
expect_in "$WORK/err" "use batch=4 or batch=6"
[ -d runs/odd ] && fail "the indivisible batch left a run folder"
expect_exit 2 train $short device=0,1 name=gpus
expect_in "$WORK/err" "no such CUDA device"
expect_exit 2 train $short nproc_per_node=2 dist_backend=nccl name=nccl
expect_in "$WORK/err" "dist_backend=nccl carries CUDA tensors only"
"$python" -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >busy_port &
holder=$!
for _ in $(seq 50); do [ -s busy_port ] && break; sleep 0.1; done
expect_exit 1 train $short nproc_per_node=2 master_port="$(cat busy_port)" name=busy
kill "$holder" 2>/dev/null
expect_in "$WORK/err" "master_port $(cat busy_port) is in use (another training?): pass master_port=<free port> or let libreyolo pick one"

# a rank killed mid-epoch: the launcher stops the other and names it, well within dist_timeout
long="$common batch=4 val=false epochs=50"
"$LIBREYOLO" train $long nproc_per_node=2 name=killed >killed.out 2>&1 & launcher=$!
if wait_for runs/killed/results.csv '^1,'; then
  for pid in $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx RANK=1 && kill -KILL "$pid"
  done
fi
start=$(date +%s)
wait "$launcher"; code=$?
[ "$code" -eq 137 ] || { fail "a killed rank gave launcher exit $code, expected 137"; tail -20 killed.out; }
[ $(( $(date +%s) - start )) -lt 40 ] || fail "the launcher took more than 40 s after rank 1 died"
expect_in killed.out "rank 1 failed with exit code 137; the other ranks were stopped. It was killed by SIGKILL. It printed nothing (ranks other than 0 print only warnings and errors"
# status.json says which rank failed and how, in words (not the transport's "[.../pair.cc:547] ...")
expect_in runs/killed/status.json '"state": "failed"'
expect_in runs/killed/status.json '"failed_rank": 1'
expect_in runs/killed/status.json 'rank 1 failed with exit code 137'
grep -q 'pair.cc\|\.cc:[0-9]' runs/killed/status.json && fail "status.json holds the transport's text: $(cat runs/killed/status.json)"

# rank 0 itself killed: nobody left to write status.json but the launcher, which does
"$LIBREYOLO" train $long nproc_per_node=2 name=killed0 >killed0.out 2>&1 & launcher=$!
if wait_for runs/killed0/results.csv '^1,'; then
  for pid in $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx RANK=0 && kill -KILL "$pid"
  done
fi
wait "$launcher"; code=$?
[ "$code" -eq 137 ] || { fail "a killed rank 0 gave launcher exit $code, expected 137"; tail -20 killed0.out; }
expect_in killed0.out "rank 0 failed with exit code 137; the other ranks were stopped. It was killed by SIGKILL"
expect_in runs/killed0/status.json '"state": "failed"'
expect_in runs/killed0/status.json '"failed_rank": 0'

# rank 1 hangs (stopped): rank 0 loses contact after dist_timeout and fails first, yet the launcher
# names rank 1, which did not end when asked
"$LIBREYOLO" train $long nproc_per_node=2 name=hung dist_timeout=8 >hung.out 2>&1 & launcher=$!
if wait_for runs/hung/results.csv '^1,'; then
  for pid in $(pgrep -P "$launcher"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx RANK=1 && kill -STOP "$pid"
  done
fi
wait "$launcher"; code=$?
[ "$code" -ne 0 ] || fail "a hung rank 1 gave launcher exit 0"
expect_in hung.out "rank 1 stopped responding: its peers lost contact with it (dist_timeout) and it did not end when asked"
grep -q "libreyolo: error: rank 0 failed" hung.out && fail "the launcher blamed rank 0 for rank 1's hang"
expect_in runs/hung/status.json '"failed_rank": 1'

# started by hand (as srun or a scheduler would, no launcher to stop it): when a rank dies, the
# other fails with a message well within dist_timeout instead of waiting in a collective
port=$(free_port)
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$LIBREYOLO" train $long name=orphan dist_timeout=20 \
  quiet=false >orphan0.out 2>&1 & r0=$!
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$LIBREYOLO" train $long name=orphan dist_timeout=20 \
  >orphan1.out 2>&1 & r1=$!
wait_for runs/orphan/results.csv '^1,' && kill -KILL "$r1"
start=$(date +%s)
wait "$r0"; code=$?
[ "$code" -ne 0 ] && [ "$code" -lt 128 ] || { fail "rank 0 without its peer exited $code, expected an error exit"; tail -5 orphan0.out; }
[ $(( $(date +%s) - start )) -lt 60 ] || fail "rank 0 took more than 60 s to notice that rank 1 died (dist_timeout=20)"
expect_in orphan0.out "libreyolo: error: rank 0 of 2 lost contact with another rank (Connection"
expect_in runs/orphan/status.json '"state": "failed"'
expect_in runs/orphan/status.json 'rank 0 of 2 lost contact with another rank'
sed 's/^/  orphan: /' orphan0.out | tail -2

# rank 0 killed with no launcher of ours to say so (torchrun, srun): rank 1 ends status.json's
# "running", saying that it lost contact and that rank 0 recorded nothing
port=$(free_port)
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$LIBREYOLO" train $long name=orphan0 dist_timeout=20 \
  >orphan00.out 2>&1 & r0=$!
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$LIBREYOLO" train $long name=orphan0 dist_timeout=20 \
  >orphan01.out 2>&1 & r1=$!
wait_for runs/orphan0/results.csv '^1,' && kill -KILL "$r0"
wait "$r1"; code=$?
[ "$code" -ne 0 ] && [ "$code" -lt 128 ] || { fail "rank 1 without rank 0 exited $code, expected an error exit"; tail -5 orphan01.out; }
expect_in runs/orphan0/status.json '"state": "failed"'
expect_in runs/orphan0/status.json 'rank 1 of 2 lost contact with another rank'
expect_in runs/orphan0/status.json 'rank 0 recorded no failure of its own'
expect_in runs/orphan0/status.json '"reported_by_rank": 1'

# Ctrl-C to the launcher: every rank stops at the same step, rank 0 saves last.pt, exit 130; then
# resume with the same world size, and (another run) with one process
for world in 2 1; do
  "$LIBREYOLO" train $common batch=4 val=false epochs=3 nproc_per_node=2 name=cut$world quiet=false >cut$world.out 2>&1 & launcher=$!
  wait_for runs/cut$world/results.csv '^1,' && kill -INT "$launcher"
  wait "$launcher"; code=$?
  [ "$code" -eq 130 ] || { fail "Ctrl-C to the launcher gave exit $code, expected 130"; tail -20 cut$world.out; }
  expect_in runs/cut$world/status.json '"state": "interrupted"'
  expect_in cut$world.out "SIGINT received"
  timeout 180 "$LIBREYOLO" train model=runs/cut$world/weights/last.pt resume=true nproc_per_node=$world >resume$world.out 2>&1 \
    || { fail "resume with $world process(es) exited $?"; tail -20 resume$world.out; }
  expect_in runs/cut$world/status.json '"state": "completed"'
  [ "$(rows runs/cut$world)" -eq 3 ] || fail "resumed with $world process(es): expected 3 epochs in results.csv"
done
# RT-DETR with batches that hold no target on one rank: its denoising embedding then gets no
# gradient there, and the reducer finds it from the loss (find_unused_parameters) instead of failing
mkdir -p dsbg/images/train dsbg/labels/train
n=0
for image in $(ls ds/images/train | head -8); do
  n=$((n + 1))
  cp "ds/images/train/$image" dsbg/images/train/
  label="ds/labels/train/${image%.*}.txt"
  if [ "$n" -le 2 ]; then cp "$label" dsbg/labels/train/; else : >"dsbg/labels/train/${image%.*}.txt"; fi
done
sed -e 's|^path:.*|path: '"$WORK"'/dsbg|' -e 's|^val:.*|val: images/train|' ds/data.yaml >dsbg/data.yaml
expect_exit 0 train model=rtdetr-r18 data=dsbg/data.yaml imgsz=128 batch=2 epochs=1 val=false workers=0 \
  nproc_per_node=2 project=runs name=detr_background quiet=true
[ "$(rows runs/detr_background)" -eq 1 ] || fail "RT-DETR with background batches on one rank: expected 1 epoch in results.csv"
finish
