"""What the Python benches share: where the binary is, the datasets, and the CPU model every figure names."""
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# $LIBREYOLO names another build of the binary (scripts/device/gpu-check.sh runs a carried one)
OURS = pathlib.Path(os.environ.get("LIBREYOLO", ROOT / "build" / "tools" / "libreyolo" / "libreyolo"))


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def require_dataset(name):
    """The datasets folder ($LIBREYOLO_DATASETS, default ../shared/datasets, exported for the binary);
    exits 77 (skipped) when it has no `name`."""
    datasets = pathlib.Path(os.environ.setdefault("LIBREYOLO_DATASETS", str(ROOT.parent / "shared" / "datasets")))
    if not (datasets / name).is_dir():
        print(f"{name} not found under {datasets}: skipped", file=sys.stderr)
        sys.exit(77)
    return datasets
