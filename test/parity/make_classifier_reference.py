"""libreyolo 1.6.0's classifier networks (MobileNetV4 s/m/l, ResNet 18/50) with random weights and
norm statistics: the state dict, and on one input the eval logits, the train-mode logits, the
gradients of a weighted sum of them with respect to every parameter, and the norms' statistics
after that step, for classifier_parity_test.

    make_classifier_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.mobilenetv4.nn import MobileNetV4
    from libreyolo.models.resnet.nn import ResNet
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

# (family 0 = MobileNetV4 / 1 = ResNet, size, classes); sizes as strings in the models' own terms
CASES = [(0, "s", 10), (0, "m", 7), (0, "l", 3), (1, "18", 10), (1, "50", 5)]
SIZE_CODES = {"s": 0, "m": 1, "l": 2, "18": 18, "50": 50}


def randomise(model, generator):
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var"):
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif name.endswith(("running_mean", "bias")):
                tensor.copy_(0.1 * torch.randn(tensor.shape, generator=generator))
            elif tensor.dim() == 1:  # norm weights
                tensor.copy_(0.8 + 0.4 * torch.rand(tensor.shape, generator=generator))
            else:  # conv and linear weights: scaled to keep the activations of a deep net in range
                fan_in = tensor[0].numel()
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * (1.0 / fan_in) ** 0.5)


def main(out_dir):
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(20261207)
    tensors = {}
    for number, (family, size, classes) in enumerate(CASES):
        model = MobileNetV4(size=size, num_classes=classes) if family == 0 else ResNet(size=size, num_classes=classes)
        randomise(model, generator)
        name = f"case{number}"
        tensors[f"{name}.config"] = torch.tensor([family, SIZE_CODES[size], classes], dtype=torch.int64)
        for key, value in model.state_dict().items():
            tensors[f"{name}.state.{key}"] = value.clone()
        x = torch.randn(2, 3, 64, 64, generator=generator)
        tensors[f"{name}.input"] = x
        model.eval()
        with torch.no_grad():
            tensors[f"{name}.eval0"] = model(x)
        model.train()
        out = model(x)
        weights = torch.randn(out.shape, generator=generator)
        tensors[f"{name}.train0"] = out.detach()
        tensors[f"{name}.weights0"] = weights
        (out * weights).sum().backward()
        for key, parameter in model.named_parameters():
            tensors[f"{name}.grad.{key}"] = parameter.grad
        for key, value in model.state_dict().items():
            if "running" in key:
                tensors[f"{name}.after.{key}"] = value.clone()
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/classifier.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
