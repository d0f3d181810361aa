"""The GEMM-shape yardstick of bench_gemm_mix on PyTorch's sgemm (MKL in the pip wheel)
instead of OpenBLAS: the same products in the same order (from `bench_gemm_mix --list`
on stdin), one torch.mm per matrix, on this process's threads. Says how much of the
peers' lead on one core is their GEMM library. One JSON line (bench "gemm_mix").

usage: bench_gemm_mix MODEL --batch B --list | torch_gemm_mix.py [--threads N] [--seconds S]"""
import argparse
import json
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--seconds", type=float, default=3.0)
a = ap.parse_args()
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = str(a.threads)
import torch  # noqa: E402

torch.set_num_threads(a.threads)
spec = json.loads(sys.stdin.readline())
gemms = spec["gemms"]
amax = max(m * k for m, n, k, ta, tb, c in gemms)
bmax = max(k * n for m, n, k, ta, tb, c in gemms)
cmax = max(m * n for m, n, k, ta, tb, c in gemms)
A = torch.arange(amax, dtype=torch.float32).remainder_(17).mul_(0.01)
B = torch.arange(bmax, dtype=torch.float32).remainder_(13).mul_(0.01)
C = torch.zeros(cmax)
calls = []
for m, n, k, ta, tb, c in gemms:   # op(A) (m, k), op(B) (k, n), row-major, as cblas_sgemm is called
    a_ = A[:m * k].view(k, m).t() if ta else A[:m * k].view(m, k)
    b_ = B[:k * n].view(n, k).t() if tb else B[:k * n].view(k, n)
    calls.append((a_, b_, C[:m * n].view(m, n), c))
flops = sum(2.0 * m * n * k * c for m, n, k, ta, tb, c in gemms)
wall, cpu = [], []
start = time.perf_counter()
with torch.no_grad():
    while len(wall) < 5 or time.perf_counter() - start < a.seconds:
        t0, c0 = time.perf_counter(), time.process_time()
        for a_, b_, c_, count in calls:
            for _ in range(count):
                torch.mm(a_, b_, out=c_)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
print(json.dumps({"bench": "gemm_mix", "library": "torch.mm " + torch.__version__ + " (MKL)", "model": spec["model"],
                  "microbatch": spec["microbatch"], "gflop_per_pass": round(flops * 1e-9, 4), "passes": len(wall),
                  "threads": a.threads, "gflops_median": round(flops / statistics.median(wall) * 1e-9, 2),
                  "gflops_best": round(flops / min(wall) * 1e-9, 2),
                  "gflops_cpu_median": round(flops / statistics.median(cpu) * 1e-9, 2),
                  "loadavg_1m": round(os.getloadavg()[0], 2)}), flush=True)
