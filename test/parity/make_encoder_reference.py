"""libreyolo 1.6.0's hybrid encoders (AIFI + CCFM), RT-DETR's and D-FINE's (RepNCSPELAN4 blocks,
SCDown; DEIM shares it), with random weights and norm statistics:
its state dict, and on random backbone maps its eval outputs, its train-mode outputs, the gradients
of a weighted sum of them with respect to every parameter and to the input maps, and the norms'
statistics after that step, for encoder_parity_test.

    make_encoder_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.dfine.encoder import HybridEncoder as DfineHybridEncoder
    from libreyolo.models.dfine.nn import SIZE_CONFIGS as DFINE_SIZES
    from libreyolo.models.rtdetr.nn import HybridEncoder
    from detr_reference import randomise_norms
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

# (family, backbone channels, expansion, eval_spatial_size): RT-DETR-r18 as LibreYOLO builds it,
# r50's widths; D-FINE-n (two levels, hidden 128) and -s as LibreDFINEModel builds them
CASES = [("rtdetr", [128, 256, 512], 0.5, None), ("rtdetr", [512, 1024, 2048], 1.0, [96, 64]),
         ("dfine", "n", None, None), ("dfine", "s", None, [96, 64])]


def build(family, channels, expansion, eval_size):
    """The encoder and its config row: blocks (0 RT-DETR's, 1 D-FINE's), hidden, feed-forward,
    expansion and depth multiplier (x100), then the input channels."""
    if family == "rtdetr":
        model = HybridEncoder(in_channels=channels, hidden_dim=256, nhead=8, dim_feedforward=1024, expansion=expansion,
                              dropout=0.0, eval_spatial_size=eval_size)
        return model, [0, 256, 1024, round(expansion * 100), 100] + channels
    cfg = DFINE_SIZES[channels]
    model = DfineHybridEncoder(in_channels=cfg["enc_in_channels"], feat_strides=cfg["enc_feat_strides"],
                               hidden_dim=cfg["enc_hidden_dim"], dim_feedforward=cfg["enc_dim_feedforward"],
                               expansion=cfg["enc_expansion"], depth_mult=cfg["enc_depth_mult"],
                               use_encoder_idx=cfg["enc_use_encoder_idx"], eval_spatial_size=eval_size)
    return model, [1, cfg["enc_hidden_dim"], cfg["enc_dim_feedforward"], round(cfg["enc_expansion"] * 100),
                   round(cfg["enc_depth_mult"] * 100)] + list(cfg["enc_in_channels"])


def main(out_dir):
    torch.manual_seed(20261207)
    generator = torch.Generator().manual_seed(20261207)
    tensors = {}
    for number, (family, channels, expansion, eval_size) in enumerate(CASES):
        model, config = build(family, channels, expansion, eval_size)
        channels = config[5:]
        randomise_norms(model, generator)
        name = f"case{number}"
        tensors[f"{name}.config"] = torch.tensor(config, dtype=torch.int64)
        for key, value in model.state_dict().items():
            tensors[f"{name}.state.{key}"] = value.clone()
        feats = [torch.randn(2, c, 8 // s, 12 // s, generator=generator) for c, s in zip(channels, (1, 2, 4)[3 - len(channels):])]
        for level, feat in enumerate(feats):
            tensors[f"{name}.input{level}"] = feat
        model.eval()
        with torch.no_grad():
            for level, out in enumerate(model(feats)):
                tensors[f"{name}.eval{level}"] = out
        model.train()
        leaves = [f.clone().requires_grad_() for f in feats]
        total = 0
        for level, out in enumerate(model(leaves)):
            weights = torch.randn(out.shape, generator=generator)
            tensors[f"{name}.train{level}"] = out.detach()
            tensors[f"{name}.weights{level}"] = weights
            total = total + (out * weights).sum()
        total.backward()
        for level, leaf in enumerate(leaves):
            tensors[f"{name}.grad.input{level}"] = leaf.grad
        for key, parameter in model.named_parameters():
            tensors[f"{name}.grad.{key}"] = parameter.grad
        for key, value in model.state_dict().items():
            if "running" in key:
                tensors[f"{name}.after.{key}"] = value.clone()
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/encoder.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
