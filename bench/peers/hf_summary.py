"""The summary lines of bench/hf_peers.sh, from all its JSON lines (a file, one per line),
for each model:

- hf_peers_losses: every configuration's per-step losses against the reference (PyTorch
  eager, 1 thread, on the module as exported): the largest relative difference, and each
  configuration's first and last loss;
- hf_peers_summary: on 1 core and on 2, the best onnxpipe configuration and the best peer
  configuration by their median tokens/s over the rounds, the ratio of those medians
  against the target (1.2x), each round's ratio of its best onnxpipe to its best peer, and
  the ranking (median and each round's tokens/s); and the GEMM yardstick (the export's
  products on OpenBLAS, on onnxpipe's own products and on PyTorch's MKL, 1 core).

usage: hf_summary.py LINES.jsonl"""
import json
import statistics
import sys

TARGET = 1.2
REFERENCE = "torch eager 1 thread"

lines = [json.loads(ln) for ln in open(sys.argv[1]) if ln.startswith("{")]
runs = [d for d in lines if d.get("bench") in ("onnxpipe", "peer") and "tokens_per_s" in d and "error" not in d]
failed = [d for d in lines if d.get("bench") in ("onnxpipe", "peer") and "error" in d]
loads = [d["loadavg"][0] for d in lines if isinstance(d.get("loadavg"), list)]


def label(d):
    return d["config"] + (f" [{d['exporter']}]" if d.get("exporter") else "")


for model in dict.fromkeys(d["model"] for d in runs):
    mine = [d for d in runs if d["model"] == model]
    ref = next((d for d in mine if d["config"] == REFERENCE), None) or mine[0]
    diffs = {}
    for d in mine:
        n = min(len(d["losses"]), len(ref["losses"]))
        diffs[label(d)] = float(f"{max(abs(x - y) / abs(y) for x, y in zip(d['losses'][:n], ref['losses'][:n])):.2g}")
    print(json.dumps({"bench": "hf_peers_losses", "model": model, "reference": label(ref),
                      "reference_losses": ref["losses"], "max_rel_diff": diffs,
                      "first_last": {label(d): [d["loss_first"], d["loss_last"]] for d in mine},
                      "note": "losses are printed to 5 digits"}), flush=True)
    out = {"bench": "hf_peers_summary", "model": model, "target": TARGET}
    for cores, key in ((1, "one_core"), (2, "two_cores")):
        ds = [d for d in mine if d.get("cores") == cores]
        if not any(d["system"] == "onnxpipe" for d in ds) or not any(d["system"] != "onnxpipe" for d in ds):
            out[key] = {"error": "no onnxpipe or no peer configuration ran"}
            continue
        for metric, sub in (("tokens_per_s", None), ("tokens_per_cpu_s", "by_cpu_time")):
            if sub and cores != 1:   # one thread on one core: CPU time is the time it ran, whatever else shared it
                continue
            conf = {}   # label -> (onnxpipe?, median, [per round])
            for d in ds:
                if metric in d:
                    conf.setdefault(label(d), (d["system"] == "onnxpipe", []))[1].append(d[metric])
            med = {k: (o, round(statistics.median(v), 1), v) for k, (o, v) in conf.items()}
            ours = {k: v for k, v in med.items() if v[0]}
            peers = {k: v for k, v in med.items() if not v[0]}
            if not ours or not peers:
                continue
            bo = max(ours, key=lambda k: ours[k][1])
            bp = max(peers, key=lambda k: peers[k][1])
            ratio = ours[bo][1] / peers[bp][1]
            rounds = sorted({d.get("round", 1) for d in ds})
            by_round = []
            for r in rounds:
                o = [d[metric] for d in ds if d.get("round", 1) == r and d["system"] == "onnxpipe" and metric in d]
                p = [d[metric] for d in ds if d.get("round", 1) == r and d["system"] != "onnxpipe" and metric in d]
                if o and p:
                    by_round.append(round(max(o) / max(p), 3))
            res = {"best_onnxpipe": bo, f"onnxpipe_{metric}": ours[bo][1], "best_peer": bp,
                   f"peer_{metric}": peers[bp][1], "ratio": round(ratio, 3), "ratio_by_round": by_round}
            if sub:
                out[key][sub] = res
            else:
                out[key] = {**res, "met": ratio >= TARGET,
                            "ranking": [[k, v[1], v[2]] for k, v in sorted(med.items(), key=lambda kv: -kv[1][1])]}
    gm = [d for d in lines if d.get("bench") == "gemm_mix" and d.get("model") == model and "error" not in d]
    blas = next((d for d in gm if d.get("gemm", "").startswith("openblas")), None)
    ours = next((d for d in gm if d.get("gemm", "").startswith("onnxpipe")), None)
    mkl = next((d for d in gm if "library" in d), None)
    if blas and mkl:   # the export's products alone, 1 core: what the GEMM library gives each side
        out["gemm_1_core"] = {"openblas_gflops": blas["gflops_median"], "torch_mkl_gflops": mkl["gflops_median"],
                              "mkl_over_openblas": round(mkl["gflops_median"] / blas["gflops_median"], 3)}
        if ours:
            out["gemm_1_core"]["onnxpipe_gflops"] = ours["gflops_median"]
        paired = next((d for d in lines if d.get("bench") == "gemm_compare_pass" and d.get("model") == model), None)
        if paired:   # the same products on smat_gemm and OpenBLAS call by call: drift moves both
            out["gemm_1_core"]["onnxpipe_over_openblas_paired"] = paired["speedup"]
    out["loadavg_1m_range"] = [min(loads), max(loads)] if loads else None
    out["failed"] = sorted({d.get("config", "?") for d in failed if d.get("model") == model})
    print(json.dumps(out), flush=True)
