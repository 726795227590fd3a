# The profiler on a CUDA run: CUPTI kernels in the trace, GPU utilisation measured, a GPU verdict
# (not "unknown"), peak VRAM from the caching allocator, kernels attributed to forward/backward,
# and launch->kernel flows in the trace; no operator in the step that makes the host wait for the GPU
# (item, nonzero, ...). Skips (77) without a GPU or coco8.
. "$(dirname "$0")/../cli/lib.sh"
require_gpu coco8

for amp in --amp --no-amp; do
  expect_exit 0 profile run coco8 --device 0 --batch 4 --imgsz 320 --workers 2 --steps 10 --warmup 3 $amp --project "prof$amp" --json
  p="$WORK/out"
  python3 - "$p" <<'PY' || fail "CUDA profile checks ($amp)"
import json, sys
p = json.load(open(sys.argv[1]))
print({k: p.get(k) for k in ("bound", "gpu_util", "kernels_per_step", "mean_kernel_us", "peak_vram_mb", "memcpy_ms_per_step", "tensorcore_pct", "host_syncs_per_step", "host_sync_ops")})
assert p["device_kind"] == "cuda", p["device_kind"]
assert p["gpu_trace"]["available"], p["gpu_trace"]
assert p["bound"] in ("compute", "host / launch", "dataloader", "memory-pressure"), p["bound"]
assert p["kernels_per_step"] > 10, p["kernels_per_step"]
assert 0 < p["gpu_util"] <= 1, p["gpu_util"]
assert p["peak_vram_mb"] > 1, p["peak_vram_mb"]
phases = {r["phase"]: r for r in p["phases"]}
assert phases["forward"]["kernels_per_step"] > 0 and phases["backward"]["kernels_per_step"] > 0, phases
assert p["host_syncs_per_step"] == 0, p["host_sync_ops"]
PY
  grep -q '"cat":"kernel"' "prof$amp/prof/profile_trace.json" || fail "no kernel events in the trace"
  grep -q '"cat":"ac2g"' "prof$amp/prof/profile_trace.json" || fail "no launch->kernel flows in the trace"
  expect_exit 0 profile kernels "prof$amp/prof/profile.json" --top 5
  expect_in "$WORK/out" "kernel [category]"
done
finish
