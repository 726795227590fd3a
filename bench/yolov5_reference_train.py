"""Trains a YOLOv5 from scratch with the original package's own trainer (PyPI yolov5==7.0.14, the
test venv's oracle: `yolov5.train.run`, hyp.scratch-low, SGD, AutoAnchor on), then writes its
best.pt's weights in float32 with our checkpoint's metadata, OUT_DIR/LibreYOLOv5<SIZE>.pt, which
our `libreyolo val` reads (yolov5's checkpoints pickle the model object). Run by
bench/train_accuracy.py with the venv's python:

    python yolov5_reference_train.py DATA_DIR OUT_DIR SIZE IMGSZ BATCH EPOCHS SEED

The package is installed without its requirements (scripts/setup.sh), so what its trainer would
fetch from the network is stubbed here, for this process only: the Roboflow connector (an import
of train.py), the requirements check (it would pip-install), the font download and the Hugging
Face lookup of the weights name; torch.load reads the checkpoints it wrote itself as it did before
PyTorch 2.6; and NumPy 2's name for np.trapz is given its old one. Nothing of the training itself
is touched.
"""
import os
import pathlib
import sys
import types


def offline():
    # yolov5 7.0 predates torch.load's weights_only default (PyTorch 2.6) and pickles its model
    # object in the checkpoints it writes here and reads back (strip_optimizer, the final val)
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    # yolov5/utils/roboflow.py imports Roboflow and roboflow.core.version's Version
    for name, attribute in (("roboflow", "Roboflow"), ("roboflow.core", None), ("roboflow.core.version", "Version")):
        module = types.ModuleType(name)
        module.__path__ = []
        if attribute:
            setattr(module, attribute, object)
        sys.modules[name] = module
    import yolov5.utils.general as general
    import yolov5.utils.downloads as downloads
    general.check_requirements = lambda *args, **kwargs: None
    general.check_font = lambda *args, **kwargs: None
    downloads.attempt_download_from_hub = lambda *args, **kwargs: None
    # yolov5 7.0's metrics integrate with np.trapz, which NumPy 2 renamed np.trapezoid (same function)
    import numpy
    if not hasattr(numpy, "trapz"):
        numpy.trapz = numpy.trapezoid
    import yolov5.train as train
    train.check_requirements = general.check_requirements
    train.attempt_download_from_hub = downloads.attempt_download_from_hub
    return train


def main():
    data, out, size, imgsz, batch, epochs, seed = sys.argv[1:8]
    data, out = pathlib.Path(data).resolve(), pathlib.Path(out).resolve()
    train = offline()
    import torch
    import yaml
    import yolov5

    # yolov5 resolves a relative `path:` against its own package folder, so this copy is absolute
    spec = yaml.safe_load((data / "data.yaml").read_text())
    spec["path"] = str(data)
    spec_file = out / "data.yaml"
    out.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(yaml.safe_dump(spec))
    cfg = pathlib.Path(yolov5.__file__).parent / "models" / f"yolov5{size}.yaml"
    train.run(data=str(spec_file), cfg=str(cfg), weights="", imgsz=int(imgsz), batch_size=int(batch),
              epochs=int(epochs), seed=int(seed), device="cpu", workers=2, project=str(out), name="train",
              exist_ok=True, noplots=True)
    checkpoint = torch.load(out / "train" / "weights" / "best.pt", map_location="cpu", weights_only=False)
    # at the end of training yolov5's strip_optimizer has put the EMA in "model" (and "ema" to None)
    model = checkpoint["ema"] if checkpoint.get("ema") is not None else checkpoint["model"]
    state = {name: (value.float() if value.is_floating_point() else value).contiguous()
             for name, value in model.state_dict().items()}
    # with the metadata our checkpoints carry (a bare state dict says neither the size nor nc)
    names = spec["names"] if isinstance(spec["names"], dict) else dict(enumerate(spec["names"]))
    weights = out / f"LibreYOLOv5{size}.pt"
    torch.save({"model": state, "schema_version": "1.0", "libreyolo_version": f"yolov5 {yolov5.__version__}",
                "model_family": "yolov5", "size": size, "task": "detect", "nc": len(names),
                "names": {int(k): str(v) for k, v in names.items()}, "imgsz": int(imgsz)}, weights)
    print(weights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
