"""Writes what yolo7_parity_test compares against, from libreyolo 1.6.0's YOLOv7-b: a model with
random BatchNorm statistics (seeded), its state dict, an input batch, the raw head maps in eval
mode, each map decoded by its postprocess's decode_v7_head (batch 0), the train-mode maps in
float32 and float64; then its YOLOv7Loss (the anchor head decoded into SimOTA's predictions) on the
eval maps for hand-made boxes: the loss, its terms, the number of positives, the gradient with
respect to each map, and through the network (eval mode) every parameter's gradient.

    make_yolo7_reference.py OUT_DIR

Fails when torch, safetensors or libreyolo cannot be imported (the wrapper skips, 77, only when
the venv is absent).
"""
import copy
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.yolo7.net import YOLOv7Model
    from libreyolo.models.yolo7.loss import YOLOv7Loss
    from libreyolo.postprocess.yolo7 import decode_v7_head
except ImportError as error:
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

HEIGHT, WIDTH = 128, 160  # not square, so that x and y cannot be swapped unseen
CLASSES = 3


def build(classes):
    torch.manual_seed(0)
    model = YOLOv7Model(num_classes=classes)
    model.initialize_biases(0.01)
    generator = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
            for name, p in module.named_parameters(recurse=False):
                if name == "implicit":  # away from 0 and 1, so that a missed implicit layer shows
                    p.add_(torch.randn(p.shape, generator=generator) * 0.1)
    return model


def boxes_for(generator):
    """Rows (image, class, cx, cy, w, h), normalised: boxes of every size, one image empty, one
    box near the border."""
    rows = []
    for image, count in enumerate((6, 0, 4)):
        for _ in range(count):
            w, h = (0.05 + 0.6 * torch.rand(2, generator=generator)).tolist()
            cx = w / 2 + (1 - w) * torch.rand(1, generator=generator).item()
            cy = h / 2 + (1 - h) * torch.rand(1, generator=generator).item()
            rows.append([image, int(torch.randint(0, CLASSES, (1,), generator=generator)), cx, cy, w, h])
    rows.append([2, CLASSES - 1, 0.97, 0.5, 0.06, 0.3])
    rows.sort(key=lambda r: r[0])
    return torch.tensor(rows, dtype=torch.float32)


def pixel_labels(rows, batch):
    """The loss's input: [B, G, 5] (class, cx, cy, w, h) pixels, real rows first, zero rows after."""
    slots = max(1, max(int((rows[:, 0] == b).sum()) for b in range(batch)))
    labels = torch.zeros(batch, slots, 5)
    for b in range(batch):
        mine = rows[rows[:, 0] == b]
        labels[b, :len(mine), 0] = mine[:, 1]
        labels[b, :len(mine), 1:] = mine[:, 2:] * torch.tensor([WIDTH, HEIGHT, WIDTH, HEIGHT])
    return labels


def main():
    out = pathlib.Path(sys.argv[1])
    tensors = {}
    model = build(CLASSES)
    generator = torch.Generator().manual_seed(11)
    images = torch.rand(3, 3, HEIGHT, WIDTH, generator=generator)
    for name, value in model.state_dict().items():
        tensors[f"w.{name}"] = value.detach().clone().contiguous()
    tensors["input"] = images
    model.eval()
    with torch.no_grad():
        maps = model(images)
    for level, (m, stride) in enumerate(zip(maps, model.strides)):
        tensors[f"eval{level}"] = m.contiguous()
        flat = model.anchors[level]  # (w, h) pairs, as the postprocess takes them
        pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
        boxes, scores = decode_v7_head(m, pairs, stride, CLASSES)
        tensors[f"decoded_boxes{level}"] = boxes.contiguous()
        tensors[f"decoded_scores{level}"] = scores.contiguous()
    trained = copy.deepcopy(model).train()  # train mode moves the BatchNorm statistics: not the model's
    with torch.no_grad():
        train32 = trained(images)
        train64 = trained.double()(images.double())
    for level, (m32, m64) in enumerate(zip(train32, train64)):
        tensors[f"train{level}"] = m32.contiguous()
        tensors[f"train64_{level}"] = m64.contiguous()

    rows = boxes_for(torch.Generator().manual_seed(5))
    labels = pixel_labels(rows, images.shape[0])
    tensors["targets"] = rows
    criterion = YOLOv7Loss(CLASSES, model.anchors, model.strides, distributed_normalize=False)
    model.eval()
    with torch.no_grad():
        maps = model(images)
    maps = [m.detach().requires_grad_(True) for m in maps]
    # the assignment of each image: matched box + 1 per prediction, 0 for background
    outputs, xs, ys, strides = criterion._decode(maps)
    assigned = torch.zeros(outputs.shape[0], outputs.shape[1], dtype=torch.int64)
    for b in range(outputs.shape[0]):
        count = int((labels[b].sum(-1) > 0).sum())
        if count == 0:
            continue
        _, fg, _, gt_index, _ = criterion.get_assignments(
            b, count, labels[b, :count, 1:5], labels[b, :count, 0], outputs[b, :, :4].detach(), torch.cat(strides, 1),
            torch.cat(xs, 1), torch.cat(ys, 1), outputs[..., 5:].detach(), outputs[..., 4:5].detach())
        assigned[b, fg] = gt_index + 1
    tensors["assigned"] = assigned
    result = criterion(maps, labels)
    result["total_loss"].backward()
    for key in ("total_loss", "iou_loss", "obj_loss", "cls_loss"):
        tensors[f"loss.{key}"] = torch.as_tensor(result[key], dtype=torch.float32).detach().reshape(1)
    for level, m in enumerate(maps):
        tensors[f"map_grad{level}"] = m.grad.contiguous()
    model.zero_grad()
    criterion(model(images), labels)["total_loss"].backward()
    for name, parameter in model.named_parameters():
        tensors[f"grad.{name}"] = parameter.grad.detach().clone().contiguous()
    save_file({f"case0.{k}": v for k, v in tensors.items()}, str(out / "yolo7.safetensors"))
    print(f"loss {float(result['total_loss']):.6g} (iou {float(result['iou_loss']):.6g}, obj {float(result['obj_loss']):.6g}, "
          f"cls {float(result['cls_loss']):.6g}); {len(rows)} boxes")


if __name__ == "__main__":
    main()
