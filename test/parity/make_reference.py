"""Writes what the C++ model parity test compares against: a model of libreyolo 1.6.0 built in
Python (random weights, fixed seed, nc=80, BatchNorm statistics randomised so eval mode uses
them), its state dict, an input batch and the raw head outputs in eval and train mode; for YOLOv9
with the PGI auxiliary branch attached (enable_aux), and the auxiliary head's train-mode maps too.
The train-mode maps also come from the same model in float64 (`train64_*`, `aux64_*`): the truth
that float32 results are measured against (in train mode, on batch statistics of two images,
float32 rounding grows through the network: PyTorch's own float32 maps are ~2e-4 off it).

    make_reference.py OUT_DIR FAMILY SIZE [SIZE ...]      FAMILY: yolox | yolo9

Fails when torch, safetensors or libreyolo cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import copy
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    import libreyolo.models.yolo9.nn as yolo9_nn
    import libreyolo.models.yolox.nn as yolox_nn
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def raw_outputs(family, model, captured):
    """Per level, the head's raw maps as our C++ models return them."""
    if family == "yolox":
        return [(captured[f"reg{i}"], captured[f"obj{i}"], captured[f"cls{i}"]) for i in range(3)]
    return [(captured[f"box{i}"], captured[f"cls{i}"]) for i in range(3)]


def hook_head(family, model, keep):
    handles = []
    for level in range(3):
        if family == "yolox":
            modules = [(model.head.reg_preds[level], "reg"), (model.head.obj_preds[level], "obj"),
                       (model.head.cls_preds[level], "cls")]
        else:
            modules = [(model.head.cv2[level], "box"), (model.head.cv3[level], "cls")]
        handles += [m.register_forward_hook(keep(f"{name}{level}")) for m, name in modules]
    return handles


def head_maps(family, model, images, train):
    """The raw per-level head maps our C++ models return for `images` in eval or train mode
    (YOLOX eval: objectness and classes through sigmoid, as upstream)."""
    captured = {}

    def keep(name):
        def hook(_module, _inputs, output):
            captured[name] = output.detach().clone()
        return hook

    handles = hook_head(family, model, keep)
    model.train(train)
    with torch.no_grad():
        model(images)
    for handle in handles:
        handle.remove()
    maps = []
    for parts in raw_outputs(family, model, captured):
        if family == "yolox" and not train:
            parts = (parts[0], parts[1].sigmoid(), parts[2].sigmoid())
        maps.append(torch.cat(parts, 1))
    return maps


def aux_maps(model, images):
    """YOLOv9's auxiliary head's train-mode maps (the branch runs only in training, from the
    backbone's P3, P4 and B5)."""
    model.train()
    with torch.no_grad():
        p3, p4, _, b5 = model.backbone(images, return_b5=True)
        features = model.aux(p3, p4, b5)
        head = model.aux_head
        return [torch.cat([head.cv2[level](feature), head.cv3[level](feature)], 1) for level, feature in enumerate(features)]


def reference(family: str, size: str, out: pathlib.Path) -> None:
    torch.manual_seed(0)
    if family == "yolox":
        model = yolox_nn.LibreYOLOXModel(config=size, nb_classes=80)
    else:
        model = yolo9_nn.LibreYOLO9Model(config=size, nb_classes=80)
        model.enable_aux(0.25)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    truth = copy.deepcopy(model).double()  # before any train-mode pass moves the running statistics
    images = torch.rand(2, 3, 96, 128)
    tensors = {"input": images}
    for mode, train in (("eval", False), ("train", True)):
        for level, maps in enumerate(head_maps(family, model, images, train)):
            tensors[f"{mode}{level}"] = maps
    for level, maps in enumerate(head_maps(family, truth, images.double(), True)):
        tensors[f"train64_{level}"] = maps
    if family == "yolo9":
        for level, maps in enumerate(aux_maps(model, images)):
            tensors[f"aux{level}"] = maps
        for level, maps in enumerate(aux_maps(truth, images.double())):
            tensors[f"aux64_{level}"] = maps
    save_file(weights, str(out / f"{family}-{size}.weights.safetensors"))
    save_file(tensors, str(out / f"{family}-{size}.io.safetensors"))
    print(f"{family}-{size}: {sum(p.numel() for p in model.parameters())} parameters, {len(weights)} state-dict entries")


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    family = sys.argv[2]
    for size in sys.argv[3:]:
        reference(family, size, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
