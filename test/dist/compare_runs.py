"""Gradient parity of a data-parallel run against one process (test/cli/dist_train.sh).

usage: compare_runs.py START.pt ONE_RUN TWO_RUN TOLERANCE

ONE_RUN trained in one process, TWO_RUN with the same global batch over several ranks, both from
START.pt's weights. Checks, to TOLERANCE (relative):
  - every train/* loss column of results.csv, epoch by epoch;
  - the trained weights (last.pt's train_model): |w_two - w_one| over |w_one - w_start|, all
    tensors together (the difference as a share of what training changed);
  - the BatchNorm running statistics, the same way.
Prints the measured figures; exits 1 when one is over. PyTorch reads the checkpoints (an oracle
of the test venv, never of the product).
"""
import csv
import math
import sys

import torch


def rows(run):
    with open(f"{run}/results.csv", newline="") as f:
        return list(csv.DictReader(f))


def tensors(path, key):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    return checkpoint[key]


def main():
    start_path, one, two, tolerance = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    failed = False
    a, b = rows(one), rows(two)
    if len(a) != len(b) or not a:
        print(f"FAIL: {len(a)} epochs in {one}, {len(b)} in {two}")
        return 1
    worst = 0.0
    for ra, rb in zip(a, b):
        for key in ra:
            if not key.startswith("train/"):
                continue
            x, y = float(ra[key]), float(rb[key])
            rel = abs(x - y) / max(abs(x), 1e-12)
            worst = max(worst, rel)
            if rel > tolerance:
                print(f"FAIL: epoch {ra['epoch']} {key}: {x} in one process, {y} over ranks (relative {rel:.2e})")
                failed = True
    print(f"losses: largest relative difference {worst:.2e} over {len(a)} epochs")
    start = tensors(start_path, "model")
    w1 = tensors(f"{one}/weights/last.pt", "train_model")
    w2 = tensors(f"{two}/weights/last.pt", "train_model")
    for kind, pick in (("weights", lambda k: "running_" not in k), ("BatchNorm statistics", lambda k: "running_" in k)):
        diff = change = 0.0
        for k, t in w1.items():
            if not pick(k) or not t.is_floating_point() or k not in start:
                continue
            diff += (t.double() - w2[k].double()).norm().item() ** 2
            change += (t.double() - start[k].double()).norm().item() ** 2
        rel = math.sqrt(diff) / max(math.sqrt(change), 1e-30)
        print(f"{kind}: |two - one| / |one - start| = {rel:.2e}")
        if not change or rel > tolerance:
            print(f"FAIL: {kind} differ by {rel:.2e} of what training changed (tolerance {tolerance})")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
