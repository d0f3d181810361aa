"""Checks `onnxpipe partition --json` against PyTorch's parameter count and against
the stage files it wrote.

usage: check_partition.py PARTITION_JSON PARAMS_JSON MODEL_FILE STAGE_DIR

- "params" equals params.json's expected count for MODEL_FILE (derived from torch's
  sum(p.numel()), see export_models.py), and the stages' "own_params" sum to it;
- each stage's "params" equals what stage-<s>.onnx holds (count_params.py rule);
- "tied" lists exactly the parameters that more than one stage file holds, with
  those stages; and every name in params.json's "tied" (a torch weight shared by
  several modules that the file keeps as one initializer) is still read, in the
  stage files, by every node that reads it in the model (a tie folded away fails).
Exits 1 on any mismatch, naming it."""
import json
import os
import sys

import onnx

from count_params import count_file_params, trained_initializers


def readers(models, name):
    return sorted(n.name for m in models for n in m.graph.node if name in n.input)


def main(part_path, params_path, model_file, stage_dir):
    part = json.load(open(part_path))
    want = json.load(open(params_path))[os.path.basename(model_file)]
    bad = []
    print(f"  parameters: onnxpipe {part['params']}, expected {want['expected']} "
          f"(torch {want['torch']}; {want['note']})")
    if part["params"] != want["expected"]:
        bad.append(f"total parameters {part['params']} != expected {want['expected']}")
    own = sum(s["own_params"] for s in part["stages"])
    if own != part["params"]:
        bad.append(f"stages' own_params sum to {own}, not the total {part['params']}")

    holders = {}   # parameter name -> stages whose file holds it
    stages = []
    for s in part["stages"]:
        m = onnx.load(os.path.join(stage_dir, f"stage-{s['stage']}.onnx"))
        stages.append(m)
        held = count_file_params(m)
        if held != s["params"]:
            bad.append(f"stage {s['stage']}: JSON says {s['params']} parameters, stage-{s['stage']}.onnx holds {held}")
        for name in trained_initializers(m):
            holders.setdefault(name, []).append(s["stage"])
    files_tied = {n: st for n, st in holders.items() if len(st) > 1}
    json_tied = {t["name"]: t["stages"] for t in part["tied"]}
    print(f"  per-stage parameters {[s['params'] for s in part['stages']]}, tied {json_tied or 'none'}")
    if files_tied != json_tied:
        bad.append(f"tied parameters: JSON {json_tied}, stage files {files_tied}")
    model = onnx.load(model_file)
    for name in want.get("tied", []):
        if readers(stages, name) != readers([model], name):
            bad.append(f"tied '{name}' is read by {readers([model], name)} in the model but by "
                       f"{readers(stages, name)} in the stage files")
    for b in bad:
        print(f"check_partition: {model_file}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
