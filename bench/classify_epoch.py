"""One training epoch of a classifier, ours against libreyolo 1.6.0's (its Python API from the test
venv), float32, same batch, workers and data, validation off, interleaved runs; and with
--kernel-floor the reference's training step measured as the step benches measure the detectors'
(bench/machine.py kernel_floor_report): what its convolutions and matrix products alone take, so
that the epoch's ceiling and how much of it we reach can be stated.

The data: coco128's 128 photos (640 px JPEGs), each linked --copies times (4: 512 images, eight
batches of 64) into two class folders per split, so that the epoch decodes and crops real photos as
a user's ImageFolder set does.

    python bench/classify_epoch.py [--models mobilenetv4-s,resnet-18] [--imgsz 224] [--batch 64]
                                   [--workers 2] [--copies 4] [--repeat 3] [--kernel-floor] [--steps 3]

with the test venv's python (~/.local/share/libreyolo/venv/bin/python). Prints one JSON line per
run and a summary per model: the medians, the ratio, and with --kernel-floor the ceiling
(reference epoch over its batches' kernel floor) and reach (our speed-up over that ceiling).
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

from machine import OURS, cpu_model, kernel_floor_report, require_dataset


def photo_folder(work, copies):
    images = sorted((require_dataset("coco128") / "coco128" / "images" / "train2017").glob("*.jpg"))
    root = work / "photos"
    for split in ("train", "val"):
        for index, image in enumerate(images):
            for copy in range(copies):
                folder = root / split / ("a" if (index + copy) % 2 == 0 else "b")
                folder.mkdir(parents=True, exist_ok=True)
                os.symlink(image, folder / f"{image.stem}_{copy}.jpg")
    return root


def ours(args, model, data, work):
    name = f"ours_{model}"
    subprocess.run([str(OURS), "train", f"model={model}", f"data={data}", "epochs=1", f"batch={args.batch}",
                    f"imgsz={args.imgsz}", f"workers={args.workers}", "val=false", "amp=false", "quiet=true",
                    f"project={work}", f"name={name}", "exist_ok=true"], check=True, capture_output=True)
    row = list(csv.DictReader(open(work / name / "results.csv")))[-1]
    return {"epoch_s": float(row["epoch_time"]), "data_wait_share": float(row["data_wait_share"])}


def reference(args, model, data, work):
    family, size = model.split("-")
    name = f"ref_{model}"
    code = f"""
from libreyolo.models.mobilenetv4.model import LibreMobileNetV4
from libreyolo.models.resnet.model import LibreResNet
model = ({'LibreMobileNetV4' if family == 'mobilenetv4' else 'LibreResNet'})(size={size!r}, nb_classes=2)
model.train(data={str(data)!r}, epochs=1, batch={args.batch}, imgsz={args.imgsz}, workers={args.workers}, val=False,
            amp=False, device="cpu", project={str(work)!r}, name={name!r}, exist_ok=True)
"""
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    rows = [json.loads(line) for line in (work / name / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {"epoch_s": float(rows[-1]["time"])}  # its TrainEpochEvent's epoch seconds


def reference_step(model, args, channels_last):
    """The reference's training step on a random batch: forward, cross-entropy, backward, AdamW."""
    import torch
    from libreyolo.models.mobilenetv4.model import LibreMobileNetV4
    from libreyolo.models.resnet.model import LibreResNet

    torch.manual_seed(0)
    family, size = model.split("-")
    net = (LibreMobileNetV4 if family == "mobilenetv4" else LibreResNet)(size=size, nb_classes=2).model
    net.train()
    x = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    y = torch.randint(0, 2, (args.batch,))
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out[0] if isinstance(out, (tuple, list)) else out, y)
        loss.backward()
        optimizer.step()

    return step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mobilenetv4-s,resnet-18")
    parser.add_argument("--imgsz", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kernel-floor", action="store_true", help="also the reference step's kernel floor")
    parser.add_argument("--steps", type=int, default=3, help="profiled steps per layout for --kernel-floor")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = pathlib.Path(folder)
        data = photo_folder(work, args.copies)
        images = 128 * args.copies
        batches = images // args.batch  # both drop the incomplete last batch
        for model in args.models.split(","):
            runs = {"ours": [], "reference": []}
            for r in range(args.repeat):  # interleaved: drift hits both alike
                for side, run in (("ours", ours), ("reference", reference)):
                    runs[side].append(run(args, model, data, work))
                    print(json.dumps({"side": side, "model": model, "run": r, **runs[side][-1]}), flush=True)
            med = {side: statistics.median(run["epoch_s"] for run in rows) for side, rows in runs.items()}
            summary = {"bench": "classify_epoch", "model": model, "imgsz": args.imgsz, "batch": args.batch,
                       "workers": args.workers, "images": images, "batches": batches, "repeat": args.repeat,
                       "cpu": cpu_model(), "ours_epoch_s": round(med["ours"], 2), "reference_epoch_s": round(med["reference"], 2),
                       "ours_data_wait_share": round(statistics.median(run["data_wait_share"] for run in runs["ours"]), 4),
                       "speedup": round(med["reference"] / med["ours"], 3)}
            if args.kernel_floor:
                captured = kernel_floor_report(lambda cl: reference_step(model, args, cl), args.steps, {}, emit=False)
                floor_epoch = batches * captured["best_of_both_s"]
                summary.update({"reference_step_s": captured["contiguous"]["step_s"],
                                "reference_step_channels_last_s": captured["channels_last"]["step_s"],
                                "kernel_floor_step_s": captured["best_of_both_s"],
                                "ceiling": round(med["reference"] / floor_epoch, 3)})
                summary["reach"] = round(summary["speedup"] / summary["ceiling"], 3)
            print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.exit(main())
