"""ONNX Runtime training (onnxruntime-training 1.19.2, its on-device training API) on the
same ONNX file onnxpipe trains: artifacts generated from the file (so its initializers
are the initial weights), the batches onnxpipe reads as M microbatches whose gradients
the training session accumulates, then one AdamW step. One JSON line (bench "peer").

What the file needs before ORT's gradient builder and loader take it (each is said in the
output line): every LayerNormalization node's optional Mean and InvStdDev outputs
declared (the builder reads them); the logits flattened to [B·T, V], since
SoftmaxCrossEntropyLoss takes classes on axis 1; the loss scaled by 1/M, since gradients
are summed over the microbatches of a step and the optimizer has no scale; artifacts
written by a newer onnx package carry a newer IR version than this runtime reads (10), so
it is lowered. onnxblock's AdamW writes ORT's AdamWOptimizer in its Hugging Face form
(adam_mode 1: eps added to the uncorrected sqrt(v), decay after the update), whose losses
drift from torch's and onnxpipe's in the 4th digit after some 20 steps; the op's PyTorch
form (adam_mode 0) is what the others run, so the optimizer model is switched to it
(--adam-mode hf keeps onnxblock's).

usage: ort_train.py MODEL.onnx DATA_DIR [--threads N] [--steps S] [--batch B]
       [--microbatches M] [--workdir DIR]"""
import os
import sys
import tempfile

from job_args import job_parser

ap = job_parser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--workdir")
ap.add_argument("--adam-mode", choices=("torch", "hf"), default="torch",
                help="AdamWOptimizer's adam_mode: 0, torch.optim.AdamW's form, or 1, Hugging Face's (onnxblock's)")
ap.add_argument("--spin", choices=("on", "off"), default="on",
                help="intra-op threads spin while waiting for work (ORT's default) or sleep")
a = ap.parse_args()
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = str(a.threads)   # onnxruntime.training imports torch when it loads
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from common import Timer, emit, fail, load_gpt, read_data, step_batch  # noqa: E402

NAME = f"ort training {a.threads} thread{'s' if a.threads > 1 else ''}" + (" no spin" if a.spin == "off" else "")
MAX_IR = 10   # what onnxruntime 1.19 reads


def prepare(path, vocab):
    """The file, made trainable by ORT: LayerNormalization's Mean/InvStdDev declared, the
    logits flattened to [B*T, V]."""
    m = onnx.load(path)
    for n in m.graph.node:
        if n.op_type == "LayerNormalization" and len(n.output) == 1:
            n.output.extend([n.name + ".mean", n.name + ".inv_std_dev"])
    out = m.graph.output[0].name
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([-1, vocab], dtype=np.int64), "ort.flat_shape"))
    m.graph.node.append(onnx.helper.make_node("Reshape", [out, "ort.flat_shape"], [out + ".flat"], name="ort.flatten"))
    del m.graph.output[:]
    m.graph.output.append(onnx.helper.make_tensor_value_info(out + ".flat", onnx.TensorProto.FLOAT, ["tokens", vocab]))
    return m


def generate(model, workdir, params, microbatches, weight_decay, adam_mode):
    from onnxruntime.training import artifacts, onnxblock

    class ScaledCrossEntropy(onnxblock.Block):
        """mean cross-entropy over the microbatch's tokens, times 1/M"""

        def __init__(self):
            super().__init__()
            self.ce = onnxblock.loss.CrossEntropyLoss(reduction="mean")
            self.scale = onnxblock.blocks.Constant(1.0 / microbatches)
            self.mul = onnxblock.blocks.Mul()

        def build(self, logits):
            return self.mul(self.ce(logits), self.scale())

    opt = onnxblock.optim.AdamW(betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    artifacts.generate_artifacts(model, requires_grad=params, frozen_params=[], loss=ScaledCrossEntropy(),
                                 optimizer=opt, artifact_directory=workdir)
    changes = []
    for f in sorted(os.listdir(workdir)):
        if f.endswith(".onnx"):
            p = os.path.join(workdir, f)
            m = onnx.load(p)
            changed = False
            if m.ir_version > MAX_IR:
                changes.append(f"{f} IR {m.ir_version} -> {MAX_IR}")
                m.ir_version, changed = MAX_IR, True
            for n in m.graph.node:
                for at in n.attribute:
                    if n.op_type == "AdamWOptimizer" and at.name == "adam_mode" and at.i != adam_mode:
                        changes.append(f"{f} AdamWOptimizer adam_mode {at.i} -> {adam_mode}")
                        at.i, changed = adam_mode, True
            if changed:
                onnx.save(m, p)
    return changes


def main(workdir):
    cfg, w = load_gpt(a.model)
    ids, labels = read_data(a.data)
    model = prepare(a.model, cfg["vocab"])
    changes = generate(model, workdir, sorted(w), a.microbatches, a.weight_decay, 0 if a.adam_mode == "torch" else 1)
    import onnxruntime as ort
    from onnxruntime.training import api

    ort.set_default_logger_severity(3)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if a.spin == "on" else "0")
    state = api.CheckpointState.load_checkpoint(os.path.join(workdir, "checkpoint"))
    module = api.Module(os.path.join(workdir, "training_model.onnx"), state,
                        os.path.join(workdir, "eval_model.onnx"), device="cpu", session_options=so)
    opt = api.Optimizer(os.path.join(workdir, "optimizer_model.onnx"), module)
    opt.set_learning_rate(a.lr)
    module.train()
    mb = a.batch // a.microbatches
    timer, losses = Timer(), []
    for step in range(1, a.steps + 1):
        x, y = step_batch(ids, labels, a.batch, step)
        timer.start()
        total = 0.0
        for m in range(a.microbatches):
            out = module(np.ascontiguousarray(x[m * mb:(m + 1) * mb]),
                         np.ascontiguousarray(y[m * mb:(m + 1) * mb].reshape(-1)))
            total += float(np.asarray(out).reshape(-1)[0])
        opt.step()
        module.lazy_reset_grad()
        timer.stop()
        losses.append(total)
    line = {"bench": "peer", "config": NAME, "system": "onnxruntime-training " + ort.__version__,
            "mode": "on-device training API (training session, AdamW optimizer model)", "threads": a.threads,
            "processes": 1, "cores": a.threads, "spinning": a.spin, "global_batch": a.batch, "microbatches": a.microbatches,
            "optimizer": "ORT AdamWOptimizer, " + ("adam_mode 0 (torch.optim.AdamW's form)" if a.adam_mode == "torch"
                                                   else "adam_mode 1 (Hugging Face form)"), "losses": [round(l, 5) for l in losses],
            "model_changes": ["LayerNormalization Mean/InvStdDev outputs declared", "logits flattened to [B*T, V]",
                              f"loss scaled by 1/{a.microbatches} (gradients accumulate over microbatches)"]
            + changes}
    line.update(timer.summary(a.batch, cfg["seq"]))
    emit(line)


try:
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
        main(a.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="ort-artifacts-") as d:
            main(d)
except Exception as e:  # noqa: BLE001
    fail("peer", NAME, f"{type(e).__name__}: {e}")
    sys.exit(1)
