"""CUDA-graph training on a GPU: the profiled step eager against graphed (`libreyolo profile run
--cuda_graph`) at each boundary (cuda_graph_scope): the network's forward and backward (`network`,
LibreYOLO's), + the loss (`loss`, YOLOv9), + the optimizer step (`optimizer`), + EMA (`step`), YOLOv9-t and YOLOX-s at batch 8 and imgsz 640 with float16
AMP (--fp32: float32). Prints one JSON line per model: the median real step time of each mode over --repeat trials,
the speed-ups, the kernel launches per step, peak VRAM (the graphs' pool included) and the verdicts.

    python3 bench/cuda_graph.py [--repeat 3] [--batch 8] [--imgsz 640] [--models yolo9-t,yolox-s] [--fp32]
    python3 bench/cuda_graph.py --classify --models mobilenetv4-s,resnet-18 --batch 16 --imgsz 224 [--fp32]

--classify trains the classifiers on coco128's boxes as an ImageFolder set (`libreyolo data
crops`), beside the training-performance guide's figures for LibreYOLO's: MobileNetV4-s at batch 16
gains 2.74x from CUDA graphs under AMP and 3.61x in float32; ResNet-18 at 224, batch 16 goes from
0.48 to 0.57 GB. Needs a CUDA device and coco128 (or --data); exits 77 without them.
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
               str(args.imgsz), "--workers", "8", "--device", "0", "--steps", "20", "--warmup", "8",
               "--project", str(work / f"{model}_{mode}_{trial}"), "--json"]
    command += ["--no-amp"] if args.fp32 else ["--amp"]
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
    parser.add_argument("--fp32", action="store_true", help="float32 instead of float16 AMP")
    parser.add_argument("--modes", default=",".join(MODES), help="eager and the cuda_graph_scope values to run")
    parser.add_argument("--classify", action="store_true", help="the models are classifiers: train on --data's box crops")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m in MODES]
    if "eager" not in modes:
        modes.insert(0, "eager")
    if gpu_count() == 0:
        print("no CUDA device: skipped", file=sys.stderr)
        sys.exit(77)
    if args.data == "coco128":
        require_dataset("coco128")
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        if args.classify:  # an ImageFolder set of the detection set's boxes
            crops = work / "crops"
            subprocess.run([str(OURS), "data", "crops", f"data={args.data}", f"out={crops}"], check=True, capture_output=True)
            args.data = str(crops)
        for model in args.models.split(","):
            runs = {mode: [] for mode in modes}
            captured = {mode: True for mode in modes if mode != "eager"}
            for trial in range(args.repeat):  # interleaved: drift hits every mode alike
                for mode in modes:
                    p, log = profile(work, args, model, mode, trial)
                    runs[mode].append(p)
                    if mode != "eager" and "cuda_graph: captured" not in log:
                        captured[mode] = False
                    if mode in ("optimizer", "step") and "captured the optimizer step" not in log:
                        captured[mode] = False
            step = {m: statistics.median(p["step_ms"] for p in runs[m]) for m in modes}
            last = {m: runs[m][-1] for m in modes}
            print(json.dumps({
                "model": model, "batch": args.batch, "imgsz": args.imgsz, "amp": "float32" if args.fp32 else "float16",
                "repeat": args.repeat,
                "gpu": last["eager"]["config"].get("device"), "cpu": cpu_model(),
                "step_ms": {m: round(step[m], 2) for m in modes},
                "speedup": {m: round(step["eager"] / step[m], 3) for m in modes if m != "eager"},
                "captured": captured,
                "launches_per_step": {m: last[m].get("launches_per_step") for m in modes},
                "peak_vram_mb": {m: last[m].get("peak_vram_mb") for m in modes},
                "bound": {m: last[m].get("bound") for m in modes},
            }), flush=True)

if __name__ == "__main__":
    main()
