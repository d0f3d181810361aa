"""PyTorch yardstick for bench_step and bench/pipeline.sh: the example GPT (pre-LN GPT-2
block, causal softmax attention written out as matmuls like the ONNX graph, exact GELU,
LM head tied to the token embedding) trained with AdamW on random tokens. Prints one
JSON line with tokens/s of warm steps (forward + backward + optimizer step), by the wall
clock and per CPU second of the process (the second is what a loaded machine distorts least;
with more than one thread it counts every thread's time).

Threads: OpenBLAS (which Debian's torch calls for sgemm) reads OPENBLAS_NUM_THREADS when
it is loaded, so --blas-threads is put in the environment before torch is imported;
--torch-threads goes to torch.set_num_threads."""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--d-model", type=int, default=256)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--vocab", type=int, default=256)
ap.add_argument("--seq", type=int, default=128)
ap.add_argument("--batch", type=int, default=8, help="samples per optimizer step")
ap.add_argument("--microbatches", type=int, default=1, help="gradient accumulation steps per optimizer step")
ap.add_argument("--steps", type=int, default=10, help="timed steps (after 2 warm-up steps)")
ap.add_argument("--blas-threads", type=int, default=1)
ap.add_argument("--torch-threads", type=int, default=1)
ap.add_argument("--sdpa", action="store_true", help="attention through F.scaled_dot_product_attention")
ap.add_argument("--tag", default="torch_step")
a = ap.parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(a.blas_threads)

import torch  # noqa: E402  (after the environment is set)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(a.torch_threads)
torch.manual_seed(0)
L, D, H, V, T = a.layers, a.d_model, a.heads, a.vocab, a.seq


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.fc_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("mask", torch.triu(torch.full((T, T), -1e9), 1))

    def attn(self, x):
        b = x.shape[0]
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(b, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        if a.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-2, -1) * (1.0 / (D // H) ** 0.5) + self.mask
            y = s.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, T, D))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe.weight
        for blk in self.h:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()


model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
mb = a.batch // a.microbatches
ids = torch.randint(0, V, (a.microbatches, mb, T))
labels = torch.randint(0, V, (a.microbatches, mb, T))


def step():
    opt.zero_grad(set_to_none=False)
    for m in range(a.microbatches):
        logits = model(ids[m])
        loss = F.cross_entropy(logits.reshape(-1, V), labels[m].reshape(-1)) / a.microbatches
        loss.backward()
    opt.step()


for _ in range(2):
    step()
times, cpu = [], []
for _ in range(a.steps):
    t0, c0 = time.perf_counter(), time.process_time()
    step()
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
times.sort()
cpu.sort()
med, cmed = times[len(times) // 2], cpu[len(cpu) // 2]
print(json.dumps({"bench": a.tag, "framework": "pytorch " + torch.__version__, "layers": L, "d_model": D,
                  "heads": H, "vocab": V, "seq": T, "batch": a.batch, "microbatches": a.microbatches,
                  "attention": "sdpa" if a.sdpa else "matmul", "blas_threads": a.blas_threads,
                  "torch_threads": a.torch_threads, "steps": a.steps, "step_s_median": round(med, 5),
                  "step_s_best": round(times[0], 5), "tokens_per_s": round(a.batch * T / med, 1),
                  "tokens_per_s_best": round(a.batch * T / times[0], 1),
                  "step_cpu_s_median": round(cmed, 5), "tokens_per_s_cpu": round(a.batch * T / cmed, 1),
                  "loadavg_1m": round(os.getloadavg()[0], 2)}))
sys.stdout.flush()
