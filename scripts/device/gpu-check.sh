#!/bin/bash
# The GPU checks of issue 14, in one command for the device tool (a lent GPU machine: torch
# 2.11.0+cu130 in its python3, no meson, no Debian -dev packages, nothing reachable). Needs the
# bundle that scripts/device/bundle.sh made here:
#
#   device run: command="bash scripts/device/gpu-check.sh", carry=[".device"], timeout_s=580
#
# Stages, in order, each given what is left of $DEADLINE seconds (default 540), its output written
# to $OUT as it goes (so that a stage cut off still reports the ones before it):
#   env      GPU, driver, CPU, `libreyolo checks` (env.txt)
#   tests    the gpu suite through scripts/device/run_tests.py (gpu-tests.txt, whole logs in gpu-tests.log)
#   graphs   bench/cuda_graph.py: eager and each cuda_graph_scope, yolo9-t then yolox-s (cuda_graph.jsonl)
#   vs       bench/train_speed.py --cuda-graph: ours and LibreYOLO 1.6.0, eager and graphed (train_speed.jsonl)
#   classify bench/cuda_graph.py --classify: mobilenetv4-s and resnet-18 at 224, batch 16, eager against
#            graphed, float16 and float32, peak VRAM (classify_graph.jsonl; LibreYOLO's guide: 2.74x / 3.61x,
#            ResNet-18 0.48 -> 0.57 GB)
#   cpu      only where the host CPU has AMX (amx_bf16): a coco128 epoch of yolo9-t at 640 on the CPU in
#            float32 and in bfloat16 (cpu_bf16.jsonl), and the bf16 step's operators from our profiler
#            (cpu_bf16_ops.txt): the CPU half of issue 14's point 3, which a machine without AMX cannot measure
# then graphs for yolox-s. STAGES="tests graphs" runs a subset, TESTS_ONLY=name,... some of the gpu suite, and
# TESTS_S, GRAPHS_S, VS_S set the stages' limits in seconds.
set -u
start=$SECONDS
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bundle=$root/.device
out=${OUT:-$bundle/out}
mkdir -p "$out"
deadline=${DEADLINE:-540}
[ -f "$bundle/tests.json" ] || { echo "no $bundle/tests.json: run scripts/device/bundle.sh first and carry .device"; exit 2; }

torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))') || { echo "python3 has no torch"; exit 2; }
site=$(dirname "$torch_dir")
export LD_LIBRARY_PATH="$bundle/lib:$torch_dir/lib:$site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBREYOLO="$bundle/build/tools/libreyolo/libreyolo" LIBREYOLO_DATASETS="$bundle/datasets" PYTHONUNBUFFERED=1

left() { echo $((deadline - (SECONDS - start))); }
stage() {  # name, seconds it may take at most, command...
  local name=$1 most=$2 budget
  shift 2
  budget=$(left)
  ((budget > most)) && budget=$most
  if ((budget < 20)); then echo "== $name: skipped, $(left) s left" >&2; return; fi
  echo "== $name (at most $budget s, $(left) s left)" >&2
  timeout -k 10 "$budget" "$@"
  echo "== $name: exit $? after $((SECONDS - start)) s" >&2
}
wants() { [[ " ${STAGES:-env tests graphs vs classify cpu} " == *" $1 "* ]]; }

if wants env; then
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores); $(grep -o -m1 'amx_bf16' /proc/cpuinfo || echo 'no amx_bf16')"
    python3 -c 'import torch; print("python torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
    "$LIBREYOLO" version
    "$LIBREYOLO" checks --json
  } >"$out/env.txt" 2>&1
  cat "$out/env.txt"
fi
wants tests && stage tests ${TESTS_S:-300} python3 scripts/device/run_tests.py ${TESTS_ONLY:+--only "$TESTS_ONLY"} --log "$out/gpu-tests.log" | tee "$out/gpu-tests.txt"
wants graphs && stage graphs ${GRAPHS_S:-150} python3 bench/cuda_graph.py --repeat 1 --models yolo9-t | tee "$out/cuda_graph.jsonl"
if wants classify; then
  for precision in "" --fp32; do
    stage classify${precision} ${CLASSIFY_S:-90} python3 bench/cuda_graph.py --classify --repeat 1 --modes eager,network,step \
      --models mobilenetv4-s,resnet-18 --batch 16 --imgsz 224 $precision | tee -a "$out/classify_graph.jsonl"
  done
fi
if wants vs; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/reference "$bundle"/wheels/*.whl; then
    PYTHONPATH=/tmp/reference${PYTHONPATH:+:$PYTHONPATH} stage vs ${VS_S:-150} python3 bench/train_speed.py --device 0 --workers 8 \
      --imgsz 640 --batch 8 --amp-dtype float16 --epochs 3 --repeat 1 --cuda-graph --models yolo9-t \
      --reference-python python3 | tee "$out/train_speed.jsonl"
  else
    echo "== vs: the reference's wheels did not install"
  fi
fi
cpu_bf16() {
  local threads amp
  threads=$(nproc)
  for amp in none bfloat16; do
    python3 bench/train_speed.py --device cpu --workers 4 --imgsz 640 --batch 8 --amp-dtype "$amp" --epochs 1 --repeat 1 \
      --models yolo9-t --skip-reference | tee -a "$out/cpu_bf16.jsonl"
  done
  "$LIBREYOLO" train model=yolo9-t data=coco128 imgsz=640 batch=8 epochs=1 device=cpu workers=4 val=false amp=true \
    amp_dtype=bfloat16 profile=true profile_steps=8 profile_then_stop=true project=/tmp/cpu-profile name=bf16 quiet=true \
    && "$LIBREYOLO" profile ops /tmp/cpu-profile/bf16 --top 40 >"$out/cpu_bf16_ops.txt" 2>&1 \
    && "$LIBREYOLO" profile phases /tmp/cpu-profile/bf16 >>"$out/cpu_bf16_ops.txt" 2>&1
  echo "$threads CPU threads"
}
if wants cpu; then
  if grep -q amx_bf16 /proc/cpuinfo; then
    export -f cpu_bf16
    export out
    stage cpu 200 bash -c cpu_bf16
  else
    echo "== cpu: the host CPU has no AMX (amx_bf16): skipped" >&2
  fi
fi
wants graphs && stage graphs-yolox 120 python3 bench/cuda_graph.py --repeat 1 --models yolox-s | tee -a "$out/cuda_graph.jsonl"
echo "done after $((SECONDS - start)) s"
