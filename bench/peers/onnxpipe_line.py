"""One JSON line for an `onnxpipe train` run of bench/peers.sh, from what the run left:
the ranks' per-step timing (PP_LOG=info: "step N: X s, compute Y s, wait Z s"), the
--losses file, and, when the run profiled its last step, rank 0's table of the measured
bubble beside the simulator's on the measured stage costs.

Step time is the slowest rank's, per step; steps 2.. are timed (step 1 is the warm-up,
as for the peers), up to --timed-steps (a profiled step after them is not timed). The
measured bubble is 1 - sum of the ranks' compute / (ranks x step time), per step.

usage: onnxpipe_line.py LOG LOSSES CONFIG RANKS --batch B --seq T --timed-steps S
       [--stdout RANK0_STDOUT] [--extra JSON]"""
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
ap.add_argument("--timed-steps", type=int, required=True, help="steps 1..S count; 2..S are timed")
ap.add_argument("--stdout", help="rank 0's stdout, with the profile's bubble table")
ap.add_argument("--extra", default="{}")
a = ap.parse_args()

out = {"bench": "onnxpipe", "config": a.config, "system": "onnxpipe", "ranks": a.ranks, "global_batch": a.batch}
out.update(json.loads(a.extra))
steps = {}
pat = re.compile(r"(?:\[rank (\d+)\] )?.*step (\d+): ([0-9.]+) s, compute ([0-9.]+) s, wait ([0-9.]+) s")
text = open(a.log, errors="replace").read() if os.path.exists(a.log) else ""
for line in text.splitlines():
    m = pat.search(line)
    if m:
        r, s = int(m.group(1) or 0), int(m.group(2))
        steps.setdefault(s, {})[r] = (float(m.group(3)), float(m.group(4)), float(m.group(5)))
full = [s for s in sorted(steps) if 2 <= s <= a.timed_steps and len(steps[s]) == a.ranks]
losses = []
if os.path.exists(a.losses):
    losses = [float(l.split()[1]) for l in open(a.losses) if l.strip()][:a.timed_steps]
if not full or not losses:
    out["error"] = "no per-step timing or losses in the run's output"
    out["log_tail"] = text[-500:]
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    raise SystemExit(0)
step_s = [max(t for t, _, _ in steps[s].values()) for s in full]
med = statistics.median(step_s)
out.update({"losses": [round(l, 5) for l in losses], "steps_timed": len(full), "step_s_median": round(med, 4),
            "step_s_min": round(min(step_s), 4), "step_s_max": round(max(step_s), 4),
            "first_step_s": round(max(t for t, _, _ in steps[1].values()), 3) if 1 in steps else None,
            "tokens_per_s": round(a.batch * a.seq / med, 1)})
# single-process runs under bench/peers/cputime.py: CPU seconds so far at each step's end
cum = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"cputime step (\d+): ([0-9.]+)", text)}
cpu = [cum[s] - cum[s - 1] for s in full if s in cum and s - 1 in cum]
if cpu:
    out["step_cpu_s_median"] = round(statistics.median(cpu), 4)
    out["tokens_per_cpu_s"] = round(a.batch * a.seq / statistics.median(cpu), 1)
if a.ranks > 1:
    bubble = [1 - sum(c for _, c, _ in steps[s].values()) / (a.ranks * max(t for t, _, _ in steps[s].values()))
              for s in full]
    out["bubble_measured"] = round(statistics.median(bubble), 4)
    out["compute_s_per_rank"] = [round(statistics.median(steps[s][r][1] for s in full), 4) for r in range(a.ranks)]
if a.stdout and os.path.exists(a.stdout):
    prof = open(a.stdout, errors="replace").read()
    m = re.search(r"predicted step ([0-9.]+) ms, overall bubble ([0-9.]+)%", prof)
    if m:
        out["bubble_simulated_measured_costs"] = round(float(m.group(2)) / 100, 4)
        out["step_s_simulated_measured_costs"] = round(float(m.group(1)) / 1000, 4)
        out["bubble_simulated_note"] = ("the schedule simulated on the mean stage costs measured in the profiled "
                                        "steps (after the timed ones), messages free; replay: on each action's own "
                                        "measured time")
    m = re.search(r"replayed step ([0-9.]+) ms, overall bubble ([0-9.]+)%", prof)
    if m:
        out["bubble_simulated_replay"] = round(float(m.group(2)) / 100, 4)
    # the profile's table, one row per rank: rank, pipeline rank, step ms, compute ms, wait ms, bubble %,
    # simulated %, replayed %
    rows = [(float(r.group(1)), float(r.group(2))) for r in
            re.finditer(r"^\d+\s+\d+\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+(?:\s+-?[0-9.]+%){2,3}$", prof, re.M)]
    if rows:   # the same measure as bubble_measured, over the profiled steps the simulation used
        out["bubble_measured_profiled"] = round(1 - sum(c for _, c in rows) / (len(rows) * max(t for t, _ in rows)), 4)
out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
print(json.dumps(out))
