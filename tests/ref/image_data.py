"""A random image dataset: DIR SAMPLES C H W writes input.bin (SAMPLES x C x H x W float32,
standard normal), labels.bin (SAMPLES int64 in 0..9) and dataset.json, from numpy's
default_rng(0), for models whose input is named "input" (tests/ref/export_models.py)."""
import json
import os
import sys

import numpy as np

d, n = sys.argv[1], int(sys.argv[2])
shape = [int(v) for v in sys.argv[3:6]]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(0)
rng.standard_normal((n, *shape)).astype(np.float32).tofile(f"{d}/input.bin")
rng.integers(0, 10, size=(n,), dtype=np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": [
    {"name": "input", "dtype": "float32", "shape": shape, "file": "input.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
