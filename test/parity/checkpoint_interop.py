"""Checkpoint interop with Python, both directions, with libreyolo 1.6.0 and torch as the oracle.

    checkpoint_interop.py DIR write   Python side first: LibreYOLO checkpoints of YOLOX-n,
                                      YOLOv9-t, YOLOv7-b, RTMDet-t (its head's shared
                                      convolutions repeated under every level's name) and
                                      RT-DETR-l as LibreYOLO trains it from weights
                                      (HGNetv2 with frozen norms: no num_batches_tracked)
                                      (torch.save of a state dict with _metadata, schema
                                      v1.0 metadata, training extras), an input batch and the
                                      models' raw eval outputs.
    checkpoint_interop.py DIR check   After the C++ side wrote cpp-*.pt: each loads with
                                      torch.load(weights_only=True), passes LibreYOLO's strict
                                      schema check, loads strictly into LibreYOLO's model and
                                      gives the outputs C++ computed, to 1e-4.

Fails when torch, safetensors or libreyolo cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import pathlib
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
    import libreyolo.models.yolo9.nn as yolo9_nn
    import libreyolo.models.yolox.nn as yolox_nn
    from libreyolo.models.rtdetr.hgnetv2 import HGNetv2
    from libreyolo.models.rtdetr.model import RTDETR_CONFIGS
    from libreyolo.models.rtdetr.nn import RTDETRModel
    from libreyolo.models.rtmdet.nn import LibreRTMDetModel
    from libreyolo.models.yolo7.net import YOLOv7Model
    from libreyolo.utils.serialization import validate_checkpoint_metadata, wrap_libreyolo_checkpoint
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from detr_reference import randomise_norms  # noqa: E402
from make_reference import head_maps  # noqa: E402

MODELS = [("yolox", "n", 416), ("yolo9", "t", 640), ("yolo7", "b", 640), ("rtmdet", "t", 640), ("rtdetr", "l", 640)]
SHARED = {f"head.{tower}_convs.{level}.{i}.conv.weight" for tower in ("cls", "reg") for level in (1, 2) for i in (0, 1)}


def build(family, size):
    if family == "rtdetr":  # LibreRTDETR's build for weights it loads: the stem and backbone norms frozen
        cfg = RTDETR_CONFIGS[size]
        backbone = HGNetv2(name=cfg["backbone_arch"], return_idx=[1, 2, 3], freeze_at=0, freeze_norm=True, pretrained=False)
        return RTDETRModel(num_classes=80, backbone=backbone, hidden_dim=cfg["encoder_hidden_dim"],
                           dim_feedforward=cfg["encoder_dim_feedforward"], expansion=cfg["encoder_expansion"],
                           decoder_hidden_dim=cfg["decoder_hidden_dim"], num_decoder_layers=cfg["num_decoder_layers"],
                           eval_idx=cfg["eval_idx"])
    if family == "yolox":
        return yolox_nn.LibreYOLOXModel(config=size, nb_classes=80)
    if family == "yolo7":
        return YOLOv7Model(num_classes=80)
    if family == "rtmdet":
        return LibreRTMDetModel(size=size, nc=80)
    return yolo9_nn.LibreYOLO9Model(config=size, nb_classes=80)


def eval_outputs(family, model, images):
    if family == "rtdetr":
        model.eval()
        with torch.no_grad():
            out = model(images)
        return [out["pred_logits"], out["pred_boxes"]]
    if family in ("yolo7", "rtmdet"):
        model.eval()
        with torch.no_grad():
            out = model(images)
        if family == "rtmdet":  # ours per level: the distances, then the class logits
            return [torch.cat([reg, cls], 1) for cls, reg in zip(*out)]
        return list(out)
    return head_maps(family, model, images, train=False)


def write(work):
    torch.manual_seed(1)
    images = torch.rand(1, 3, 64, 96)
    tensors = {"input": images}
    for family, size, imgsz in MODELS:
        model = build(family, size)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.running_mean.uniform_(-0.2, 0.2)
                    module.running_var.uniform_(0.5, 1.5)
        if family == "rtdetr":
            randomise_norms(model, torch.Generator().manual_seed(2), box_heads=True)
        checkpoint = wrap_libreyolo_checkpoint(
            model.state_dict(), model_family=family, size=size, task="detect", nc=80, imgsz=imgsz,
            epoch=4, loss=1.25, best_mAP50_95=0.125, config={"epochs": 10, "lr0": 0.01, "mosaic": True},
            rng_state={"torch": torch.get_rng_state()})
        torch.save(checkpoint, work / f"py-{family}-{size}.pt")
        if family == "rtdetr":  # 300 queries need at least 300 encoder tokens
            tensors["rtdetr.input"] = torch.rand(1, 3, 160, 160)
        for level, out in enumerate(eval_outputs(family, model, tensors.get(f"{family}.input", images))):
            tensors[f"{family}.{level}"] = out
    save_file(tensors, str(work / "py-outputs.safetensors"))
    print("wrote", ", ".join(f"py-{f}-{s}.pt" for f, s, _ in MODELS))


def check(work):
    ours = load_file(str(work / "cpp-outputs.safetensors"))
    ok = True
    for family, size, _ in MODELS:
        path = work / f"cpp-{family}-{size}.pt"
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        errors = validate_checkpoint_metadata(checkpoint, strict=False)
        model = build(family, size)
        if family == "rtmdet":
            missing, unexpected = model.load_state_dict(checkpoint["model"], strict=False)
            if set(missing) != SHARED or unexpected:
                print(f"  {path.name}: missing {missing}, unexpected {unexpected} MISMATCH")
                ok = False
        else:
            model.load_state_dict(checkpoint["model"], strict=True)
        outputs = eval_outputs(family, model, ours.get(f"{family}.input", ours["input"]))
        for level, out in enumerate(outputs):
            diff = (out - ours[f"{family}.{level}"]).abs().max().item()
            same = torch.allclose(out, ours[f"{family}.{level}"], atol=1e-4, rtol=1e-4)
            ok = ok and same
            print(f"  python loads {path.name}: level {level} max |diff| {diff:.3g} {'ok' if same else 'MISMATCH'}")
        extras_ok = checkpoint.get("epoch") == 4 and checkpoint.get("config", {}).get("epochs") == 10
        print(f"  {path.name}: schema errors {errors or 'none'}, family {checkpoint['model_family']}, "
              f"names[0] {checkpoint['names'][0]!r}, extras {'ok' if extras_ok else 'MISSING'}")
        ok = ok and not errors and extras_ok
    return 0 if ok else 1


def main() -> int:
    work = pathlib.Path(sys.argv[1])
    if sys.argv[2] == "write":
        write(work)
        return 0
    return check(work)


if __name__ == "__main__":
    sys.exit(main())
