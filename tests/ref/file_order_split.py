"""The exact parameter-balanced split of an ONNX file's own node order, computed here
from the file alone (no onnxpipe): each trainable initializer counts at its first reader
in the file's order (count_params.py's rule for what is trainable), and a DP over
(stage, end) gives the smallest possible largest stage of a split into P contiguous
ranges of that order.

usage: file_order_split.py MODEL P...   prints a JSON object {P: bottleneck}"""
import json
import sys

import onnx

from count_params import trained_initializers


def node_params(model):
    trained, seen, w = trained_initializers(model), set(), []
    for node in model.graph.node:
        k = 0
        for name in node.input:
            if name in trained and name not in seen:
                seen.add(name)
                k += trained[name]
        w.append(k)
    return w


def min_max_split(w, P):
    """min over splits of w into P non-empty contiguous ranges of the largest range sum."""
    n, pre = len(w), [0]
    for x in w:
        pre.append(pre[-1] + x)
    INF = float("inf")
    best = [INF] * (n + 1)   # best[j]: first j items in s stages
    for j in range(1, n + 1):
        best[j] = pre[j]
    for s in range(2, P + 1):
        nxt = [INF] * (n + 1)
        for j in range(s, n + 1):
            nxt[j] = min(max(best[i], pre[j] - pre[i]) for i in range(s - 1, j))
        best = nxt
    return best[n]


def main():
    model = onnx.load(sys.argv[1], load_external_data=False)
    w = node_params(model)
    print(json.dumps({int(p): min_max_split(w, int(p)) for p in sys.argv[2:]}))


if __name__ == "__main__":
    main()
