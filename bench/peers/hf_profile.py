"""One JSON line (bench "hf_profile") from the per-op table `onnxpipe train --profile-steps
A:B --profile FILE` prints on stdout: every row (op type, forward or backward, calls, total
ms, share of the profiled time, GFLOP/s), largest first, and the profiled steps' time.

usage: hf_profile.py STDOUT MODEL EXPORTER --steps A:B [--extra JSON]"""
import argparse
import json
import os
import re

ap = argparse.ArgumentParser()
ap.add_argument("stdout")
ap.add_argument("model")
ap.add_argument("exporter")
ap.add_argument("--steps", required=True)
ap.add_argument("--extra", default="{}")
a = ap.parse_args()

text = open(a.stdout, errors="replace").read() if os.path.exists(a.stdout) else ""
rows = []
for m in re.finditer(r"^(\S.*?)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)%\s+([0-9.]+)$", text, re.M):
    op = m.group(1).strip()
    rows.append({"op": op.replace(" (bw)", ""), "pass": "backward" if op.endswith("(bw)") else "forward",
                 "calls": int(m.group(2)), "ms": float(m.group(3)), "share": round(float(m.group(4)) / 100, 4),
                 "gflops": float(m.group(5))})
out = {"bench": "hf_profile", "model": a.model, "exporter": a.exporter, "profiled_steps": a.steps}
out.update(json.loads(a.extra))
if not rows:
    out["error"] = "no per-op table in the run's output"
    out["stdout_tail"] = text[-500:]
else:
    total = sum(r["ms"] for r in rows)
    by_op = {}
    for r in rows:
        by_op[r["op"]] = by_op.get(r["op"], 0.0) + r["ms"]
    out.update({"total_ms": round(total, 3),
                "by_op_type": {k: round(v / total, 4) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])},
                "rows": rows})
    m = re.search(r"^0\s+0\s+([0-9.]+)\s+([0-9.]+)", text, re.M)
    if m:
        out["step_ms_rank0"], out["compute_ms_rank0"] = float(m.group(1)), float(m.group(2))
out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
print(json.dumps(out))
