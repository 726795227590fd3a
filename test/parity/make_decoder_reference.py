"""libreyolo 1.6.0's RT-DETR decoder (RTDETRTransformer: query selection, denoising queries,
deformable-attention layers, iterative box refinement) with random weights: its state dict, and on
random encoder maps its eval outputs, its train-mode outputs for a batch of targets (with the
denoising draws recorded), and the gradients of a weighted sum of every output with respect to
every parameter, for decoder_parity_test.

    make_decoder_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from detr_reference import eval_then_train, randomise_norms, random_targets, store_targets, weighted_levels
    from libreyolo.models.rtdetr.nn import RTDETRTransformer
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CLASSES, QUERIES, LAYERS = 12, 30, 3


def case(generator, shapes):
    model = RTDETRTransformer(num_classes=CLASSES, hidden_dim=256, num_queries=QUERIES, feat_channels=[256, 256, 256],
                              num_decoder_layers=LAYERS, num_denoising=20)
    randomise_norms(model, generator, box_heads=True)
    tensors = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    feats = [torch.randn(2, 256, h, w, generator=generator) for h, w in shapes]
    for level, feat in enumerate(feats):
        tensors[f"input{level}"] = feat
    counts = [3, 1]
    targets = random_targets(generator, counts, CLASSES)
    store_targets(tensors, targets, counts)

    out = eval_then_train(model, feats, targets, tensors)
    total = weighted_levels(out, generator, tensors)
    total.backward()
    for key, parameter in model.named_parameters():
        tensors[f"grad.{key}"] = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
    for key, value in model.state_dict().items():
        if "running" in key:
            tensors[f"after.{key}"] = value.clone()
    tensors["shapes"] = torch.tensor(shapes, dtype=torch.int64)
    return tensors


def main(out_dir):
    torch.manual_seed(20261209)
    generator = torch.Generator().manual_seed(20261209)
    # the second: maps 52 wide, whose border positions' anchors are invalid (+inf), so the encoder
    # head sees them zeroed while the layers attend to them as they are
    cases = [case(generator, ((8, 12), (4, 6), (2, 3))), case(generator, ((4, 52), (2, 26), (1, 13)))]
    save_file({f"case{i}.{k}": v.contiguous() for i, tensors in enumerate(cases) for k, v in tensors.items()},
              f"{out_dir}/decoder.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
