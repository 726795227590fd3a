"""Validation against libreyolo 1.6.0, same weights in: detections and COCO mAP (the DETRs; YOLOX,
YOLOv7 and RTMDet, validated in the top-left corner of the square).

    rtdetr_val.py DIR COCO8 [FAMILY SIZE]   LibreYOLO's RT-DETR-r18, or FAMILY-SIZE (dfine n ...;
                                    random weights, box heads away from zero, a convolutional
                                    family's score layers off their prior; the DETRs', YOLOv7's and
                                    RTMDet's BatchNorm statistics, YOLOv7's and RTMDet's score
                                    layers, from the images) saved as a LibreYOLO
                                    checkpoint, DIR/py-FAMILY-SIZE.pt. So that
                                    the mAP means something, the coco8 val images get labels from
                                    the model itself: its 3 best detections per image, jittered
                                    (IoUs from about 0.5 to 1), in DIR/ds (images linked, not copied).
                                    LibreYOLO then validates on DIR/ds.yaml (save_json): the expected
                                    metrics and predictions, DIR/expected.json.
    rtdetr_val.py DIR reference CKPT OUT   LibreYOLO's validation of CKPT (ours, written by
                                    `libreyolo train`) on DIR/ds.yaml, into OUT: C++ writes, Python reads.
    rtdetr_val.py DIR interop CKPT OURS KIND   KIND plain or single: a checkpoint of our training
                                    as LibreYOLO reads its `config`: its CLI `libreyolo val --json`
                                    gives our mAP (to its 4 decimals and the tie order,
                                    TIED_MAP_TOLERANCE) and collapses the classes
                                    exactly when KIND is single (config single_cls); its val()
                                    without data= validates on the config's data to our mAP; and
                                    the train arguments its resume restores from the config have
                                    the types of the family's TrainConfig (a string 'false' for
                                    single_cls is True to Python) and build one.
    rtdetr_val.py DIR check EXPECTED OURS PREDICTIONS [any-map|trained]   OURS: our `val --json` output,
                                    PREDICTIONS our predictions.json. Same detections per image (boxes to 1e-3 px,
                                    scores to 1e-5) and the same mAP50 and mAP50-95 (to 1e-6).
                                    Measured: boxes within 1e-4 px, scores equal, mAP equal.
                                    trained: mAP50 above 0.1, and equal within TIED_MAP_TOLERANCE.

Fails when torch or libreyolo cannot be imported (the shell wrapper skips, 77, only without the venv).
"""
import json
import os
import pathlib
import sys

try:
    import torch
    import yaml
    from libreyolo import LibreYOLO
    from libreyolo.models.rtdetr.model import RTDETR_CONFIGS
    from libreyolo.models.deim.nn import LibreDEIMModel
    from libreyolo.models.dfine.nn import LibreDFINEModel
    from libreyolo.models.rtdetr.nn import RTDETRModel
    from libreyolo.models.rtmdet.nn import LibreRTMDetModel
    from libreyolo.models.yolo7.net import YOLOv7Model
    from libreyolo.models.yolox.nn import LibreYOLOXModel
    from libreyolo.utils.serialization import wrap_libreyolo_checkpoint
except ImportError as error:
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from detr_reference import randomise_norms  # noqa: E402

IMGSZ, CLASSES, MAX_DET = 640, 80, 300  # coco8's own size: JPEG decoding then resizes nothing


def build(family, size):
    if family == "yolox":
        return LibreYOLOXModel(config=size, nb_classes=CLASSES)
    if family == "yolo7":
        return YOLOv7Model(num_classes=CLASSES)
    if family == "rtmdet":
        return LibreRTMDetModel(size=size, nc=CLASSES)
    if family == "dfine":
        return LibreDFINEModel(size, nb_classes=CLASSES, train_from_scratch=True)
    if family == "deim":
        return LibreDEIMModel(size, nb_classes=CLASSES, train_from_scratch=True)
    if family == "rtdetrv4":  # LibreRTDETRv4._init_model: D-FINE's network with SiLU
        return LibreDFINEModel(size, nb_classes=CLASSES, activation="silu", train_from_scratch=True)
    cfg = RTDETR_CONFIGS[size]
    return RTDETRModel(num_classes=CLASSES, backbone_depth=cfg["backbone_depth"], backbone_freeze_at=-1,
                       backbone_freeze_norm=False, backbone_pretrained=False, hidden_dim=cfg["encoder_hidden_dim"],
                       dim_feedforward=cfg["encoder_dim_feedforward"], expansion=cfg["encoder_expansion"],
                       decoder_hidden_dim=cfg["decoder_hidden_dim"],
                       decoder_dim_feedforward=cfg.get("decoder_dim_feedforward", 1024),
                       num_decoder_layers=cfg["num_decoder_layers"], eval_idx=cfg["eval_idx"], num_queries=300)


# validated in the top-left corner of the imgsz square (LibreYOLO's YOLOX, YOLOv7 and RTMDet)
CONV_FAMILIES = ("yolox", "yolo7", "rtmdet")


def randomise_score_biases(model, generator):
    """The score layers away from their initialisation: biases off their prior (-4.6: scores of 1e-4,
    below the validation's 0.001) so that a random network detects something, weights larger so that
    its scores differ between places (ties at the max_det cut-off would be kept in either order)."""
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if "rtm_reg" in name and name.endswith(".bias"):  # RTMDet's distances: positive, boxes with area
                tensor.copy_(1.0 + torch.rand(tensor.shape, generator=generator))
            if not any(part in name for part in ("cls_preds", "obj_preds", "head_conv", "rtm_cls")):
                continue
            if name.endswith(".bias"):
                tensor.copy_(torch.randn(tensor.shape, generator=generator) - 1.0)
            elif name.endswith(".weight"):  # scores that vary from place to place: few ties at max_det
                tensor.copy_(0.2 * torch.randn(tensor.shape, generator=generator))


def letterboxed(images, bgr_mean_std=None, stretch=False):
    """`images` as LibreYOLO validates them, near enough for BatchNorm statistics: top-left in the
    IMGSZ square on grey 114, or (`stretch`, the DETRs) stretched to the square; RGB / 255, or
    (RTMDet) BGR less mmdetection's mean over its std."""
    import cv2  # noqa: PLC0415 (only where images are read)
    batch = []
    for image in images:
        pixels = cv2.imread(str(image))
        height, width = pixels.shape[:2]
        ratio = IMGSZ / max(height, width)
        size = (IMGSZ, IMGSZ) if stretch else (round(width * ratio), round(height * ratio))
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_LINEAR)
        canvas = torch.full((IMGSZ, IMGSZ, 3), 114.0)
        canvas[:pixels.shape[0], :pixels.shape[1]] = torch.from_numpy(pixels.astype("float32"))
        if bgr_mean_std:
            canvas = (canvas - torch.tensor(bgr_mean_std[0])) / torch.tensor(bgr_mean_std[1])
        else:
            canvas = canvas.flip(2) / 255
        batch.append(canvas.permute(2, 0, 1))
    return torch.stack(batch)


def norms_from_images(net, batch, layers, norms_only=False):
    """BatchNorm statistics from `batch` itself, and the inputs of the `layers` (name -> tensor).
    With random statistics a deep network loses the image: YOLOv7-b's and RTMDet-t's head inputs
    differed by 1e-8 between coco8's images and only at the borders within one, so the scores took
    a few values per image and ties decided the maxDets cut-off. The DETRs' logits kept more of the
    image, but little: at most 0.06 from their mean over coco8's images (spread 0.55 within one);
    with these statistics about 2. `norms_only`: the rest of the network in eval mode (a DETR's dropout
    and denoising stay off)."""
    norms = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for module in norms:
        module.reset_running_stats()
        module.momentum = None  # a cumulative average: this batch's statistics
    inputs = {}
    hooks = [module.register_forward_hook(lambda m, i, o, name=name: inputs.__setitem__(name, i[0].detach()))
             for name, module in net.named_modules() if name in layers]
    with torch.no_grad():
        if norms_only:
            net.eval()
            for module in norms:
                module.train()
        else:
            net.train()
        net(batch)
        net.eval()
    for hook in hooks:
        hook.remove()
    return inputs


def score_weights(shape, features, generator, spread=1.5):
    """Random weights for a score convolution over `features` less their mean, scaled so that the
    logits spread by `spread`."""
    weight = torch.randn(shape, generator=generator)
    logits = torch.nn.functional.conv2d(features - features.mean(dim=(0, 2, 3), keepdim=True), weight,
                                        padding=shape[-1] // 2)
    return weight * spread / logits.std(dim=(0, 2, 3)).view(-1, 1, 1, 1)


def calibrate_scores(family, net, images, generator):
    """YOLOv7-b's and RTMDet's fixture: BatchNorm statistics from the images, then each score layer
    centred on its input's mean, logits of spread 1.5 (YOLOv7) or 1 (RTMDet) and biases that leave a few hundred to some
    thousands of candidates per image above 0.001, of distinct scores."""
    with torch.no_grad():
        if family == "yolo7":
            heads = {name + ".head_conv": module for name, module in net.named_modules()
                     if hasattr(module, "head_conv") and hasattr(module, "implicit_a")}
            inputs = norms_from_images(net, letterboxed(images), heads)
            for name, head in heads.items():
                mean = inputs[name].mean(dim=(0, 2, 3)).view(1, -1, 1, 1)
                head.implicit_a.implicit.copy_(-mean)  # centred there, not in the bias: implicit_a (0 at init) is exercised
                head.head_conv.weight.copy_(score_weights(head.head_conv.weight.shape, inputs[name], generator))
                bias = 0.5 * torch.randn(head.head_conv.bias.shape, generator=generator).view(3, -1)
                bias[:, 4] -= 6.0  # objectness
                bias[:, 5:] -= 8.0  # classes
                head.head_conv.bias.copy_(bias.view(-1))
            return
        convs = {name: module for name, module in net.named_modules() if ".rtm_cls." in name}
        inputs = norms_from_images(net, letterboxed(images, ([103.53, 116.28, 123.675], [57.375, 57.12, 58.395])), convs)
        for name, conv in convs.items():
            weight = score_weights(conv.weight.shape, inputs[name], generator, spread=1.0)
            conv.weight.copy_(weight)
            centre = weight.sum(dim=(2, 3)) @ inputs[name].mean(dim=(0, 2, 3))
            conv.bias.copy_(0.5 * torch.randn(conv.bias.shape, generator=generator) - 8.0 - centre)


def validate(model, data, project):
    result = model.val(data=str(data), imgsz=IMGSZ, batch=4, save_json=True, workers=0, plots=False, verbose=False,
                       device="cpu", project=str(project), name="v", exist_ok=True)
    return result, json.loads((project / "v" / "predictions.json").read_text())


def write(work, coco8, family, size):
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = build(family, size)
    randomise_norms(net, generator, box_heads=True)
    images = sorted((coco8 / "images" / "val").glob("*.jpg"))
    if family in CONV_FAMILIES:
        randomise_score_biases(net, generator)
    if family in ("yolo7", "rtmdet"):
        calibrate_scores(family, net, images, generator)
    if family not in CONV_FAMILIES:
        norms_from_images(net, letterboxed(images, stretch=True), {}, norms_only=True)
    checkpoint = wrap_libreyolo_checkpoint(net.state_dict(), model_family=family, size=size, task="detect",
                                           nc=CLASSES, imgsz=IMGSZ)
    weights = work / f"py-{family}-{size}.pt"
    torch.save(checkpoint, weights)
    names = {i: f"c{i}" for i in range(CLASSES)}
    # the model's own best detections as labels, jittered
    plain = work / "plain.yaml"
    plain.write_text(yaml.safe_dump({"path": str(coco8), "train": "images/val", "val": "images/val", "names": names}))
    _, predictions = validate(LibreYOLO(str(weights), device="cpu"), plain, work / "pyplain")
    (work / "ds" / "images" / "val").mkdir(parents=True)
    (work / "ds" / "labels" / "val").mkdir(parents=True)
    jitter = torch.Generator().manual_seed(1)
    for index, image in enumerate(images):
        os.symlink(image, work / "ds" / "images" / "val" / image.name)
        # sides of 0 or at least 1 px: a box of 0.002 px (a random network draws some) has IoUs at the
        # noise of float32 label coordinates, which ours are (LibreYOLO's are float64)
        usable = (p for p in predictions if p["image_id"] == index and all(s == 0 or s >= 1 for s in p["bbox"][2:]))
        best = sorted(usable, key=lambda p: -p["score"])[:3]
        import cv2  # noqa: PLC0415 (only where images are read)
        height, width = cv2.imread(str(image)).shape[:2]
        rows = []
        for p in best:
            x, y, w, h = p["bbox"]
            shift = (torch.rand(4, generator=jitter) - 0.5) * 0.3
            x, y = x + shift[0].item() * w, y + shift[1].item() * h
            w, h = w * (1 + shift[2].item()), h * (1 + shift[3].item())
            cx, cy = min(max((x + w / 2) / width, 0), 1), min(max((y + h / 2) / height, 0), 1)
            rows.append(f"{p['category_id']} {cx:.6f} {cy:.6f} {min(w / width, 1):.6f} {min(h / height, 1):.6f}")
        (work / "ds" / "labels" / "val" / (image.stem + ".txt")).write_text("\n".join(rows) + "\n")
    data = work / "ds.yaml"
    data.write_text(yaml.safe_dump({"path": str(work / "ds"), "train": "images/val", "val": "images/val", "names": names}))
    reference(work, weights, work / "expected.json")


def reference(work, checkpoint, out):
    """LibreYOLO's validation of `checkpoint` on DIR/ds.yaml: its mAP and predictions, into `out`."""
    model = LibreYOLO(str(checkpoint), device="cpu")
    result, predictions = validate(model, work / "ds.yaml", work / ("py-" + out.stem))
    stems = [image.stem for image in sorted((work / "ds" / "images" / "val").glob("*.jpg"))]
    expected = {"mAP50": result["metrics/mAP50"], "mAP50-95": result["metrics/mAP50-95"],
                "predictions": [dict(p, stem=stems[p["image_id"]]) for p in predictions]}
    out.write_text(json.dumps(expected))
    print(f"reference: mAP50 {expected['mAP50']:.4f}, mAP50-95 {expected['mAP50-95']:.4f}, "
          f"{len(predictions)} detections")


def exit_with(failures):
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


def strict_types(config_class, values):
    """The values whose Python type is not the one `config_class` (a dataclass) declares."""
    import dataclasses  # noqa: PLC0415
    import typing  # noqa: PLC0415
    hints = typing.get_type_hints(config_class)
    wrong = {}
    for field in dataclasses.fields(config_class):
        if field.name not in values:
            continue
        value, hint = values[field.name], hints[field.name]
        origin = typing.get_origin(hint)
        union = origin is typing.Union or type(hint).__name__ == "UnionType"
        allowed = tuple(typing.get_origin(a) or a for a in typing.get_args(hint)) if union else (origin or hint,)
        allowed = tuple(a for a in allowed if isinstance(a, type))
        if typing.Any in (typing.get_args(hint) if union else (hint,)) or not allowed:
            continue
        if float in allowed:
            allowed += (int,)
        if tuple in allowed:
            allowed += (list,)
        if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
            wrong[field.name] = value
    return wrong


def interop(work, checkpoint, ours_path, kind):
    import subprocess  # noqa: PLC0415
    from libreyolo.models.base.model import _drop_disabled_eval_interval  # noqa: PLC0415
    from libreyolo.training.config import TrainConfig  # noqa: PLC0415
    ours = json.loads(pathlib.Path(ours_path).read_text())
    failures = []
    # 1. its CLI, as a user runs it
    cli = pathlib.Path(sys.executable).parent / "libreyolo"
    run = subprocess.run([str(cli), "val", f"model={checkpoint}", f"data={work / 'ds.yaml'}", f"imgsz={IMGSZ}", "batch=4",
                          "device=cpu", "workers=0", f"project={work / 'cli'}", f"name={kind}", "exist_ok=true", "--json"],
                         capture_output=True, text=True, check=False)
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {}
    if run.returncode != 0 or "metrics" not in result:
        print(run.stderr[-3000:])
        failures.append(f"libreyolo val (its CLI) exited {run.returncode}: {result}")
    else:
        for key, theirs in (("mAP50", result["metrics"]["mAP50"]), ("mAP50-95", result["metrics"]["mAP50_95"])):
            if abs(ours[f"metrics/{key}"] - theirs) > TIED_MAP_TOLERANCE + 5e-5:  # ties; the CLI rounds to 4 decimals
                failures.append(f"CLI {key}: ours {ours[f'metrics/{key}']:.6f}, libreyolo val {theirs:.4f}")
        print(f"CLI: mAP50 {result['metrics']['mAP50']:.4f} mAP50-95 {result['metrics']['mAP50_95']:.4f}")
    collapsed = "collapsing" in run.stderr
    if collapsed != (kind == "single"):
        failures.append(f"libreyolo val {'collapsed' if collapsed else 'did not collapse'} the classes of a "
                        f"{kind} checkpoint (config single_cls)")
    # 2. its Python API without data=: the data the config names
    model = LibreYOLO(str(checkpoint), device="cpu")
    api = model.val(imgsz=IMGSZ, batch=4, workers=0, plots=False, verbose=False, device="cpu",
                    project=str(work / "api"), name=kind, exist_ok=True)
    if abs(api["metrics/mAP50-95"] - ours["metrics/mAP50-95"]) > TIED_MAP_TOLERANCE:
        failures.append(f"val() on the config's data: mAP50-95 {api['metrics/mAP50-95']:.6f}, ours "
                        f"{ours['metrics/mAP50-95']:.6f}")
    # 3. the train arguments its resume restores, typed as the family's TrainConfig declares them
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    restored = type(model)._resume_train_args(model, str(checkpoint), set())
    _drop_disabled_eval_interval(restored, None)
    config_class = type(model).TRAIN_CONFIG or TrainConfig
    wrong = strict_types(config_class, restored)
    if wrong:
        failures.append(f"resume restores values of the wrong type into {config_class.__name__}: {wrong}")
    try:
        config_class.from_kwargs(size=saved["size"], num_classes=saved["nc"], **restored)
    except Exception as error:  # noqa: BLE001 (whatever it raises is the finding)
        failures.append(f"{config_class.__name__} from the restored arguments: {type(error).__name__}: {error}")
    print(f"interop {kind}: {len(restored)} train arguments restored into {config_class.__name__}, "
          f"classes {'collapsed' if collapsed else 'kept'}")
    exit_with(failures)


# Equal detections may still score a different mAP where scores tie exactly: a convolutional
# network scores the flat padding of a letterbox alike at many places, and the order the two lists
# give such ties decides COCOeval's matching. Measured on YOLOX-s trained two steps from the
# fixture: the same detections (boxes 3e-5 px, scores equal), mAP50 0.388104 ours, 0.387766 LibreYOLO.
TIED_MAP_TOLERANCE = 1e-3


def check(expected_path, ours_path, predictions_path, informative, map_tolerance=1e-6):
    expected = json.loads(pathlib.Path(expected_path).read_text())
    ours = json.loads(pathlib.Path(ours_path).read_text())
    predictions = json.loads(pathlib.Path(predictions_path).read_text())
    failures = []
    for key in ("mAP50", "mAP50-95"):
        if abs(ours[f"metrics/{key}"] - expected[key]) > map_tolerance:
            failures.append(f"{key}: ours {ours[f'metrics/{key}']:.6f}, libreyolo {expected[key]:.6f}")
    if informative and not expected["mAP50"] > informative:
        failures.append(f"the fixture's mAP50 is {expected['mAP50']}: too low to tell anything")
    # image ids differ by convention (LibreYOLO: the index; ours: the numeric stem): compare per stem
    stems = sorted({p["stem"] for p in expected["predictions"]})
    for stem in stems:
        theirs = sorted((p for p in expected["predictions"] if p["stem"] == stem), key=lambda p: -p["score"])
        mine = sorted((p for p in predictions if p["image_id"] == int(stem)), key=lambda p: -p["score"])
        if len(theirs) == MAX_DET and len(mine) == MAX_DET:
            # cut at max_det: boxes tied (to 1e-5) with the last score may be kept in either order
            # (a random convolutional network scores flat regions alike), so those are left out
            cut = theirs[-1]["score"]
            theirs = [p for p in theirs if p["score"] > cut + 1e-5]
            mine = [p for p in mine if p["score"] > cut + 1e-5]
        if len(theirs) != len(mine):
            failures.append(f"{stem}: {len(mine)} detections, libreyolo {len(theirs)}")
            continue
        # near-equal scores may come in either order: pair each of theirs with the nearest unpaired
        # detection of ours of its class and (to 1e-5) its score
        free = list(mine)
        worst_box = worst_score = 0.0
        for p in theirs:
            candidates = [q for q in free if q["category_id"] == p["category_id"] and abs(q["score"] - p["score"]) <= 1e-5]
            if not candidates:
                failures.append(f"{stem}: no detection of ours for class {p['category_id']} score {p['score']:.6f}")
                break
            q = min(candidates, key=lambda q: max(abs(a - b) for a, b in zip(p["bbox"], q["bbox"])))
            free.remove(q)
            worst_box = max(worst_box, max(abs(a - b) for a, b in zip(p["bbox"], q["bbox"])))
            worst_score = max(worst_score, abs(p["score"] - q["score"]))
        print(f"{stem}: {len(mine)} detections, largest box difference {worst_box:.2e} px, score {worst_score:.2e}")
        if worst_box > 1e-3:
            failures.append(f"{stem}: boxes differ by {worst_box:.2e} px")
    print(f"mAP50 ours {ours['metrics/mAP50']:.6f} libreyolo {expected['mAP50']:.6f}; "
          f"mAP50-95 ours {ours['metrics/mAP50-95']:.6f} libreyolo {expected['mAP50-95']:.6f}")
    exit_with(failures)


if __name__ == "__main__":
    directory = pathlib.Path(sys.argv[1])
    if sys.argv[2] == "check":  # check EXPECTED OURS_JSON OURS_PREDICTIONS [any-map|trained]
        mode = sys.argv[6] if len(sys.argv) > 6 else ""
        # trained: the fixture's weights after a step too small to move them (its mAP50 above 0.1)
        check(sys.argv[3], sys.argv[4], sys.argv[5], informative={"any-map": 0, "trained": 0.1}.get(mode, 0.3),
              map_tolerance=TIED_MAP_TOLERANCE if mode == "trained" else 1e-6)
    elif sys.argv[2] == "interop":  # interop CHECKPOINT OURS_JSON plain|single
        interop(directory, pathlib.Path(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif sys.argv[2] == "reference":  # reference CHECKPOINT OUT
        reference(directory, pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4]))
    else:  # COCO8 [FAMILY SIZE]
        write(directory, pathlib.Path(sys.argv[2]), *(sys.argv[3:5] if len(sys.argv) > 3 else ("rtdetr", "r18")))
