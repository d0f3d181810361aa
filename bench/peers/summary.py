"""The summary lines of bench/peers.sh, from all its JSON lines (a file, one per line):

- peers_losses: each configuration's per-step losses against onnxpipe pp=1's (the
  reference; the largest relative difference over the steps all of them ran);
- peers_summary: on 1 core and on 2, the best onnxpipe configuration and the best peer
  configuration by tokens/s (each configuration's median over rounds), their ratio and
  the target (1.15x on 1 core, 1.3x on 2);
- peers_sgemm_fraction: model FLOPs/s of onnxpipe pp=1 on 1 core over the sgemm rate
  OpenBLAS reaches on the model's own GEMM shapes, measured right before and after it;
- peers_bubble: for each onnxpipe pp=2 schedule, the measured bubble beside the
  simulator's on the partition's FLOPs and on the stage costs measured in the run.

usage: summary.py LINES.jsonl"""
import json
import statistics
import sys

TARGET = {1: 1.15, 2: 1.3}
REFERENCE = "onnxpipe pp=1 1 core"

lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
runs = [d for d in lines if d.get("bench") in ("onnxpipe", "peer") and "error" not in d and "tokens_per_s" in d]
errors = [d for d in lines if d.get("bench") in ("onnxpipe", "peer") and "error" in d]
loads = [d["loadavg"][0] for d in lines if isinstance(d.get("loadavg"), list)]


def emit(d):
    print(json.dumps(d), flush=True)


by_config = {}
for d in runs:
    by_config.setdefault(d["config"], []).append(d)


def med(config, key="tokens_per_s"):
    return statistics.median(d[key] for d in by_config[config])


# ---- the losses
ref = by_config.get(REFERENCE, [None])[0]
if ref:
    diffs = {}
    for config, ds in by_config.items():
        for d in ds:
            n = min(len(d["losses"]), len(ref["losses"]))
            rel = max(abs(a - b) / abs(b) for a, b in zip(d["losses"][:n], ref["losses"][:n]))
            diffs[config] = max(diffs.get(config, 0.0), rel)
    emit({"bench": "peers_losses", "reference": REFERENCE, "reference_losses": ref["losses"],
          "max_rel_diff": {k: float(f"{v:.2g}") for k, v in sorted(diffs.items(), key=lambda kv: kv[1])},
          "note": "losses are printed to 5 digits"})

# ---- best onnxpipe / best peer per core budget
summary = {"bench": "peers_summary", "rounds": max((d.get("round", 1) for d in runs), default=0)}
for cores in (1, 2):
    cfgs = {c for c, ds in by_config.items() if ds[0].get("cores") == cores}
    ours = [c for c in cfgs if by_config[c][0]["system"] == "onnxpipe"]
    peers = [c for c in cfgs if by_config[c][0]["system"] != "onnxpipe"]
    key = "one_core" if cores == 1 else "two_cores"
    if not ours or not peers:
        summary[key] = {"error": "no onnxpipe or no peer configuration ran"}
        continue
    bo, bp = max(ours, key=med), max(peers, key=med)
    ratio = med(bo) / med(bp)
    summary[key] = {"best_onnxpipe": bo, "onnxpipe_tokens_per_s": round(med(bo), 1),
                    "best_peer": bp, "peer_tokens_per_s": round(med(bp), 1),
                    "peer_system": by_config[bp][0]["system"], "ratio": round(ratio, 3), "target": TARGET[cores],
                    "met": ratio >= TARGET[cores],
                    "ranking": [[c, round(med(c), 1)] for c in sorted(cfgs, key=med, reverse=True)]}
    # the same within each round: a load that hits one side of one round shows here
    per_round = []
    for r in sorted({d.get("round", 1) for d in runs}):
        rs = [d for d in runs if d.get("round", 1) == r and d.get("cores") == cores]
        o = [d for d in rs if d["system"] == "onnxpipe"]
        p = [d for d in rs if d["system"] != "onnxpipe"]
        if o and p:
            bo_r, bp_r = max(o, key=lambda d: d["tokens_per_s"]), max(p, key=lambda d: d["tokens_per_s"])
            la = [d["loadavg"][0] for d in rs]
            per_round.append({"round": r, "onnxpipe": bo_r["config"], "peer": bp_r["config"],
                              "ratio": round(bo_r["tokens_per_s"] / bp_r["tokens_per_s"], 3),
                              "loadavg_1m": [min(la), max(la)]})
    summary[key]["per_round"] = per_round
    if cores == 1:   # one thread on one core: CPU time is the time it ran, whatever else shared the core
        cpu = [c for c in cfgs if all("tokens_per_cpu_s" in d for d in by_config[c])]
        co = [c for c in cpu if c in ours]
        cp = [c for c in cpu if c in peers]
        if co and cp:
            bo, bp = max(co, key=lambda c: med(c, "tokens_per_cpu_s")), max(cp, key=lambda c: med(c, "tokens_per_cpu_s"))
            summary[key]["by_cpu_time"] = {
                "best_onnxpipe": bo, "onnxpipe_tokens_per_cpu_s": round(med(bo, "tokens_per_cpu_s"), 1),
                "best_peer": bp, "peer_tokens_per_cpu_s": round(med(bp, "tokens_per_cpu_s"), 1),
                "ratio": round(med(bo, "tokens_per_cpu_s") / med(bp, "tokens_per_cpu_s"), 3)}
summary["loadavg_1m_range"] = [min(loads), max(loads)] if loads else None
summary["failed"] = sorted({d.get("config") or d.get("script", "?") for d in errors})
emit(summary)

# ---- model FLOPs of the best 1-core onnxpipe run against the GEMM-shape yardstick
gm = [d for d in lines if d.get("bench") == "gemm_mix" and "error" not in d and "library" not in d
      and d.get("gemm", "openblas").startswith("openblas")]
own = [d for d in lines if d.get("bench") == "gemm_mix" and d.get("gemm", "").startswith("onnxpipe")]
mkl = [d for d in lines if d.get("bench") == "gemm_mix" and "library" in d]
if REFERENCE in by_config and gm:
    per_round = []
    for d in by_config[REFERENCE]:
        yard = [g["gflops_median"] for g in gm if g.get("round") == d.get("round")]
        flops = gm[0]["gflop_per_pass"] * d["global_batch"] / gm[0]["microbatch"]   # a pass is one microbatch
        model = flops / d["step_s_median"]
        row = {"round": d.get("round"), "model_gflops": round(model, 2), "sgemm_gflops": [round(y, 2) for y in yard],
               "fraction": round(model / statistics.mean(yard), 3) if yard else None}
        ycpu = [g["gflops_cpu_median"] for g in gm if g.get("round") == d.get("round")]
        if ycpu and "step_cpu_s_median" in d:   # the same by CPU time, on both sides
            row["fraction_cpu"] = round(flops / d["step_cpu_s_median"] / statistics.mean(ycpu), 3)
        other = [g["gflops_median"] for g in mkl if g.get("round") == d.get("round")]
        if other:
            row["torch_mkl_gflops_same_shapes"] = other[0]
        mine = [g["gflops_median"] for g in own if g.get("round") == d.get("round")]
        if mine:
            row["onnxpipe_gemm_gflops_same_shapes"] = mine[0]
        per_round.append(row)
    fraction = statistics.median(r["fraction"] for r in per_round if r["fraction"] is not None)
    emit({"bench": "peers_sgemm_fraction", "config": REFERENCE, "model_gflop_per_step": round(flops, 3),
          "yardstick": "bench_gemm_mix: every MatMul of the model at microbatch 4, forward and both backward "
                       "products, one OpenBLAS thread on core 0, median pass, right before and after the run",
          "peers_model_gflops_1_core": {c: round(flops / med(c, "step_s_median"), 2) for c, ds in by_config.items()
                                        if ds[0].get("cores") == 1 and ds[0]["system"] != "onnxpipe"},
          "rounds": per_round, "fraction_median": fraction,
          "fraction_cpu_median": statistics.median([r["fraction_cpu"] for r in per_round if "fraction_cpu" in r] or [0]),
          "target": 0.85, "met": fraction >= 0.85})

# ---- bubbles: measured against the simulator
rows = {}
for d in runs:
    if d["system"] == "onnxpipe" and d.get("schedule"):
        rows.setdefault(d["schedule"], []).append(d)
if rows:
    emit({"bench": "peers_bubble", "pp": 2, "microbatches": 16,
          "schedules": {k: {"measured": round(statistics.median(d["bubble_measured"] for d in ds), 4),
                            "measured_profiled_steps": round(statistics.median(
                                d.get("bubble_measured_profiled", float("nan")) for d in ds), 4),
                            "simulated_measured_costs": round(statistics.median(
                                d.get("bubble_simulated_measured_costs", float("nan")) for d in ds), 4),
                            "simulated_replay": round(statistics.median(
                                d.get("bubble_simulated_replay", float("nan")) for d in ds), 4),
                            "predicted_flops": ds[0].get("bubble_predicted_flops")} for k, ds in rows.items()},
          "note": "measured: 1 - sum of compute / (ranks x step), median over timed steps, and the same over the "
                  "profiled steps; simulated: the schedule on the mean stage costs measured in the profiled steps, "
                  "messages free; replay: the schedule on each action's own time measured in those steps; predicted: "
                  "on the partition's FLOPs"})
