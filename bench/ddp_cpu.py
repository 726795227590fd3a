"""Data-parallel training on the CPU: one coco128 epoch in 1 process x 2 threads against
2 processes x 1 thread (Gloo, `nproc_per_node=2`), with and without sync_bn (two small all-reduces
per BatchNorm layer and step), the same global batch. Prints one JSON line per
setting with the median epoch time (results.csv's epoch_time, without validation), the wall time
of the command, and for the 2-process runs the bytes their Reducer all-reduces per optimizer step
(the run's result object, json=true) and the communication share from the profiler (`libreyolo
profile run --nproc_per_node 2`, a separate run of the same setting: the share of the step with a
collective in flight, every rank's step time, the verdict).

    python3 bench/ddp_cpu.py [--repeat 3] [--imgsz 320] [--batch 16] [--model yolo9-t]

Needs coco128 under $LIBREYOLO_DATASETS (default ../shared/datasets); exits 77 without it.
"""
import argparse
import csv
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

from machine import OURS, cpu_model, require_dataset


def run(work, name, args, threads, nproc, sync_bn):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    command = [str(OURS), "train", f"model={args.model}", "data=coco128", f"imgsz={args.imgsz}", f"batch={args.batch}",
               "epochs=1", "val=false", "workers=2", "json=true", "quiet=true", f"project={work}", f"name={name}",
               "exist_ok=true", f"nproc_per_node={nproc}", "device=cpu", f"sync_bn={sync_bn}"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    with open(work / name / "results.csv", newline="") as f:
        epoch_time = float(list(csv.DictReader(f))[-1]["epoch_time"])
    return epoch_time, wall, result.get("data_parallel", {})


def profile(work, args, sync_bn):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [str(OURS), "profile", "run", "coco128", "--model", args.model, "--imgsz", str(args.imgsz), "--batch",
               str(args.batch), "--workers", "2", "--device", "cpu", "--no-amp", "--nproc_per_node", "2", "--sync_bn", sync_bn,
               "--steps", str(args.profile_steps), "--warmup", "3", "--project", str(work / f"profile_{sync_bn}"), "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"profile run failed ({done.returncode}): {done.stderr[-2000:]}")
    p = json.loads(done.stdout)
    d = p["distributed"]
    return {"collective_frac": d["collective_frac"], "collective_ms_per_step": d["collective_ms_per_step"],
            "step_ms": p["step_ms"], "rank_step_ms": [r["step_ms"] for r in d["ranks"]], "rank_spread_pct": d["rank_spread_pct"],
            "bound": p["bound"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--model", default="yolo9-t")
    parser.add_argument("--profile-steps", type=int, default=10)
    args = parser.parse_args()
    require_dataset("coco128")
    settings = [("1 process x 2 threads", 2, 1, "true"), ("2 processes x 1 thread, sync_bn=true", 1, 2, "true"),
                ("2 processes x 1 thread, sync_bn=false", 1, 2, "false")]
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        times = {label: [] for label, _, _, _ in settings}
        info = {}
        for _ in range(args.repeat):  # interleaved: drift on a shared machine hits all alike
            for label, threads, nproc, sync_bn in settings:
                epoch, wall, dp = run(work, f"n{nproc}", args, threads, nproc, sync_bn)
                times[label].append((epoch, wall))
                info[label] = dp
        communication = {label: profile(work, args, sync_bn) for label, _, nproc, sync_bn in settings if nproc > 1}
        base = statistics.median(e for e, _ in times[settings[0][0]])
        for label, _, _, _ in settings:
            epochs = [e for e, _ in times[label]]
            print(json.dumps({"setting": label, "model": args.model, "imgsz": args.imgsz, "batch": args.batch,
                              "cpu": cpu_model(), "cores": os.cpu_count(), "repeat": args.repeat,
                              "epoch_s_median": round(statistics.median(epochs), 2),
                              "wall_s_median": round(statistics.median(w for _, w in times[label]), 2),
                              "epoch_time_vs_1_process": round(statistics.median(epochs) / base, 3),
                              "epoch_s": [round(e, 2) for e in epochs], "data_parallel": info[label],
                              "communication": communication.get(label)}), flush=True)


if __name__ == "__main__":
    main()
