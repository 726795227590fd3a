"""CPU contention: one training alone, then two of the same started together on this machine,
for each setting. A fair share costs each run about 2x on a machine whose cores both runs want;
OpenMP threads that wait for each other at barriers can cost far more (a run spinning while the
thread it waits for is descheduled). Prints one JSON line per setting with medians and the
slowdown of a pair against a run alone.

    python3 bench/contention.py [--repeat 3] [--settings "inherit,OMP_NUM_THREADS=2,GOMP_SPINCOUNT=3000"]

"inherit" is libreyolo's own choice (its contention hook lowers the intra-op threads while the
run waits for CPUs); OMP_NUM_THREADS=N pins the thread count, which turns the hook off (the
behaviour before it); GOMP_SPINCOUNT / OMP_WAIT_POLICY change libgomp's wait policy.

Each run: YOLOv9-t from scratch, one epoch of the synthetic dataset (240 images at 192 px,
batch 8), validation off. "inherit" runs with the environment as it is (the binary's own
choice); the others set the variable for both runs.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

from machine import OURS, cpu_model


def command(work, name):
    return [str(OURS), "train", "model=yolo9-t", f"data={work / 'synth' / 'data.yaml'}", "imgsz=192", "batch=8",
            "epochs=1", "warmup_epochs=1", "aux_weight=0", "val=false", f"project={work / 'runs'}", f"name={name}",
            "quiet=true"]


def environment(setting):
    env = dict(os.environ)
    for key in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS"):
        if setting != "inherit":
            env.pop(key, None)
    if setting != "inherit":
        key, value = setting.split("=", 1)
        env[key] = value
    return env


def timed(commands, env):
    start = time.perf_counter()
    running = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands]
    codes = [p.wait(timeout=900) for p in running]
    if any(codes):
        raise SystemExit(f"a run failed: exit codes {codes}")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settings", default="inherit,OMP_NUM_THREADS=2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        subprocess.run([str(OURS), "data", "synth", f"out={work / 'synth'}", "synth_size=160", "quiet=true"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for setting in args.settings.split(","):
            env = environment(setting)
            alone = [timed([command(work, "alone")], env) for _ in range(args.repeat)]
            pair = [timed([command(work, "a"), command(work, "b")], env) for _ in range(args.repeat)]
            print(json.dumps({"setting": setting, "cpu": cpu_model(), "cores": os.cpu_count(), "repeat": args.repeat,
                              "alone_s_median": round(statistics.median(alone), 2),
                              "pair_s_median": round(statistics.median(pair), 2),
                              "pair_slowdown": round(statistics.median(pair) / statistics.median(alone), 2),
                              "alone_s": [round(t, 2) for t in alone], "pair_s": [round(t, 2) for t in pair]}), flush=True)


if __name__ == "__main__":
    main()
