"""Fixture detections (seeded: several images and classes, background images, classes without
detections, duplicates and near misses) and Ultralytics' P, R, F1 and AP on them: its
DetectionValidator.match_predictions per image, then ultralytics.utils.metrics.ap_per_class.

    make_pr_reference.py OUT_DIR

Fails when ultralytics cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import json
import os
import pathlib
import random
import sys

os.environ["YOLO_CONFIG_DIR"] = sys.argv[1]  # its settings file goes to the scratch folder, not ~/.config
os.environ["YOLO_OFFLINE"] = "1"
try:
    import numpy as np
    import torch
    from ultralytics.models.yolo.detect import DetectionValidator
    from ultralytics.utils.metrics import ap_per_class, box_iou
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def fixture(seed, images=14):
    rng = random.Random(seed)
    gts, dts = [], []
    for image in range(images):
        n = 0 if image % 6 == 5 else rng.randint(1, 8)
        for _ in range(n):
            cls = rng.choice([0, 1, 2, 3, 5])
            w, h = rng.uniform(8, 200), rng.uniform(8, 200)
            x, y = rng.uniform(0, 500), rng.uniform(0, 400)
            gts.append([image, cls, x, y, w, h])
            for _ in range(rng.choice([0, 1, 1, 2])):  # misses, hits, duplicates
                j = lambda v, s: v + rng.gauss(0, s)
                dts.append([image, cls if rng.random() < 0.85 else rng.choice([0, 1, 2, 3, 4]), j(x, 0.1 * w), j(y, 0.1 * h),
                            abs(j(w, 0.12 * w)) + 1, abs(j(h, 0.12 * h)) + 1, rng.random()])
        for _ in range(rng.randint(0, 4)):  # stray false positives
            dts.append([image, rng.choice([0, 1, 2, 4]), rng.uniform(0, 500), rng.uniform(0, 400), rng.uniform(3, 150),
                        rng.uniform(3, 150), rng.random()])
    return images, gts, dts


def xyxy(rows):
    return torch.tensor([[r[2], r[3], r[2] + r[4], r[3] + r[5]] for r in rows], dtype=torch.float32).reshape(-1, 4)


def evaluate(images, gts, dts):
    validator = DetectionValidator.__new__(DetectionValidator)
    validator.iouv = torch.linspace(0.5, 0.95, 10)
    tp, conf, pred_cls, target_cls, matches = [], [], [], [], []
    for image in range(images):
        g = [r for r in gts if r[0] == image]
        d = sorted([r for r in dts if r[0] == image], key=lambda r: -r[6])  # NMS order: descending confidence
        target_cls += [r[1] for r in g]
        if not d:
            continue
        if g:
            correct = validator.match_predictions(torch.tensor([r[1] for r in d]), torch.tensor([r[1] for r in g]),
                                                  box_iou(xyxy(g), xyxy(d))).numpy()
        else:
            correct = np.zeros((len(d), 10), dtype=bool)
        matches.append({"image": image, "correct": correct.astype(int).tolist()})
        tp.append(correct)
        conf += [r[6] for r in d]
        pred_cls += [r[1] for r in d]
    tp = np.concatenate(tp, 0) if tp else np.zeros((0, 10), dtype=bool)
    _, _, p, r, f1, ap, classes, *_ = ap_per_class(tp, np.array(conf), np.array(pred_cls), np.array(target_cls))
    return {"matches": matches, "classes": classes.tolist(), "p": p.tolist(), "r": r.tolist(), "f1": f1.tolist(),
            "ap": ap.tolist(), "mp": float(p.mean()) if len(p) else 0.0, "mr": float(r.mean()) if len(r) else 0.0}


cases = []
for seed in range(6):
    images, gts, dts = fixture(seed)
    cases.append({"gt": gts, "dt": dts, "expected": evaluate(images, gts, dts)})
pathlib.Path(sys.argv[1], "pr.json").write_text(json.dumps(cases))
