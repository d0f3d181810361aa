"""The eval loss, perplexity and accuracy onnxpipe reports after the last step, against
onnxruntime running the exported (trained) model over the same eval batches, with the
cross-entropy and argmax computed here in numpy.

usage: eval_ref.py MODEL.onnx EVAL_DIR BATCH BATCHES METRICS TOL"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402


def main():
    model, d, batch, batches, metrics, tol = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5], float(sys.argv[6])
    hdr = json.load(open(f"{d}/dataset.json"))
    arrays = {a["name"]: np.fromfile(f"{d}/{a['file']}", dtype=a["dtype"]).reshape([hdr["samples"]] + a["shape"])
              for a in hdr["arrays"]}
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = [i.name for i in sess.get_inputs()]
    nll, hits, count = 0.0, 0, 0
    for b in range(batches):
        sl = slice(b * batch, (b + 1) * batch)
        logits = sess.run(["logits"], {n: arrays[n][sl] for n in feeds})[0].astype(np.float64)
        y = arrays["labels"][sl]
        z = logits - logits.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        nll -= np.take_along_axis(logp, y[..., None], -1).sum()
        hits += int((logits.argmax(-1) == y).sum())
        count += y.size
    loss, acc = nll / count, hits / count
    last = [json.loads(l) for l in open(metrics) if "eval_loss" in l][-1]
    rl = abs(last["eval_loss"] - loss) / loss
    rp = abs(last["eval_perplexity"] - np.exp(loss)) / np.exp(loss)
    print(f"after step {last['step']}: eval loss {last['eval_loss']:.7f} vs onnxruntime {loss:.7f} (rel {rl:.1e}); "
          f"perplexity rel {rp:.1e}; accuracy {last['eval_accuracy']:.6f} vs {acc:.6f} over {count} tokens")
    # a tie between two logits may flip an argmax at fp32 rounding: allow one token in 10^4
    if rl > tol or rp > 2 * tol or abs(last["eval_accuracy"] - acc) > 1e-4 + 1.0 / count:
        sys.exit("the eval metrics differ from onnxruntime's")


if __name__ == "__main__":
    main()
