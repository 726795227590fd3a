"""libreyolo 1.6.0's PResNet (RT-DETR's backbone) with random weights and norm statistics: its
state dict, and on one input its eval outputs, its train-mode outputs, the gradients of a weighted
sum of them with respect to every trainable parameter, and the norms' statistics after that step,
for presnet_parity_test.

    make_presnet_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.rtdetr.backbone import PResNet
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

# (depth, freeze_at, freeze_norm): r18/r34 as trained from scratch and as LibreYOLO builds them,
# r50 with frozen norms (its default), r101 as from scratch
CASES = [(18, -1, False), (34, 0, False), (50, 0, True), (101, -1, False)]


def randomise(model, generator):
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var"):
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif name.endswith(("running_mean", "bias")):
                tensor.copy_(0.1 * torch.randn(tensor.shape, generator=generator))
            elif name.endswith("norm.weight"):
                tensor.copy_(0.8 + 0.4 * torch.rand(tensor.shape, generator=generator))
            else:  # conv weights: scaled to keep the activations of a deep net in range
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * (1.0 / fan_in) ** 0.5)


def main(out_dir):
    generator = torch.Generator().manual_seed(20261206)
    tensors = {}
    for number, (depth, freeze_at, freeze_norm) in enumerate(CASES):
        model = PResNet(depth, variant="d", return_idx=[1, 2, 3], freeze_at=freeze_at, freeze_norm=freeze_norm)
        randomise(model, generator)
        name = f"case{number}"
        tensors[f"{name}.config"] = torch.tensor([depth, freeze_at, int(freeze_norm)], dtype=torch.int64)
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
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/presnet.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
