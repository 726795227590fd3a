"""Writes what rtmdet_parity_test compares against, from libreyolo 1.6.0's RTMDet: models (t at
3 classes, m at 2: distances exp'ed) with random BatchNorm statistics, their state dicts (the head's
shared convolutions under every level's name, as it saves them), an input batch, the eval-mode
class and box maps and the train-mode ones in float32 and float64; then its RTMDetLoss on the eval
maps for hand-made boxes: the dynamic soft-label assignment (labels and IoU metrics per prior), the
loss and its two terms, the gradients with respect to every map, and through the network (eval
mode) every parameter's gradient.

    make_rtmdet_reference.py OUT_DIR

Fails when torch, safetensors or libreyolo cannot be imported (the wrapper skips, 77, only when
the venv is absent).
"""
import copy
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.rtmdet.nn import LibreRTMDetModel
    from libreyolo.models.rtmdet.loss import RTMDetLoss
except ImportError as error:
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

HEIGHT, WIDTH = 128, 160  # not square, so that x and y cannot be swapped unseen
CASES = [("t", 3), ("m", 2)]
SIZES = "tsmlx"
INIT_SEEDS = (0, 1)


def build(size, classes, seed):
    torch.manual_seed(seed)
    model = LibreRTMDetModel(size=size, nc=classes)
    generator = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
        for name, p in model.named_parameters():  # the head's boxes away from their zero start
            if "rtm_reg" in name and name.endswith("weight"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
            elif "rtm_reg" in name:  # t/s: distances of 1.5 strides (m: exp(0) = 1)
                p.fill_(0.0 if size == "m" else 1.5)
            elif "rtm_cls" in name and name.endswith("weight"):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
    return model


def boxes_for(generator, batch, classes):
    """Per image (xyxy pixels [n, 4], labels [n]): boxes of every size, image 1 empty."""
    out = []
    for image, count in enumerate((6, 0, 4)[:batch]):
        rows, labels = [], []
        for _ in range(count):
            w = (0.08 + 0.6 * torch.rand(1, generator=generator).item()) * WIDTH
            h = (0.08 + 0.6 * torch.rand(1, generator=generator).item()) * HEIGHT
            x1 = (WIDTH - w) * torch.rand(1, generator=generator).item()
            y1 = (HEIGHT - h) * torch.rand(1, generator=generator).item()
            rows.append([x1, y1, x1 + w, y1 + h])
            labels.append(int(torch.randint(0, classes, (1,), generator=generator)))
        out.append((torch.tensor(rows, dtype=torch.float32).reshape(-1, 4), torch.tensor(labels, dtype=torch.long)))
    return out


def main():
    out = pathlib.Path(sys.argv[1])
    tensors = {}
    for index, (size, classes) in enumerate(CASES):
        case = f"case{index}."
        model = build(size, classes, index)
        generator = torch.Generator().manual_seed(11 + index)
        images = torch.randn(3, 3, HEIGHT, WIDTH, generator=generator)
        for name, value in model.state_dict().items():
            tensors[case + "w." + name] = value.detach().clone().contiguous()
        tensors[case + "input"] = images
        tensors[case + "config"] = torch.tensor([SIZES.index(size), classes])
        model.eval()
        with torch.no_grad():
            cls_scores, bbox_preds = model(images)
        for level, (c, r) in enumerate(zip(cls_scores, bbox_preds)):
            tensors[f"{case}eval_cls{level}"] = c.contiguous()
            tensors[f"{case}eval_reg{level}"] = r.contiguous()
        trained = copy.deepcopy(model).train()  # train mode moves the BatchNorm statistics: not the model's
        with torch.no_grad():
            train32 = trained(images)
            train64 = trained.double()(images.double())
        for level in range(3):
            tensors[f"{case}train_cls{level}"] = train32[0][level].contiguous()
            tensors[f"{case}train_reg{level}"] = train32[1][level].contiguous()
            tensors[f"{case}train64_cls{level}"] = train64[0][level].contiguous()
            tensors[f"{case}train64_reg{level}"] = train64[1][level].contiguous()

        boxes = boxes_for(torch.Generator().manual_seed(5 + index), images.shape[0], classes)
        rows = [[i, float(label), (b[0] + b[2]) / 2 / WIDTH, (b[1] + b[3]) / 2 / HEIGHT, (b[2] - b[0]) / WIDTH,
                 (b[3] - b[1]) / HEIGHT] for i, (bb, ll) in enumerate(boxes) for b, label in zip(bb.tolist(), ll.tolist())]
        tensors[case + "targets"] = torch.tensor(rows, dtype=torch.float32)
        tensors[case + "boxes_xyxy"] = torch.cat([bb for bb, _ in boxes])  # the pixels the reference's loss gets
        criterion = RTMDetLoss(num_classes=classes, distributed_normalize=False)
        with torch.no_grad():
            cls_scores, bbox_preds = model(images)
        cls_scores = [c.detach().requires_grad_(True) for c in cls_scores]
        bbox_preds = [r.detach().requires_grad_(True) for r in bbox_preds]
        # the assignment, as the loss runs it
        captured = {}
        assigner_forward = criterion.assigner.forward
        def capture(*args, **kwargs):
            captured.update(assigner_forward(*args, **kwargs))
            return captured
        criterion.assigner.forward = capture
        result = criterion(cls_scores, bbox_preds, [bb for bb, _ in boxes], [ll for _, ll in boxes])
        tensors[case + "assigned_labels"] = captured["assigned_labels"].contiguous()
        tensors[case + "assign_metrics"] = captured["assign_metrics"].contiguous()
        result["total_loss"].backward()
        for key in ("total_loss", "loss_cls", "loss_bbox"):
            tensors[f"{case}loss.{key}"] = result[key].detach().float().reshape(1)
        for level in range(3):
            tensors[f"{case}grad_cls{level}"] = cls_scores[level].grad.contiguous()
            tensors[f"{case}grad_reg{level}"] = bbox_preds[level].grad.contiguous()
        model.zero_grad()
        cls_scores, bbox_preds = model(images)
        criterion(cls_scores, bbox_preds, [bb for bb, _ in boxes], [ll for _, ll in boxes])["total_loss"].backward()
        for name, parameter in model.named_parameters():  # the shared convolutions once, under level 0
            tensors[f"{case}grad.{name}"] = parameter.grad.detach().clone().contiguous()
        print(f"rtmdet-{size}: loss {float(result['total_loss']):.6g} (cls {float(result['loss_cls']):.6g}, "
              f"bbox {float(result['loss_bbox']):.6g}); {int((captured['assigned_labels'] < classes).sum())} positives")
    save_file(tensors, str(out / "rtmdet.safetensors"))
    # what training starts from: RTMDet-t at 80 classes built right after torch.manual_seed(seed),
    # as libreyolo's model wrapper builds it (models/base/model.py)
    init = {}
    for seed in INIT_SEEDS:
        torch.manual_seed(seed)
        for name, value in LibreRTMDetModel(size="t", nc=80).state_dict().items():
            init[f"seed{seed}.{name}"] = value.detach().clone().contiguous()
    save_file(init, str(out / "rtmdet_init.safetensors"))


if __name__ == "__main__":
    main()
