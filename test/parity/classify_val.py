"""libreyolo 1.6.0's side of classify_val.sh: train a classifier on an ImageFolder set and write its
checkpoint; validate and predict a checkpoint (its metrics and every image's top-5); compare those
with ours.

    classify_val.py train FAMILY SIZE DATA DIR      -> DIR/py/weights/best.pt
    classify_val.py reference CHECKPOINT DATA OUT   -> OUT (JSON: val metrics, top-5 per image)
    classify_val.py check REFERENCE OUR_VAL OUR_PREDICT
"""
import json
import os
import sys

try:
    from libreyolo import LibreYOLO
    from libreyolo.models.mobilenetv4.model import LibreMobileNetV4
    from libreyolo.models.resnet.model import LibreResNet
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

METRICS = ["metrics/accuracy_top1", "metrics/accuracy_top5", "metrics/precision", "metrics/recall", "metrics/f1"]
IMGSZ = 64


def val_images(data):
    root = os.path.join(data, "val")
    return [os.path.join(root, c, f) for c in sorted(os.listdir(root)) for f in sorted(os.listdir(os.path.join(root, c)))]


def train(family, size, data, out_dir):
    classes = len(os.listdir(os.path.join(data, "train")))
    model = (LibreMobileNetV4 if family == "mobilenetv4" else LibreResNet)(size=size, nb_classes=classes)
    # the raw weights (ema=False): after two epochs they tell the classes apart, as an EMA this young does not
    model.train(data=data, epochs=2, batch=8, imgsz=IMGSZ, workers=0, amp=False, ema=False, project=out_dir, name="py",
                exist_ok=True)


def reference(checkpoint, data, out):
    model = LibreYOLO(checkpoint)
    metrics = model.val(data=data, batch=8, imgsz=IMGSZ, verbose=False, workers=0)
    top5 = {}
    for path in val_images(data):
        result = model.predict(path, imgsz=IMGSZ)
        top5[os.path.realpath(path)] = (result[0] if isinstance(result, list) else result).summary()
    with open(out, "w") as f:
        json.dump({"metrics": {k: metrics[k] for k in METRICS}, "top5": top5}, f)


def check(reference_file, val_file, predict_file):
    ref = json.load(open(reference_file))
    ours_val = json.load(open(val_file))
    ours_predict = json.load(open(predict_file))["classifications"]
    ok = True
    for key in METRICS:
        if ours_val[key] != ref["metrics"][key]:
            print(f"{key}: ours {ours_val[key]}, libreyolo {ref['metrics'][key]}")
            ok = False
    worst = 0.0
    for image in ours_predict:
        theirs = ref["top5"].get(os.path.realpath(image["path"]))
        if theirs is None:
            print(f"{image['path']}: not predicted by libreyolo")
            ok = False
            continue
        if [r["class"] for r in image["top5"]] != [r["class"] for r in theirs] or \
           [r["name"] for r in image["top5"]] != [r["name"] for r in theirs]:
            print(f"{image['path']}: top-5 ours {image['top5']}, libreyolo {theirs}")
            ok = False
        worst = max([worst] + [abs(a["confidence"] - b["confidence"]) for a, b in zip(image["top5"], theirs)])
    if worst > 1.5e-5:  # both round to 5 decimals
        print(f"confidences differ by up to {worst}")
        ok = False
    print(f"top-1 {ours_val['metrics/accuracy_top1']:.4f} (libreyolo {ref['metrics']['metrics/accuracy_top1']:.4f}), "
          f"{len(ours_predict)} images' top-5 (largest confidence difference {worst:.1g}): {'ok' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "train":
        train(*sys.argv[2:6])
    elif mode == "reference":
        reference(*sys.argv[2:5])
    elif mode == "check":
        sys.exit(0 if check(*sys.argv[2:5]) else 1)
    else:
        sys.exit(f"unknown mode {mode}")
