"""libreyolo 1.6.0's RT-DETR hybrid encoder (AIFI + CCFM) with random weights and norm statistics:
its state dict, and on random backbone maps its eval outputs, its train-mode outputs, the gradients
of a weighted sum of them with respect to every parameter and to the input maps, and the norms'
statistics after that step, for encoder_parity_test.

    make_encoder_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.models.rtdetr.nn import HybridEncoder
    from detr_reference import randomise_norms
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

# (backbone channels, expansion, eval_spatial_size): r18 as LibreYOLO builds it, r50's widths
CASES = [([128, 256, 512], 0.5, None), ([512, 1024, 2048], 1.0, [96, 64])]


def main(out_dir):
    torch.manual_seed(20261207)
    generator = torch.Generator().manual_seed(20261207)
    tensors = {}
    for number, (channels, expansion, eval_size) in enumerate(CASES):
        model = HybridEncoder(in_channels=channels, hidden_dim=256, nhead=8, dim_feedforward=1024, expansion=expansion,
                              dropout=0.0, eval_spatial_size=eval_size)
        randomise_norms(model, generator)
        name = f"case{number}"
        tensors[f"{name}.config"] = torch.tensor(channels + [int(expansion * 100)], dtype=torch.int64)
        for key, value in model.state_dict().items():
            tensors[f"{name}.state.{key}"] = value.clone()
        feats = [torch.randn(2, c, 8 // s, 12 // s, generator=generator) for c, s in zip(channels, (1, 2, 4))]
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
