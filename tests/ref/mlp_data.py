"""A random dataset for the example MLP (--in 16 --classes 10): DIR SAMPLES SEED writes
x.bin (SAMPLES x 16 float32, standard normal), labels.bin (SAMPLES int64 in 0..9) and
dataset.json, drawn in that order from numpy's default_rng(SEED). A fourth argument K sets
x[K, 0] = 1e6, beyond float16's range (65504): an fp16 overflow planted in sample K."""
import json
import os
import sys

import numpy as np

d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(seed)
x = rng.standard_normal((n, 16)).astype(np.float32)
if len(sys.argv) > 4:
    x[int(sys.argv[4]), 0] = 1e6
x.tofile(f"{d}/x.bin")
rng.integers(0, 10, size=(n,), dtype=np.int64).tofile(f"{d}/labels.bin")
json.dump({"format": "onnxpipe-dataset-1", "samples": n, "arrays": [
    {"name": "x", "dtype": "float32", "shape": [16], "file": "x.bin"},
    {"name": "labels", "dtype": "int64", "shape": [], "file": "labels.bin"}]}, open(f"{d}/dataset.json", "w"))
