"""Training speed, ours next to the reference package (libreyolo 1.6.0's own CLI from the test
venv) on the same machine and data: epochs of coco128 from scratch, validation off, per model
and image size. Prints one JSON line per run and a final summary line with medians.

    python3 bench/train_speed.py [--models yolo9-t,yolox-s] [--imgsz 320,640] [--batch 8]
                                 [--repeat 3] [--reference-repeat N] [--amp-dtype none|bfloat16|float16]
                                 [--skip-reference] [--device cpu|0] [--workers 2] [--epochs 1]
                                 [--cuda-graph] [--reference-python PYTHON]

Wall time is the whole command (start-up, label scan, model build, the epochs); our epoch times
and data-wait share come from results.csv, the reference's from its metrics.jsonl. With
--epochs > 1, epoch_s is the median of the epochs after the first (steady state: a CUDA graph is
captured in the first) and first_epoch_s the first.

--cuda-graph (a CUDA --device) runs each implementation eager and with cuda_graph=true, so the
summary gives both tools' graphed speed-up and ours against LibreYOLO's graphed epoch on the
same GPU (issue 14):

    python3 bench/train_speed.py --device 0 --workers 8 --imgsz 640 --amp-dtype float16 \
        --epochs 4 --repeat 2 --cuda-graph

Needs coco128 under $LIBREYOLO_DATASETS (default ../shared/datasets); $LIBREYOLO names our
binary (default build/tools/libreyolo/libreyolo).
"""
import argparse
import csv
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from machine import OURS, ROOT, cpu_model

VENV_PYTHON = pathlib.Path.home() / ".local/share/libreyolo/venv/bin/python3"
# the reference's CLI (its console script `libreyolo`), run by a chosen Python
REFERENCE_CLI = "import sys; from libreyolo.cli import entrypoint; sys.argv[0] = 'libreyolo'; sys.exit(entrypoint())"


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


def epoch_figures(epoch_seconds):
    """epoch_s: the one epoch, or the median of those after the first; first_epoch_s: the first."""
    if not epoch_seconds:
        return {}
    steady = epoch_seconds[1:] or epoch_seconds
    return {"epoch_s": statistics.median(steady), "first_epoch_s": epoch_seconds[0], "epochs": len(epoch_seconds)}


def ours(args, model, imgsz, graph, yaml, work):
    command = [OURS, "train", f"model={model}", f"data={yaml}", f"epochs={args.epochs}", f"batch={args.batch}",
               f"imgsz={imgsz}", f"workers={args.workers}", "val=false", "quiet=true", "project=runs", "name=ours",
               "exist_ok=true", f"device={args.device}", f"cuda_graph={'true' if graph else 'false'}"]
    command += ["amp=true", f"amp_dtype={args.amp_dtype}"] if args.amp_dtype != "none" else ["amp=false"]
    wall = run(command, work)
    rows = list(csv.DictReader(open(work / "runs/ours/results.csv")))
    return {"wall_s": wall, **epoch_figures([float(row["epoch_time"]) for row in rows]),
            "data_wait_share": statistics.median(float(row["data_wait_share"]) for row in rows)}


def reference(args, model, imgsz, graph, yaml, work):
    command = [args.reference_python, "-c", REFERENCE_CLI, "train", f"model={model}", f"data={yaml}",
               f"epochs={args.epochs}", f"batch={args.batch}", f"imgsz={imgsz}", f"workers={args.workers}", "val=false",
               "pretrained=false", f"device={args.device}", "project=runs", "name=ref", "exist_ok=true",
               "amp=false" if args.amp_dtype == "none" else "amp=true", f"cuda_graph={'true' if graph else 'false'}"]
    if args.amp_dtype not in ("none", "bfloat16"):  # the reference's CPU autocast is bf16 whatever it is told
        command.append(f"amp_dtype={args.amp_dtype}")
    for old in (work / "runs").glob("ref*"):
        shutil.rmtree(old)
    wall = run(command, work)
    out = {"wall_s": wall}
    # the reference's own record of its epochs (metrics.jsonl `time`: the epoch's seconds, its
    # TrainEpochEvent.epoch_seconds)
    for path in sorted((work / "runs").glob("ref*/metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        out.update(epoch_figures([float(row["time"]) for row in rows if "time" in row]))
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
    parser.add_argument("--device", default="cpu", help="cpu, or a CUDA index (0)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cuda-graph", action="store_true", help="each implementation eager and with cuda_graph=true")
    parser.add_argument("--reference-python", default=str(VENV_PYTHON), help="a Python that imports libreyolo 1.6.0")
    args = parser.parse_args()
    if args.cuda_graph and args.device == "cpu":
        parser.error("--cuda-graph needs a CUDA --device (cuda_graph=true is ignored on the CPU)")
    have_reference = not args.skip_reference and subprocess.run(
        [args.reference_python, "-c", "import libreyolo"], capture_output=True).returncode == 0
    if not args.skip_reference and not have_reference:
        print(f"{args.reference_python} cannot import libreyolo: the reference is skipped", file=sys.stderr)
    modes = (False, True) if args.cuda_graph else (False,)
    reference_repeat = args.repeat if args.reference_repeat is None else args.reference_repeat
    med = lambda rows, key: statistics.median(row[key] for row in rows if key in row) if any(key in row for row in rows) else None  # noqa: E731
    ratio = lambda a, b: a / b if a and b else None  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        yaml = data_yaml(work)
        for model in args.models.split(","):
            for imgsz in [int(s) for s in args.imgsz.split(",")]:
                runs = {(impl, graph): [] for impl in ("ours", "reference") for graph in modes}
                for r in range(args.repeat):  # interleaved: drift hits every mode alike
                    for graph in modes:
                        runs["ours", graph].append(ours(args, model, imgsz, graph, yaml, work))
                        print(json.dumps({"impl": "ours", "model": model, "imgsz": imgsz, "cuda_graph": graph, "run": r,
                                          **runs["ours", graph][-1]}), flush=True)
                        if have_reference and r < reference_repeat:
                            runs["reference", graph].append(reference(args, model, imgsz, graph, yaml, work))
                            print(json.dumps({"impl": "reference", "model": model, "imgsz": imgsz, "cuda_graph": graph,
                                              "run": r, **runs["reference", graph][-1]}), flush=True)
                entry = {"model": model, "imgsz": imgsz, "batch": args.batch, "amp_dtype": args.amp_dtype,
                         "device": args.device, "epochs": args.epochs, "workers": args.workers, "images": 128,
                         "repeat": args.repeat, "cpu": cpu_model()}
                for graph in modes:
                    tag = "_graph" if graph else ""
                    ours_rows, reference_rows = runs["ours", graph], runs["reference", graph]
                    entry.update({f"ours{tag}_wall_s": med(ours_rows, "wall_s"), f"ours{tag}_epoch_s": med(ours_rows, "epoch_s"),
                                  f"ours{tag}_img_per_s": ratio(128, med(ours_rows, "epoch_s")),
                                  f"ours{tag}_data_wait_share": med(ours_rows, "data_wait_share"),
                                  f"reference{tag}_wall_s": med(reference_rows, "wall_s"),
                                  f"reference{tag}_epoch_s": med(reference_rows, "epoch_s")})
                if args.cuda_graph:
                    entry.update({"ours_graph_speedup": ratio(entry["ours_epoch_s"], entry["ours_graph_epoch_s"]),
                                  "reference_graph_speedup": ratio(entry["reference_epoch_s"], entry["reference_graph_epoch_s"]),
                                  "graphed_ours_vs_reference": ratio(entry["reference_graph_epoch_s"], entry["ours_graph_epoch_s"])})
                print(json.dumps({"summary": entry}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
