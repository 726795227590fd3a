"""libreyolo 1.6.0's classification evaluation view (build_classify_transforms(augment=False):
Resize(floor(imgsz / crop_pct), bicubic) on the PIL image, CenterCrop, ToTensor, Normalize) of
images written here (JPEG in colour and grey, odd sizes, an EXIF-rotated one, a PNG), and Pillow's
bicubic resize with fractional boxes, and its training loss (F.cross_entropy, as its
classification_loss without class weights) with the logits' gradient, for classify_views_parity_test.

    make_classify_views_reference.py OUT_DIR
"""
import io
import math
import os
import sys

try:
    import numpy as np
    import torch
    from PIL import Image
    from safetensors.torch import save_file
    from libreyolo.data.augment.classify import build_classify_transforms
    from torchvision.datasets.folder import pil_loader
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

VIEWS = [(224, 0.875), (224, 0.95), (256, 0.95), (64, 0.875)]
# (width, height, mode, format)
IMAGES = [(300, 200, "RGB", "JPEG"), (97, 411, "RGB", "JPEG"), (224, 224, "RGB", "JPEG"), (500, 375, "L", "JPEG"),
          (640, 427, "RGB", "PNG"), (31, 45, "RGB", "JPEG")]
# Pillow resizes: (source width, height, output width, height, box or None)
RESIZES = [(300, 200, 120, 80, None), (50, 40, 224, 224, None), (300, 200, 64, 64, (10.5, 3.25, 210.0, 170.75)),
           (97, 411, 256, 256, (0, 100, 97, 197)), (640, 427, 224, 149, None)]


def picture(rng, width, height):
    # smooth gradients plus noise: what a photo has, and enough detail that a resize shows
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255.0 / max(1, width - 1), y * 255.0 / max(1, height - 1), (x + y) % 256], axis=-1)
    return np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)


def main(out_dir):
    rng = np.random.default_rng(20261207)
    images = os.path.join(out_dir, "images")
    os.makedirs(images)
    tensors = {}
    names = []
    for number, (width, height, mode, fmt) in enumerate(IMAGES):
        image = Image.fromarray(picture(rng, width, height)).convert(mode)
        path = os.path.join(images, f"{number}.{'jpg' if fmt == 'JPEG' else 'png'}")
        image.save(path, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        names.append(path)
    # an EXIF orientation 6 JPEG: ImageFolder's loader does not rotate it
    image = Image.fromarray(picture(rng, 180, 120))
    exif = Image.Exif()
    exif[0x0112] = 6
    path = os.path.join(images, f"{len(names)}.jpg")
    image.save(path, "JPEG", quality=90, exif=exif.tobytes())
    names.append(path)
    with open(os.path.join(out_dir, "images.txt"), "w") as listing:
        listing.write("\n".join(names) + "\n")
    for v, (imgsz, crop_pct) in enumerate(VIEWS):
        transform = build_classify_transforms(imgsz, False, crop_pct=crop_pct, interpolation="bicubic")
        tensors[f"view{v}.config"] = torch.tensor([imgsz, crop_pct], dtype=torch.float64)
        for i, path in enumerate(names):
            tensors[f"view{v}.image{i}"] = transform(pil_loader(path)).contiguous()
    for r, (w, h, ow, oh, box) in enumerate(RESIZES):
        source = picture(rng, w, h)
        out = Image.fromarray(source).resize((ow, oh), Image.BICUBIC, box=box)
        tensors[f"resize{r}.source"] = torch.from_numpy(source.copy())
        tensors[f"resize{r}.out"] = torch.from_numpy(np.asarray(out).copy())
        tensors[f"resize{r}.box"] = torch.tensor(box if box else (0, 0, w, h), dtype=torch.float64)
    from libreyolo.training.classification import classification_loss
    generator = torch.Generator().manual_seed(7)
    for case, (batch, classes) in enumerate([(16, 10), (5, 3), (64, 1000)]):
        logits = (torch.randn(batch, classes, generator=generator) * 3).requires_grad_()
        targets = torch.randint(0, classes, (batch,), generator=generator)
        loss = classification_loss(logits, targets, None)
        loss.backward()
        tensors[f"loss{case}.logits"] = logits.detach()
        tensors[f"loss{case}.targets"] = targets
        tensors[f"loss{case}.loss"] = loss.detach()
        tensors[f"loss{case}.grad"] = logits.grad
    save_file(tensors, os.path.join(out_dir, "views.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1])
