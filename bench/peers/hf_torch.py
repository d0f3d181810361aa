"""PyTorch 2.x training the HuggingFace module an export was made from (bench/hf_peers.sh):
examples/export/export_model.py's rebuild() gives back the module with the export's initial
weights; it trains, eager or torch.compile'd, on the batches `onnxpipe train` reads (the
global batch as M accumulated microbatches), with AdamW as onnxpipe's. One JSON line
(bench "peer").

Timing: W warm-up steps (allocation, torch.compile's compilation), then S timed steps; the
losses of all W + S steps are printed, as onnxpipe's run prints them. Wall and CPU time
(all threads of the process) per step, as bench/peers/common.py reports them.

--attn eager trains the module as exported (HF's eager attention: the MatMul, mask, Softmax
and MatMul the ONNX graph holds); --attn sdpa switches it to HF's default,
F.scaled_dot_product_attention, what a PyTorch user runs. The same losses either way.

usage: hf_torch.py MODEL.onnx DATA_DIR [--threads N] [--compile] [--attn eager|sdpa]
       [--warmup W] [--steps S] [--batch B] [--microbatches M] [--lr X] [--weight-decay X]"""
import os
import statistics
import sys
import time
import warnings

from job_args import job_parser

ap = job_parser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--compile", action="store_true")
ap.add_argument("--attn", choices=("eager", "sdpa"), default="eager")
ap.add_argument("--warmup", type=int, default=2)
a = ap.parse_args()
# MKL and OpenMP read these when torch loads
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = str(a.threads)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "export"))
warnings.filterwarnings("ignore")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from common import emit, fail, read_data, step_batch  # noqa: E402
from torch_gpt import adamw  # noqa: E402

mode = "compile" if a.compile else "eager"
name = f"torch {mode} {a.threads} thread{'s' if a.threads > 1 else ''}" + (" sdpa" if a.attn == "sdpa" else "")
try:
    import export_model as ex

    torch.set_num_threads(a.threads)
    module = ex.rebuild(a.model).train()
    if a.attn != module.config._attn_implementation:
        module.set_attn_implementation(a.attn)
    model = ex.LogitsOnly(module, "causal-lm", module.config.model_type).train()
    fwd = torch.compile(model) if a.compile else model
    opt, opt_kind = adamw(list(module.parameters()), a.lr, a.weight_decay)
    ids, labels = read_data(a.data)
    seq = ids.shape[1]
    mb = a.batch // a.microbatches
    wall, cpu, losses = [], [], []
    for step in range(1, a.warmup + a.steps + 1):
        x, y = step_batch(ids, labels, a.batch, step)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for m in range(a.microbatches):
            logits = fwd(x[m * mb:(m + 1) * mb])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   y[m * mb:(m + 1) * mb].reshape(-1)) / a.microbatches
            loss.backward()
            total += loss.item()
        opt.step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        losses.append(total)
    timed, ctimed = wall[a.warmup:], cpu[a.warmup:]
    med, cmed = statistics.median(timed), statistics.median(ctimed)
    emit({"bench": "peer", "config": name, "system": "pytorch " + torch.__version__,
          "mode": "torch.compile (inductor)" if a.compile else "eager", "attention": a.attn,
          "threads": a.threads, "processes": 1, "cores": a.threads, "global_batch": a.batch,
          "microbatches": a.microbatches, "seq": seq, "optimizer": f"torch.optim.AdamW ({opt_kind})",
          "parameters": sum(p.numel() for p in module.parameters()),
          "losses": [round(v, 5) for v in losses], "loss_first": round(losses[0], 5),
          "loss_last": round(losses[-1], 5), "warmup_steps": a.warmup, "steps_timed": len(timed),
          "warmup_s": [round(t, 3) for t in wall[:a.warmup]], "step_s_median": round(med, 4),
          "step_s_min": round(min(timed), 4), "step_s_max": round(max(timed), 4),
          "tokens_per_s": round(a.batch * seq / med, 1), "step_cpu_s_median": round(cmed, 4),
          "tokens_per_cpu_s": round(a.batch * seq / cmed, 1)})
except Exception as e:  # noqa: BLE001  (a peer that cannot run says why, the others still run)
    fail("peer", name, f"{type(e).__name__}: {e}")
    sys.exit(1)
