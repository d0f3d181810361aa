"""Checks a checkpoint with readers nobody here wrote: every shard opens with
safetensors.numpy.load_file and holds what the manifest says (names, shapes, bytes at
the manifest's offsets); every parameter equals the initializer of the model exported
by `onnxpipe train --export` of the same run, and `onnxpipe ckpt export` gives a model
that onnxruntime runs to the same outputs as that export.

usage: check_ckpt.py CKPT_DIR TRAIN_EXPORT.onnx CKPT_EXPORT.onnx"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402


def main():
    ckpt, train_export, ckpt_export = sys.argv[1:4]
    manifest = json.load(open(os.path.join(ckpt, "manifest.json")))
    shards = {f["name"]: load_file(os.path.join(ckpt, f["name"])) for f in manifest["files"]}
    n = 0
    for t in manifest["tensors"]:
        arr = shards[t["file"]][t["name"]]
        assert list(arr.shape) == t["shape"], (t["name"], arr.shape, t["shape"])
        with open(os.path.join(ckpt, t["file"]), "rb") as f:
            f.seek(t["offset"])
            raw = f.read(t["nbytes"])
        assert raw == arr.tobytes(), f"{t['name']}: bytes at the manifest's offset differ from safetensors' view"
        n += 1
    assert n == sum(len(s) for s in shards.values()), "a shard holds a tensor the manifest does not list"
    print(f"safetensors: {len(shards)} shards, {n} tensors open and match the manifest's offsets")

    exported = {i.name: numpy_helper.to_array(i) for i in onnx.load(train_export).graph.initializer}
    params = [t for t in manifest["tensors"] if t["state"] is None]
    for t in params:
        assert np.array_equal(shards[t["file"]][t["name"]], exported[t["name"]]), t["name"]
    print(f"parameters and buffers: {len(params)} equal the train --export initializers bitwise")

    rng = np.random.default_rng(0)
    a = ort.InferenceSession(train_export, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(ckpt_export, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in a.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        if "int64" in i.type:
            feeds[i.name] = rng.integers(0, 10, size=shape, dtype=np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    outs_a, outs_b = a.run(None, feeds), b.run(None, feeds)
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(outs_a, outs_b))
    print(f"onnxruntime: ckpt export vs train --export, {len(outs_a)} outputs, max abs diff {diff:.1e}")
    assert diff == 0.0


if __name__ == "__main__":
    main()
