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


# The ATen ops whose self time is the convolution and matrix-product kernels (oneDNN's, MKL's):
# forward and backward, whatever the backend ATen picks; their wrappers (aten::convolution,
# aten::linear) add only their own dispatch time.
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation"}


def kernel_floor(step, steps):
    """Seconds a step spends in the convolution and matrix-product kernels: the self time of those
    ATen ops under torch.profiler over `steps` calls of `step()` after one unprofiled call, per step.
    An implementation that calls the same kernels on the same work cannot take less, so a
    reference step's time over this is the most any such implementation can gain on it."""
    import torch

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for _ in range(steps):
            step()
    seconds = {"convolution_s": 0.0, "matmul_s": 0.0}
    for event in profile.key_averages():
        if event.key in MATMUL_OPS:
            seconds["matmul_s"] += event.self_cpu_time_total / 1e6 / steps
        elif event.key.startswith("aten::") and "conv" in event.key:
            seconds["convolution_s"] += event.self_cpu_time_total / 1e6 / steps
    return seconds | {"kernels_s": seconds["convolution_s"] + seconds["matmul_s"]}


def kernel_floor_report(make_step, steps, summary):
    """`make_step(channels_last)` builds the reference's training step in that layout. Each layout's
    step is timed unprofiled (median of `steps` after one) and then measured by kernel_floor; prints
    `summary` with both and max_speedup: the contiguous step (as the step benches run the
    reference) over the smaller kernel time. The step benches' --kernel-floor."""
    import json
    import statistics
    import time

    import torch

    layouts = {}
    for layout in ("contiguous", "channels_last"):
        step = make_step(layout == "channels_last")
        step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        layouts[layout] = {"step_s": round(statistics.median(times), 4)} | {
            k: round(v, 4) for k, v in kernel_floor(step, steps).items()}
    floor = min(layout["kernels_s"] for layout in layouts.values())
    print(json.dumps(summary | {"steps": steps, "cpu": cpu_model(), "threads": torch.get_num_threads(), **layouts,
                                "max_speedup": round(layouts["contiguous"]["step_s"] / floor, 3)}))


def require_dataset(name):
    """The datasets folder ($LIBREYOLO_DATASETS, default ../shared/datasets, exported for the binary);
    exits 77 (skipped) when it has no `name`."""
    datasets = pathlib.Path(os.environ.setdefault("LIBREYOLO_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    if not (datasets / name).is_dir():
        print(f"{name} not found under {datasets}: skipped", file=sys.stderr)
        sys.exit(77)
    return datasets
