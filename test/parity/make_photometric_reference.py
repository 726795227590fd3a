"""torchvision 0.26's RandomPhotometricDistort (the strong stage's first step of libreyolo 1.6.0's
D-FINE and DEIM pipeline) applied with given draws to a uint8 RGB image: its transform() with each
case's params (brightness, contrast before or after, saturation, hue, channel permutation), for
photometric_parity_test. Each case: config [brightness, contrast, saturation, hue, contrast_before,
p0, p1, p2] (a factor of -99 or p0 of -1: not drawn) and the output image.

    make_photometric_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from torchvision import tv_tensors
    from torchvision.transforms.v2 import RandomPhotometricDistort
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

NONE = -99.0
# (brightness, contrast, saturation, hue, contrast_before, permutation)
CASES = [
    (1.1, None, None, None, True, None),
    (0.9, None, None, None, True, None),
    (None, 0.6, None, None, True, None),
    (None, 1.4, None, None, False, None),
    (None, None, 1.45, None, True, None),
    (None, None, 0.55, None, True, None),
    (None, None, None, 0.04, True, None),
    (None, None, None, -0.03, True, None),
    (None, None, None, None, True, [2, 0, 1]),
    (1.05, 0.7, 1.3, -0.045, False, [1, 2, 0]),
    (0.95, 1.2, 0.8, 0.02, True, [0, 2, 1]),
]


def main(out_dir):
    generator = torch.Generator().manual_seed(20261204)
    # a smooth ramp with noise and a saturated corner, so that every branch of the HSV maths is met
    height, width = 37, 53
    ys = torch.linspace(0, 1, height).view(height, 1)
    xs = torch.linspace(0, 1, width).view(1, width)
    base = torch.stack([xs.expand(height, width), ys.expand(height, width), (xs * ys).expand(height, width)])
    noise = torch.rand(3, height, width, generator=generator)
    image = (255 * (0.7 * base + 0.3 * noise)).to(torch.uint8)
    image[:, :5, :5] = torch.tensor([255, 0, 0], dtype=torch.uint8).view(3, 1, 1)
    image[:, -4:, -4:] = 128  # grey: hue undefined
    transform = RandomPhotometricDistort()
    tensors = {"image": image}
    for i, (brightness, contrast, saturation, hue, before, permutation) in enumerate(CASES):
        params = {"brightness_factor": brightness, "contrast_factor": contrast, "saturation_factor": saturation,
                  "hue_factor": hue, "contrast_before": before,
                  "channel_permutation": None if permutation is None else torch.tensor(permutation)}
        out = transform.transform(tv_tensors.Image(image.clone()), params)
        values = [NONE if v is None else float(v) for v in (brightness, contrast, saturation, hue)]
        values += [float(before)] + ([-1.0, -1.0, -1.0] if permutation is None else [float(p) for p in permutation])
        tensors[f"case{i}.config"] = torch.tensor(values, dtype=torch.float64)
        tensors[f"case{i}.output"] = out.as_subclass(torch.Tensor).contiguous()
    save_file(tensors, f"{out_dir}/photometric.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
