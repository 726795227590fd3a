"""What the DETR reference scripts share: the recording of libreyolo 1.6.0's denoising draws,
random norm statistics, random targets in its (labels, cxcywh boxes) form, and a model's eval then
training outputs."""
import libreyolo.models.rtdetr.denoising as denoising
import torch


class RecordingTorch:
    """torch, with every rand_like / randint_like result kept in call order: the denoising module's
    draws (set as its `torch` while the reference runs)."""

    def __init__(self):
        self.draws = []

    def __getattr__(self, name):
        return getattr(torch, name)

    def rand_like(self, *args, **kwargs):
        self.draws.append(torch.rand_like(*args, **kwargs))
        return self.draws[-1]

    def randint_like(self, *args, **kwargs):
        self.draws.append(torch.randint_like(*args, **kwargs))
        return self.draws[-1]


NOISE_KEYS = ("label_uniform", "random_label", "sign_bit", "box_uniform")  # the draws, in call order


def randomise_norms(model, generator, box_heads=False):
    """Random BatchNorm statistics; with `box_heads`, the DETR box heads' last layers away from
    their zero initialisation."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("running_var"):
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif name.endswith("running_mean"):
                tensor.copy_(0.1 * torch.randn(tensor.shape, generator=generator))
            elif box_heads and "bbox_head" in name and name.endswith("layers.2.weight"):
                tensor.copy_(0.05 * torch.randn(tensor.shape, generator=generator))


def random_targets(generator, counts, classes, smallest=0.1, spread=0.4):
    """Per image {labels, boxes}: boxes (cx, cy, w, h) inside the unit square."""
    targets = []
    for count in counts:
        size = smallest + spread * torch.rand(count, 2, generator=generator)
        centre = size / 2 + (1 - size) * torch.rand(count, 2, generator=generator)
        targets.append({"labels": torch.randint(0, classes, (count,), generator=generator),
                        "boxes": torch.cat([centre, size], 1)})
    return targets


def store_targets(tensors, targets, counts):
    """The targets as the C++ checkers read them: counts, then every image's classes and boxes."""
    tensors["counts"] = torch.tensor(counts, dtype=torch.int64)
    tensors["classes"] = torch.cat([t["labels"] for t in targets])
    tensors["boxes"] = torch.cat([t["boxes"] for t in targets])


def eval_then_train(model, inputs, targets, tensors, denoising_module=denoising):
    """The model's eval outputs (eval.logits, eval.boxes), then its training outputs on `targets`
    with the denoising draws recorded (noise.<key>) into `tensors`; returns the training outputs.
    `denoising_module`: the family's denoising module (RT-DETR's by default, D-FINE's)."""
    model.eval()
    with torch.no_grad():
        out = model(inputs)
    tensors["eval.logits"], tensors["eval.boxes"] = out["pred_logits"], out["pred_boxes"]
    model.train()
    recorder = RecordingTorch()
    denoising_module.torch = recorder
    try:
        out = model(inputs, targets=targets)
    finally:
        denoising_module.torch = torch
    for key, draw in zip(NOISE_KEYS, recorder.draws):
        tensors[f"noise.{key}"] = draw
    return out


def weighted_levels(out, generator, tensors):
    """Every output level of a DETR's training outputs (last, aux<i>, dn<i>) into `tensors` with
    random weights; returns the weighted sum whose gradients the checkers compare."""
    levels = [("last", out)] + [(f"aux{i}", o) for i, o in enumerate(out["aux_outputs"])] + \
             [(f"dn{i}", o) for i, o in enumerate(out.get("dn_aux_outputs", []))]
    total = 0
    for label, level in levels:
        for key in ("pred_logits", "pred_boxes"):
            weights = torch.randn(level[key].shape, generator=generator)
            tensors[f"train.{label}.{key}"] = level[key].detach()
            tensors[f"weights.{label}.{key}"] = weights
            total = total + (level[key] * weights).sum()
    return total
