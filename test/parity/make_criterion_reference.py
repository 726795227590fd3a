"""libreyolo 1.6.0's RT-DETR criterion (RTDETRLoss: Hungarian matching per level, VFL, L1, GIoU;
denoising groups matched by construction) on random decoder, encoder and denoising outputs: every
weighted term it returns and the gradient of the total with respect to each output, for
criterion_parity_test.

    make_criterion_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.rtdetr.loss import RTDETRLoss
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CLASSES, QUERIES, LAYERS = 12, 30, 3


def leaf(tensor):
    return tensor.detach().clone().requires_grad_()


def random_level(generator, images, queries):
    logits = torch.randn(images, queries, CLASSES, generator=generator) * 2 - 1
    size = 0.05 + 0.4 * torch.rand(images, queries, 2, generator=generator)
    centre = size / 2 + (1 - size) * torch.rand(images, queries, 2, generator=generator)
    return {"pred_logits": leaf(logits), "pred_boxes": leaf(torch.cat([centre, size], -1))}


def random_targets(generator, counts):
    targets = []
    for count in counts:
        size = 0.05 + 0.4 * torch.rand(count, 2, generator=generator)
        centre = size / 2 + (1 - size) * torch.rand(count, 2, generator=generator)
        targets.append({"labels": torch.randint(0, CLASSES, (count,), generator=generator),
                        "boxes": torch.cat([centre, size], -1)})
    return targets


def case(generator, counts, groups):
    images = len(counts)
    outputs = random_level(generator, images, QUERIES)
    # decoder layers 0..LAYERS-2, then the encoder's top-k proposals
    outputs["aux_outputs"] = [random_level(generator, images, QUERIES) for _ in range(LAYERS)]
    leaves = [("last", outputs)] + [(f"aux{i}", level) for i, level in enumerate(outputs["aux_outputs"])]
    if groups:
        most = max(counts)
        positives = [torch.tensor([g * 2 * most + j for g in range(groups) for j in range(n)], dtype=torch.int64)
                     for n in counts]
        outputs["dn_aux_outputs"] = [random_level(generator, images, groups * 2 * most) for _ in range(LAYERS)]
        outputs["dn_meta"] = {"dn_positive_idx": positives, "dn_num_group": groups,
                              "dn_num_split": [groups * 2 * most, QUERIES]}
        leaves += [(f"dn{i}", level) for i, level in enumerate(outputs["dn_aux_outputs"])]
    return outputs, random_targets(generator, counts), leaves


def main(out_dir):
    generator = torch.Generator().manual_seed(20261205)
    criterion = RTDETRLoss(num_classes=CLASSES)
    tensors = {}
    cases = [case(generator, [4, 0, 6], groups=3), case(generator, [1, 2], groups=0), case(generator, [0, 0], groups=0)]
    for number, (outputs, targets, leaves) in enumerate(cases):
        name = f"case{number}"
        losses = criterion(outputs, targets)
        losses["total_loss"].backward()
        for key, value in losses.items():
            tensors[f"{name}.term.{key}"] = value.detach().reshape(())
        for label, level in leaves:
            for key in ("pred_logits", "pred_boxes"):
                tensors[f"{name}.{label}.{key}"] = level[key].detach()
                grad = level[key].grad
                tensors[f"{name}.{label}.{key}.grad"] = grad if grad is not None else torch.zeros_like(level[key])
        tensors[f"{name}.classes"] = torch.cat([t["labels"] for t in targets])
        tensors[f"{name}.target_boxes"] = torch.cat([t["boxes"] for t in targets]).reshape(-1, 4)
        tensors[f"{name}.counts"] = torch.tensor([len(t["labels"]) for t in targets], dtype=torch.int64)
        if "dn_meta" in outputs:
            tensors[f"{name}.dn_groups"] = torch.tensor(outputs["dn_meta"]["dn_num_group"], dtype=torch.int64)
            for image, positives in enumerate(outputs["dn_meta"]["dn_positive_idx"]):
                tensors[f"{name}.dn_positive{image}"] = positives
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/criterion.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
