"""Writes the seed corpus of the fuzz targets into test/fuzz/corpus/<target>/ (committed; run again
only to change the seeds). Needs the test venv (torch) and a profile run folder:
    python3 make_corpus.py PROFILE_RUN_DIR
"""
import json, os, struct, sys, zlib
from collections import OrderedDict

import torch

here = os.path.dirname(os.path.abspath(__file__))
run = sys.argv[1]


def put(target, name, data):
    folder = os.path.join(here, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())


def saved(obj):
    path = "/tmp/libreyolo_corpus.pt"
    torch.save(obj, path)
    with open(path, "rb") as f:
        return f.read()


# torch.save: a state dict (OrderedDict with _metadata), a checkpoint-shaped dict, shared storages
state = OrderedDict([("conv.weight", torch.arange(6, dtype=torch.float32).reshape(2, 3)),
                     ("bn.num_batches_tracked", torch.tensor(3)), ("half", torch.ones(2, dtype=torch.float16))])
state._metadata = OrderedDict([("", {"version": 1})])
put("torch_file", "state_dict.pt", saved(state))
base = torch.arange(8, dtype=torch.float32)
put("torch_file", "checkpoint.pt", saved({"model": {"a": base[2:6], "b": base.view(2, 4).t()}, "epoch": 3, "nc": 2,
                                          "names": {0: "a", 1: "b"}, "imgsz": 64, "model_family": "yolo9", "size": "t",
                                          "opt": [1.5, None, True, "x", (1, 2)], "big": 2**40}))

# safetensors: written by hand in the format's layout (8-byte header length, JSON header, data)
def safetensors_bytes(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data
put("safetensors", "two.safetensors", safetensors_bytes(
    {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "i": ("I64", [1], struct.pack("<q", 7))},
    {"model_family": "yolo9", "size": "t", "nc": "2", "names": '["a", "b"]'}))
put("safetensors", "empty.safetensors", safetensors_bytes({"e": ("BF16", [0, 3], b"")}))

# labels: the first byte is the class count - 1
put("labels", "boxes.txt", b"\x04" + b"0 0.5 0.5 0.2 0.3\n3 0.1 0.2 0.05 0.05\n")
put("labels", "polygon.txt", b"\x02" + b"1 0.1 0.1 0.4 0.1 0.4 0.5 0.1 0.5\n\n")
put("labels", "duplicates.txt", b"\x00" + b"0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n")
put("labels", "bad.txt", b"\x01" + b"1 0.5 nan 0.2 0.2\n-1 2 0 1\n")

# dataset YAML
put("dataset_yaml", "list.yaml", "path: .\ntrain: images/train\nval: [images/val, more/val]\nnames: [cat, dog]\n")
put("dataset_yaml", "map.yaml", "path: /tmp/data\ntrain: train.txt\nval: images/val\nnc: 3\nnames:\n  0: a\n  1: b\n  2: c\ndownload: x\n")
put("dataset_yaml", "bad.yaml", "train: [\nnames: {0: a, 2: b}\n")
put("coco_json", "valid.json", json.dumps({
    "images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48}, {"id": 9, "file_name": "b/c.png", "width": 5, "height": 5}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 90, "bbox": [-3, 4, 80, 20.5], "area": 300, "iscrowd": 0},
                    {"id": 2, "image_id": 9, "category_id": 2, "bbox": [0, 0, 5, 5], "iscrowd": 1},
                    {"id": 3, "image_id": 4, "category_id": 2, "bbox": [1, 1, 0, 2], "area": 0}],
    "categories": [{"id": 90, "name": "toothbrush"}, {"id": 2, "name": "bicycle"}]}))
put("coco_json", "bad.json", '{"images": [{"id": 1, "file_name": "", "width": -4}], "categories": [{"id": "x"}]')

# profile.json from a real run, rows cut to a few
profile = json.load(open(os.path.join(run, "profile.json")))
for key in ("kernels", "ops", "top_kernels"):
    profile[key] = profile[key][:3]
for key in ("kernels_by_phase", "ops_by_phase"):
    profile[key] = {phase: rows[:2] for phase, rows in list(profile[key].items())[:2]}
put("profile_json", "profile.json", json.dumps(profile))

# traces: events of each phase kind, flows, metadata; and a profile summary
events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "libreyolo"}},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": "stream 7", "args": {"name": "main"}}]
t = 100.0
for step in range(1, 4):
    events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t, "dur": 900})
    events.append({"ph": "X", "cat": "user_annotation", "name": "step/forward", "pid": 1, "tid": 1, "ts": t + 10, "dur": 400})
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": t + 20, "dur": 100})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 30, "dur": 5,
                   "args": {"correlation": step}})
    events.append({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>()", "pid": 1000000, "tid": 7, "ts": t + 40,
                   "dur": 50, "args": {"correlation": step}})
    events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": step, "pid": 1, "tid": 1, "ts": t + 30})
    events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": step, "pid": 1000000, "tid": 7, "ts": t + 40, "bp": "e"})
    t += 1000
put("trace_json", "trace.json", json.dumps({"traceEvents": events}))
put("trace_json", "summary.json", open(os.path.join(run, "profile_summary.json")).read())
