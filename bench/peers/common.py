"""What the peer benchmarks (bench/peers/*.py, run by bench/peers.sh) share: the example
GPT's configuration and initial weights read from the ONNX file onnxpipe trains, the
batches `onnxpipe train` reads for each step (no shuffle: step s reads samples
(s-1)·B .. s·B-1 of the stream, an epoch being the whole batches that fit), and the JSON
line every run prints (per-step losses, the median of the timed steps, the load average).

Timing: step 1 is a warm-up (allocation, torch.compile's compilation) and is left out of
the median; its time is reported beside. Wall time and the process's CPU time (all its
threads) are both reported: the machine is shared, and CPU time is what other load
distorts least."""
import json
import os
import statistics
import time

import numpy as np
import onnx
from onnx import numpy_helper


def load_gpt(path):
    """(config, weights): config {layers, d_model, heads, vocab, seq, eps}; weights name ->
    float32 NumPy array (ONNX layout: MatMul weights are [in, out])."""
    m = onnx.load(path)
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    layers = sum(1 for k in w if k.endswith(".ln_1.weight"))
    vocab, d = w["wte.weight"].shape
    seq = w["wpe.weight"].shape[0]
    heads = int(w["shape.heads"][2])   # the Reshape to [-1, T, H, D/H]
    eps = next(a.f for n in m.graph.node if n.op_type == "LayerNormalization" for a in n.attribute
               if a.name == "epsilon")
    cfg = dict(layers=layers, d_model=d, heads=heads, vocab=vocab, seq=seq, eps=eps)
    return cfg, {k: v for k, v in w.items() if v.dtype == np.float32}


def read_data(d):
    meta = json.load(open(os.path.join(d, "dataset.json")))
    arrays = {}
    for a in meta["arrays"]:
        arrays[a["name"]] = np.fromfile(os.path.join(d, a["file"]), dtype=np.int64).reshape([-1] + a["shape"])
    return arrays["input_ids"], arrays["labels"]


def step_batch(ids, labels, batch, step):
    """The global batch `onnxpipe train` reads at step (1-based), without --shuffle."""
    per_epoch = (ids.shape[0] // batch) * batch
    idx = [((step - 1) * batch + i) % per_epoch for i in range(batch)]
    return ids[idx], labels[idx]


class Timer:
    """Per-step wall and CPU seconds."""

    def __init__(self):
        self.wall, self.cpu = [], []

    def start(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def stop(self):
        self.wall.append(time.perf_counter() - self.t0)
        self.cpu.append(time.process_time() - self.c0)

    def summary(self, batch, seq):
        timed = self.wall[1:] or self.wall
        ctimed = self.cpu[1:] or self.cpu
        med, cmed = statistics.median(timed), statistics.median(ctimed)
        return {"steps_timed": len(timed), "step_s_median": round(med, 4), "step_s_min": round(min(timed), 4),
                "step_s_max": round(max(timed), 4), "first_step_s": round(self.wall[0], 3),
                "tokens_per_s": round(batch * seq / med, 1),
                "step_cpu_s_median": round(cmed, 4), "tokens_per_cpu_s": round(batch * seq / cmed, 1)}


def emit(line):
    line["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(line), flush=True)


def fail(bench, config, why):
    emit({"bench": bench, "config": config, "error": str(why)[-600:]})
