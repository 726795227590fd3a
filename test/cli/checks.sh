# `libreyolo checks` / `version` report the build and the machine; on this CPU machine: no GPU.
. "$(dirname "$0")/lib.sh"

expect_exit 0 checks
for field in "libreyolo " "LibTorch    2.11" "CUDA " "cuDNN" "NCCL" "CUPTI" "GPUs " "CPU threads" "OpenCV" "malloc "; do
  expect_in "$WORK/out" "$field"
done
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect_in "$WORK/out" "no CUDA device"
fi

expect_exit 0 version --json
expect_in "$WORK/out" '"torch_version": "2.11.0"'
expect_in "$WORK/out" '"gpu_count":'
expect_in "$WORK/out" '"cupti_compiled":'
expect_in "$WORK/out" '"git_revision":'
# the malloc the build linked (-Dtcmalloc) is the one the process runs on
expect_in "$WORK/out" "\"allocator\": \"${LIBREYOLO_MALLOC:-tcmalloc}"

# --version is the same command; a bad flag is a usage error
expect_exit 0 --version
expect_exit 2 checks --frobnicate
finish
