# Fuzzes one reader with libFuzzer for a bounded time: fuzz.sh TARGET [SECONDS]
# The fuzzer build (clang, ASan + UBSan, -Dfuzzing=true) lives in $LIBREYOLO_BUILD_ROOT/fuzz and is
# configured and built on first use; the targets of one `meson test` share it under a lock.
# Exit 77 without clang's libFuzzer. New inputs stay in a scratch copy of the seed corpus; a crash
# input is kept in $LIBREYOLO_BUILD_ROOT/fuzz-findings/ and fails the test.
set -u
target=$1
seconds=${2:-${LIBREYOLO_FUZZ_SECONDS:-20}}
seed=${LIBREYOLO_FUZZ_SEED:-1}  # fixed in the test suite, so that a run is repeatable; 0 draws one
source_root=${LIBREYOLO_SOURCE_ROOT:?}
build_root=${LIBREYOLO_BUILD_ROOT:?}
fuzz_build=$build_root/fuzz
command -v clang++ >/dev/null 2>&1 || { echo "skipped: no clang++"; exit 77; }
runtime=$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)
[ -f "$runtime" ] || runtime=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -n 1)
[ -f "${runtime:-}" ] || { echo "skipped: clang has no libFuzzer runtime (Debian: libclang-rt-dev)"; exit 77; }

mkdir -p "$build_root"
(
  flock 9
  if [ ! -f "$fuzz_build/build.ninja" ]; then
    CXX="ccache clang++" meson setup "$fuzz_build" "$source_root" -Dfuzzing=true -Dwerror=false -Dbuildtype=debugoptimized \
      -Db_ndebug=false >"$build_root/fuzz-setup.log" 2>&1 || { cat "$build_root/fuzz-setup.log"; exit 1; }
  fi
  ninja -C "$fuzz_build" >"$build_root/fuzz-build.log" 2>&1 || { tail -n 40 "$build_root/fuzz-build.log"; exit 1; }
) 9>"$build_root/fuzz.lock" || { echo "FAIL: the fuzzer build failed"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/libreyolo_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$source_root/test/fuzz/corpus/$target" "$work/corpus"
mkdir -p "$work/artifacts"
# rss_limit: an input may not make a reader take more than 2 GB; malloc_limit: nor one allocation of 512 MB
LIBREYOLO_FUZZ_TARGET=$target LIBREYOLO_FUZZ_DIR=$work OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 \
  "$fuzz_build/test/fuzz/libreyolo_fuzz" -max_total_time="$seconds" -seed="$seed" -rss_limit_mb=2048 -malloc_limit_mb=512 \
  -max_len=65536 -timeout=10 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1
status=$?
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ +DONE" "$work/log" | sed "s/^/$target: /"
echo "$target: corpus $(ls "$work/corpus" | wc -l) inputs (seeds $(ls "$source_root/test/fuzz/corpus/$target" | wc -l))"
if [ "$status" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  mkdir -p "$build_root/fuzz-findings/$target"
  cp "$work/artifacts/"* "$build_root/fuzz-findings/$target/" 2>/dev/null
  grep -v "^#" "$work/log" | tail -n 60
  echo "FAIL: $target: libFuzzer exited $status; inputs kept in $build_root/fuzz-findings/$target/"
  exit 1
fi
exit 0
