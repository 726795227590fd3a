"""What the Python benches share: where the binary is, and the CPU model every figure names."""
import pathlib
import platform

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = ROOT / "build" / "tools" / "libreyolo" / "libreyolo"


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()
