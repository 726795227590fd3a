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
    ATen ops under torch.profiler over `steps` calls of `step()` after one unprofiled call, per step,
    as {"convolution_s", "matmul_s", "kernels_s", "by_call": {(op, input shapes): seconds}}. An
    implementation that calls the same kernels on the same work cannot take less."""
    import torch

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profile:
        for _ in range(steps):
            step()
    seconds = {"convolution_s": 0.0, "matmul_s": 0.0}
    by_call = {}
    for event in profile.key_averages(group_by_input_shape=True):
        kind = ("matmul_s" if event.key in MATMUL_OPS else
                "convolution_s" if event.key.startswith("aten::") and "conv" in event.key else None)
        if kind:
            value = event.self_cpu_time_total / 1e6 / steps
            seconds[kind] += value
            by_call[(event.key, str(event.input_shapes))] = value
    return seconds | {"kernels_s": seconds["convolution_s"] + seconds["matmul_s"], "by_call": by_call}


def kernel_floor_report(make_step, steps, summary, emit=True):
    """`make_step(channels_last)` builds the reference's training step in that layout. Each layout's
    step is timed unprofiled (median of `steps` after one) and then measured by kernel_floor. Prints
    `summary` with both, `best_of_both_s` (each kernel call, by op and input shapes, at the faster of
    its two layouts: a floor even for a step that mixed layouts, conversions free) and max_speedup:
    the contiguous step (as the step benches run the reference) over that floor. The step benches'
    --kernel-floor. Returns what it prints (emit=False: prints nothing)."""
    import json
    import statistics
    import time

    import torch

    layouts, calls = {}, {}
    for layout in ("contiguous", "channels_last"):
        step = make_step(layout == "channels_last")
        step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        floor = kernel_floor(step, steps)
        calls[layout] = floor.pop("by_call")
        layouts[layout] = {"step_s": round(statistics.median(times), 4)} | {k: round(v, 4) for k, v in floor.items()}
    keys = set(calls["contiguous"]) | set(calls["channels_last"])
    best = sum(min(calls[layout].get(key, float("inf")) for layout in calls) for key in keys)
    report = summary | {"steps": steps, "cpu": cpu_model(), "threads": torch.get_num_threads(), **layouts,
                        "best_of_both_s": round(best, 4), "max_speedup": round(layouts["contiguous"]["step_s"] / best, 3)}
    if emit:
        print(json.dumps(report))
    return report


def require_dataset(name):
    """The datasets folder ($LIBREYOLO_DATASETS, default ../shared/datasets, exported for the binary);
    exits 77 (skipped) when it has no `name`."""
    datasets = pathlib.Path(os.environ.setdefault("LIBREYOLO_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    if not (datasets / name).is_dir():
        print(f"{name} not found under {datasets}: skipped", file=sys.stderr)
        sys.exit(77)
    return datasets
