"""PyTorch 2.x on one process, eager or torch.compile'd: the example GPT from the ONNX
file's initial weights, the batches onnxpipe reads, the global batch as M accumulated
microbatches, AdamW. One JSON line (bench "peer").

usage: torch_eager.py MODEL.onnx DATA_DIR [--threads N] [--compile] [--steps S]
       [--batch B] [--microbatches M] [--attention sdpa|matmul]"""
import os
import sys

from job_args import job_parser

ap = job_parser(attention=True)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--compile", action="store_true")
a = ap.parse_args()
# MKL and OpenMP read these when torch loads
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = str(a.threads)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from common import Timer, emit, fail, load_gpt, read_data, step_batch  # noqa: E402
from torch_gpt import GPT, adamw  # noqa: E402

name = f"torch {'compile' if a.compile else 'eager'} {a.threads} thread{'s' if a.threads > 1 else ''}"
try:
    torch.set_num_threads(a.threads)
    cfg, w = load_gpt(a.model)
    ids, labels = read_data(a.data)
    model = GPT(cfg, w, a.attention)
    opt, opt_kind = adamw(list(model.parameters()), a.lr, a.weight_decay)
    fwd = torch.compile(model) if a.compile else model
    V, mb = cfg["vocab"], a.batch // a.microbatches
    timer, losses = Timer(), []
    for step in range(1, a.steps + 1):
        x, y = step_batch(ids, labels, a.batch, step)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        timer.start()
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for m in range(a.microbatches):
            logits = fwd(x[m * mb:(m + 1) * mb])
            loss = F.cross_entropy(logits.reshape(-1, V), y[m * mb:(m + 1) * mb].reshape(-1)) / a.microbatches
            loss.backward()
            total += loss.item()
        opt.step()
        timer.stop()
        losses.append(total)
    line = {"bench": "peer", "config": name, "system": "pytorch " + torch.__version__,
            "mode": "torch.compile (inductor)" if a.compile else "eager", "threads": a.threads, "processes": 1,
            "cores": a.threads, "global_batch": a.batch, "microbatches": a.microbatches,
            "attention": a.attention, "optimizer": f"torch.optim.AdamW ({opt_kind})", "losses": [round(l, 5) for l in losses]}
    line.update(timer.summary(a.batch, cfg["seq"]))
    if a.compile:
        line["note"] = "first_step_s includes compiling forward and backward"
    emit(line)
except Exception as e:  # noqa: BLE001  (a peer that cannot run says why, the others still run)
    fail("peer", name, f"{type(e).__name__}: {e}")
    sys.exit(1)
