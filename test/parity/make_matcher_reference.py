"""libreyolo 1.6.0's RT-DETR Hungarian matcher (focal class cost, L1, GIoU; weights 2, 5, 2) run
on random queries and targets: its cost matrices and its assignments, for matcher_parity_test.

    make_matcher_reference.py OUT_DIR

Cases: DETR-sized (300 queries, 80 classes, an image without targets), more targets than queries,
and ties (queries and targets repeated, so that several assignments cost the same and SciPy's
tie-breaking decides).
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.rtdetr.loss import RTDETRLoss
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def random_boxes(generator, count):
    """(cx, cy, w, h) inside the unit square."""
    size = 0.02 + 0.5 * torch.rand(count, 2, generator=generator)
    centre = size / 2 + (1 - size) * torch.rand(count, 2, generator=generator)
    return torch.cat([centre, size], 1)


def case(generator, queries, classes, counts, repeat_queries=False, repeat_targets=False):
    images = len(counts)
    logits = torch.randn(images, queries, classes, generator=generator) * 2
    boxes = random_boxes(generator, images * queries).view(images, queries, 4)
    if repeat_queries:  # each query twice
        logits[:, 1::2] = logits[:, 0::2][:, : queries // 2]
        boxes[:, 1::2] = boxes[:, 0::2][:, : queries // 2]
    targets = []
    for count in counts:
        labels = torch.randint(0, classes, (count,), generator=generator)
        target_boxes = random_boxes(generator, count)
        if repeat_targets and count >= 2:  # the first target twice
            labels[1], target_boxes[1] = labels[0], target_boxes[0]
        targets.append({"labels": labels, "boxes": target_boxes})
    return logits, boxes, targets


def main(out_dir):
    generator = torch.Generator().manual_seed(20261204)
    matcher = RTDETRLoss(num_classes=80).matcher
    tensors = {}
    cases = [
        case(generator, 300, 80, [5, 0, 17]),
        case(generator, 10, 3, [12, 4]),
        case(generator, 24, 4, [6, 9], repeat_queries=True, repeat_targets=True),
        case(generator, 8, 2, [8, 3], repeat_queries=True),
    ]
    for number, (logits, boxes, targets) in enumerate(cases):
        outputs = {"pred_logits": logits, "pred_boxes": boxes}
        cost = matcher.compute_cost_matrix(outputs, targets)
        indices = matcher(outputs, targets)
        name = f"case{number}"
        tensors[f"{name}.logits"] = logits
        tensors[f"{name}.boxes"] = boxes
        tensors[f"{name}.classes"] = torch.cat([t["labels"] for t in targets])
        tensors[f"{name}.target_boxes"] = torch.cat([t["boxes"] for t in targets])
        tensors[f"{name}.counts"] = torch.tensor([len(t["labels"]) for t in targets], dtype=torch.int64)
        tensors[f"{name}.cost"] = cost.contiguous()
        for image, (rows, cols) in enumerate(indices):
            tensors[f"{name}.rows{image}"] = rows
            tensors[f"{name}.cols{image}"] = cols
    save_file(tensors, f"{out_dir}/matcher.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
