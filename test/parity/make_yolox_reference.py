"""Writes what the C++ YOLOX parity test compares against: libreyolo 1.6.0's YOLOX built in
Python (random weights, fixed seed, nc=80, BatchNorm statistics randomised so eval mode uses
them), its state dict, an input batch and the raw head outputs in eval and train mode.

    make_yolox_reference.py OUT_DIR SIZE [SIZE ...]

Exits 77 (skipped) when torch, safetensors or libreyolo cannot be imported.
"""
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    import libreyolo.models.yolox.nn as yolox_nn
except ImportError as error:  # the oracle is a test-time tool; without it the test skips
    print(f"skipped: {error}")
    sys.exit(77)


def reference(size: str, out: pathlib.Path) -> None:
    torch.manual_seed(0)
    model = yolox_nn.LibreYOLOXModel(config=size, nb_classes=80)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    captured = {}

    def keep(name):
        def hook(_module, _inputs, output):
            captured[name] = output.detach().clone()
        return hook

    for level in range(3):
        model.head.reg_preds[level].register_forward_hook(keep(f"reg{level}"))
        model.head.obj_preds[level].register_forward_hook(keep(f"obj{level}"))
        model.head.cls_preds[level].register_forward_hook(keep(f"cls{level}"))

    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    images = torch.rand(2, 3, 96, 128)
    tensors = {"input": images}
    model.eval()
    with torch.no_grad():
        model(images)
    for level in range(3):
        tensors[f"eval{level}"] = torch.cat(
            [captured[f"reg{level}"], captured[f"obj{level}"].sigmoid(), captured[f"cls{level}"].sigmoid()], 1)
    model.train()
    with torch.no_grad():
        model(images)
    for level in range(3):
        tensors[f"train{level}"] = torch.cat([captured[f"reg{level}"], captured[f"obj{level}"], captured[f"cls{level}"]], 1)
    save_file(weights, str(out / f"yolox-{size}.weights.safetensors"))
    save_file(tensors, str(out / f"yolox-{size}.io.safetensors"))
    print(f"yolox-{size}: {sum(p.numel() for p in model.parameters())} parameters, {len(weights)} state-dict entries")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for size in sys.argv[2:]:
        reference(size, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
