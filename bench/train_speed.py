"""Training speed, ours next to the reference package (libreyolo 1.6.0's own CLI from the test
venv) on the same machine and data: one epoch of coco128 from scratch, validation off, per model
and image size. Prints one JSON line per run and a final summary line with medians.

    python3 bench/train_speed.py [--models yolo9-t,yolox-s] [--imgsz 320,640] [--batch 8]
                                 [--repeat 3] [--reference-repeat N] [--amp-dtype none|bfloat16]
                                 [--skip-reference]

Wall time is the whole command (start-up, label scan, model build, one epoch); our epoch time
and data-wait share come from results.csv. Needs coco128 under $LIBREYOLO_DATASETS (default
../shared/datasets).
"""
import argparse
import csv
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "tools" / "libreyolo" / "libreyolo"
REFERENCE = pathlib.Path.home() / ".local/share/libreyolo/venv/bin/libreyolo"


def data_yaml(work: pathlib.Path) -> pathlib.Path:
    datasets = pathlib.Path(os.environ.get("LIBREYOLO_DATASETS", ROOT.parent / "shared" / "datasets"))
    coco128 = datasets / "coco128"
    if not (coco128 / "images").is_dir():
        sys.exit(f"coco128 not found at {coco128}")
    names = (ROOT / "share/libreyolo/datasets/coco128.yaml").read_text().split("names:", 1)[1]
    path = work / "coco128.yaml"
    path.write_text(f"path: {coco128}\ntrain: images/train2017\nval: images/train2017\nnames:{names}")
    return path


def run(command, cwd):
    start = time.monotonic()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        print(result.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(map(str, command))}")
    return seconds


def ours(model, imgsz, batch, amp_dtype, yaml, work):
    args = [OURS, "train", f"model={model}", f"data={yaml}", "epochs=1", f"batch={batch}", f"imgsz={imgsz}",
            "workers=2", "val=false", "quiet=true", "project=runs", "name=ours", "exist_ok=true", "device=cpu"]
    args += ["amp=true", f"amp_dtype={amp_dtype}"] if amp_dtype != "none" else ["amp=false"]
    wall = run(args, work)
    row = list(csv.DictReader(open(work / "runs/ours/results.csv")))[-1]
    return {"wall_s": wall, "epoch_s": float(row["epoch_time"]), "data_wait_share": float(row["data_wait_share"])}


def reference(model, imgsz, batch, amp_dtype, yaml, work):
    args = [REFERENCE, "train", f"model={model}", f"data={yaml}", "epochs=1", f"batch={batch}", f"imgsz={imgsz}",
            "workers=2", "val=false", "pretrained=false", "device=cpu", "project=runs", "name=ref", "exist_ok=true",
            "amp=false" if amp_dtype == "none" else "amp=true"]
    wall = run(args, work)
    out = {"wall_s": wall}
    # the reference's own record of the epoch (metrics.jsonl `time`: seconds since training began)
    for path in sorted((work / "runs").glob("ref*/metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if rows and "time" in rows[-1]:
            out["epoch_s"] = float(rows[-1]["time"])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="yolo9-t,yolox-s")
    parser.add_argument("--imgsz", default="320,640")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--amp-dtype", default="none")
    parser.add_argument("--reference-repeat", type=int, help="runs of the reference (default: --repeat); it is slow")
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args()
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        yaml = data_yaml(work)
        for model in args.models.split(","):
            for imgsz in [int(s) for s in args.imgsz.split(",")]:
                runs = {"ours": [], "reference": []}
                for r in range(args.repeat):
                    runs["ours"].append(ours(model, imgsz, args.batch, args.amp_dtype, yaml, work))
                    print(json.dumps({"impl": "ours", "model": model, "imgsz": imgsz, "run": r, **runs["ours"][-1]}), flush=True)
                    reference_repeat = args.repeat if args.reference_repeat is None else args.reference_repeat
                    if not args.skip_reference and REFERENCE.exists() and r < reference_repeat:
                        runs["reference"].append(reference(model, imgsz, args.batch, args.amp_dtype, yaml, work))
                        print(json.dumps({"impl": "reference", "model": model, "imgsz": imgsz, "run": r,
                                          **runs["reference"][-1]}), flush=True)
                med = lambda rows, key: statistics.median(row[key] for row in rows) if rows else None  # noqa: E731
                entry = {"model": model, "imgsz": imgsz, "batch": args.batch, "amp_dtype": args.amp_dtype,
                         "images": 128, "repeat": args.repeat,
                         "ours_wall_s": med(runs["ours"], "wall_s"), "ours_epoch_s": med(runs["ours"], "epoch_s"),
                         "ours_img_per_s": 128 / med(runs["ours"], "epoch_s"),
                         "ours_data_wait_share": med(runs["ours"], "data_wait_share"),
                         "reference_wall_s": med(runs["reference"], "wall_s"),
                         "reference_epoch_s": med([r for r in runs["reference"] if "epoch_s" in r], "epoch_s")}
                summary.append(entry)
                print(json.dumps({"summary": entry}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
