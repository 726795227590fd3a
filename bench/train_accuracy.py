"""Same recipe, same data, same machine: train YOLOv9-t from scratch with ours and with the reference
package (libreyolo 1.6.0's own CLI from the test venv), then score both best checkpoints with one
yardstick. Prints one JSON line per implementation and a final comparison line.

    python3 bench/train_accuracy.py [--epochs 20] [--no-aug-epochs 15] [--imgsz 192] [--batch 8]
                                    [--skip-reference] [--work DIR]

The data is the main job's synthetic dataset (`libreyolo data synth synth_size=160`: 240 train /
60 val images). Each best.pt is validated by our `libreyolo val` (conf 0.001, iou 0.65, save_json)
and its predictions.json is scored again by pycocotools against ground truth built here from the
label files, so the mAP columns do not depend on either implementation's evaluator. The
reference's own reported best mAP is printed too, for the record.
"""
import argparse
import contextlib
import csv
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "tools" / "libreyolo" / "libreyolo"
REFERENCE = pathlib.Path.home() / ".local/share/libreyolo/venv/bin/libreyolo"


def run(command, cwd):
    start = time.monotonic()
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(map(str, command))}")
    return seconds, result.stdout


def recipe(args):
    return [f"imgsz={args.imgsz}", f"batch={args.batch}", f"epochs={args.epochs}", "warmup_epochs=1",
            f"no_aug_epochs={args.no_aug_epochs}", f"eval_interval={args.eval_interval}", "workers=2", "seed=0",
            "device=cpu", "amp=false", "exist_ok=true"]


def pycocotools_map(predictions: pathlib.Path, dataset: pathlib.Path):
    """(mAP50-95, mAP50) of a COCO predictions file against the val labels, by pycocotools."""
    from PIL import Image
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images, annotations = [], []
    for index, image in enumerate(sorted((dataset / "images/val").glob("*.jpg"))):
        width, height = Image.open(image).size
        images.append({"id": index, "width": width, "height": height})
        for line in (dataset / "labels/val" / (image.stem + ".txt")).read_text().splitlines():
            c, x, y, w, h = map(float, line.split())
            w, h = w * width, h * height
            annotations.append({"id": len(annotations) + 1, "image_id": index, "category_id": int(c),
                                "bbox": [x * width - w / 2, y * height - h / 2, w, h], "area": w * h, "iscrowd": 0})
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": images, "annotations": annotations, "categories": [{"id": i} for i in range(4)]}
        gt.createIndex()
        evaluator = COCOeval(gt, gt.loadRes(str(predictions)), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0]), float(evaluator.stats[1])


def score(weights: pathlib.Path, dataset: pathlib.Path, work: pathlib.Path, name: str, imgsz: int):
    _, out = run([OURS, "val", f"model={weights}", f"data={dataset / 'data.yaml'}", f"imgsz={imgsz}", "batch=8",
                  "iou=0.65", "save_json=true", "project=val", f"name={name}", "exist_ok=true", "quiet=true", "--json"],
                 work)
    ours = json.loads(out)
    oracle = pycocotools_map(work / "val" / name / "predictions.json", dataset)
    return {"val_mAP50": ours["metrics/mAP50"], "val_mAP50_95": ours["metrics/mAP50-95"],
            "pycocotools_mAP50": oracle[1], "pycocotools_mAP50_95": oracle[0]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--no-aug-epochs", type=int, default=15)
    parser.add_argument("--eval-interval", type=int, default=5)
    parser.add_argument("--imgsz", type=int, default=192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--work", help="keep the runs here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        dataset = work / "synth"
        run([OURS, "data", "synth", f"out={dataset}", "synth_size=160", "quiet=true"], work)
        rows = {}
        seconds, _ = run([OURS, "train", "model=yolo9-t", f"data={dataset / 'data.yaml'}", *recipe(args),
                          "project=runs", "name=ours", "quiet=true"], work)
        trained = list(csv.DictReader(open(work / "runs/ours/results.csv")))
        rows["ours"] = {"impl": "ours", "wall_s": seconds, "epochs": len(trained),
                        "train_s": float(trained[-1]["time"]),
                        **score(work / "runs/ours/weights/best.pt", dataset, work, "ours", args.imgsz)}
        print(json.dumps(rows["ours"]), flush=True)
        if not args.skip_reference and REFERENCE.exists():
            seconds, _ = run([REFERENCE, "train", "model=yolo9-t", f"data={dataset / 'data.yaml'}", *recipe(args),
                              "pretrained=false", "project=runs", "name=ref"], work)
            reported = {}
            for path in (work / "runs").glob("ref*/metrics.jsonl"):
                for line in path.read_text().splitlines():
                    record = json.loads(line) if line.strip() else {}
                    for key, value in record.items():
                        if "mAP50" in key and isinstance(value, (int, float)):
                            reported[key] = max(reported.get(key, 0.0), value)
            best = next((work / "runs").glob("ref*/weights/best.pt"))
            rows["reference"] = {"impl": "reference", "wall_s": seconds, "reported_best": reported,
                                 **score(best, dataset, work, "ref", args.imgsz)}
            print(json.dumps(rows["reference"]), flush=True)
        if "reference" in rows:
            o, r = rows["ours"], rows["reference"]
            print(json.dumps({"summary": {
                "recipe": " ".join(recipe(args)), "ours_wall_s": o["wall_s"], "reference_wall_s": r["wall_s"],
                "speedup": r["wall_s"] / o["wall_s"],
                "ours_mAP50": o["pycocotools_mAP50"], "reference_mAP50": r["pycocotools_mAP50"],
                "ours_mAP50_95": o["pycocotools_mAP50_95"], "reference_mAP50_95": r["pycocotools_mAP50_95"]}}),
                flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
