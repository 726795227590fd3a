"""What the Python benches share: where the binary is, the datasets, and the CPU model every figure names."""
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# $LIBREYOLO names another build of the binary (scripts/device/gpu-check.sh runs a carried one)
OURS = pathlib.Path(os.environ.get("LIBREYOLO", ROOT / "build" / "tools" / "libreyolo" / "libreyolo"))


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def interleaved_medians(args, phases, ours, reference, summary):
    """Runs `ours(args)` and `reference(args)` args.repeat times, interleaved, printing each run's
    phases (JSON lines), then `summary` with, per phase, the median of each side's medians and the
    reference's over ours (the step benches: detr_step.py, yolo_step.py)."""
    import json
    import statistics

    runs = {"ours": [], "reference": []}
    for _ in range(args.repeat):
        runs["ours"].append(ours(args))
        runs["reference"].append(reference(args))
        for name in runs:
            print(json.dumps({"run": name} | {k: runs[name][-1][k] for k in phases}), flush=True)
    summary = summary | {"repeat": args.repeat, "cpu": cpu_model(), "threads": runs["ours"][-1]["threads"],
                         "reference_threads": runs["reference"][-1]["threads"]}
    for name in phases:
        ours_median = statistics.median(run[name] for run in runs["ours"])
        theirs = statistics.median(run[name] for run in runs["reference"])
        summary[name] = {"ours": round(ours_median, 4), "reference": round(theirs, 4), "speedup": round(theirs / ours_median, 3)}
    print(json.dumps(summary))


def require_dataset(name):
    """The datasets folder ($LIBREYOLO_DATASETS, default ../shared/datasets, exported for the binary);
    exits 77 (skipped) when it has no `name`."""
    datasets = pathlib.Path(os.environ.setdefault("LIBREYOLO_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    if not (datasets / name).is_dir():
        print(f"{name} not found under {datasets}: skipped", file=sys.stderr)
        sys.exit(77)
    return datasets
