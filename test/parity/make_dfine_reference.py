"""libreyolo 1.6.0's whole D-FINE network (HGNetv2, the hybrid encoder, DFINETransformer) built as
LibreDFINEModel builds each size, DEIM's as LibreDEIMModel does (its DEIMTransformer with SiLU
heads; DEIMCriterion with MAL) and RT-DETRv4's as LibreRTDETRv4 does (LibreDFINEModel with SiLU,
trained by DEIM's trainer: DEIMCriterion), but with fewer queries, so that a small image feeds them, with
random weights: its state dict, and on random images its eval outputs, its training outputs for a
batch of targets (the denoising draws recorded: every layer's logits, boxes, edge distributions and
reference boxes, the pre boxes, the encoder's proposals, the denoising queries'), every term of
DFINECriterion on those outputs (LibreYOLO's D-FINE weights and matcher) and the gradient of their
sum with respect to every output, and the gradients of a weighted sum of the outputs with respect to
every trainable parameter, for dfine_parity_test.

    make_dfine_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    import libreyolo.models.deim.denoising as deim_denoising
    import libreyolo.models.dfine.denoising as dfine_denoising
    from libreyolo.models.deim.backbone import HGNetv2 as DeimHGNetv2
    from libreyolo.models.deim.decoder import DEIMTransformer
    from libreyolo.models.deim.encoder import HybridEncoder as DeimHybridEncoder
    from libreyolo.models.deim.loss import DEIMCriterion
    from libreyolo.models.deim.matcher import HungarianMatcher as DeimHungarianMatcher
    from libreyolo.models.deim.nn import SIZE_CONFIGS as DEIM_SIZES
    from detr_reference import eval_then_train, randomise_norms, random_targets, store_targets
    from libreyolo.models.dfine.backbone import HGNetv2
    from libreyolo.models.dfine.decoder import DFINETransformer
    from libreyolo.models.dfine.encoder import HybridEncoder
    from libreyolo.models.dfine.loss import DFINECriterion
    from libreyolo.models.dfine.matcher import HungarianMatcher
    from libreyolo.models.dfine.nn import SIZE_CONFIGS
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CLASSES, QUERIES = 7, 20
SIZES = ["n", "s", "m", "l", "x"]
FAMILIES = ["dfine", "deim", "rtdetrv4"]  # dfine_parity_test's DfineVariant
# (family, size, from scratch): D-FINE-n (two levels, the learnable affine) as from weights, D-FINE-s
# from scratch, DEIM-n as from weights, RT-DETRv4-s (its smallest) as from weights (the stem frozen)
CASES = [("dfine", "n", False), ("dfine", "s", True), ("deim", "n", False), ("rtdetrv4", "s", False)]


class Dfine(torch.nn.Module):
    """LibreDFINEModel's or LibreDEIMModel's construction (nn.py) with `queries` decoder queries."""

    def __init__(self, family, size, scratch, queries):
        super().__init__()
        deim = family == "deim"
        cfg = (DEIM_SIZES if deim else SIZE_CONFIGS)[size]
        self.backbone = (DeimHGNetv2 if deim else HGNetv2)(
            name=cfg["backbone"], use_lab=cfg["use_lab"], return_idx=cfg["return_idx"],
            freeze_stem_only=False if scratch else cfg["freeze_stem_only"], freeze_at=-1 if scratch else cfg["freeze_at"],
            freeze_norm=False if scratch else cfg["freeze_norm"], pretrained=False)
        self.encoder = (DeimHybridEncoder if deim else HybridEncoder)(
            in_channels=cfg["enc_in_channels"], feat_strides=cfg["enc_feat_strides"], hidden_dim=cfg["enc_hidden_dim"],
            dim_feedforward=cfg["enc_dim_feedforward"], expansion=cfg["enc_expansion"], depth_mult=cfg["enc_depth_mult"],
            use_encoder_idx=cfg["enc_use_encoder_idx"], eval_spatial_size=(640, 640))
        common = dict(num_classes=CLASSES, hidden_dim=cfg["dec_hidden_dim"], num_queries=queries,
                      feat_channels=cfg["dec_feat_channels"], feat_strides=cfg["dec_feat_strides"],
                      num_levels=cfg["dec_num_levels"], num_points=cfg["dec_num_points"], num_layers=cfg["dec_num_layers"],
                      dim_feedforward=cfg["dec_dim_feedforward"], eval_spatial_size=(640, 640), eval_idx=cfg["dec_eval_idx"],
                      reg_scale=cfg["reg_scale"])
        if deim:
            self.decoder = DEIMTransformer(**common, activation=cfg["activation"], mlp_act=cfg["mlp_act"])
        else:
            self.decoder = DFINETransformer(**common, activation="silu" if family == "rtdetrv4" else "relu")

    def forward(self, x, targets=None):
        return self.decoder(self.encoder(self.backbone(x)), targets=targets)


def randomise(model, generator):
    """Random norm statistics, and the heads D-FINE starts at zero (box heads, quality heads, gates,
    attention weights and offsets) away from it, so that every path carries a gradient."""
    randomise_norms(model, generator, box_heads=True)
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if any(part in name for part in ("reg_conf.layers.1", "gateway.gate", "attention_weights", "sampling_offsets.weight")):
                tensor.copy_(0.05 * torch.randn(tensor.shape, generator=generator))
            elif "dec_bbox_head" in name and name.endswith("layers.2.weight"):
                tensor.copy_(0.5 * torch.randn(tensor.shape, generator=generator))


def levels(out):
    """(label, output dict, keys) of every training output the checker compares."""
    fdr = ("pred_logits", "pred_boxes", "pred_corners", "ref_points")
    plain = ("pred_logits", "pred_boxes")
    named = [("last", out, fdr)] + [(f"aux{i}", o, fdr) for i, o in enumerate(out["aux_outputs"])]
    named += [("pre", out["pre_outputs"], plain)] + [(f"enc{i}", o, plain) for i, o in enumerate(out["enc_aux_outputs"])]
    named += [(f"dn{i}", o, fdr) for i, o in enumerate(out.get("dn_outputs", []))]
    if "dn_pre_outputs" in out:
        named.append(("dnpre", out["dn_pre_outputs"], plain))
    return named


def case(generator, family, size, scratch):
    model = Dfine(family, size, scratch, QUERIES)
    randomise(model, generator)
    tensors = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    tensors["config"] = torch.tensor([SIZES.index(size), int(scratch), FAMILIES.index(family)], dtype=torch.int64)
    images = torch.rand(2, 3, 64, 96, generator=generator)
    tensors["images"] = images
    counts = [2, 3]
    targets = random_targets(generator, counts, CLASSES)
    store_targets(tensors, targets, counts)
    out = eval_then_train(model, images, targets, tensors, deim_denoising if family == "deim" else dfine_denoising)
    # the loss on these outputs (every level's matching included), as LibreYOLO's trainer builds it, and
    # its gradient with respect to every output
    costs = {"cost_class": 2.0, "cost_bbox": 5.0, "cost_giou": 2.0}
    if family != "dfine":  # LibreYOLO's DEIM trainer (RT-DETRv4's too): MAL (gamma 1.5)
        criterion = DEIMCriterion(matcher=DeimHungarianMatcher(weight_dict=costs, use_focal_loss=True, alpha=0.25, gamma=2.0),
                                  weight_dict={"loss_mal": 1.0, "loss_bbox": 5.0, "loss_giou": 2.0, "loss_fgl": 0.15,
                                               "loss_ddf": 1.5},
                                  losses=["mal", "boxes", "local"], alpha=0.75, gamma=1.5, num_classes=CLASSES, reg_max=32)
    else:
        criterion = DFINECriterion(matcher=HungarianMatcher(weight_dict=costs, use_focal_loss=True, alpha=0.25, gamma=2.0),
                                   weight_dict={"loss_vfl": 1.0, "loss_bbox": 5.0, "loss_giou": 2.0, "loss_fgl": 0.15,
                                                "loss_ddf": 1.5},
                                   losses=["vfl", "boxes", "local"], alpha=0.75, gamma=2.0, num_classes=CLASSES, reg_max=32)
    terms = criterion({k: v for k, v in out.items()}, targets)
    for key, value in terms.items():
        tensors[f"loss.{key}"] = value.detach().reshape(())
    loss_total = sum(terms.values())
    tensors["loss.total_loss"] = loss_total.detach().reshape(())
    differentiable = [(f"{label}.{key}", level[key]) for label, level, keys in levels(out) for key in keys if key != "ref_points"]
    grads = torch.autograd.grad(loss_total, [t for _, t in differentiable], retain_graph=True, allow_unused=True)
    for (stem, tensor), grad in zip(differentiable, grads):
        tensors[f"lossgrad.{stem}"] = grad if grad is not None else torch.zeros_like(tensor)
    total = 0
    for label, level, keys in levels(out):
        for key in keys:
            weights = torch.randn(level[key].shape, generator=generator)
            tensors[f"train.{label}.{key}"] = level[key].detach()
            tensors[f"weights.{label}.{key}"] = weights
            total = total + (level[key] * weights).sum()
    total.backward()
    for key, parameter in model.named_parameters():
        if parameter.requires_grad:
            tensors[f"grad.{key}"] = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
    return tensors


def main(out_dir):
    torch.manual_seed(20261204)
    generator = torch.Generator().manual_seed(20261204)
    cases = [case(generator, family, size, scratch) for family, size, scratch in CASES]
    save_file({f"case{i}.{k}": v.contiguous() for i, tensors in enumerate(cases) for k, v in tensors.items()},
              f"{out_dir}/dfine.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
