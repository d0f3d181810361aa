"""The exact parameter-balanced split of an ONNX file's own node order, computed here from
the file (no onnxpipe code): a DP over (stage, end) gives the smallest possible largest stage
of a split into P contiguous ranges of that order.

What a node weighs is what it trains: the floating-point initializers it reads at a
differentiable input (count_params.py's rule from ONNX's schemas), each counted at its first
reader; an initializer that `onnxpipe partition --json` reports untied (`what_is_trained.
untied`: equal-valued biases the exporter merged into one) counts at every reader, one copy
each. The file is read as it computes, as onnxpipe loads it: an Identity of an initializer is
the exporter's second name for it (its readers read the initializer), and a node that reads
only initializers and constants (a Transpose of a weight, a constant chain) sits right before
its first reader. (A fresh torchvision ResNet-18 exported in eval mode holds its zero Conv
biases as 4 initializers and 16 Identity nodes at the head of the file: weighed there, its
4-stage split would look 1,024 parameters lighter than any split onnxpipe can make.)

usage: file_order_split.py MODEL PARTITION_JSON P...   prints a JSON object {P: bottleneck}
PARTITION_JSON is `onnxpipe partition MODEL --json` (its untied list and trained total, which
the weights must add up to)."""
import json
import sys

import onnx

from count_params import trained_initializers


def file_order(model):
    """The computing nodes in the file's order, constant-only nodes moved before their first
    reader; and the alias map of Identity nodes over initializers."""
    inits = {t.name for t in model.graph.initializer}
    alias, const_out, nodes = {}, set(inits), []
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
            const_out.add(node.output[0])
        elif node.op_type == "Constant" or all(not x or x in const_out for x in node.input):
            const_out.update(node.output)
            nodes.append((node, True))
        else:
            nodes.append((node, False))
    # reverse walk: a constant-only node goes right before its first reader (readers later)
    key = {}
    first_reader = {}
    for i, (node, _) in enumerate(nodes):
        for x in node.input:
            first_reader.setdefault(alias.get(x, x), i)
    for i in range(len(nodes) - 1, -1, -1):
        node, const = nodes[i]
        key[i] = 2 * i
        if const:
            readers = [key[j] for o in node.output for j in [first_reader.get(o)] if j is not None and j > i]
            if readers:
                key[i] = min(readers) - 1
    order = sorted(range(len(nodes)), key=lambda i: (key[i], i))
    return [nodes[i][0] for i in order], alias


def node_params(model, untied):
    trained = trained_initializers(model)
    order, alias = file_order(model)
    seen, w = set(), []
    for node in order:
        k = 0
        for x in node.input:
            x = alias.get(x, x)
            if x in trained and (x in untied or x not in seen):
                seen.add(x)
                k += trained[x]
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
    part = json.load(open(sys.argv[2]))["what_is_trained"]
    untied = {u["from"] for u in part["untied"]}
    w = node_params(model, untied)
    if sum(w) != part["trained"]["elements"]:
        sys.exit(f"file_order_split: {sys.argv[1]}: the file's parameters weigh {sum(w)}, onnxpipe trains "
                 f"{part['trained']['elements']}: the two do not count the same set")
    print(json.dumps({int(p): min_max_split(w, int(p)) for p in sys.argv[3:]}))


if __name__ == "__main__":
    main()
