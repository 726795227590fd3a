"""Writes what the C++ loss parity test compares against: libreyolo 1.6.0's own loss code run on
random head maps and hand-made targets (some images empty), with the loss terms it returns and
the gradient of the total loss with respect to every map.

    make_loss_reference.py OUT_DIR

Fails when torch, safetensors or libreyolo cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import math
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.yolo9.loss import YOLO9Loss
    import libreyolo.models.yolox.nn as yolox_nn
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

WIDTH, HEIGHT, STRIDES, CLASSES = 160, 128, (8, 16, 32), 80


def random_targets(generator, counts):
    """[N, 6] rows (image, class, cx, cy, w, h), normalised, as our loader collates them."""
    rows = []
    for image, count in enumerate(counts):
        for _ in range(count):
            w, h = (0.08 + 0.5 * torch.rand(2, generator=generator)).tolist()
            cx = w / 2 + (1 - w) * torch.rand(1, generator=generator).item()
            cy = h / 2 + (1 - h) * torch.rand(1, generator=generator).item()
            cls = int(torch.randint(0, CLASSES, (1,), generator=generator))
            rows.append([image, cls, cx, cy, w, h])
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def padded(rows, images, columns):
    """[B, max, 5] per-image rows built by `columns(row)`, zero padded."""
    most = max([int((rows[:, 0] == i).sum()) for i in range(images)] + [1])
    out = torch.zeros(images, most, 5)
    for i in range(images):
        mine = rows[rows[:, 0] == i]
        for j, row in enumerate(mine):
            out[i, j] = torch.tensor(columns(row))
    return out


def maps_for(generator, images, channels, bias):
    maps = []
    for stride in STRIDES:
        m = torch.randn(images, channels, HEIGHT // stride, WIDTH // stride, generator=generator) * 1.5
        maps.append((m + bias.view(1, -1, 1, 1)).requires_grad_())
    return maps


def yolo9_case(generator, counts, tensors, name):
    images = len(counts)
    rows = random_targets(generator, counts)
    # Box bins fall off linearly so decoded sides are a few strides, not all ~7.5.
    bias = torch.cat([(-0.35 * torch.arange(16)).repeat(4), torch.full((CLASSES,), -4.0)])
    maps = maps_for(generator, images, 64 + CLASSES, bias)
    loss = YOLO9Loss(num_classes=CLASSES, reg_max=16, strides=list(STRIDES), image_size=[WIDTH, HEIGHT],
                     device=torch.device("cpu"), distributed_normalize=False)
    targets = padded(rows, images, lambda r: [r[1], r[2] - r[4] / 2, r[3] - r[5] / 2, r[2] + r[4] / 2, r[3] + r[5] / 2])
    out = loss(maps, targets)
    out["total_loss"].backward()
    for level, m in enumerate(maps):
        tensors[f"{name}.map{level}"] = m.detach().clone()
        tensors[f"{name}.grad{level}"] = m.grad.clone()
    tensors[f"{name}.targets"] = rows
    for key in ("total_loss", "box_loss", "dfl_loss", "cls_loss", "num_fg"):
        tensors[f"{name}.{key}"] = torch.as_tensor(out[key], dtype=torch.float32).detach().reshape(())
    print(f"yolo9 {name}: " + ", ".join(f"{k} {float(torch.as_tensor(out[k]).detach()):.5f}" for k in ("total_loss", "box_loss", "dfl_loss", "cls_loss", "num_fg")))


def yolox_case(generator, counts, use_l1, tensors, name):
    images = len(counts)
    rows = random_targets(generator, counts)
    head = yolox_nn.LibreYOLOXModel(config="n", nb_classes=CLASSES).head
    head.train()
    head.use_l1 = use_l1
    bias = torch.tensor([0.0, 0.0, math.log(4.0), math.log(4.0), -3.0] + [-3.0] * CLASSES)
    maps = maps_for(generator, images, 5 + CLASSES, bias)
    outputs, x_shifts, y_shifts, strides, origin = [], [], [], [], []
    for level, (m, stride) in enumerate(zip(maps, STRIDES)):
        output, grid = head.get_output_and_grid(m.clone(), level, stride, m.type())
        outputs.append(output)
        x_shifts.append(grid[:, :, 0])
        y_shifts.append(grid[:, :, 1])
        strides.append(torch.full((1, grid.shape[1]), float(stride)))
        if use_l1:
            b, _, h, w = m.shape
            origin.append(m[:, :4].reshape(b, 1, 4, h, w).permute(0, 1, 3, 4, 2).reshape(b, -1, 4).clone())
    labels = padded(rows, images, lambda r: [r[1], r[2] * WIDTH, r[3] * HEIGHT, r[4] * WIDTH, r[5] * HEIGHT])
    out = head.get_losses(None, x_shifts, y_shifts, strides, labels, torch.cat(outputs, 1), origin, torch.float32)
    out["total_loss"].backward()
    for level, m in enumerate(maps):
        tensors[f"{name}.map{level}"] = m.detach().clone()
        tensors[f"{name}.grad{level}"] = m.grad.clone()
    tensors[f"{name}.targets"] = rows
    tensors[f"{name}.use_l1"] = torch.tensor(float(use_l1))
    for key in ("total_loss", "iou_loss", "obj_loss", "cls_loss", "l1_loss", "num_fg"):
        tensors[f"{name}.{key}"] = torch.as_tensor(out[key], dtype=torch.float32).detach().reshape(())
    print(f"yolox {name}: " + ", ".join(f"{k} {float(torch.as_tensor(out[k]).detach()):.5f}" for k in ("total_loss", "iou_loss", "obj_loss", "cls_loss", "l1_loss", "num_fg")))


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    cases = [[3, 0, 5, 1], [1], [0, 0], [12, 7]]
    tensors = {}
    for i, counts in enumerate(cases):
        yolo9_case(generator, counts, tensors, f"case{i}")
    save_file(tensors, str(out / "loss-yolo9.safetensors"))
    tensors = {}
    for i, counts in enumerate(cases):
        yolox_case(generator, counts, i % 2 == 1, tensors, f"case{i}")
    save_file(tensors, str(out / "loss-yolox.safetensors"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
