"""Writes what yolov5_loss_parity_test compares against: the original YOLOv5's ComputeLoss
(PyPI yolov5==7.0.14) with hyp.scratch-low's gains as its train.py scales them, on a YOLOv5n's
head maps for hand-made targets (boxes of every size, near cell borders and image edges, one
image empty): the matches of each level (build_targets), the loss and its three terms, the
gradient of the loss with respect to each map, and (eval-mode network, so that no batch
statistics blur the comparison, its BatchNorm statistics random so that the signal reaches the
head) with respect to every parameter.

    make_yolov5_loss_reference.py OUT_DIR

Fails when torch, safetensors or yolov5 cannot be imported (the wrapper skips, 77, only when the
venv is absent).
"""
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    from yolov5.utils.loss import ComputeLoss
    from make_yolov5_reference import build  # random weights and BatchNorm statistics
except ImportError as error:
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

HEIGHT, WIDTH, IMGSZ = 96, 128, 128
# (classes, label smoothing): nc 1 has no class loss
CASES = [(3, 0.0), (1, 0.0), (5, 0.1)]


def targets_for(generator, classes):
    rows = []
    for image, count in enumerate((7, 0, 5)):
        for _ in range(count):
            w, h = (0.02 + 0.6 * torch.rand(2, generator=generator)).tolist()
            cx = w / 2 + (1 - w) * torch.rand(1, generator=generator).item()
            cy = h / 2 + (1 - h) * torch.rand(1, generator=generator).item()
            rows.append([image, int(torch.randint(0, classes, (1,), generator=generator)), cx, cy, w, h])
    # a tiny box and a wide one at the edges, a box centred on a cell border
    rows += [[2, 0, 0.01, 0.99, 0.01, 0.01], [0, classes - 1, 0.5, 0.03, 0.99, 0.05], [2, 0, 0.5, 0.5, 0.25, 0.25]]
    rows.sort(key=lambda r: r[0])  # the collate's order: image by image
    return torch.tensor(rows, dtype=torch.float32)


def main():
    out = pathlib.Path(sys.argv[1])
    tensors = {}
    for index, (classes, smoothing) in enumerate(CASES):
        case = f"case{index}"
        torch.manual_seed(index)
        model = build("n", classes)
        nl = model.model[-1].nl
        model.hyp = {"box": 0.05 * 3 / nl, "cls": 0.5 * classes / 80 * 3 / nl, "obj": 1.0 * (IMGSZ / 640) ** 2 * 3 / nl,
                     "cls_pw": 1.0, "obj_pw": 1.0, "anchor_t": 4.0, "fl_gamma": 0.0, "label_smoothing": smoothing}
        compute = ComputeLoss(model)
        generator = torch.Generator().manual_seed(100 + index)
        targets = targets_for(generator, classes)
        images = torch.rand(3, 3, HEIGHT, WIDTH, generator=generator)
        for name, value in model.state_dict().items():
            tensors[f"{case}.w.{name}"] = value.detach().clone().contiguous()
        tensors[f"{case}.input"] = images
        tensors[f"{case}.targets"] = targets
        tensors[f"{case}.config"] = torch.tensor([classes, IMGSZ], dtype=torch.float64)
        tensors[f"{case}.smoothing"] = torch.tensor([smoothing], dtype=torch.float64)

        model.eval()
        _, maps = model(images)
        maps = [m.detach().requires_grad_(True) for m in maps]  # the loss on the maps themselves
        loss, items = compute(maps, targets)
        loss.backward()
        tensors[f"{case}.loss"] = loss.detach().reshape(1)
        tensors[f"{case}.items"] = items.detach()
        for level, m in enumerate(maps):
            tensors[f"{case}.map{level}"] = m.detach().contiguous()
            tensors[f"{case}.map_grad{level}"] = m.grad.contiguous()
        tcls, tbox, indices, anchors = compute.build_targets(maps, targets)
        # matches that share a cell (boxes of one image, one anchor): yolov5's tobj[b, a, gj, gi] = iou
        # leaves the last one's IoU there, the rule ours follows; the case must hold some
        shared = sum(len(b) - len({(int(x), int(y), int(j), int(i)) for x, y, j, i in zip(b, a, gj, gi)})
                     for b, a, gj, gi in indices)
        assert shared > 0, f"{case}: no two matches share a cell; the duplicate rule goes unchecked"
        for level in range(nl):
            b, a, gj, gi = indices[level]
            tensors[f"{case}.match{level}"] = torch.stack([b, a, gj, gi, tcls[level]]).contiguous()
            tensors[f"{case}.tbox{level}"] = tbox[level].contiguous()

        model.zero_grad()
        _, maps = model(images)
        compute(maps, targets)[0].backward()
        for name, parameter in model.named_parameters():
            tensors[f"{case}.grad.{name}"] = parameter.grad.detach().clone().contiguous()
    save_file(tensors, str(out / "yolov5_loss.safetensors"))


if __name__ == "__main__":
    main()
