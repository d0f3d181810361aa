"""The summary lines of bench/hf_peers.sh, from all its JSON lines (a file, one per line),
for each model:

- hf_peers_losses: every configuration's per-step losses against the reference (PyTorch
  eager, 1 thread, on the module as exported): the largest relative difference, and each
  configuration's first and last loss;
- hf_peers_summary: on 1 core and on 2, the best onnxpipe configuration and the best peer
  configuration by tokens/s, their ratio against the target (1.2x), and the ranking; and
  the GEMM yardstick (the export's products on OpenBLAS and on PyTorch's MKL, 1 core).

usage: hf_summary.py LINES.jsonl"""
import json
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
        ours = [d for d in ds if d["system"] == "onnxpipe"]
        peers = [d for d in ds if d["system"] != "onnxpipe"]
        if not ours or not peers:
            out[key] = {"error": "no onnxpipe or no peer configuration ran"}
            continue
        bo = max(ours, key=lambda d: d["tokens_per_s"])
        bp = max(peers, key=lambda d: d["tokens_per_s"])
        ratio = bo["tokens_per_s"] / bp["tokens_per_s"]
        out[key] = {"best_onnxpipe": label(bo), "onnxpipe_tokens_per_s": bo["tokens_per_s"],
                    "best_peer": label(bp), "peer_tokens_per_s": bp["tokens_per_s"],
                    "ratio": round(ratio, 3), "met": ratio >= TARGET,
                    "ranking": [[label(d), d["tokens_per_s"]] for d in sorted(ds, key=lambda d: -d["tokens_per_s"])]}
        if cores == 1:   # one thread on one core: CPU time is the time it ran, whatever else shared it
            co = [d for d in ours if "tokens_per_cpu_s" in d]
            cp = [d for d in peers if "tokens_per_cpu_s" in d]
            if co and cp:
                bo = max(co, key=lambda d: d["tokens_per_cpu_s"])
                bp = max(cp, key=lambda d: d["tokens_per_cpu_s"])
                out[key]["by_cpu_time"] = {"best_onnxpipe": label(bo), "onnxpipe_tokens_per_cpu_s": bo["tokens_per_cpu_s"],
                                           "best_peer": label(bp), "peer_tokens_per_cpu_s": bp["tokens_per_cpu_s"],
                                           "ratio": round(bo["tokens_per_cpu_s"] / bp["tokens_per_cpu_s"], 3)}
    gm = [d for d in lines if d.get("bench") == "gemm_mix" and d.get("model") == model and "error" not in d]
    blas = next((d for d in gm if d.get("gemm", "").startswith("openblas")), None)
    ours = next((d for d in gm if d.get("gemm", "").startswith("onnxpipe")), None)
    mkl = next((d for d in gm if "library" in d), None)
    if blas and mkl:   # the export's products alone, 1 core: what the GEMM library gives each side
        out["gemm_1_core"] = {"openblas_gflops": blas["gflops_median"], "torch_mkl_gflops": mkl["gflops_median"],
                              "mkl_over_openblas": round(mkl["gflops_median"] / blas["gflops_median"], 3)}
        if ours:
            out["gemm_1_core"]["onnxpipe_gflops"] = ours["gflops_median"]
    out["loadavg_1m_range"] = [min(loads), max(loads)] if loads else None
    out["failed"] = sorted({d.get("config", "?") for d in failed if d.get("model") == model})
    print(json.dumps(out), flush=True)
