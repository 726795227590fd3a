"""COCO JSON oracle for coco_json.sh, with pycocotools.

    coco_json.py make DATASET      writes DATASET/annotations/instances_{train,val}.json from the
                                   synthetic dataset's YOLO labels: sparse category ids, segment
                                   areas below the box areas, crowd regions, an empty box, an image
                                   without annotations; prints pycocotools' counts per split
    coco_json.py counts JSON       pycocotools' image, annotation and category counts
    coco_json.py evaluate JSON PREDICTIONS
                                   COCOeval's stats[0] and stats[1] of predictions.json against JSON
"""
import contextlib
import io
import json
import pathlib
import random
import sys

try:
    from PIL import Image
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CATEGORY_IDS = [3, 7, 11, 90]  # classes 0..3 of the synthetic data, sparse on purpose
NAMES = ["square", "circle", "triangle", "cross"]


def quiet_coco(path):
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


def make(dataset):
    root = pathlib.Path(dataset)
    (root / "annotations").mkdir(exist_ok=True)
    rng = random.Random(7)
    for split in ("train", "val"):
        images, annotations = [], []
        files = sorted((root / "images" / split).glob("*.jpg"))
        for number, image_file in enumerate(files):
            width, height = Image.open(image_file).size
            image_id = 1000 + 17 * number  # ids that are not indices
            images.append({"id": image_id, "file_name": image_file.name, "width": width, "height": height})
            label = root / "labels" / split / (image_file.stem + ".txt")
            rows = [line.split() for line in label.read_text().splitlines() if line.strip()] if label.exists() else []
            if number == 2:
                rows = []  # an image without annotations
            for cls, cx, cy, w, h in rows:
                bw, bh = float(w) * width, float(h) * height
                x, y = float(cx) * width - bw / 2, float(cy) * height - bh / 2
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": CATEGORY_IDS[int(cls)],
                                    "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
                                    "area": round(bw * bh * rng.uniform(0.5, 0.9), 2), "iscrowd": 0})
            if number % 3 == 1:  # a crowd region over part of the image
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": CATEGORY_IDS[number % 4],
                                    "bbox": [0, 0, width / 2, height / 2], "area": width * height / 8, "iscrowd": 1})
        if split == "train":  # an empty box: left out of training
            annotations.append({"id": len(annotations) + 1, "image_id": images[0]["id"], "category_id": CATEGORY_IDS[0],
                                "bbox": [5, 5, 0, 0], "area": 0, "iscrowd": 0})
        categories = [{"id": i, "name": n, "supercategory": "shape"} for i, n in zip(CATEGORY_IDS, NAMES)]
        path = root / "annotations" / f"instances_{split}.json"
        path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
        counts(path)


def counts(path):
    coco = quiet_coco(path)
    crowd = sum(1 for a in coco.dataset["annotations"] if a.get("iscrowd"))
    print(f"{pathlib.Path(path).name}: {len(coco.getImgIds())} images, {len(coco.getAnnIds())} annotations ({crowd} crowd), "
          f"{len(coco.getCatIds())} categories")


def evaluate(path, predictions):
    coco = quiet_coco(path)
    with contextlib.redirect_stdout(io.StringIO()):
        result = coco.loadRes(str(predictions))
        ev = COCOeval(coco, result, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    print(f"{float(ev.stats[0])!r} {float(ev.stats[1])!r}")


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "make":
        make(sys.argv[2])
    elif command == "counts":
        counts(sys.argv[2])
    else:
        evaluate(sys.argv[2], sys.argv[3])
