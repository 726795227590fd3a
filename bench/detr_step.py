"""An RT-DETR or D-FINE training step on the CPU, ours (bench/detr_step) beside libreyolo 1.6.0's
(its RTDETRModel and RTDETRLoss, LibreDFINEModel and DFINECriterion, or LibreDEIMModel and
DEIMCriterion; torch's AdamW and clip_grad_norm_), same size, input, batch, targets and recipe (lr
1e-4 for RT-DETR and DEIM, 2e-4 for D-FINE, weight decay 1e-4, clip 0.1), by phase: forward with the denoising queries,
matching and loss, backward, optimizer. Medians over --steps after a warm-up step; --repeat runs
each implementation that many times, interleaved, and reports the median of their medians.

    python3 bench/detr_step.py [--size r18|...|x|dfine-n|...|dfine-x|deim-n|...|deim-x] [--imgsz 320] [--batch 4] [--steps 5] [--repeat 3]
                               [--targets 6] [--threads N] [--kernel-floor]

--kernel-floor profiles the reference's step alone, as yolo_step.py's does (its docstring says what
the figure means).

Needs the test venv (libreyolo 1.6.0, torch) for the reference; run it with that venv's Python.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from machine import ROOT, interleaved_medians, kernel_floor_report

PHASES = ("forward_s", "matching_loss_s", "backward_s", "optimizer_s", "step_s")


def reference_parts(args, torch, channels_last=False):
    """(model, criterion, optimizer, images, targets) of the reference, in training mode."""
    torch.manual_seed(0)
    if args.size.startswith(("dfine-", "deim-")):
        family, size = args.size.split("-", 1)
        model, criterion, lr = fdr_reference(size, deim=family == "deim")
    else:
        model, criterion, lr = rtdetr_reference(args.size)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    images = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    targets = []
    for _ in range(args.batch):
        size = 0.05 + 0.3 * torch.rand(args.targets, 2)
        targets.append({"labels": torch.randint(0, 80, (args.targets,)),
                        "boxes": torch.cat([size / 2 + (1 - size) * torch.rand(args.targets, 2), size], 1)})
    if channels_last:
        model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    return model, criterion, optimizer, images, targets


def reference_step(args):
    import torch

    return time_steps(args, *reference_parts(args, torch))


def fdr_reference(size, deim):
    """LibreDFINEModel (or LibreDEIMModel) from scratch and DFINECriterion (DEIMCriterion, MAL) as
    LibreYOLO's trainers build them; lr 2e-4 (DEIM 1e-4)."""
    if deim:
        from libreyolo.models.deim.loss import DEIMCriterion as Criterion
        from libreyolo.models.deim.matcher import HungarianMatcher
        from libreyolo.models.deim.nn import LibreDEIMModel as Model
    else:
        from libreyolo.models.dfine.loss import DFINECriterion as Criterion
        from libreyolo.models.dfine.matcher import HungarianMatcher
        from libreyolo.models.dfine.nn import LibreDFINEModel as Model

    model = Model(size, nb_classes=80, train_from_scratch=True)
    matcher = HungarianMatcher(weight_dict={"cost_class": 2.0, "cost_bbox": 5.0, "cost_giou": 2.0}, use_focal_loss=True,
                               alpha=0.25, gamma=2.0)
    label = "mal" if deim else "vfl"
    criterion = Criterion(matcher=matcher, weight_dict={f"loss_{label}": 1.0, "loss_bbox": 5.0, "loss_giou": 2.0,
                                                        "loss_fgl": 0.15, "loss_ddf": 1.5},
                          losses=[label, "boxes", "local"], alpha=0.75, gamma=1.5 if deim else 2.0, num_classes=80,
                          reg_max=32)
    return model, lambda outputs, targets: sum(criterion(outputs, targets).values()), 1e-4 if deim else 2e-4


def rtdetr_reference(size):
    """RTDETRModel and RTDETRLoss as LibreYOLO's RT-DETR trainer builds them; lr 1e-4."""
    from libreyolo.models.rtdetr.loss import RTDETRLoss
    from libreyolo.models.rtdetr.model import RTDETR_CONFIGS
    from libreyolo.models.rtdetr.nn import RTDETRModel

    cfg = RTDETR_CONFIGS[size]
    model = RTDETRModel(num_classes=80, backbone_depth=cfg["backbone_depth"], backbone_freeze_at=-1,
                        backbone_freeze_norm=False, backbone_pretrained=False, hidden_dim=cfg["encoder_hidden_dim"],
                        dim_feedforward=cfg["encoder_dim_feedforward"], expansion=cfg["encoder_expansion"],
                        decoder_hidden_dim=cfg["decoder_hidden_dim"],
                        decoder_dim_feedforward=cfg.get("decoder_dim_feedforward", 1024),
                        num_decoder_layers=cfg["num_decoder_layers"], eval_idx=cfg["eval_idx"])
    criterion = RTDETRLoss(num_classes=80)
    return model, lambda outputs, targets: criterion(outputs, targets)["total_loss"], 1e-4


def time_steps(args, model, criterion, optimizer, images, targets):
    import torch

    phases = {name: [] for name in PHASES}
    for step in range(args.steps + 1):
        start = time.perf_counter()
        outputs = model(images, targets=targets)
        forward = time.perf_counter() - start
        start = time.perf_counter()
        loss = criterion(outputs, targets)
        matching_loss = time.perf_counter() - start
        start = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        backward = time.perf_counter() - start
        start = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        optimizer_step = time.perf_counter() - start
        if step == 0:
            continue
        for name, value in zip(PHASES, (forward, matching_loss, backward, optimizer_step,
                                        forward + matching_loss + backward + optimizer_step)):
            phases[name].append(value)
    return {name: statistics.median(values) for name, values in phases.items()} | {"threads": torch.get_num_threads()}


def reference_training_step(args, channels_last):
    """The reference's whole training step as one call (for --kernel-floor)."""
    import torch

    model, criterion, optimizer, images, targets = reference_parts(args, torch, channels_last)

    def step():
        loss = criterion(model(images, targets=targets), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()

    return step


def ours_step(args):
    binary = os.environ.get("LIBREYOLO_BENCH_DIR", str(ROOT / "build" / "bench")) + "/detr_step"
    output = subprocess.run([binary, f"size={args.size}", f"imgsz={args.imgsz}", f"batch={args.batch}",
                             f"steps={args.steps}", f"targets={args.targets}"], check=True, capture_output=True, text=True)
    return json.loads(output.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="r18")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=4)
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
    model = args.size if args.size.startswith(("dfine-", "deim-")) else f"rtdetr-{args.size}"
    if args.kernel_floor:
        return kernel_floor_report(lambda channels_last: reference_training_step(args, channels_last), args.steps,
                                   {"bench": "detr_step_kernel_floor", "model": model, "imgsz": args.imgsz,
                                    "batch": args.batch, "targets_per_image": args.targets})
    interleaved_medians(args, PHASES, ours_step, reference_step,
                        {"bench": "detr_step", "model": model, "imgsz": args.imgsz, "batch": args.batch,
                         "targets_per_image": args.targets, "steps": args.steps})


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "bench"))
    main()
