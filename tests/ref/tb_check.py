"""Reads onnxpipe's TensorBoard event files back with the tensorboard package and
compares them with the run's --losses and --metrics files: every record's framing and
masked CRC32C (tensorboard's masked_crc32c), then every scalar through EventAccumulator:
TensorBoard stores float32, and the files print about 10 digits, so a value that sits on
a midpoint between two floats (a mean of two float losses does) may round either way:
equal means within one float32 step of the printed value; then the text summary at step
0, and the histograms (element counts against the exported model's initializers).

usage: tb_check.py LOGDIR LOSSES METRICS RANKS [MODEL.onnx HIST_EVERY]"""
import glob
import json
import struct
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c  # noqa: E402


def check_framing(path):
    data = open(path, "rb").read()
    pos = n = 0
    while pos < len(data):
        length = struct.unpack_from("<Q", data, pos)[0]
        (hcrc,) = struct.unpack_from("<I", data, pos + 8)
        body = data[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack_from("<I", data, pos + 12 + length)
        assert hcrc == masked_crc32c(data[pos:pos + 8]), f"record {n}: length CRC"
        assert dcrc == masked_crc32c(body), f"record {n}: data CRC"
        pos += 16 + length
        n += 1
    assert pos == len(data), "trailing bytes"
    return n


def main():
    logdir, losses, metrics, ranks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    files = glob.glob(f"{logdir}/events.out.tfevents.*")
    assert len(files) == 1, f"expected one event file in {logdir}, found {files}"
    print(f"{files[0]}: {check_framing(files[0])} records, lengths and masked CRC32C as tensorboard computes them")
    ea = EventAccumulator(logdir, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    bad, compared, worst = [], 0, 0.0

    def same(tag, got, want):
        nonlocal compared, worst
        got_d = {e.step: e.value for e in ea.Scalars(tag)} if tag in tags["scalars"] else {}
        for step, v in want.items():
            compared += 1
            ulps = abs(got_d[step] - v) / float(np.spacing(np.float32(abs(v)))) if step in got_d else np.inf
            worst = max(worst, ulps)
            if ulps > 1.0:
                bad.append(f"{tag} step {step}: tensorboard {got_d.get(step)} != {v} ({ulps:.2f} float32 steps)")
        extra = set(got_d) - set(want)
        if extra:
            bad.append(f"{tag}: steps {sorted(extra)} not in the reference")

    ref = {int(s): l for s, l in np.loadtxt(losses, ndmin=2)}
    lines = [json.loads(l) for l in open(metrics)]
    by = lambda key: {m["step"]: m[key] for m in lines if key in m}  # noqa: E731
    same("train/loss", None, ref)
    rate = "train/tokens_per_s" if "tokens_per_s" in lines[0] else "train/samples_per_s"
    for tag, key in [("train/loss", "loss"), ("train/lr", "lr"), ("train/grad_norm", "grad_norm"),
                     (rate, rate.split("/")[1]), ("train/step_s", "step_s"), ("eval/loss", "eval_loss"),
                     ("eval/perplexity", "eval_perplexity"), ("eval/accuracy", "eval_accuracy"),
                     ("pipeline/bubble", "bubble"), ("ckpt/saves", "ckpt_saves"), ("ckpt/stall_s", "ckpt_stall_s")]:
        same(tag, None, by(key))
    for r in range(ranks):
        same(f"pipeline/wait_s/rank{r}", None, {s: v[r] for s, v in by("wait_s_per_rank").items()})
        same(f"memory/peak_bytes/rank{r}", None, {s: v[r] for s, v in by("stage_bytes_per_rank").items()})
    evals = sorted(by("eval_loss"))
    assert evals, "no evaluation in the metrics"
    saves = by("ckpt_saves")
    if saves:
        print(f"checkpoint scalars at {len(saves)} steps, {max(saves.values())} saves")
    print(f"{compared} scalars equal (largest difference {worst:.2f} float32 steps): train/loss at {len(ref)} steps = --losses; lr, grad_norm, {rate}, step_s, "
          f"bubble, eval/* at steps {evals}, wait_s and peak_bytes of {ranks} ranks = --metrics")
    text = ea.Tensors("config/plan")
    assert text and text[0].step == 0, "no text summary at step 0"
    s = text[0].tensor_proto.string_val[0].decode()
    assert "onnxpipe train" in s and "--logdir" in s and "schedule" in s, s[:300]
    print(f"text summary at step 0: {len(s)} characters, the command line and the plan")
    if len(sys.argv) > 6:
        import onnx
        from onnx import numpy_helper
        model, every = onnx.load(sys.argv[5]), int(sys.argv[6])
        numel = {i.name: numpy_helper.to_array(i).size for i in model.graph.initializer}
        hist = [t for t in tags["histograms"]]
        names = {t.split("/", 1)[1] for t in hist}
        for t in hist:
            for h in ea.Histograms(t):
                v = h.histogram_value
                if h.step % every or v.num != numel[t.split("/", 1)[1]] or sum(v.bucket) != v.num or v.min > v.max:
                    bad.append(f"histogram {t} step {h.step}: num {v.num}, buckets {sum(v.bucket)}")
        print(f"{len(hist)} histograms (weights and grads of {len(names)} parameters) every {every} steps: "
              f"element counts = the model's initializers, buckets sum to them")
    if bad:
        sys.exit("\n".join(bad[:20]))


if __name__ == "__main__":
    main()
