"""The classification loader against libreyolo 1.6.0's, on the same ImageFolder set and workers:
images per second of training batches (decode, RandomResizedCrop with bicubic resampling, flips,
collate), median of --repeat runs, interleaved. Ours: `libreyolo data bench` (decoding only as much
of each JPEG as its crop needs); LibreYOLO's: torchvision's ImageFolder with its
build_classify_transforms(augment=True, interpolation="bicubic") in a torch DataLoader as its
trainer builds it (shuffle, batch, workers, its classify collate), float32 CHW out.

The default set is coco128's 128 full-size images (640 px JPEGs, as photos come), each linked
--copies times (8: 1024 per split, 16 batches of 64), as one class folder per split: a loader bench,
where the pixels matter and the labels do not. The timed batches lie inside one epoch on both sides:
LibreYOLO's trainer does not keep its workers between epochs, and on 128 images their restart
every two batches would be most of what the reference is timed on.

    python3 bench/classify_loader.py [--data ROOT] [--copies 8] [--workers 2] [--batch 64] [--imgsz 224] [--repeat 3] [--batches 12]

Prints one JSON line per run and side, then the summary (medians, the ratio, the CPU model).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from machine import OURS, cpu_model, require_dataset


def coco128_folder(work, copies):
    images = require_dataset("coco128") / "coco128" / "images" / "train2017"
    for split in ("train", "val"):
        folder = work / "coco128-cls" / split / "images"
        folder.mkdir(parents=True)
        for image in sorted(images.glob("*.jpg")):
            for copy in range(copies):
                os.symlink(image, folder / f"{image.stem}_{copy}.jpg")
    return work / "coco128-cls"


def ours(args):
    command = [str(OURS), "data", "bench", f"data={args.data}", "model=mobilenetv4-s", f"imgsz={args.imgsz}",
               f"batch={args.batch}", f"workers={args.workers}", "repeat=1", f"bench_batches={args.batches}", "quiet=true"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def reference(args):
    import torch
    from libreyolo.data.augment.classify import build_classify_transforms
    from torchvision.datasets import ImageFolder

    torch.set_num_threads(1)
    dataset = ImageFolder(os.path.join(args.data, "train"),
                          transform=build_classify_transforms(args.imgsz, True, interpolation="bicubic"))
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         drop_last=False, persistent_workers=False)
    images, seen = 0, 0
    iterator = iter(loader)
    next(iterator)  # the workers started and their first batches in flight, as ours after start_epoch
    start = time.perf_counter()
    while seen < args.batches:
        try:
            batch, _ = next(iterator)
        except StopIteration:
            iterator = iter(loader)
            continue
        images += batch.shape[0]
        seen += 1
    return {"images_per_second_median": images / (time.perf_counter() - start)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data")
    parser.add_argument("--copies", type=int, default=8, help="links per coco128 image in the default set")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=224)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batches", type=int, default=12)
    args = parser.parse_args()
    given = bool(args.data)  # --copies shapes the default set only
    with tempfile.TemporaryDirectory() as folder:
        if not args.data:
            args.data = str(coco128_folder(pathlib.Path(folder), args.copies))
        runs = {"ours": [], "reference": []}
        for _ in range(args.repeat):  # interleaved: drift hits both alike
            runs["ours"].append(ours(args)["images_per_second_median"])
            runs["reference"].append(reference(args)["images_per_second_median"])
            print(json.dumps({"ours": round(runs["ours"][-1], 1), "reference": round(runs["reference"][-1], 1)}), flush=True)
        last = ours(args)
        summary = {"bench": "classify_loader", "data": args.data, "copies": None if given else args.copies, "imgsz": args.imgsz, "batch": args.batch,
                   "workers": args.workers, "repeat": args.repeat, "cpu": cpu_model(),
                   "ours_images_per_second": round(statistics.median(runs["ours"]), 1),
                   "reference_images_per_second": round(statistics.median(runs["reference"]), 1),
                   "single_thread_ms": {k.removeprefix("single_thread_").removesuffix("_ms_per_image"): round(v, 2)
                                        for k, v in last.items() if k.startswith("single_thread_")}}
        summary["speedup"] = round(summary["ours_images_per_second"] / summary["reference_images_per_second"], 2)
        print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
