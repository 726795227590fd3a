"""Same recipe, same data, same machine, for the classifiers: train from scratch with ours and with
libreyolo 1.6.0 (its Python API from the test venv), over seeds, then validate every best.pt with
our `libreyolo val` (whose metrics equal LibreYOLO's on the same checkpoint: parity_classify_val).
Prints one JSON line per run and a final line with each side's mean, sample standard deviation,
min and max of top-1.

The data: `libreyolo data synth` (240 train / 60 val images at 320 px, four shape classes in random
colours on textured backgrounds) cut into an ImageFolder set by `libreyolo data crops`
(crop_min_size 24). coco128's crops are no test of learning from scratch: 298 crops over 38
classes, and MobileNetV4-s memorises them while its validation stays at the majority class's share.

    python bench/classify_accuracy.py [--model mobilenetv4-s] [--seeds 0,1,2] [--epochs 30] [--imgsz 64]
                                      [--batch 32] [--skip-reference] [--work DIR]

with the test venv's python (~/.local/share/libreyolo/venv/bin/python).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from machine import OURS, cpu_model


def dataset(work):
    root = work / "crops"
    if not root.exists():
        subprocess.run([str(OURS), "data", "synth", f"out={work / 'synth'}", "synth_size=320", "seed=0"], check=True,
                       capture_output=True)
        subprocess.run([str(OURS), "data", "crops", f"data={work / 'synth' / 'data.yaml'}", f"out={root}", "crop_min_size=24"],
                       check=True, capture_output=True)
    return root


def validate(checkpoint, data, args):
    done = subprocess.run([str(OURS), "val", f"model={checkpoint}", f"data={data}", f"imgsz={args.imgsz}", "batch=32",
                           "json=true"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(args, data, seed, work):
    name = f"ours_{args.model}_{seed}"
    start = time.perf_counter()
    subprocess.run([str(OURS), "train", f"model={args.model}", f"data={data}", f"epochs={args.epochs}", f"imgsz={args.imgsz}",
                    f"batch={args.batch}", f"seed={seed}", "workers=2", f"project={work}", f"name={name}", "exist_ok=true",
                    "quiet=true"], check=True, capture_output=True)
    return work / name / "weights" / "best.pt", time.perf_counter() - start


def reference(args, data, seed, work):
    family, size = args.model.split("-")
    code = f"""
import sys
from libreyolo.models.mobilenetv4.model import LibreMobileNetV4
from libreyolo.models.resnet.model import LibreResNet
import os
classes = len(os.listdir(os.path.join({str(data)!r}, "train")))
model = ({'LibreMobileNetV4' if family == 'mobilenetv4' else 'LibreResNet'})(size={size!r}, nb_classes=classes)
model.train(data={str(data)!r}, epochs={args.epochs}, batch={args.batch}, imgsz={args.imgsz}, workers=2, seed={seed},
            project={str(work)!r}, name="ref_{args.model}_{seed}", exist_ok=True)
"""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return work / f"ref_{args.model}_{seed}" / "weights" / "best.pt", time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mobilenetv4-s")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--imgsz", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--work")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(args.work or folder)
        work.mkdir(parents=True, exist_ok=True)
        data = dataset(work)
        sides = {"ours": ours} if args.skip_reference else {"ours": ours, "reference": reference}
        top1 = {side: [] for side in sides}
        for seed in (int(s) for s in args.seeds.split(",")):
            for side, train in sides.items():
                best, seconds = train(args, data, seed, work)
                metrics = validate(best, data, args)
                top1[side].append(metrics["metrics/accuracy_top1"])
                print(json.dumps({"side": side, "seed": seed, "seconds": round(seconds, 1),
                                  **{k: round(v, 4) for k, v in metrics.items() if k.startswith("metrics/")}}), flush=True)
        summary = {"bench": "classify_accuracy", "model": args.model, "epochs": args.epochs, "imgsz": args.imgsz,
                   "batch": args.batch, "data": "synth 320 px crops (crop_min_size 24)", "cpu": cpu_model()}
        for side, values in top1.items():
            summary[side] = {"top1_mean": round(statistics.mean(values), 4),
                             "top1_sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
                             "top1_min": round(min(values), 4), "top1_max": round(max(values), 4)}
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
