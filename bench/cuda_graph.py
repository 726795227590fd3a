"""CUDA-graph training on a GPU: the profiled step eager against graphed (`libreyolo profile run
--cuda_graph`), YOLOv9-t and YOLOX-s at batch 8 and imgsz 640 with float16 AMP. Prints one JSON
line per model: the median real step time of each mode over --repeat trials, the speed-up, the
kernel launches per step, peak VRAM (the graph's pool included) and the verdict before and after.

    python3 bench/cuda_graph.py [--repeat 3] [--batch 8] [--imgsz 640] [--models yolo9-t,yolox-s]

Needs a CUDA device and coco128 (or --data); exits 77 without them.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

from machine import OURS, cpu_model, require_dataset


def gpu_count():
    done = subprocess.run([str(OURS), "checks", "--json"], capture_output=True, text=True)
    return json.loads(done.stdout).get("gpu_count", 0) if done.returncode == 0 else 0


def profile(work, args, model, graphed, trial):
    command = [str(OURS), "profile", "run", args.data, "--model", model, "--batch", str(args.batch), "--imgsz",
               str(args.imgsz), "--workers", "8", "--amp", "--device", "0", "--steps", "20", "--warmup", "8",
               "--project", str(work / f"{model}_{int(graphed)}_{trial}"), "--json"]
    if graphed:
        command.append("--cuda_graph")
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{model} graphed={graphed} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout), done.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--models", default="yolo9-t,yolox-s")
    parser.add_argument("--data", default="coco128")
    args = parser.parse_args()
    if gpu_count() == 0:
        print("no CUDA device: skipped", file=sys.stderr)
        sys.exit(77)
    if args.data == "coco128":
        require_dataset("coco128")
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        for model in args.models.split(","):
            runs = {False: [], True: []}
            captured = True
            for trial in range(args.repeat):  # interleaved: drift hits both modes alike
                for graphed in (False, True):
                    p, log = profile(work, args, model, graphed, trial)
                    runs[graphed].append(p)
                    if graphed and "captured training forward/backward" not in log:
                        captured = False
            step = {g: statistics.median(p["step_ms"] for p in runs[g]) for g in runs}
            last = {g: runs[g][-1] for g in runs}
            print(json.dumps({
                "model": model, "batch": args.batch, "imgsz": args.imgsz, "amp": "float16", "repeat": args.repeat,
                "gpu": last[False]["config"].get("device"), "cpu": cpu_model(),
                "step_ms_eager": round(step[False], 2), "step_ms_graphed": round(step[True], 2),
                "speedup": round(step[False] / step[True], 3), "captured": captured,
                "launches_per_step": {"eager": last[False].get("launches_per_step"), "graphed": last[True].get("launches_per_step")},
                "peak_vram_mb": {"eager": last[False].get("peak_vram_mb"), "graphed": last[True].get("peak_vram_mb")},
                "bound": {"eager": last[False].get("bound"), "graphed": last[True].get("bound")},
            }), flush=True)


if __name__ == "__main__":
    main()
