"""libreyolo 1.6.0's contrastive denoising groups (get_contrastive_denoising_training_group) with
its random draws recorded: the draws, the noised labels (before the class embedding), the noised
boxes, the attention mask and the positive indices, for denoising_parity_test.

    make_denoising_reference.py OUT_DIR
"""
import sys

try:
    import torch
    from safetensors.torch import save_file
    import libreyolo.models.rtdetr.denoising as denoising
    from detr_reference import NOISE_KEYS, RecordingTorch, random_targets
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

CLASSES, QUERIES = 12, 30


def main(out_dir):
    torch.manual_seed(20261208)
    generator = torch.Generator().manual_seed(20261208)
    tensors = {}
    # (counts, denoising queries asked): groups 100 // 5 = 20 with an empty image, 5 singles, more targets than asked
    for number, (counts, asked) in enumerate([([3, 0, 5], 100), ([1, 1], 5), ([7], 3), ([0, 0], 100)]):
        targets = random_targets(generator, counts, CLASSES, smallest=0.05, spread=0.5)
        recorder = RecordingTorch()
        denoising.torch = recorder
        try:
            classes, boxes, mask, meta = denoising.get_contrastive_denoising_training_group(
                targets, CLASSES, QUERIES, lambda c: c, num_denoising=asked, label_noise_ratio=0.5, box_noise_scale=1.0)
        finally:
            denoising.torch = torch
        name = f"case{number}"
        tensors[f"{name}.config"] = torch.tensor([asked, len(counts)], dtype=torch.int64)
        tensors[f"{name}.counts"] = torch.tensor(counts, dtype=torch.int64)
        tensors[f"{name}.classes"] = torch.cat([t["labels"] for t in targets]).to(torch.int64)
        tensors[f"{name}.boxes"] = torch.cat([t["boxes"] for t in targets]).reshape(-1, 4)
        if classes is None:
            continue
        for key, draw in zip(NOISE_KEYS, recorder.draws):
            tensors[f"{name}.noise.{key}"] = draw
        tensors[f"{name}.out.classes"] = classes.to(torch.int64)
        tensors[f"{name}.out.boxes_unact"] = boxes
        tensors[f"{name}.out.attn_mask"] = mask
        tensors[f"{name}.out.groups"] = torch.tensor(meta["dn_num_group"], dtype=torch.int64)
        for image, positives in enumerate(meta["dn_positive_idx"]):
            tensors[f"{name}.out.positive{image}"] = positives
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/denoising.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
