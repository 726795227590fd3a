"""libreyolo 1.6.0's training samples with the augmentation off, as its YOLOX, YOLOv7 and RTMDet
trainers build them (YOLODataset.pull_item: load_resized_img and the labels times r; then the
TrainTransform at flip 0 and hsv 0: the top-left fit), for samples_parity_test. Writes JPEGs of
awkward sizes (a 1/2-scale JPEG decode would cover imgsz; truncated sides; an upscale) with YOLO
labels and a data YAML into OUT_DIR, then per image its name, the sample (HWC BGR uint8) and the
labels [class, cx, cy, w, h] in the sample's pixels.

    make_samples_reference.py OUT_DIR
"""
import pathlib
import sys

try:
    import cv2
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from libreyolo.data.augment.yolox import TrainTransform
    from libreyolo.data.dataset import YOLODataset
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

IMGSZ = 320
# (width, height): 850 x 567 and 1000 x 300 decode at 1/2 scale where a decoder may scale; 381 x 500
# and 640 x 427 truncate a side (487.68 -> 487 at 640 is the same case at 320: 243.84, 213.5); 100 x 70
# is enlarged; 320 x 320 is left alone
SIZES = [(850, 567), (381, 500), (640, 427), (100, 70), (320, 320), (1000, 300)]


def main(out_dir):
    out = pathlib.Path(out_dir)
    (out / "images").mkdir()
    (out / "labels").mkdir()
    rng = np.random.default_rng(20261205)
    images, labels = [], []
    for index, (width, height) in enumerate(SIZES):
        ys, xs = np.mgrid[0:height, 0:width]
        base = np.stack([xs / width, ys / height, (xs * ys) / (width * height)], axis=-1)
        image = (255 * (0.6 * base + 0.4 * rng.random((height, width, 3)))).astype(np.uint8)
        rows = []
        for _ in range(1 + index % 3):
            w, h = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.5)
            cx, cy = rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2)
            cls = int(rng.integers(0, 3))
            x1, y1 = int((cx - w / 2) * width), int((cy - h / 2) * height)
            cv2.rectangle(image, (x1, y1), (int((cx + w / 2) * width), int((cy + h / 2) * height)),
                          (60 * cls, 255 - 60 * cls, 128), 3)
            rows.append(f"{cls} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}")
        name = f"img{index}"
        images.append(out / "images" / f"{name}.jpg")
        labels.append(out / "labels" / f"{name}.txt")
        cv2.imwrite(str(images[-1]), image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        labels[-1].write_text("\n".join(rows) + "\n")
    (out / "data.yaml").write_text(f"path: {out}\ntrain: images\nval: images\nnames:\n  0: a\n  1: b\n  2: c\n")

    dataset = YOLODataset(img_files=images, label_files=labels, img_size=(IMGSZ, IMGSZ),
                          preproc=TrainTransform(max_labels=120, flip_prob=0.0, hsv_prob=0.0), num_classes=3)
    tensors = {}
    for index in range(len(SIZES)):
        image, label, _, _ = dataset.pull_item(index)
        sample, padded = dataset.preproc(image, label, (IMGSZ, IMGSZ))
        padded = padded[(padded[:, 3:5] > 0).all(axis=1)]
        tensors[f"case{index}.name"] = torch.tensor(list(images[index].name.encode()), dtype=torch.uint8)
        tensors[f"case{index}.image"] = torch.from_numpy(np.ascontiguousarray(sample.transpose(1, 2, 0))).to(torch.uint8)
        tensors[f"case{index}.labels"] = torch.from_numpy(padded).to(torch.float64).contiguous()
    save_file(tensors, str(out / "samples.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1])
