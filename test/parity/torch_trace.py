"""A real trace from PyTorch's own profiler (torch.profiler, CPU, a small conv net with the
step/<phase> annotations LibreYOLO uses), plus the figures the trace implies by LibreYOLO's
window rule, for torch_trace.sh to compare with what `libreyolo profile` reads from it."""
import json
import sys

try:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
except ImportError as error:  # the venv is there (the wrapper skips only without it): a missing oracle fails
    print(f"FAIL: the test venv cannot import an oracle ({error}); run scripts/setup.sh")
    sys.exit(1)

out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.SiLU(), torch.nn.Conv2d(8, 4, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=2, active=10, repeat=1)) as prof:
    for _ in range(12):
        with record_function("step/dataload"):
            x = torch.randn(4, 3, 48, 48)
        with record_function("step/forward"):
            loss = model(x).square().mean()
        optimizer.zero_grad()
        with record_function("step/backward"):
            loss.backward()
        with record_function("step/optimizer"):
            optimizer.step()
        prof.step()
prof.export_chrome_trace(f"{out}/torch_trace.json")

events = json.load(open(f"{out}/torch_trace.json"))["traceEvents"]
steps = sorted((e["ts"], e["name"]) for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
w0, w1 = steps[2][0], steps[min(len(steps) - 1, 8)][0]
numbers = {name for ts, name in steps if w0 <= ts < w1}
n = max(1, len(numbers))
conv = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == "aten::conv2d" and w0 <= e["ts"] < w1]
json.dump({"steps": n, "step_ms": (w1 - w0) / 1000 / n, "conv2d_per_step": len(conv) // n,
           "conv2d_ms_per_step": sum(e["dur"] for e in conv) / 1000 / n}, open(f"{out}/expected.json", "w"))
