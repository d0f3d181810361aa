#!/usr/bin/env bash
# Pipeline layouts are bit for bit pp=1, tied weights included: the example GPT (its token
# embedding and LM head share one weight, read by stage 0 and the last stage) trained 8
# steps at the same microbatch size (batch 16 in 4 microbatches) with AdamW, weight decay
# and clipping, under (pp, schedule, chunks) in {(2, gpipe), (2, 1f1b), (2, interleaved x
# 2), (2, zb-h1), (2, zb-v x 2), (4, 1f1b), (4, interleaved x 3), (4, zb-v x 2)}, in fp32 and
# bf16 (fp16, whose dtypes are bf16's with a loss scale, at (2, gpipe), (2, zb-h1), (4,
# interleaved x 3) and (4, zb-v x 2): a schedule of each kind), writes the same --losses
# file and the same exported model, byte for byte, as
# the single-process run; and a checkpoint saved at step 4 by one layout, resumed by
# others (pp=2 -> pp=1, pp=4 zb-h1, pp=2 zb-v; pp=1 -> pp=4 interleaved), continues
# byte for byte as the uninterrupted run. A PyTorch export that applies one Linear four
# times (ALBERT's sharing; --balance flops puts the uses on four stages) does the same at
# pp=4, pp=2 interleaved x 2 (the uses alternate between the ranks) and pp=3 zb-v, in fp32
# and bf16. The reference nobody here wrote is the
# single-process run itself: every layout sums each microbatch and each use of the tied
# weight in the order pp=1 does. (dp and the microbatch size change sums; not compared.)
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/bitwise-layout
rm -rf "$OUT"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
"$PY" "$SRC_DIR/tests/ref/mlp_data.py" "$OUT/mlp-data" 512 3
"$PY" - "$OUT/shared.onnx" <<'PYEOF'
import sys
import warnings
warnings.filterwarnings("ignore")
import torch
import torch.nn as nn
import torch.nn.functional as F
class Shared(nn.Module):
    def __init__(s):
        super().__init__()
        s.inp, s.shared, s.out = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 10)
    def forward(s, x, labels):
        h = torch.tanh(s.inp(x))
        for _ in range(4):
            h = torch.tanh(s.shared(h)) + h
        return F.cross_entropy(s.out(h), labels)
torch.manual_seed(0)
torch.onnx.export(Shared(), (torch.randn(4, 16), torch.zeros(4, dtype=torch.int64)), sys.argv[1],
                  input_names=["x", "labels"], output_names=["loss"], opset_version=17, do_constant_folding=False,
                  dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
PYEOF

# shellcheck source=lib/run.sh
. "$SRC_DIR/tests/lib/run.sh"
model=(--model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels)
train() {  # TAG PP SCHEDULE CHUNKS PRECISION EXTRA...
    local tag=$1 pp=$2 sched=$3 chunks=$4 prec=$5
    shift 5
    run_onnxpipe "$tag" "$pp" train "${model[@]}" --pp "$pp" --schedule "$sched" --chunks "$chunks" --batch 16 \
        --microbatches 4 --steps 8 --optimizer adamw --lr 3e-3 --weight-decay 0.01 --clip-norm 0.5 \
        --precision "$prec" --quiet --losses "$OUT/$tag.losses" --export "$OUT/$tag.onnx" "$@"
}
same() {  # REF TAG LABEL: the losses file and the exported model, byte for byte
    cmp "$OUT/$1.losses" "$OUT/$2.losses" >/dev/null || { echo "FAILED: $3: losses differ"; paste "$OUT/$1.losses" "$OUT/$2.losses"; exit 1; }
    cmp "$OUT/$1.onnx" "$OUT/$2.onnx" >/dev/null || { echo "FAILED: $3: the exported weights differ"; exit 1; }
    echo "  $3: the same $(wc -l <"$OUT/$2.losses") losses, the same exported model"
}

for prec in fp32 bf16 fp16; do
    echo "== $prec: layouts against pp=1"
    train "$prec-ref" 1 1f1b 1 "$prec"
    layouts="2:gpipe:1 2:1f1b:1 2:interleaved:2 2:zb-h1:1 2:zb-v:2 4:1f1b:1 4:interleaved:3 4:zb-v:2"
    [ "$prec" = fp16 ] && layouts="2:gpipe:1 2:zb-h1:1 4:interleaved:3 4:zb-v:2"
    for layout in $layouts; do
        IFS=: read -r pp sched chunks <<<"$layout"
        tag=$prec-pp$pp-$sched-c$chunks
        train "$tag" "$pp" "$sched" "$chunks" "$prec"
        same "$prec-ref" "$tag" "$prec pp=$pp $sched chunks=$chunks"
    done
done
"$PY" - "$OUT/fp32-ref.losses" "$OUT/fp32-ref.log" <<'PYEOF'
import sys
import numpy as np
l = np.loadtxt(sys.argv[1])[:, 1]
print(f"  fp32 reference: loss {l[0]:.4f} -> {l[-1]:.4f} over {len(l)} steps")
assert l[-1] < 0.9 * l[0], "the reference trains"
PYEOF

echo "== resume on another layout (fp32): a checkpoint of step 4, steps 5-8 against the uninterrupted run"
tail -n 4 "$OUT/fp32-ref.losses" >"$OUT/tail.losses"
cp "$OUT/fp32-ref.onnx" "$OUT/tail.onnx"
train save-pp2 2 1f1b 1 fp32 --save "$OUT/ck2" --save-every 4 --save-sync
train save-pp1 1 1f1b 1 fp32 --save "$OUT/ck1" --save-every 4 --save-sync
for r in ck2:1:1f1b:1 ck2:4:zb-h1:1 ck2:2:zb-v:2 ck1:4:interleaved:2; do
    IFS=: read -r ck pp sched chunks <<<"$r"
    tag=resume-$ck-pp$pp-$sched
    train "$tag" "$pp" "$sched" "$chunks" fp32 --resume "$OUT/$ck/step-4"
    same tail "$tag" "saved by pp=${ck#ck}, resumed at pp=$pp $sched chunks=$chunks"
done

echo "== one Linear applied four times (a PyTorch export), its uses on 4 stages, against pp=1"
model=(--model "$OUT/shared.onnx" --data "$OUT/mlp-data" --balance flops)
for prec in fp32 bf16; do
    train "shared-$prec-ref" 1 1f1b 1 "$prec"
    for layout in 4:1f1b:1 2:interleaved:2 3:zb-v:2; do
        IFS=: read -r pp sched chunks <<<"$layout"
        tag=shared-$prec-pp$pp-$sched
        train "$tag" "$pp" "$sched" "$chunks" "$prec"
        same "shared-$prec-ref" "$tag" "$prec pp=$pp $sched chunks=$chunks"
    done
done
