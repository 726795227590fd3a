"""libreyolo 1.6.0's HGNetv2 backbones, RT-DETR's (l, x) and D-FINE's (every D-FINE and DEIM size),
with random weights and norm statistics: the state dict, and on one input the eval outputs, the
train-mode outputs, the gradients of a weighted sum of them with respect to every trainable
parameter, and the norms' statistics after that step, for hgnetv2_parity_test.

    make_hgnetv2_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.dfine.backbone import HGNetv2 as DfineHGNetv2
    from libreyolo.models.rtdetr.hgnetv2 import HGNetv2 as RtdetrHGNetv2
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

ARCHS = ["B0", "B1", "B2", "B3", "B4", "B5", "B6", "L", "X", "H"]
# (layout, arch, learnable affine, returned stages, from weights): RT-DETR-l from scratch and -x
# as LibreRTDETR builds it from weights (stem and norms frozen); D-FINE-n as from weights (stem
# frozen, two levels) and D-FINE-m from scratch (learnable affine, three levels)
CASES = [("rtdetr", "L", False, [1, 2, 3], False), ("rtdetr", "X", False, [1, 2, 3], True),
         ("dfine", "B0", True, [2, 3], True), ("dfine", "B2", True, [1, 2, 3], False)]


def build(layout, arch, lab, returned, from_weights):
    if layout == "rtdetr":
        model = RtdetrHGNetv2(arch, use_lab=lab, return_idx=returned, freeze_at=0 if from_weights else -1,
                              freeze_norm=from_weights, pretrained=False)
        return model, from_weights, 0, from_weights
    model = DfineHGNetv2(arch, use_lab=lab, return_idx=returned, freeze_stem_only=True,
                         freeze_at=0 if from_weights else -1, freeze_norm=False)
    return model, from_weights, 0, False


def randomise(model, generator):
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var"):
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif name.endswith(("running_mean", "bias")):
                tensor.copy_(0.1 * torch.randn(tensor.shape, generator=generator))
            elif name.endswith(("bn.weight", "lab.scale")):
                tensor.copy_(0.8 + 0.4 * torch.rand(tensor.shape, generator=generator))
            else:  # conv weights: scaled to keep the activations of a deep net in range
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * (0.5 / fan_in) ** 0.5)


def main(out_dir):
    generator = torch.Generator().manual_seed(20261204)
    tensors = {}
    for number, (layout, arch, lab, returned, from_weights) in enumerate(CASES):
        model, freeze_stem, frozen_stages, freeze_norm = build(layout, arch, lab, returned, from_weights)
        randomise(model, generator)
        name = f"case{number}"
        mask = sum(1 << stage for stage in returned)
        tensors[f"{name}.config"] = torch.tensor(
            [int(layout == "dfine"), ARCHS.index(arch), int(lab), int(freeze_stem), frozen_stages, int(freeze_norm), mask],
            dtype=torch.int64)
        for key, value in model.state_dict().items():
            tensors[f"{name}.state.{key}"] = value.clone()
        x = torch.randn(2, 3, 64, 96, generator=generator)
        tensors[f"{name}.input"] = x
        model.eval()
        with torch.no_grad():
            for level, out in enumerate(model(x)):
                tensors[f"{name}.eval{level}"] = out
        model.train()
        outs = model(x)
        total = 0
        for level, out in enumerate(outs):
            weights = torch.randn(out.shape, generator=generator)
            tensors[f"{name}.train{level}"] = out.detach()
            tensors[f"{name}.weights{level}"] = weights
            total = total + (out * weights).sum()
        total.backward()
        for key, parameter in model.named_parameters():
            if parameter.requires_grad:
                tensors[f"{name}.grad.{key}"] = parameter.grad
        for key, value in model.state_dict().items():
            if "running" in key:
                tensors[f"{name}.after.{key}"] = value.clone()
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/hgnetv2.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
