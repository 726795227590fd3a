"""Fixture ground truth and detections (seeded: several images and classes, all three area
ranges, images without ground truth, classes without detections, duplicate and near-miss
boxes, tied scores; two with crowd regions and annotation areas, as COCO JSON has them) and
pycocotools' COCOeval results on them, for the C++ COCO metrics test.

    make_coco_reference.py OUT_DIR

Fails when pycocotools or numpy cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import json
import pathlib
import random
import sys

try:
    import numpy as np
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def fixture(seed):
    rng = random.Random(seed)
    images, gts, dts = list(range(1, 13)), [], []
    for image in images:
        if image % 5 == 0:
            n = 0  # background image: every detection is a false positive
        else:
            n = rng.randint(1, 9)
        for _ in range(n):
            cls = rng.choice([0, 1, 2, 3, 5])
            w, h = rng.choice([rng.uniform(4, 30), rng.uniform(30, 95), rng.uniform(95, 300)]), rng.uniform(5, 250)
            x, y = rng.uniform(0, 600), rng.uniform(0, 400)
            gts.append([image, cls, x, y, w, h])
            for _ in range(rng.choice([0, 1, 1, 2])):  # misses, hits, duplicates
                j = lambda v, s: v + rng.gauss(0, s)
                dts.append([image, cls if rng.random() < 0.85 else rng.choice([0, 1, 2, 3, 4]),
                            j(x, 0.08 * w), j(y, 0.08 * h), abs(j(w, 0.1 * w)) + 1, abs(j(h, 0.1 * h)) + 1,
                            round(rng.random(), 2)])  # rounded scores: ties
        for _ in range(rng.randint(0, 4)):  # stray false positives
            dts.append([image, rng.choice([0, 1, 2, 4]), rng.uniform(0, 600), rng.uniform(0, 400),
                        rng.uniform(3, 200), rng.uniform(3, 200), round(rng.random(), 2)])
    return images, gts, dts


def with_crowds(seed, images, gts, dts):
    """COCO JSON's ground truth: each box with an annotation area below its box's (a segment's), some
    boxes crowd regions, and a large crowd region over some images' detections."""
    rng = random.Random(1000 + seed)
    rows = [g + [1 if rng.random() < 0.15 else 0, g[4] * g[5] * rng.uniform(0.35, 1.0)] for g in gts]
    for image in images[::3]:
        x, y, w, h = rng.uniform(0, 200), rng.uniform(0, 150), rng.uniform(200, 400), rng.uniform(150, 300)
        rows.append([image, rng.choice([0, 1, 2]), x, y, w, h, 1, w * h * 0.6])
        for _ in range(rng.randint(1, 4)):  # detections inside the crowd: neither right nor wrong
            dts.append([image, rows[-1][1], x + rng.uniform(0, w / 2), y + rng.uniform(0, h / 2), rng.uniform(10, w / 2),
                        rng.uniform(10, h / 2), round(rng.random(), 2)])
    return rows, dts


def coco_eval(images, gts, dts, categories, max_dets=None):
    """COCOeval on the fixture, evaluated and accumulated."""
    coco = COCO()
    coco.dataset = {
        "images": [{"id": i} for i in images],
        "categories": [{"id": c} for c in categories],
        "annotations": [{"id": k + 1, "image_id": g[0], "category_id": g[1], "bbox": g[2:6],
                         "area": g[7] if len(g) > 6 else g[4] * g[5], "iscrowd": g[6] if len(g) > 6 else 0}
                        for k, g in enumerate(gts)],
    }
    coco.createIndex()
    result = coco.loadRes([{"image_id": d[0], "category_id": d[1], "bbox": d[2:6], "score": d[6]} for d in dts]) if dts else COCO()
    ev = COCOeval(coco, result, "bbox")
    if max_dets:
        ev.params.maxDets = max_dets
    ev.evaluate()
    ev.accumulate()
    return ev


def evaluate(images, gts, dts, categories):
    ev = coco_eval(images, gts, dts, categories)
    ev.summarize()
    p = ev.eval["precision"][:, :, :, 0, -1]
    r = ev.eval["recall"][:, :, 0, -1]
    per_class = []
    for k, c in enumerate(categories):
        pk, rk = ev.eval["precision"][:, :, k, 0, -1], ev.eval["recall"][:, k, 0, -1]
        per_class.append({"category": c, "map50_95": float(pk[pk > -1].mean()) if (pk > -1).any() else -1,
                          "map50": float(pk[0][pk[0] > -1].mean()) if (pk[0] > -1).any() else -1,
                          "recall": float(rk[rk > -1].mean()) if (rk > -1).any() else -1})
    return {"stats": [float(s) for s in ev.stats], "precision": float(p[p > -1].mean()),
            "recall": float(r[r > -1].mean()), "per_class": per_class}


def evaluate_capped(images, gts, dts, categories, cap):
    """LibreYOLO's eval_max_det: maxDets {1, 10, 100, cap}; AP, AR@cap and the area metrics read
    at the cap from the accumulated arrays (its COCOEvaluator._standard_stats); recall = AR@100."""
    ev = coco_eval(images, gts, dts, categories, sorted({1, 10, 100, cap}))
    labels, dets = ev.params.areaRngLbl, ev.params.maxDets

    def mean_valid(values):
        valid = values[values > -1]
        return float(valid.mean()) if valid.size else -1.0

    def ap(area="all", thr=None):
        v = ev.eval["precision"]
        if thr is not None:
            v = v[np.flatnonzero(np.isclose(ev.params.iouThrs, thr))]
        return mean_valid(v[:, :, :, labels.index(area), dets.index(cap)])

    def ar(m, area="all"):
        return mean_valid(ev.eval["recall"][:, :, labels.index(area), dets.index(m)])

    stats = [ap(), ap(thr=0.5), ap(thr=0.75), ap("small"), ap("medium"), ap("large"),
             ar(1), ar(10), ar(cap), ar(cap, "small"), ar(cap, "medium"), ar(cap, "large")]
    return {"stats": stats, "recall": ar(100)}


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for seed in range(6):
        images, gts, dts = fixture(seed)
        if seed >= 4:
            gts, dts = with_crowds(seed, images, gts, dts)
        categories = [0, 1, 2, 3, 4, 5]
        cases.append({"images": images, "categories": categories, "gt": gts, "dt": dts,
                      "expected": evaluate(images, gts, dts, categories),
                      "capped": [{"cap": cap, **evaluate_capped(images, gts, dts, categories, cap)} for cap in (5, 15)]})
    (out / "coco.json").write_text(json.dumps(cases))
    print(f"{len(cases)} fixtures, stats[0] " + ", ".join(f"{c['expected']['stats'][0]:.4f}" for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
