#!/usr/bin/env bash
# onnxpipe on the models users bring (issue 24 §6): HuggingFace Llama and GPT-2 (L=4, D=256,
# H=4, V=256, T=256 by default, random init, seed 0), exported for training by
# examples/export/export_model.py with both PyTorch exporters (torchscript, dynamo), trained
# by onnxpipe against PyTorch 2.x training the HF module itself (export_model.rebuild(): the
# export's initial weights), eager and torch.compile, with HF's eager attention (the graph
# as exported) and with sdpa (HF's default). The same job everywhere: global batch B as M
# microbatches, the batches `onnxpipe data text` writes from the GPL-3 text, AdamW (lr 1e-3,
# betas 0.9/0.999, eps 1e-8, decay 0.01), W warm-up steps then S timed steps; every
# trainer prints the losses of all W + S steps.
#
#   1 core (all bound to core 0): onnxpipe pp=1 (one OpenBLAS thread); PyTorch on 1 thread.
#   2 cores: onnxpipe pp=1 x dp=2 (mpirun, M/2 microbatches per replica) and pp=2 (mpirun,
#     PP_MICROBATCHES microbatches, each schedule of PP_SCHEDULES), ranks bound to cores;
#     PyTorch on 2 threads.
#
# Each core count runs every configuration ROUNDS times, round after round (this machine's
# speed drifts by 10-25% over tens of seconds, so one run of each, one after the other, can
# favour either side); the summary takes each configuration's median over the rounds.
#
# The first round's 1-core onnxpipe runs of Llama profile 2 more steps after the timed ones (not timed):
# their per-op table as a JSON line (bench "hf_profile"), the raw table also in PROFILE_DIR
# when set.
#
# One JSON line per trainer and configuration (losses, loss_first, loss_last, median of the
# timed steps, CPU time where one process on one core runs it, the load average), the
# GEMM yardstick per model (bench_gemm_mix on OpenBLAS, on onnxpipe's smat_gemm and on PyTorch's MKL, 1 core;
# smat_gemm against OpenBLAS call by call), then
# bench/peers/hf_summary.py's: per model, the losses against PyTorch eager's and best
# onnxpipe / best peer on 1 core and on 2 (target 1.2x).
#
# PyTorch and the exporters come from the export venv (scripts/export-venv.sh: torch 2.x,
# transformers; set up on first use, minutes).
#
# Usage: bench/hf_peers.sh [BUILD_DIR]   (a Release build)
# Env: LAYERS (4), DIM (256), HEADS (4), SEQ (256), BATCH (16), MICROBATCHES (4; the peers'
# and pp=1's; dp=2 runs half per replica), PP_MICROBATCHES (8), PP_SCHEDULES ("1f1b"),
# WARMUP (2), STEPS (3), ROUNDS (3), CORES ("1 2"), MODELS ("gpt2 llama"), EXPORTERS ("torchscript dynamo"),
# PEERS ("eager compile"; empty: onnxpipe only), ATTN ("eager sdpa"), PROFILE (1: profile the
# Llama exports), PROFILE_DIR (keep the raw per-op tables there), WORK (keep the exports and
# data in this folder and reuse those already made with the same arguments; default: a
# temporary folder), LINES (also append every line to this file).
# A smoke run: LAYERS=2 SEQ=32 STEPS=2 WARMUP=1 bench/hf_peers.sh
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
LAYERS=${LAYERS:-4} DIM=${DIM:-256} HEADS=${HEADS:-4} SEQ=${SEQ:-256} VOCAB=256
BATCH=${BATCH:-16} MB=${MICROBATCHES:-4} PP_MB=${PP_MICROBATCHES:-8}
PP_SCHEDULES=${PP_SCHEDULES:-1f1b}
WARMUP=${WARMUP:-2} STEPS=${STEPS:-3} ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-gpt2 llama} EXPORTERS=${EXPORTERS:-torchscript dynamo}
PEERS=${PEERS-eager compile} ATTN=${ATTN:-eager sdpa} PROFILE=${PROFILE:-1} CORES=${CORES:-1 2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
WORK=${WORK:-$TMP/work}
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LINES_FILE=$TMP/lines.jsonl
PEERDIR=$SRC/bench/peers
NSTEPS=$((WARMUP + STEPS))
exec 3>&1   # stdout, for the lines of functions whose own stdout is captured

fail() { printf '{"bench": "hf_peers", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
[ $((BATCH % MB)) = 0 ] && [ $((MB % 2)) = 0 ] && [ $((BATCH % PP_MB)) = 0 ] ||
    fail "BATCH $BATCH must split into MICROBATCHES $MB (even, for dp=2) and into PP_MICROBATCHES $PP_MB"

# out TAGS_JSON: the JSON lines of stdin with TAGS (and "round": ROUND while a round runs)
# added, to stdout and the lines file
ROUND=
out() {
    python3 -c '
import json, sys
tags = {**json.loads(sys.argv[1]), **({"round": int(sys.argv[2])} if sys.argv[2] else {})}
for l in sys.stdin:
    if l.startswith("{"):
        print(json.dumps({**json.loads(l), **tags}), flush=True)' "$1" "$ROUND" | tee -a "$LINES_FILE" ${LINES:+-a "$LINES"}
}

VENV=$("$SRC/scripts/export-venv.sh" 2>"$TMP/venv.err" | tail -1)
PY=$VENV/bin/python
[ -x "$PY" ] || fail "no export venv (scripts/export-venv.sh): $(tail -c 300 "$TMP/venv.err" | tr '\n"\\' '   ')"
versions=$("$PY" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")' 2>/dev/null)
printf '{"bench": "hf_peers_machine", "cores": %d, "cpu": "%s", "versions": "%s", "layers": %d, "d_model": %d, "heads": %d, "vocab": %d, "seq": %d, "global_batch": %d, "microbatches": %d, "warmup_steps": %d, "timed_steps": %d, "rounds": %d, "loadavg": "%s", "utc": "%s"}\n' \
    "$(nproc)" "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$versions" "$LAYERS" "$DIM" "$HEADS" \
    "$VOCAB" "$SEQ" "$BATCH" "$MB" "$WARMUP" "$STEPS" "$ROUNDS" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" | out '{}'

# the data: the GPL-3 text as sequences of SEQ bytes, labels the next bytes
DATA=$WORK/data-$SEQ
[ -f "$DATA/dataset.json" ] || "$OP" data text /usr/share/common-licenses/GPL-3 -o "$DATA" --seq "$SEQ" >/dev/null ||
    fail "onnxpipe data text failed"

# export MODEL EXPORTER: WORK/MODEL-EXPORTER.onnx (+ .safetensors, .json), reused when made
# with the same arguments
export_one() {
    local model=$1 exporter=$2 kv=()
    local f=$WORK/$model-$exporter-L$LAYERS-d$DIM-T$SEQ.onnx
    [ "$model" = llama ] && kv=(--kv-heads "$HEADS")
    local args=(--model "$model" --exporter "$exporter" --layers "$LAYERS" --d-model "$DIM" --heads "$HEADS"
                "${kv[@]}" --vocab $VOCAB --seq "$SEQ" --save-weights --no-check -o "$f")
    if [ ! -f "$f" ] || [ "$(cat "$f.args" 2>/dev/null)" != "${args[*]}" ]; then
        "$PY" "$SRC/examples/export/export_model.py" "${args[@]}" >"$TMP/export.log" 2>&1 || {
            printf '{"bench": "hf_export", "model": "%s", "exporter": "%s", "error": "%s"}\n' "$model" "$exporter" \
                "$(grep -v Warning "$TMP/export.log" | tail -c 300 | tr '\n"\\' '   ')" | out '{}' >&3
            return 1
        }
        echo "${args[*]}" >"$f.args"
    fi
    echo "$f"
}

# onnxpipe_run TAGS CONFIG RANKS PROFILED LAUNCH... -- TRAIN_ARGS...
# (LAUNCH: taskset ... or mpirun ...; PROFILED=1 profiles 2 more steps after the timed ones)
onnxpipe_run() {
    local tags=$1 config=$2 ranks=$3 profiled=$4 model_file=$5
    shift 5
    local launch=()
    while [ "$1" != "--" ]; do launch+=("$1"); shift; done
    shift
    rm -rf "$TMP/run" && mkdir -p "$TMP/run"
    local n=$NSTEPS prof=()
    if [ "$profiled" = 1 ]; then
        n=$((NSTEPS + 2))
        prof=(--profile-steps "$((NSTEPS + 1)):$n" --profile "$TMP/run/prof.json")
    fi
    local train=(train --model "$model_file" --data "$DATA" --dim seq="$SEQ" --batch "$BATCH" --steps "$n"
                 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --loss cross_entropy --logits logits
                 --labels labels --losses "$TMP/run/losses.txt" --quiet "${prof[@]}")
    if [ "${launch[0]}" = mpirun ]; then
        OPENBLAS_NUM_THREADS=1 PP_LOG=info "${launch[@]}" --output-filename "$TMP/run/out" \
            -x OPENBLAS_NUM_THREADS -x PP_LOG "$OP" "${train[@]}" "$@" >/dev/null 2>&1
        cat "$TMP"/run/out/*/rank.*/stderr >"$TMP/run/log" 2>/dev/null
        cp "$TMP"/run/out/*/rank.0/stdout "$TMP/run/stdout0" 2>/dev/null
    else
        python3 "$PEERDIR/cputime.py" "$TMP/run/log" env OPENBLAS_NUM_THREADS=1 PP_LOG=info \
            "${launch[@]}" "$OP" "${train[@]}" "$@" >"$TMP/run/stdout0"
    fi
    python3 "$PEERDIR/hf_onnxpipe_line.py" "$TMP/run/log" "$TMP/run/losses.txt" "$config" "$ranks" \
        --batch "$BATCH" --seq "$SEQ" --warmup "$WARMUP" --steps "$STEPS" | out "$tags"
}

# peer TAGS ARGS...: hf_torch.py, or a line saying why it printed none
peer() {
    local tags=$1
    shift
    timeout 1200 "$@" >"$TMP/peer.out" 2>"$TMP/peer.err"
    local rc=$?
    if grep -q '^{' "$TMP/peer.out"; then
        out "$tags" <"$TMP/peer.out"
    else
        printf '{"bench": "peer", "args": "%s", "error": "exit status %d", "stderr": "%s"}\n' \
            "$(printf '%s ' "$@" | sed "s|$WORK/||g" | tail -c 200)" $rc \
            "$(grep -v -e CUDA_HOME -e '^\s*$' "$TMP/peer.err" | tail -c 400 | tr '\n"\\\t' '    ')" | out "$tags"
    fi
}

# the PyTorch runs of one model (on the first export's weights; once more per export whose
# initial weights differ, which seed 0 makes none)
peers() {
    local model=$1 cores=$2 f=$3 exporter=$4
    local tags="{\"model\": \"$model\", \"cores\": $cores, \"weights_from\": \"$exporter export\"}"
    local bind=()
    [ "$cores" = 1 ] && bind=(taskset -c 0)
    for mode in $PEERS; do
        for attn in $ATTN; do
            local c=()
            [ "$mode" = compile ] && c=(--compile)
            peer "$tags" "${bind[@]}" "$PY" "$PEERDIR/hf_torch.py" "$f" "$DATA" --threads "$cores" --attn "$attn" \
                "${c[@]}" --warmup "$WARMUP" --steps "$STEPS" --batch "$BATCH" --microbatches "$MB"
        done
    done
}

# gemm_yardstick MODEL FILE: the export's products (every MatMul at one microbatch, forward
# and both backward forms, in full) on one core, by OpenBLAS, by onnxpipe's own products
# (smat_gemm: kernels/cpu/gemm.c where it applies, OpenBLAS the rest) and by PyTorch's MKL,
# one JSON line each (bench "gemm_mix"): how much of a gap is the GEMM library's; then
# smat_gemm against OpenBLAS call by call (bench_gemm_mix --compare: a line per distinct
# product, "gemm_compare", and the pass's, "gemm_compare_pass"), which the drift between
# the two separate runs above does not move
gemm_yardstick() {
    local tags="{\"model\": \"$1\", \"cores\": 1}" mix=("$BUILD/bench_gemm_mix" "$2" --batch $((BATCH / MB)) --dim seq="$SEQ")
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "${mix[@]}" | out "$tags"
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "${mix[@]}" --onnxpipe | out "$tags"
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "${mix[@]}" --compare | out "$tags"
    "${mix[@]}" --list | taskset -c 0 "$PY" "$PEERDIR/torch_gemm_mix.py" --threads 1 2>/dev/null | out "$tags"
}

same_weights() {   # same_weights A.onnx B.onnx: their .safetensors hold equal tensors
    "$PY" - "${1%.onnx}.safetensors" "${2%.onnx}.safetensors" <<'EOF' 2>/dev/null
import sys
import numpy as np
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
sys.exit(0 if a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a) else 1)
EOF
}

for model in $MODELS; do
    files=() exps=()
    for exporter in $EXPORTERS; do
        f=$(export_one "$model" "$exporter") && { files+=("$f"); exps+=("$exporter"); }
    done
    [ ${#files[@]} = 0 ] && continue
    # which exports the peers run on: the first, and any whose weights differ from it
    peer_idx=(0)
    for i in "${!files[@]}"; do
        [ "$i" -gt 0 ] && ! same_weights "${files[0]}" "${files[$i]}" && peer_idx+=("$i")
    done
    for cores in $CORES; do
        for ROUND in $(seq "$ROUNDS"); do
            for i in "${!files[@]}"; do
                f=${files[$i]} e=${exps[$i]}
                tags="{\"model\": \"$model\", \"exporter\": \"$e\", \"cores\": $cores}"
                if [ "$cores" = 1 ]; then
                    prof=0
                    [ "$model" = llama ] && [ "$PROFILE" = 1 ] && [ "$ROUND" = 1 ] && prof=1
                    onnxpipe_run "$tags" "onnxpipe pp=1 1 core" 1 $prof "$f" taskset -c 0 -- --pp 1 --microbatches "$MB"
                    # where onnxpipe's time goes on Llama: the per-op table of the 2 profiled steps
                    if [ $prof = 1 ]; then
                        python3 "$PEERDIR/hf_profile.py" "$TMP/run/stdout0" "$model" "$e" \
                            --steps "$((NSTEPS + 1)):$((NSTEPS + 2))" \
                            --extra "{\"cores\": 1, \"global_batch\": $BATCH, \"seq\": $SEQ}" | out '{}'
                        if [ -n "${PROFILE_DIR:-}" ]; then
                            mkdir -p "$PROFILE_DIR" && cp "$TMP/run/stdout0" "$PROFILE_DIR/hf-profile-$model-$e.txt"
                        fi
                    fi
                else
                    onnxpipe_run "${tags%\}}, \"microbatches_per_replica\": $((MB / 2))}" "onnxpipe pp=1 x dp=2" 2 0 "$f" \
                        mpirun -np 2 --bind-to core -- --pp 1 --dp 2 --microbatches $((MB / 2))
                    for s in $PP_SCHEDULES; do
                        onnxpipe_run "${tags%\}}, \"schedule\": \"$s\", \"microbatches\": $PP_MB}" "onnxpipe pp=2 $s" 2 0 "$f" \
                            mpirun -np 2 --bind-to core -- --pp 2 --dp 1 --schedule "$s" --microbatches "$PP_MB"
                    done
                fi
            done
            for i in "${peer_idx[@]}"; do
                peers "$model" "$cores" "${files[$i]}" "${exps[$i]}"
            done
        done
        ROUND=
        [ "$cores" = 1 ] && gemm_yardstick "$model" "${files[0]}"
    done
done
printf '{"bench": "hf_peers_end", "loadavg": "%s", "utc": "%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%FT%TZ)" |
    out '{}'

python3 "$PEERDIR/hf_summary.py" "$LINES_FILE" | tee ${LINES:+-a "$LINES"}
