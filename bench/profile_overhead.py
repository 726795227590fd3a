"""Profiler overhead, two figures, medians of alternating runs (the machine is shared and noisy):

1. profile=false against a build without the profiler (--baseline: a libreyolo binary built from
   the commit before the profiler existed): images/s of one training epoch on coco128.
2. The cost of the measurement itself on the CPU: the real (unsynchronised) step time of the
   profile window with operator tracing on (profile_trace=true) against off (profile_trace=false).

    python3 bench/profile_overhead.py --baseline /tmp/baseline/build/tools/libreyolo/libreyolo
                                      [--imgsz 160] [--batch 8] [--repeat 5]

Prints one JSON line per run and a summary line. Needs coco128 under $LIBREYOLO_DATASETS
(default ../shared/datasets).
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

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "tools" / "libreyolo" / "libreyolo"
sys.path.insert(0, str(ROOT / "bench"))
from train_speed import data_yaml  # noqa: E402  (the same coco128 YAML as the speed benchmark)


def epoch_speed(binary, data, args, work, name):
    run = work / name
    command = [str(binary), "train", "model=yolo9-t", f"data={data}", f"imgsz={args.imgsz}", f"batch={args.batch}", "epochs=1",
               "val=false", "workers=2", "no_aug_epochs=0", f"project={work}", f"name={name}", "exist_ok=true", "quiet=true"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    row = next(csv.DictReader(open(run / "results.csv")))
    return 128 / float(row["epoch_time"])


def window_step_ms(binary, data, args, work, name, trace):
    run = work / name
    command = [str(binary), "train", "model=yolo9-t", f"data={data}", f"imgsz={args.imgsz}", f"batch={args.batch}", "epochs=3",
               "val=false", f"workers={args.workers}", "cache=ram", "no_aug_epochs=0", "profile=true", "profile_then_stop=true", "profile_warmup=3",
               f"profile_steps={args.steps}", f"profile_trace={str(trace).lower()}", f"project={work}", f"name={name}",
               "exist_ok=true", "quiet=true"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(run / "profile_summary.json"))["real"]["step_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="libreyolo binary built without the profiler (skip figure 1 if absent)")
    parser.add_argument("--imgsz", type=int, default=160)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20, help="profile_steps (the unsynchronised half is steps/2)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1, help="loader workers for the window runs (fewer: less CPU contention)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        data = data_yaml(work)
        speeds = {"baseline": [], "profile_false": []}
        steps = {"trace_off": [], "trace_on": []}
        for i in range(args.repeat):
            if args.baseline:
                for label, binary in (("baseline", args.baseline), ("profile_false", OURS)):
                    speeds[label].append(epoch_speed(binary, data, args, work, f"{label}_{i}"))
                    print(json.dumps({"run": i, "build": label, "img_per_s": round(speeds[label][-1], 3)}), flush=True)
            for label, trace in (("trace_off", False), ("trace_on", True)):
                steps[label].append(window_step_ms(OURS, data, args, work, f"{label}_{i}", trace))
                print(json.dumps({"run": i, "profile_trace": trace, "real_step_ms": round(steps[label][-1], 2)}), flush=True)
        summary = {"imgsz": args.imgsz, "batch": args.batch, "repeat": args.repeat, "threads": os.cpu_count()}
        if args.baseline:
            base, ours = statistics.median(speeds["baseline"]), statistics.median(speeds["profile_false"])
            summary.update({"baseline_img_per_s": round(base, 3), "profile_false_img_per_s": round(ours, 3),
                            "profile_false_vs_baseline_pct": round(100 * (ours - base) / base, 2),
                            "img_per_s_spread_pct": round(100 * (max(speeds["baseline"]) - min(speeds["baseline"])) / base, 2)})
        off, on = statistics.median(steps["trace_off"]), statistics.median(steps["trace_on"])
        summary.update({"real_step_ms_trace_off": round(off, 2), "real_step_ms_trace_on": round(on, 2),
                        "unsynced_inflation_pct": round(100 * (on - off) / off, 2)})
        print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
