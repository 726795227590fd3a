"""CUDA-graph training on a GPU: the profiled step eager against graphed (`libreyolo profile run
--cuda_graph`) at each boundary (cuda_graph_scope): the network's forward and backward (`network`,
LibreYOLO's), + the loss (`loss`, YOLOv9), + the optimizer step (`optimizer`), + EMA (`step`), YOLOv9-t and YOLOX-s at batch 8 and imgsz 640 with float16
AMP. Prints one JSON line per model: the median real step time of each mode over --repeat trials,
the speed-ups, the kernel launches per step, peak VRAM (the graphs' pool included) and the verdicts.

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


MODES = ("eager", "network", "loss", "optimizer", "step")


def profile(work, args, model, mode, trial):
    command = [str(OURS), "profile", "run", args.data, "--model", model, "--batch", str(args.batch), "--imgsz",
               str(args.imgsz), "--workers", "8", "--amp", "--device", "0", "--steps", "20", "--warmup", "8",
               "--project", str(work / f"{model}_{mode}_{trial}"), "--json"]
    if mode != "eager":
        command += ["--cuda_graph", "--cuda_graph_scope", mode]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{model} {mode} failed ({done.returncode}): {done.stderr[-2000:]}")
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
            runs = {mode: [] for mode in MODES}
            captured = {mode: True for mode in MODES if mode != "eager"}
            for trial in range(args.repeat):  # interleaved: drift hits every mode alike
                for mode in MODES:
                    p, log = profile(work, args, model, mode, trial)
                    runs[mode].append(p)
                    if mode != "eager" and "cuda_graph: captured" not in log:
                        captured[mode] = False
                    if mode in ("optimizer", "step") and "captured the optimizer step" not in log:
                        captured[mode] = False
            step = {m: statistics.median(p["step_ms"] for p in runs[m]) for m in MODES}
            last = {m: runs[m][-1] for m in MODES}
            print(json.dumps({
                "model": model, "batch": args.batch, "imgsz": args.imgsz, "amp": "float16", "repeat": args.repeat,
                "gpu": last["eager"]["config"].get("device"), "cpu": cpu_model(),
                "step_ms": {m: round(step[m], 2) for m in MODES},
                "speedup": {m: round(step["eager"] / step[m], 3) for m in MODES if m != "eager"},
                "captured": captured,
                "launches_per_step": {m: last[m].get("launches_per_step") for m in MODES},
                "peak_vram_mb": {m: last[m].get("peak_vram_mb") for m in MODES},
                "bound": {m: last[m].get("bound") for m in MODES},
            }), flush=True)

if __name__ == "__main__":
    main()
