"""A training step of a convolutional family on the CPU, ours (bench/yolo_step) beside its
oracle's, same size, input size, batch, number of targets and recipe, by phase: forward, loss,
backward, optimizer. YOLOv5 against the original (PyPI yolov5==7.0.14: its Model from
yolov5<size>.yaml, ComputeLoss with hyp.scratch-low's gains as train.py scales them, torch's SGD
with Nesterov momentum and clip_grad_norm_ 10); YOLOv7-b and RTMDet against libreyolo 1.6.0 (its
network and loss; SGD with Nesterov momentum, or RTMDet's AdamW 0.004, no clipping). Medians over
--steps after a warm-up step; --repeat runs each implementation that many times, interleaved, and
reports the median of their medians.

    python3 bench/yolo_step.py [--model yolov5n|yolo7-b|rtmdet-t...] [--imgsz 320] [--batch 8] [--steps 5]
                               [--repeat 3] [--targets 6] [--threads N] [--kernel-floor]

--kernel-floor runs the reference's step alone, contiguous and channels-last, and prints the time
each spends in the convolution and matrix-product kernels (the self time of those ATen ops under
torch.profiler), and the sum over kernel calls of each call's faster layout: a step that calls the
same kernels for the same work cannot take less, so the reference's contiguous step over that sum
(max_speedup) is the most such a step can gain, with everything else free.

Needs the test venv (yolov5 7.0.14, libreyolo 1.6.0, torch) for the references; run it with that venv's Python.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from machine import ROOT, interleaved_medians, kernel_floor_report

PHASES = ("forward_s", "loss_s", "backward_s", "optimizer_s", "step_s")


def random_rows(args, torch):
    """(image, class, cx, cy, w, h) rows, normalised, as the loader collates them."""
    count = args.batch * args.targets
    sizes = 0.05 + 0.3 * torch.rand(count, 2)
    return torch.cat([torch.arange(args.batch).repeat_interleave(args.targets)[:, None].float(),
                      torch.randint(0, 80, (count, 1)).float(), sizes / 2 + (1 - sizes) * torch.rand(count, 2), sizes], 1)


def libreyolo_setup(args, torch):
    """(model, loss of the maps, optimizer, clip) for the families libreyolo 1.6.0 trains."""
    rows = random_rows(args, torch)
    pixels = rows[:, 2:] * args.imgsz
    per_image = [rows[:, 0] == b for b in range(args.batch)]
    if args.model.startswith("yolo7"):
        from libreyolo.models.yolo7.loss import YOLOv7Loss
        from libreyolo.models.yolo7.net import YOLOv7Model
        model = YOLOv7Model(num_classes=80)
        criterion = YOLOv7Loss(80, model.anchors, model.strides, distributed_normalize=False)
        labels = torch.stack([torch.cat([rows[m, 1:2], pixels[m]], 1) for m in per_image])  # (cls, cx, cy, w, h) px
        loss = lambda maps: criterion(maps, labels)["total_loss"]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True, weight_decay=5e-4)
    else:
        from libreyolo.models.rtmdet.loss import RTMDetLoss
        from libreyolo.models.rtmdet.nn import LibreRTMDetModel
        model = LibreRTMDetModel(size=args.model.split("-")[-1], nc=80)
        criterion = RTMDetLoss(num_classes=80, distributed_normalize=False)
        xyxy = torch.cat([pixels[:, :2] - pixels[:, 2:] / 2, pixels[:, :2] + pixels[:, 2:] / 2], 1)
        boxes = [xyxy[m] for m in per_image]
        classes = [rows[m, 1].long() for m in per_image]
        loss = lambda maps: criterion(maps[0], maps[1], boxes, classes)["total_loss"]
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.004, weight_decay=0.05)
    return model, loss, optimizer, 0.0


def yolov5_setup(args, torch):
    import contextlib
    import io
    import pathlib

    import yolov5
    from yolov5.models.yolo import Model
    from yolov5.utils.loss import ComputeLoss

    size = args.model.removeprefix("yolov5")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        model = Model(str(pathlib.Path(yolov5.__file__).parent / "models" / f"yolov5{size}.yaml"), ch=3, nc=80)
    nl = model.model[-1].nl
    model.hyp = {"box": 0.05 * 3 / nl, "cls": 0.5 * 3 / nl, "obj": (args.imgsz / 640) ** 2 * 3 / nl, "cls_pw": 1.0,
                 "obj_pw": 1.0, "anchor_t": 4.0, "fl_gamma": 0.0, "label_smoothing": 0.0}
    compute = ComputeLoss(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True, weight_decay=5e-4)
    targets = random_rows(args, torch)
    return model, lambda maps: compute(maps, targets)[0], optimizer, 10.0


def reference_parts(args, torch, channels_last=False):
    """(model, loss of the maps, optimizer, clip, images) of the reference, in training mode."""
    torch.manual_seed(0)
    model, compute, optimizer, clip = (yolov5_setup if args.model.startswith("yolov5") else libreyolo_setup)(args, torch)
    model.train()
    images = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    if channels_last:
        model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    return model, compute, optimizer, clip, images


def reference_step(args):
    import torch

    model, compute, optimizer, clip, images = reference_parts(args, torch)
    phases = {name: [] for name in PHASES}
    for step in range(args.steps + 1):
        start = time.perf_counter()
        maps = model(images)
        forward = time.perf_counter() - start
        start = time.perf_counter()
        loss = compute(maps)
        loss_time = time.perf_counter() - start
        start = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        backward = time.perf_counter() - start
        start = time.perf_counter()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
        optimizer.step()
        optimizer_step = time.perf_counter() - start
        if step == 0:
            continue
        for name, value in zip(PHASES, (forward, loss_time, backward, optimizer_step,
                                        forward + loss_time + backward + optimizer_step)):
            phases[name].append(value)
    return {name: statistics.median(values) for name, values in phases.items()} | {"threads": torch.get_num_threads()}


def reference_training_step(args, channels_last):
    """The reference's whole training step as one call (for --kernel-floor)."""
    import torch

    model, compute, optimizer, clip, images = reference_parts(args, torch, channels_last)

    def step():
        loss = compute(model(images))
        optimizer.zero_grad()
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
        optimizer.step()

    return step


def ours_step(args):
    import torch

    binary = os.environ.get("LIBREYOLO_BENCH_DIR", str(ROOT / "build" / "bench")) + "/yolo_step"
    # importing yolov5 sets OMP_NUM_THREADS to min(8, cpus - 1) in this process's environment, which
    # a child would inherit: ours gets the intra-op threads the reference's torch runs with
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
    recipe = (["optimizer=adamw", "clip=0"] if args.model.startswith("rtmdet")
              else ["optimizer=sgd", "clip=10" if args.model.startswith("yolov5") else "clip=0"])
    output = subprocess.run([binary, f"model={args.model}", f"imgsz={args.imgsz}", f"batch={args.batch}",
                             f"steps={args.steps}", f"targets={args.targets}", *recipe], check=True, capture_output=True,
                            text=True, env=env)
    return json.loads(output.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="yolov5n")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--targets", type=int, default=6)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads for both (default: torch's)")
    parser.add_argument("--kernel-floor", action="store_true",
                        help="profile the reference's step instead (both layouts): its convolution and matrix kernels")
    args = parser.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        import torch
        torch.set_num_threads(args.threads)
    if args.kernel_floor:
        return kernel_floor_report(lambda channels_last: reference_training_step(args, channels_last), args.steps,
                                   {"bench": "yolo_step_kernel_floor", "model": args.model, "imgsz": args.imgsz,
                                    "batch": args.batch, "targets_per_image": args.targets})
    interleaved_medians(args, PHASES, ours_step, reference_step,
                        {"bench": "yolo_step", "model": args.model, "imgsz": args.imgsz, "batch": args.batch,
                         "targets_per_image": args.targets, "steps": args.steps})


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "bench"))
    main()
