"""libreyolo 1.6.0's RT-DETR postprocess (flat top-k over queries x classes, no NMS) on random
decoder outputs: its boxes, scores and classes per image for several confidences and caps, for
detections_parity_test.

    make_detections_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.postprocess.rtdetr import postprocess
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)


def main(out_dir):
    generator = torch.Generator().manual_seed(20261211)
    tensors = {}
    # (queries, classes, confidence, max_det): 300 x 80 as in COCO training, caps above and below Q*C, and a confidence that cuts inside the top k
    settings = [(300, 80, 0.001, 300), (300, 80, 0.3, 100), (10, 3, 0.0, 300), (50, 7, 0.5, 20), (50, 7, 0.9, 300)]
    for number, (queries, classes, confidence, cap) in enumerate(settings):
        logits = torch.randn(2, queries, classes, generator=generator) * 3 - 2
        size = 0.02 + 0.5 * torch.rand(2, queries, 2, generator=generator)
        boxes = torch.cat([size / 2 + (1 - size) * torch.rand(2, queries, 2, generator=generator), size], -1)
        image_sizes = [(640.0, 480.0), (333.0, 517.0)]
        name = f"case{number}"
        tensors[f"{name}.logits"], tensors[f"{name}.boxes"] = logits, boxes
        tensors[f"{name}.settings"] = torch.tensor([confidence, cap], dtype=torch.float64)
        tensors[f"{name}.sizes"] = torch.tensor(image_sizes, dtype=torch.float64)
        for image in range(2):
            out = postprocess({"pred_logits": logits[image:image + 1], "pred_boxes": boxes[image:image + 1]}, confidence,
                              0.7, image_sizes[image], max_det=cap)
            tensors[f"{name}.image{image}.boxes"] = out["boxes"].reshape(-1, 4)
            tensors[f"{name}.image{image}.scores"] = out["scores"]
            tensors[f"{name}.image{image}.classes"] = out["classes"].to(torch.int64)
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/detections.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
