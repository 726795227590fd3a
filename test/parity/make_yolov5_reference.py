"""Writes what yolov5_parity_test compares against: YOLOv5 models built by the original package
(PyPI yolov5==7.0.14, a test-time oracle installed by scripts/setup.sh), with random weights and
BatchNorm statistics, their state dicts, an input batch, the Detect head's raw maps in eval mode
(bs, anchors, ny, nx, 5 + nc), its decoded eval output (xywh pixels, objectness, classes) and the
raw maps in train mode, from the same model in float32 and in float64 (the truth float32 results
are measured against).

    make_yolov5_reference.py OUT_DIR

Fails when torch, safetensors or yolov5 cannot be imported (the wrapper skips, 77, only when the
venv is absent).
"""
import pathlib
import sys

try:
    import torch
    from safetensors.torch import save_file
    import yolov5
    from yolov5.models.yolo import Model
except ImportError as error:
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

SIZES = "nsmlx"
# (size, classes, input height, width): non-square inputs, so that x and y cannot be swapped unseen
CASES = [("n", 80, 96, 128), ("s", 3, 128, 64)]


def build(size, classes):
    cfg = pathlib.Path(yolov5.__file__).parent / "models" / f"yolov5{size}.yaml"
    model = Model(str(cfg), ch=3, nc=classes)
    generator = torch.Generator().manual_seed(len(size) * 7 + classes)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) + 0.5)
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
    return model


def main():
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(0)
    tensors = {}
    for index, (size, classes, height, width) in enumerate(CASES):
        case = f"case{index}"
        model = build(size, classes)
        images = torch.rand(2, 3, height, width)
        for name, value in model.state_dict().items():
            tensors[f"{case}.w.{name}"] = value.detach().clone().contiguous()
        tensors[f"{case}.input"] = images
        tensors[f"{case}.config"] = torch.tensor([SIZES.index(size), classes])
        model.eval()
        with torch.no_grad():
            decoded, maps = model(images)
        tensors[f"{case}.decoded"] = decoded.contiguous()
        for level, m in enumerate(maps):
            tensors[f"{case}.eval{level}"] = m.contiguous()
        model.train()
        with torch.no_grad():
            train32 = model(images)
            train64 = model.double()(images.double())
        for level, (m32, m64) in enumerate(zip(train32, train64)):
            tensors[f"{case}.train{level}"] = m32.contiguous()
            tensors[f"{case}.train64_{level}"] = m64.contiguous()
    save_file(tensors, str(out / "yolov5.safetensors"))


if __name__ == "__main__":
    main()
