"""libreyolo 1.6.0's ClassifyValidator metrics (its _update_metrics / _compute_metrics, run on a stub
that holds only the counters) on random batches of logits and labels: top-1, top-min(5, classes)
and the macro precision, recall and F1 over the classes present, for classify_metrics_parity_test.

    make_classify_metrics_reference.py OUT_DIR
"""
import sys
from types import SimpleNamespace

try:
    import torch
    from safetensors.torch import save_file
    from libreyolo.validation.classify_validator import ClassifyValidator
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

# (classes, batches, batch size, logits drawn as integers 0..3 so that top-k meets ties, classes
# left out of the targets)
CASES = [(10, 3, 16, False, 0), (3, 2, 8, False, 0), (7, 4, 5, True, 0), (12, 2, 9, False, 5), (1, 1, 4, False, 0)]


def reference(batches):
    stub = SimpleNamespace(config=SimpleNamespace(visualize=False))
    stub._reset_validation_loss = lambda: None
    stub._accumulate_validation_loss = lambda *args, **kwargs: None
    stub._validation_loss_metrics = lambda: {}
    stub._macro_precision_recall_f1 = lambda: ClassifyValidator._macro_precision_recall_f1(stub)
    ClassifyValidator._init_metrics(stub)
    for logits, targets in batches:
        ClassifyValidator._update_metrics(stub, logits, targets, None)
    m = ClassifyValidator._compute_metrics(stub)
    return torch.tensor([m["metrics/accuracy_top1"], m["metrics/accuracy_top5"], m["metrics/precision"], m["metrics/recall"],
                         m["metrics/f1"]], dtype=torch.float64)


def main(out_dir):
    generator = torch.Generator().manual_seed(20261207)
    tensors = {}
    for number, (classes, count, size, ties, absent) in enumerate(CASES):
        name = f"case{number}"
        batches = []
        for b in range(count):
            if ties:
                logits = torch.randint(0, 4, (size, classes), generator=generator).float()
            else:
                logits = torch.randn(size, classes, generator=generator)
            targets = torch.randint(0, classes - absent, (size,), generator=generator)
            tensors[f"{name}.logits{b}"] = logits
            tensors[f"{name}.targets{b}"] = targets
            batches.append((logits, targets))
        tensors[f"{name}.config"] = torch.tensor([classes, count], dtype=torch.int64)
        tensors[f"{name}.metrics"] = reference(batches)
    save_file({k: v.contiguous() for k, v in tensors.items()}, f"{out_dir}/classify_metrics.safetensors")


if __name__ == "__main__":
    main(sys.argv[1])
