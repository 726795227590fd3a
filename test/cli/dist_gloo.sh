# Data-parallel process groups on c10d's Gloo backend, on 127.0.0.1 only: two ranks started by
# hand with torchrun's variables, by torchrun itself (the test venv's), with a hand-set Slurm
# environment, and two "nodes" of one rank each; then the failures: a taken port and a rank that
# never comes, each a clear message within the timeout, never a hang. Each rank of dist_selftest
# also checks sync_bn against BatchNorm over the global batch, and the sharded validation against
# one process's (test/dist/dist_selftest.cpp).
. "$(dirname "$0")/lib.sh"
: "${DIST_SELFTEST:?}"
python=${LIBREYOLO_PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || python=python3
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run_ranks NAME VARS0 -- VARS1 : both ranks in the background, each with its own variables
run_ranks() {
  name=$1; shift
  env $1 timeout 60 "$DIST_SELFTEST" 20 >"$name.0" 2>&1 & p0=$!
  env $2 timeout 60 "$DIST_SELFTEST" 20 >"$name.1" 2>&1 & p1=$!
  wait $p0; c0=$?; wait $p1; c1=$?
  if [ "$c0" -ne 0 ] || [ "$c1" -ne 0 ]; then fail "$name: ranks exited $c0 and $c1"; cat "$name.0" "$name.1"; fi
}

port=$(free_port)
run_ranks torchrun_vars "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" \
  "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port"
expect_in torchrun_vars.0 "rank 0/2 ok (torchrun, local rank 0"
expect_in torchrun_vars.1 "rank 1/2 ok (torchrun, local rank 1"

port=$(free_port)
run_ranks slurm "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST=localhost MASTER_PORT=$port" \
  "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NODELIST=localhost MASTER_PORT=$port"
expect_in slurm.1 "rank 1/2 ok (slurm, local rank 1, master localhost:$port;"

# three ranks: the means and the no_sync window hold for any world size
port=$(free_port)
for r in 0 1 2; do
  RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$DIST_SELFTEST" 20 >three.$r 2>&1 &
done
wait
for r in 0 1 2; do expect_in three.$r "rank $r/3 ok"; done

# two nodes of one rank each, as torchrun --nnodes 2 sets them
port=$(free_port)
run_ranks nodes "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" \
  "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port"
expect_in nodes.1 "rank 1/2 ok (torchrun, local rank 0"

# the real launcher
torchrun=$(dirname "$python")/torchrun
if [ -x "$torchrun" ]; then
  port=$(free_port)
  timeout 90 "$torchrun" --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" --no-python "$DIST_SELFTEST" 20 \
    >torchrun.out 2>&1 || { fail "torchrun exited $?"; cat torchrun.out; }
  expect_in torchrun.out "rank 0/2 ok (torchrun"
  expect_in torchrun.out "rank 1/2 ok (torchrun"
else
  echo "note: no torchrun at $torchrun; the launcher run is left out"
fi

# the self-spawn launcher (what device=0,1 will use): a free port of its own, rank 0's lines as
# they are and the others' prefixed; a failing rank stops the others and is named; SIGTERM reaches
# every rank once
if [ -n "${DIST_SPAWN:-}" ]; then
  timeout 60 "$DIST_SPAWN" 2 "$DIST_SELFTEST" 20 >spawn.out 2>&1 || { fail "dist_spawn exited $?"; cat spawn.out; }
  grep -q "^rank 0/2 ok (torchrun" spawn.out || { fail "rank 0's line is not unprefixed"; cat spawn.out; }
  expect_in spawn.out "[rank 1] rank 1/2 ok (torchrun, local rank 1, master 127.0.0.1:"
  start=$(date +%s)
  timeout 60 "$DIST_SPAWN" 2 /bin/sh -c 'if [ "$RANK" = 1 ]; then echo boom; exit 5; fi; echo "rank $RANK waits"; sleep 50' \
    >failed.out 2>&1
  code=$?
  [ "$code" -eq 5 ] || { fail "a failed rank gave exit $code, expected its 5"; cat failed.out; }
  [ $(( $(date +%s) - start )) -lt 20 ] || fail "the other rank was not stopped after rank 1 failed"
  expect_in failed.out "libreyolo: error: rank 1 failed with exit code 5; the other ranks were stopped. Its last lines:"
  expect_in failed.out "  | boom"
  "$DIST_SPAWN" 2 /bin/sh -c 'trap "echo rank \$RANK got TERM; exit 143" TERM; echo "rank $RANK up"; sleep 50 & wait' \
    >term.out 2>&1 &
  launcher=$!
  for _ in $(seq 100); do [ "$(grep -c ' up$' term.out 2>/dev/null)" -eq 2 ] && break; sleep 0.1; done
  kill -TERM "$launcher"
  wait "$launcher"; code=$?
  [ "$code" -eq 143 ] || { fail "SIGTERM to the launcher gave exit $code, expected 143"; cat term.out; }
  expect_in term.out "rank 0 got TERM"
  expect_in term.out "[rank 1] rank 1 got TERM"
  [ "$(grep -c 'got TERM' term.out)" -eq 2 ] || { fail "each rank should get SIGTERM once"; cat term.out; }
  # SIGTERM to one rank alone: it saves, the ranks stop together, each exiting 143 by itself (as
  # training does): a stop, not a failure; a rank the signal killed outright is a failure
  timeout 60 "$DIST_SPAWN" 2 /bin/sh -c 'if [ "$RANK" = 1 ]; then exit 143; fi; sleep 1; exit 143' >rank_term.out 2>&1
  code=$?
  [ "$code" -eq 143 ] || { fail "SIGTERM to rank 1 alone gave exit $code, expected 143"; cat rank_term.out; }
  expect_in rank_term.out "libreyolo: rank 1 received SIGTERM: the ranks saved and stopped together"
  grep -q "failed" rank_term.out && { fail "a rank's own stop on SIGTERM was called a failure"; cat rank_term.out; }
  timeout 60 "$DIST_SPAWN" 2 /bin/sh -c 'if [ "$RANK" = 1 ]; then kill -TERM $$; fi; sleep 50' >rank_killed.out 2>&1
  code=$?
  [ "$code" -eq 143 ] || { fail "rank 1 killed by SIGTERM gave exit $code, expected 143"; cat rank_killed.out; }
  expect_in rank_killed.out "rank 1 failed with exit code 143; the other ranks were stopped. It was killed by SIGTERM."
fi

env SLURM_PROCID=0 SLURM_NTASKS=1 "$LIBREYOLO" train model=yolo9-t data=nowhere.yaml epochs=1 >slurm1.out 2>&1
code=$?  # one Slurm task is plain training: here it reaches the data check
[ "$code" -eq 3 ] || { fail "train as the one Slurm task exited $code, expected 3 (no such data)"; cat slurm1.out; }

# a taken port: rank 0 cannot serve the rendezvous
"$python" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' >busy_port &
holder=$!
for _ in $(seq 50); do [ -s busy_port ] && break; sleep 0.1; done
port=$(cat busy_port)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$DIST_SELFTEST" 5 >taken.out 2>&1
code=$?
kill "$holder" 2>/dev/null
[ "$code" -eq 1 ] || { fail "a taken port exited $code, expected 1"; cat taken.out; }
expect_in taken.out "master_port $port is in use (another training?): pass master_port=<free port> or let libreyolo pick one"

# a rank that never comes: rank 0 gives up after the timeout with a message
port=$(free_port)
start=$(date +%s)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$DIST_SELFTEST" 3 >alone.out 2>&1
code=$?
[ "$code" -eq 1 ] || { fail "a missing rank exited $code, expected 1"; cat alone.out; }
[ $(( $(date +%s) - start )) -lt 30 ] || fail "a missing rank took more than 30 s with a 3 s timeout"
expect_in alone.out "did not complete within 3 s"
finish
