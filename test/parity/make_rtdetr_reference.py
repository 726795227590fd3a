"""libreyolo 1.6.0's whole RT-DETR network (RTDETRModel: PResNet, hybrid encoder, decoder) built as
LibreRTDETR builds each size, without downloading a backbone, with random weights: its state dict,
and on random images its eval outputs, its train-mode outputs for a batch of targets (the denoising
draws recorded), and the gradients of a weighted sum of every output with respect to every
trainable parameter, and the loss terms of RTDETRLoss on those outputs, for rtdetr_parity_test.

    make_rtdetr_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from detr_reference import eval_then_train, randomise_norms, random_targets, store_targets, weighted_levels
    from libreyolo.models.rtdetr.loss import RTDETRLoss
    from libreyolo.models.rtdetr.hgnetv2 import HGNetv2
    from libreyolo.models.rtdetr.model import RTDETR_CONFIGS
    from libreyolo.models.rtdetr.nn import RTDETRModel
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CLASSES, QUERIES = 7, 20
# (size, from scratch): as LibreRTDETR's _init_model builds it
# (l: HGNetv2-L, its stem and norms frozen as from weights)
CASES = [("r18", True), ("r50m", False), ("r101", True), ("l", False)]


def build(size, scratch):
    cfg = RTDETR_CONFIGS[size]
    backbone = {}
    if cfg.get("backbone_type") == "hgnetv2":
        backbone["backbone"] = HGNetv2(name=cfg["backbone_arch"], return_idx=[1, 2, 3], freeze_at=-1 if scratch else 0,
                                       freeze_norm=not scratch and cfg["backbone_freeze_norm"], pretrained=False)
    return RTDETRModel(num_classes=CLASSES, backbone_depth=cfg.get("backbone_depth", 50), **backbone,
                       backbone_freeze_at=-1 if scratch else cfg["backbone_freeze_at"],
                       backbone_freeze_norm=False if scratch else cfg["backbone_freeze_norm"], backbone_pretrained=False,
                       hidden_dim=cfg["encoder_hidden_dim"], dim_feedforward=cfg["encoder_dim_feedforward"],
                       expansion=cfg["encoder_expansion"], decoder_hidden_dim=cfg["decoder_hidden_dim"],
                       decoder_dim_feedforward=cfg.get("decoder_dim_feedforward", 1024),
                       num_decoder_layers=cfg["num_decoder_layers"], eval_idx=cfg["eval_idx"], num_queries=QUERIES)


def case(generator, size, scratch):
    model = build(size, scratch)
    randomise_norms(model, generator, box_heads=True)
    tensors = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    tensors["config"] = torch.tensor([["r18", "r34", "r50", "r50m", "r101", "l", "x"].index(size), int(scratch)], dtype=torch.int64)
    images = torch.rand(2, 3, 64, 96, generator=generator)
    tensors["images"] = images
    counts = [2, 3]
    targets = random_targets(generator, counts, CLASSES)
    store_targets(tensors, targets, counts)
    out = eval_then_train(model, images, targets, tensors)
    with torch.no_grad():  # the loss on these outputs (the matcher's assignment included)
        for key, value in RTDETRLoss(num_classes=CLASSES)(out, targets).items():
            tensors[f"loss.{key}"] = value.detach().reshape(())
    total = weighted_levels(out, generator, tensors)
    total.backward()
    for key, parameter in model.named_parameters():
        if parameter.requires_grad:
            tensors[f"grad.{key}"] = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
    return tensors


def main(out_dir):
    torch.manual_seed(20261210)
    generator = torch.Generator().manual_seed(20261210)
    cases = [case(generator, size, scratch) for size, scratch in CASES]
    save_file({f"case{i}.{k}": v.contiguous() for i, tensors in enumerate(cases) for k, v in tensors.items()},
              f"{out_dir}/rtdetr.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
