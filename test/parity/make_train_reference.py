"""Writes what the C++ training-parts parity test compares against, from libreyolo 1.6.0:
the LR (and momentum) of every iteration of each scheduler, warmup included; the optimizer's
parameter groups for YOLOX-n and YOLOv9-t; and EMA weights after a few updates. From yolov5 7.0.14:
its train.py's own warmup lines (read from the package and run) over a LambdaLR, for
scheduler=linear_epoch with warmup_bias_lr, and its nominal batch: the batches it steps after.

    make_train_reference.py OUT_DIR

Fails when torch, safetensors or libreyolo cannot be imported: the test venv is meant to hold them
(the shell wrapper skips, 77, only when the venv is absent).
"""
import json
import pathlib
import sys
import textwrap

try:
    import torch
    from safetensors.torch import save_file
    import libreyolo.models.yolo9.nn as yolo9_nn
    import libreyolo.models.yolox.nn as yolox_nn
    from libreyolo.training import scheduler as sched
    from libreyolo.training.ema import ModelEMA
    from libreyolo.training.trainer import BaseTrainer
    from libreyolo.data.augment.detr import resolve_aug_stop_epoch
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

IPE, EPOCHS = 7, 12
YOLOV5_CASES = ((7, 20), (40, 6))  # (batches per epoch, epochs): warmup of 100 iterations, then of 3 epochs
# (batches per epoch, epochs, batch size) for the nominal batch of 64: windows growing to 4, to 3 (2.67
# rounded), staying 1 (1.33) and 1 with weight decay x2 (0.5)
YOLOV5_NBS_CASES = ((7, 20, 16), (40, 6, 24), (9, 15, 48), (3, 50, 128))


def yolov5_schedule(nb, epochs):
    """Every iteration's (bias lr, other lr, momentum) as yolov5's train.py sets them: its scheduler,
    `nw` and warmup lines are taken from the installed train.py and executed over a LambdaLR."""
    import numpy as np
    import yaml
    import yolov5
    root = pathlib.Path(yolov5.__file__).parent
    source = (root / "train.py").read_text().splitlines()
    def line(prefix):
        found = [l.strip() for l in source if l.strip().startswith(prefix)]
        if len(found) != 1:
            raise SystemExit(f"FAIL: yolov5/train.py has {len(found)} lines starting {prefix!r}")
        return found[0]
    start = next(i for i, l in enumerate(source) if l.strip() == "# Warmup")
    end = next(i for i in range(start, len(source)) if source[i].strip() == "# Multi-scale")
    warmup = textwrap.dedent("\n".join(source[start:end]))
    hyp = yaml.safe_load((root / "data/hyps/hyp.scratch-low.yaml").read_text())
    scope = {"np": np, "hyp": hyp, "epochs": epochs, "nb": nb, "nbs": 64, "batch_size": 64}
    exec(line("lf = lambda x: (1 - x / epochs)"), scope)
    exec(line("nw = max(round(hyp['warmup_epochs'] * nb), 100)"), scope)
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(3)]
    optimizer = torch.optim.SGD([params[0]], lr=hyp["lr0"], momentum=hyp["momentum"], nesterov=True)
    optimizer.add_param_group({"params": [params[1]], "weight_decay": hyp["weight_decay"]})
    optimizer.add_param_group({"params": [params[2]], "weight_decay": 0.0})
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=scope["lf"])
    rows = []
    for epoch in range(epochs):
        for i in range(nb):
            scope.update(ni=i + nb * epoch, epoch=epoch, optimizer=optimizer)
            exec(warmup, scope)
            groups = optimizer.param_groups
            rows.append([float(groups[0]["lr"]), float(groups[1]["lr"]), float(groups[0]["momentum"])])
        scheduler.step()
    return torch.tensor(rows, dtype=torch.float64), hyp


def yolov5_accumulation(nb, epochs, batch_size):
    """The batches (ni) after which yolov5's train.py steps the optimizer with nbs = 64, its initial
    `accumulate` and scaled weight decay: its own lines, read from the installed train.py and run."""
    import numpy as np
    import yaml
    import yolov5
    root = pathlib.Path(yolov5.__file__).parent
    source = [l.strip() for l in (root / "train.py").read_text().splitlines()]
    def line(prefix):
        found = [l for l in source if l.startswith(prefix)]
        if len(found) != 1:
            raise SystemExit(f"FAIL: yolov5/train.py has {len(found)} lines starting {prefix!r}")
        return found[0]
    hyp = yaml.safe_load((root / "data/hyps/hyp.scratch-low.yaml").read_text())
    scope = {"np": np, "hyp": hyp, "nb": nb, "batch_size": batch_size, "max": max, "round": round}
    exec(line("nbs = 64"), scope)
    exec(line("accumulate = max(round(nbs / batch_size), 1)"), scope)
    exec(line("hyp['weight_decay'] *= batch_size * accumulate / nbs"), scope)
    exec(line("nw = max(round(hyp['warmup_epochs'] * nb), 100)"), scope)
    exec(line("last_opt_step = -1"), scope)
    first = scope["accumulate"]
    ramp = line("accumulate = max(1, np.interp(ni, xi, [1, nbs / batch_size]).round())")
    condition = line("if ni - last_opt_step >= accumulate:")[len("if "):-1]
    steps = []
    for epoch in range(epochs):
        for i in range(nb):
            ni = scope["ni"] = i + nb * epoch
            if ni <= scope["nw"]:
                scope["xi"] = [0, scope["nw"]]
                exec(ramp, scope)
            if eval(condition, scope):
                steps.append(ni)
                exec(line("last_opt_step = ni"), scope)
    return steps, first, hyp["weight_decay"]
CASES = {
    "yoloxwarmcos": lambda: sched.WarmupCosineScheduler(0.01, IPE, EPOCHS, warmup_epochs=3, warmup_lr_start=0.001,
                                                         plateau_epochs=2, min_lr_ratio=0.05),
    "linear": lambda: sched.LinearLRScheduler(0.01, IPE, EPOCHS, warmup_epochs=3, warmup_lr_start=0.0001,
                                              min_lr_ratio=0.01, warmup_momentum=0.8, momentum=0.937),
    "cos": lambda: sched.CosineAnnealingScheduler(0.01, IPE, EPOCHS, warmup_epochs=3, warmup_lr_start=0.0001,
                                                  min_lr_ratio=0.01),
    "flat_cosine": lambda: sched.FlatCosineScheduler(0.01, IPE, EPOCHS, warmup_epochs=2, warmup_lr_start=1e-6,
                                                     no_aug_epochs=4, min_lr_ratio=0.05),
    "constant": lambda: sched.ConstantLRScheduler(0.01, IPE, EPOCHS, warmup_epochs=1, warmup_lr_start=0.002),
    "classify": lambda: classify_scheduler(),
}


def classify_scheduler():
    """The schedule libreyolo 1.6.0's MobileNetV4 trainer builds from its MobileNetV4Config (lr0 0.01 here)."""
    from libreyolo.models.mobilenetv4.config import MobileNetV4Config
    from libreyolo.models.mobilenetv4.trainer import MobileNetV4Trainer
    stub = type("T", (), {})()
    stub.config = MobileNetV4Config()
    stub.config.epochs = EPOCHS
    stub.effective_lr = 0.01
    return MobileNetV4Trainer.create_scheduler(stub, IPE)


class _Groups(BaseTrainer):
    """Only _setup_optimizer is used; the abstract hooks are never called."""
    def __init__(self, model):  # noqa: D401 - no BaseTrainer setup
        self.model = model
        self.config = type("C", (), {"optimizer": "sgd", "lr0": 0.01, "momentum": 0.9, "nesterov": True,
                                     "weight_decay": 5e-4})()
    effective_lr = 0.01
    def get_model_family(self): ...
    def get_model_tag(self): ...
    def create_transforms(self): ...
    def create_scheduler(self, iters_per_epoch): ...
    def get_loss_components(self, outputs): ...
    def on_forward(self, imgs, targets, polygons=None): ...


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tensors, info = {}, {"ipe": IPE, "epochs": EPOCHS, "groups": {}}
    for name, make in CASES.items():
        s = make()
        its = range(0, IPE * EPOCHS + 1)
        tensors[f"lr.{name}"] = torch.tensor([s.update_lr(i) for i in its], dtype=torch.float64)
        if hasattr(s, "update_momentum"):
            tensors[f"momentum.{name}"] = torch.tensor([s.update_momentum(i) for i in its], dtype=torch.float64)
    info["yolov5"] = []
    for nb, epochs in YOLOV5_CASES:
        rows, hyp = yolov5_schedule(nb, epochs)
        tensors[f"yolov5.{nb}x{epochs}"] = rows
        info["yolov5"].append({"nb": nb, "epochs": epochs, **{k: hyp[k] for k in (
            "lr0", "lrf", "momentum", "warmup_epochs", "warmup_momentum", "warmup_bias_lr")}})
    info["yolov5_nbs"] = []
    for nb, epochs, batch_size in YOLOV5_NBS_CASES:
        steps, accumulate, weight_decay = yolov5_accumulation(nb, epochs, batch_size)
        info["yolov5_nbs"].append({"nb": nb, "epochs": epochs, "batch": batch_size, "nbs": 64, "steps": steps,
                                   "accumulate": accumulate, "weight_decay": weight_decay})
    for family, size, model in (("yolox", "n", yolox_nn.LibreYOLOXModel(config="n", nb_classes=80)),
                                ("yolo9", "t", yolo9_nn.LibreYOLO9Model(config="t", nb_classes=80))):
        names = {id(p): n for n, p in model.named_parameters()}
        trainer = _Groups.__new__(_Groups)
        _Groups.__init__(trainer, model)
        try:
            optimizer = BaseTrainer._setup_optimizer(trainer)
        except Exception as error:  # the oracle's signature changed: fail loudly
            print(f"cannot build LibreYOLO's optimizer groups: {error!r}")
            return 1
        info["groups"][f"{family}-{size}"] = [
            {"names": [names[id(p)] for p in g["params"]], "weight_decay": g["weight_decay"]}
            for g in optimizer.param_groups]
    # the epoch D-FINE's and DEIM's strong augmentations stop at (epochs, ratio, no_aug_epochs)
    info["aug_stop"] = [[e, r, n, resolve_aug_stop_epoch(e, r, n)]
                        for e in (1, 2, 5, 20, 58, 132) for r in (0.0, 0.5, 0.85, 0.91) for n in (0, 1, 4, 12, 200)]
    # EMA: model weights at update k are base × (1 + 0.1 k) for every floating entry.
    torch.manual_seed(0)
    model = yolox_nn.LibreYOLOXModel(config="n", nb_classes=80)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    ema = ModelEMA(model, decay=0.9, tau=3)
    for k in range(1, 6):
        with torch.no_grad():
            for key, v in model.state_dict().items():
                if v.dtype.is_floating_point:
                    v.copy_(base[key] * (1 + 0.1 * k))
        ema.update(model)
    for key, v in base.items():
        tensors[f"ema_base.{key}"] = v
    for key, v in ema.ema.state_dict().items():
        tensors[f"ema.{key}"] = v.clone()
    save_file(tensors, str(out / "train.safetensors"))
    (out / "train.json").write_text(json.dumps(info))
    print("schedules:", ", ".join(CASES), "| groups:", {k: [len(g["names"]) for g in v] for k, v in info["groups"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
