# Shared helpers for the CLI tests (POSIX sh). $LIBREYOLO is the built binary.
set -u
: "${LIBREYOLO:?set LIBREYOLO to the built binary}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 99
FAILED=0

fail() { echo "FAIL: $*"; FAILED=1; }

# expect_exit CODE ARGS... : run libreyolo, keep stdout/stderr in $WORK/out, $WORK/err
expect_exit() {
  want=$1; shift
  "$LIBREYOLO" "$@" >"$WORK/out" 2>"$WORK/err"
  got=$?
  [ "$got" -eq "$want" ] || { fail "libreyolo $* exited $got, expected $want"; sed 's/^/  stderr: /' "$WORK/err"; }
}

expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" || { fail "expected '$2' in $(basename "$1")"; sed 's/^/  | /' "$1" | head -20; }
}

expect_lines() {  # expect_lines FILE N
  n=$(wc -l <"$1")
  [ "$n" -eq "$2" ] || { fail "expected $2 line(s) in $(basename "$1"), got $n"; sed 's/^/  | /' "$1"; }
}

wait_for() {  # wait_for FILE REGEX : until a line of FILE matches (at most 60 s); 1 if none does
  for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "waited 60 s for '$2' in $1"; return 1
}

# GPU tests: exit 77 (skipped) without a CUDA device, or without the dataset NAME when one is named
# (under $LIBREYOLO_DATASETS, default ../shared/datasets, then exported).
require_gpu() {
  gpus=$("$LIBREYOLO" checks --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["gpu_count"])')
  [ "${gpus:-0}" -gt 0 ] || { echo "skipped: no CUDA device"; exit 77; }
  [ $# -eq 0 ] && return 0
  shared="${LIBREYOLO_DATASETS:-${LIBREYOLO_SOURCE_ROOT:?}/../shared/datasets}"
  [ -d "$shared/$1" ] || { echo "skipped: $shared/$1 not present"; exit 77; }
  export LIBREYOLO_DATASETS="$shared"
}

finish() {
  [ "$FAILED" -eq 0 ] && echo "ok" || echo "some checks failed"
  exit "$FAILED"
}
