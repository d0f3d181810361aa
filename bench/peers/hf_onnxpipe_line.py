"""One JSON line for an `onnxpipe train` run of bench/hf_peers.sh, from what the run left:
the ranks' per-step timing (PP_LOG=info: "step N: X s, compute Y s, wait Z s"; with
bench/peers/cputime.py also "cputime step N: S") and the --losses file. Steps W+1..W+S are
timed (the first W are warm-ups); a step's time is the slowest rank's.

usage: hf_onnxpipe_line.py LOG LOSSES CONFIG RANKS --batch B --seq T --warmup W --steps S
       [--extra JSON]"""
import argparse
import json
import os
import re
import statistics

ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("losses")
ap.add_argument("config")
ap.add_argument("ranks", type=int)
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--seq", type=int, required=True)
ap.add_argument("--warmup", type=int, required=True)
ap.add_argument("--steps", type=int, required=True, help="timed steps, after the warm-ups")
ap.add_argument("--extra", default="{}")
a = ap.parse_args()

out = {"bench": "onnxpipe", "config": a.config, "system": "onnxpipe", "ranks": a.ranks, "global_batch": a.batch,
       "seq": a.seq}
out.update(json.loads(a.extra))
text = open(a.log, errors="replace").read() if os.path.exists(a.log) else ""
steps = {}
for m in re.finditer(r"(?:\[rank (\d+)\] )?.*step (\d+): ([0-9.]+) s, compute ([0-9.]+) s, wait ([0-9.]+) s", text):
    steps.setdefault(int(m.group(2)), {})[int(m.group(1) or 0)] = (float(m.group(3)), float(m.group(4)))
last = a.warmup + a.steps
timed = [s for s in range(a.warmup + 1, last + 1) if len(steps.get(s, {})) == a.ranks]
losses = []
if os.path.exists(a.losses):
    losses = [float(ln.split()[1]) for ln in open(a.losses) if ln.strip()][:last]
out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
if not timed or not losses:
    out["error"] = "no per-step timing or losses in the run's output"
    out["log_tail"] = text[-500:]
    print(json.dumps(out))
    raise SystemExit(0)
step_s = [max(t for t, _ in steps[s].values()) for s in timed]
med = statistics.median(step_s)
out.update({"losses": [round(v, 5) for v in losses], "loss_first": round(losses[0], 5),
            "loss_last": round(losses[-1], 5), "warmup_steps": a.warmup, "steps_timed": len(timed),
            "warmup_s": [round(max(t for t, _ in steps[s].values()), 3) for s in range(1, a.warmup + 1) if s in steps],
            "step_s_median": round(med, 4), "step_s_min": round(min(step_s), 4),
            "step_s_max": round(max(step_s), 4), "tokens_per_s": round(a.batch * a.seq / med, 1)})
cum = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"cputime step (\d+): ([0-9.]+)", text)}
cpu = [cum[s] - cum[s - 1] for s in timed if s in cum and s - 1 in cum]
if cpu:
    out["step_cpu_s_median"] = round(statistics.median(cpu), 4)
    out["tokens_per_cpu_s"] = round(a.batch * a.seq / statistics.median(cpu), 1)
if a.ranks > 1:   # 1 - sum of the ranks' compute / (ranks x step), median over the timed steps
    out["bubble_measured"] = round(statistics.median(
        1 - sum(c for _, c in steps[s].values()) / (a.ranks * max(t for t, _ in steps[s].values())) for s in timed), 4)
print(json.dumps(out))
