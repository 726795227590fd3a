"""Does every family still train exactly what it trained at a baseline commit? Builds the baseline's
`libreyolo` binary in a git worktree (or takes one given), then trains each family's smallest size
on coco8 for 2 epochs with a fixed seed with both binaries, and compares:

- results.csv: every column but the clock's (time, epoch_time, data_wait_share), as text;
- weights/last.pt: every tensor (model, EMA, optimizer state) bit for bit, and every other
  entry of the checkpoint except the ones that name a time, a path or the build.

Prints one JSON line per family and a summary line; exits 1 when anything differs.

    python bench/behaviour_unchanged.py [--baseline COMMIT | --baseline-bin PATH] [--families yolo9-t,...]
                                        [--imgsz 320] [--work DIR]

with the test venv's python (~/.local/share/libreyolo/venv/bin/python: torch reads the checkpoints).
COCO8 comes from LIBREYOLO_DATASETS, else ../shared/datasets beside the checkout.
"""
import argparse
import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "tools" / "libreyolo" / "libreyolo"
# The commit before the family/task seam work began: what "unchanged" is measured against.
DEFAULT_BASELINE = "ed32a91c3d9b97e99705422074b84e5eb195b039"
SMALLEST = ["yolo9-t", "yolox-n", "yolov5n", "yolo7-b", "rtmdet-t", "rtdetr-r18", "rtdetrv4-s", "dfine-n", "deim-n"]
# DEIM's multi_scale draws sizes down to 0.75 x imgsz, where its 300 queries need 256 px or more
IMAGE_SIZE = {"deim-n": 352}
CLOCK_COLUMNS = {"time", "epoch_time", "data_wait_share"}
# Entries that name a clock, a path or the build, not what was trained.
VOLATILE_KEYS = {"train_seconds", "project", "name", "save_dir", "libreyolo_version", "git_revision", "date"}


def build_baseline(commit, work):
    """The baseline's binary, built from a worktree of `commit` with this build's LibTorch."""
    source = work / "baseline-src"
    binary = source / "build" / "tools" / "libreyolo" / "libreyolo"
    if binary.exists():
        return binary
    if not source.exists():
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", source, commit], check=True)
    options = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", ROOT / "build"], check=True,
                                        capture_output=True, text=True).stdout)
    libtorch = next((o["value"] for o in options if o["name"] == "libtorch"), "")
    subprocess.run(["meson", "setup", source / "build", source, "--buildtype=release",
                    *([f"-Dlibtorch={libtorch}"] if libtorch else [])], check=True, cwd=source)
    subprocess.run(["ninja", "-C", source / "build", "tools/libreyolo/libreyolo"], check=True)
    return binary


def train(binary, model, imgsz, folder):
    command = [binary, "train", f"model={model}", "data=coco8", "epochs=2", f"imgsz={imgsz}", "batch=4", "seed=0",
               "workers=2", "device=cpu", "amp=false", f"project={folder.parent}", f"name={folder.name}",
               "exist_ok=true", "quiet=true"]
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{result.stderr[-2000:]}")


def results_rows(folder):
    with open(folder / "results.csv") as f:
        return [{k: v for k, v in row.items() if k not in CLOCK_COLUMNS} for row in csv.DictReader(f)]


def differences(a, b, path=""):
    """Where two checkpoint trees differ (tensors bit for bit), as a list of key paths."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b))
        return [] if same else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if str(key) in VOLATILE_KEYS:
                continue
            if (key not in a or key not in b) and path == "/config":
                continue  # an option one build has and the other lacks: reported apart (config_keys_changed)
            if key not in a or key not in b:
                out.append(f"{path}/{key} (only in {'baseline' if key in a else 'this build'})")
                continue
            out += differences(a[key], b[key], f"{path}/{key}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path} (length {len(a)} vs {len(b)})"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the commit to compare with (built in a worktree)")
    parser.add_argument("--baseline-bin", help="a baseline libreyolo binary already built (skips the build)")
    parser.add_argument("--families", default=",".join(SMALLEST), help="comma-separated model names")
    parser.add_argument("--imgsz", type=int, default=320, help="every model's but those of IMAGE_SIZE")
    parser.add_argument("--work", help="keep the baseline build and the runs here")
    args = parser.parse_args()
    import torch
    if "LIBREYOLO_DATASETS" not in os.environ:
        os.environ["LIBREYOLO_DATASETS"] = str(ROOT.parent / "shared" / "datasets")
    if not (pathlib.Path(os.environ["LIBREYOLO_DATASETS"]) / "coco8").is_dir():
        print("coco8 not found (set LIBREYOLO_DATASETS): skipped", file=sys.stderr)
        return 77
    work = pathlib.Path(args.work) if args.work else pathlib.Path(tempfile.mkdtemp(prefix="unchanged-"))
    work.mkdir(parents=True, exist_ok=True)
    baseline = pathlib.Path(args.baseline_bin) if args.baseline_bin else build_baseline(args.baseline, work)
    failed = 0
    for model in [m for m in args.families.split(",") if m]:
        runs = {}
        for label, binary in (("baseline", baseline), ("this", OURS)):
            runs[label] = work / "runs" / f"{model}-{label}"
            shutil.rmtree(runs[label], ignore_errors=True)
            train(binary, model, IMAGE_SIZE.get(model, args.imgsz), runs[label])
        csv_same = results_rows(runs["baseline"]) == results_rows(runs["this"])
        before = torch.load(runs["baseline"] / "weights" / "last.pt", map_location="cpu", weights_only=False)
        after = torch.load(runs["this"] / "weights" / "last.pt", map_location="cpu", weights_only=False)
        diff = differences(before, after)
        config_keys = sorted(set(before.get("config", {})) ^ set(after.get("config", {})))
        row = {"model": model, "results_csv_identical": csv_same, "last_pt_identical": not diff, "last_pt_differences": diff[:10],
               "config_keys_changed": config_keys,
               "final_loss": results_rows(runs["this"])[-1].get("train/loss")}
        print(json.dumps(row), flush=True)
        failed += (not csv_same) or bool(diff)
    print(json.dumps({"summary": {"baseline": str(baseline), "families": len(args.families.split(",")), "differing": failed}}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
