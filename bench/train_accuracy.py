"""Same recipe, same data, same machine: train a model from scratch with ours and with the reference
package (libreyolo 1.6.0's own CLI from the test venv), over one or more seeds, then score every best
checkpoint with one yardstick. Prints one JSON line per run and a final line with each
implementation's mean and spread (sample standard deviation, min, max) of mAP50-95 and mAP50.

    python bench/train_accuracy.py [--model yolo9-t] [--seeds 0,1,2] [--epochs 20] [--no-aug-epochs 15]
                                   [--imgsz 192] [--batch 8] [--skip-reference] [--work DIR]

with the test venv's python (~/.local/share/libreyolo/venv/bin/python: PIL and pycocotools score).

The reference is libreyolo 1.6.0's CLI, except for YOLOv5 (`--model yolov5n`, ...), which it does
not train: there it is the original yolov5 7.0.14 package's own trainer, hyp.scratch-low with
AutoAnchor, run by bench/yolov5_reference_train.py in the test venv, whose best weights (its EMA)
our `libreyolo val` reads like any checkpoint. YOLOv5 runs take the family's own recipe on our side
(yolov5's warm-up of 3 epochs, no mosaic-free epochs), as its trainer has no other.

The data is the main job's synthetic dataset (`libreyolo data synth synth_size=160`: 240 train /
60 val images). Each best.pt is validated by our `libreyolo val` (conf 0.001, iou 0.65, save_json)
and its predictions.json is scored again by pycocotools against ground truth built here from the
label files, so the mAP columns do not depend on either implementation's evaluator. The
reference's own reported best mAP is printed too, for the record. DETRs: the family's recipe keys
(optimizer, rates, schedule, EMA, clipping, augmentation stop) are passed to both CLIs explicitly,
libreyolo 1.6.0's CLI putting its generic defaults in their place otherwise. YOLO models take
warmup_epochs=1 and no_aug_epochs=15 unless told; the DETRs their family's defaults (D-FINE and DEIM
select 300 queries: imgsz 256 or more). `--set KEY=VALUE` adds a key to both CLIs' command lines,
`--synth-size` the dataset's image side; LIBREYOLO_BIN names another `libreyolo` binary for ours.

The README's main job, over seeds 0-4 (its expected range comes from this):

    python bench/train_accuracy.py --seeds 0,1,2,3,4 --skip-reference --imgsz 160 --epochs 32 \
        --no-aug-epochs 16 --warmup-epochs 2 --eval-interval 8 \
        --set optimizer=adamw --set lr0=0.002 --set nbs=8 --set aux_weight=0
"""
import argparse
import contextlib
import csv
import io
import json
import statistics
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = pathlib.Path(os.environ.get("LIBREYOLO_BIN", ROOT / "build" / "tools" / "libreyolo" / "libreyolo"))
REFERENCE = pathlib.Path.home() / ".local/share/libreyolo/venv/bin/libreyolo"
VENV_PYTHON = REFERENCE.parent / "python"


def run(command, cwd):
    start = time.monotonic()
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(map(str, command))}")
    return seconds, result.stdout


# The keys of a DETR family's recipe that both CLIs take. libreyolo 1.6.0's CLI fills its own
# table's defaults (SGD 0.01, yoloxwarmcos, warm-up 5, no-aug 15, EMA 0.9998) over D-FINE's and
# DEIM's (its Python API keeps them), so the family's values are passed to both, explicitly. The
# family keys its CLI has no option for (backbone_lr_mult, clip_max_norm, aug_stop_epoch_ratio,
# multi_scale) it keeps from the family's config, as its train_config.yaml shows.
RECIPE_KEYS = ("optimizer", "lr0", "momentum", "weight_decay", "scheduler", "warmup_epochs", "warmup_lr_start",
               "min_lr_ratio", "no_aug_epochs", "ema_decay")


def family_recipe(model):
    """Our `libreyolo cfg` values that come from the model's family, for RECIPE_KEYS."""
    _, text = run([OURS, "cfg", f"model={model}"], ROOT)
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == "family" and parts[0] in RECIPE_KEYS:
            values[parts[0]] = parts[1][:-2] if parts[1].endswith(".0") and parts[1][:-2].isdigit() else parts[1]
    return values


def is_yolov5(model):
    return model.lower().startswith("yolov5")


def train_yolov5_reference(args, seed, dataset, work, name):
    """yolov5's own trainer on the same data, batch, size, epochs and seed; returns (seconds, best
    weights, the best of its own validation)."""
    size = args.model.lower().removeprefix("yolov5").removesuffix(".yaml").lstrip("-")
    if args.warmup_epochs is not None or args.no_aug_epochs is not None:
        raise SystemExit("--warmup-epochs and --no-aug-epochs: yolov5's trainer takes hyp.scratch-low's as they are")
    seconds, _ = run([VENV_PYTHON, ROOT / "bench" / "yolov5_reference_train.py", dataset, work / "runs" / name, size,
                      args.imgsz, args.batch, args.epochs, seed], work)
    return (seconds, work / "runs" / name / f"LibreYOLOv5{size}.pt",
            yolov5_reported_best(work / "runs" / name / "train" / "results.csv"))


def train_libreyolo_reference(args, seed, dataset, work, name):
    """libreyolo 1.6.0's CLI with our recipe; returns (seconds, best weights, the best of its own validation)."""
    seconds, _ = run([REFERENCE, "train", f"model={args.model}", f"data={dataset / 'data.yaml'}",
                      *recipe(args, seed), "pretrained=false", "project=runs", f"name={name}"], work)
    reported = {}
    for path in (work / "runs").glob(f"{name}*/metrics.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            for key, value in record.items():
                if "mAP50" in key and isinstance(value, (int, float)):
                    reported[key] = max(reported.get(key, 0.0), value)
    return seconds, next((work / "runs").glob(f"{name}*/weights/best.pt")), reported


def yolov5_reported_best(results_csv):
    """The best of yolov5's own per-epoch validation (its results.csv pads the column names)."""
    best = {}
    for row in csv.DictReader(open(results_csv)):
        for key, value in row.items():
            if "mAP_0.5" in key:
                best[key.strip()] = max(best.get(key.strip(), 0.0), float(value))
    return best


def recipe(args, seed):
    yolo = args.model.startswith(("yolo", "yolox")) and not is_yolov5(args.model)
    family = {} if yolo or is_yolov5(args.model) else family_recipe(args.model)
    warmup = args.warmup_epochs if args.warmup_epochs is not None else (1 if yolo else None)
    no_aug = args.no_aug_epochs if args.no_aug_epochs is not None else (15 if yolo else None)
    if warmup is not None:
        family.pop("warmup_epochs", None)
    if no_aug is not None:
        family.pop("no_aug_epochs", None)
    return [*(f"{key}={value}" for key, value in family.items()), f"imgsz={args.imgsz}", f"batch={args.batch}", f"epochs={args.epochs}",
            *([f"warmup_epochs={warmup}"] if warmup is not None else []),
            *([f"no_aug_epochs={no_aug}"] if no_aug is not None else []),
            f"eval_interval={args.eval_interval}", "workers=2", f"seed={seed}", "device=cpu", "amp=false", "exist_ok=true",
            *args.set]


def spread(values):
    return {"mean": statistics.mean(values), "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "runs": values}


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
    parser.add_argument("--model", default="yolo9-t", help="our name of the model, which the reference's CLI takes too")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds, one training of each implementation per seed")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--warmup-epochs", type=float, help="default: 1 for YOLO models, the family's for DETRs")
    parser.add_argument("--no-aug-epochs", type=int, help="default: 15 for YOLO models, the family's for DETRs")
    parser.add_argument("--eval-interval", type=int, default=5)
    parser.add_argument("--imgsz", type=int, default=192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one more training key for both CLIs (repeatable), e.g. --set nbs=8 --set aux_weight=0")
    parser.add_argument("--synth-size", type=int, default=160, help="side of the synthetic images")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--skip-ours", action="store_true", help="train the reference only (for seeds ours already ran)")
    parser.add_argument("--work", help="keep the runs here instead of a temporary folder")
    args = parser.parse_args()
    try:  # the scoring needs them; found missing only after the trainings, hours would be lost
        import PIL  # noqa: F401
        import pycocotools  # noqa: F401
    except ImportError as error:
        raise SystemExit(f"{error}: run this with the test venv's python ({VENV_PYTHON}; scripts/setup.sh makes it)")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        dataset = work / "synth"
        run([OURS, "data", "synth", f"out={dataset}", f"synth_size={args.synth_size}", "quiet=true"], work)
        results = {"ours": [], "reference": []}
        for seed in seeds:
            name = f"ours_s{seed}"
            if args.skip_ours:
                seconds = None
            else:
                seconds, _ = run([OURS, "train", f"model={args.model}", f"data={dataset / 'data.yaml'}", *recipe(args, seed),
                              "project=runs", f"name={name}", "quiet=true"], work)
            if seconds is not None:
                trained = list(csv.DictReader(open(work / "runs" / name / "results.csv")))
                row = {"impl": "ours", "model": args.model, "seed": seed, "wall_s": seconds, "epochs": len(trained),
                       "train_s": float(trained[-1]["time"]),
                       **score(work / "runs" / name / "weights/best.pt", dataset, work, name, args.imgsz)}
                results["ours"].append(row)
                print(json.dumps(row), flush=True)
            if args.skip_reference or not REFERENCE.exists():
                continue
            name = f"ref_s{seed}"
            train_reference = train_yolov5_reference if is_yolov5(args.model) else train_libreyolo_reference
            seconds, best, reported = train_reference(args, seed, dataset, work, name)
            row = {"impl": "reference", "model": args.model, "seed": seed, "wall_s": seconds, "reported_best": reported,
                   **score(best, dataset, work, name, args.imgsz)}
            results["reference"].append(row)
            print(json.dumps(row), flush=True)
        summary = {"model": args.model, "recipe": " ".join(recipe(args, "<seed>")), "seeds": seeds}
        for impl, rows in results.items():
            if not rows:
                continue
            summary[impl] = {"wall_s": statistics.median(r["wall_s"] for r in rows),
                             "mAP50_95": spread([r["pycocotools_mAP50_95"] for r in rows]),
                             "mAP50": spread([r["pycocotools_mAP50"] for r in rows])}
        if results["reference"] and results["ours"]:
            summary["speedup"] = summary["reference"]["wall_s"] / summary["ours"]["wall_s"]
        print(json.dumps({"summary": summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
