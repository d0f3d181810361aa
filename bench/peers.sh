#!/usr/bin/env bash
# onnxpipe against the trainers a user would pick today, on one job: the example GPT
# (L=4, D=256, H=4, T=128, V=256), global batch 64 as 16 microbatches of 4, AdamW (lr 1e-3,
# betas 0.9/0.999, eps 1e-8, decay 0.01), every system starting from the weights of the
# same ONNX file and reading the same batches, so they print the same losses.
#
#   1 core (all bound to core 0): onnxpipe pp=1, bracketed by the sgemm yardstick on the
#     model's own GEMM shapes (bench_gemm_mix; the same shapes on PyTorch's MKL beside
#     it); PyTorch 2.x eager and torch.compile on 1 thread; ONNX Runtime training on 1
#     thread.
#   2 cores: onnxpipe pp=1 on 2 BLAS threads, pp=2 under every schedule (gpipe, 1f1b,
#     interleaved, zb-h1, zb-v; ranks bound to cores, three extra profiled steps give the
#     simulator's bubble on the measured stage costs), pp=1 x dp=2 (8 microbatches of 4 per
#     replica); PyTorch eager and torch.compile on 2 threads, torch.distributed.pipelining
#     on 2 processes (gloo) under each of its schedules; ONNX Runtime training on 2 threads
#     (spinning and not).
#
# One JSON line per system and configuration (its losses, median step time of steps 2..S,
# CPU time where one process runs it, the load average), then bench/peers/summary.py's
# lines: the losses' agreement, best onnxpipe / best peer on 1 core and on 2 against the
# targets (median over rounds, and round by round), model FLOPs as a fraction of the GEMM
# yardstick, and the bubbles. Odd rounds run onnxpipe first, even rounds the peers first. PyTorch and ONNX Runtime come from their own
# venv (scripts/bench-venv.sh, set up on first use).
#
# Usage: bench/peers.sh [BUILD_DIR]   (a Release build)
# Env: STEPS (trained steps per run, default 6; step 1 is a warm-up), ROUNDS (times the
# whole set runs, default 1; the summary takes each configuration's median over rounds),
# PEERS (default "torch compile ort pipelining"; drop one to skip it), LINES (also append
# every line to this file).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || BUILD=${1:-$SRC/build}
OP=$BUILD/onnxpipe
STEPS=${STEPS:-6}
ROUNDS=${ROUNDS:-1}
PEERS=${PEERS-torch compile ort pipelining}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BATCH=64 MB=16 SEQ=128
LINES_FILE=$TMP/lines.jsonl
PEERDIR=$SRC/bench/peers

fail() { printf '{"bench": "peers", "error": "%s"}\n' "$1"; exit 1; }
[ -x "$OP" ] || fail "no onnxpipe at $OP (build first, or pass the build dir)"
"$OP" example gpt --layers 4 --d-model 256 --heads 4 --vocab 256 --seq $SEQ -o "$TMP/gpt.onnx" >/dev/null ||
    fail "onnxpipe example gpt failed"
"$OP" data text /usr/share/common-licenses/GPL-3 -o "$TMP/data" --seq $SEQ >/dev/null || fail "onnxpipe data text failed"

# out TAGS_JSON: the JSON lines of stdin with TAGS added, to stdout and the lines file
out() {
    python3 -c '
import json, sys
tags = json.loads(sys.argv[1])
for l in sys.stdin:
    if l.startswith("{"):
        print(json.dumps({**json.loads(l), **tags}), flush=True)' "$1" | tee -a "$LINES_FILE" ${LINES:+-a "$LINES"}
}

# run_py TAGS TIMEOUT CMD...: a peer's command (its python script among the words); a
# line saying why when it prints none
run_py() {
    local tags=$1 limit=$2
    shift 2
    local log=$TMP/peer.out script
    script=$(printf '%s\n' "$@" | grep '\.py$' | head -1)
    timeout "$limit" "$@" >"$log" 2>"$TMP/peer.err"
    local rc=$?
    if grep -q '^{' "$log"; then
        out "$tags" <"$log"
    else
        local why
        why=$(grep -v -e CUDA_HOME -e '^\s*$' "$TMP/peer.err" | tail -c 400 | tr '\n"\\\t' '    ')
        printf '{"bench": "peer", "script": "%s", "args": "%s", "error": "exit status %d%s", "stderr": "%s"}\n' \
            "$(basename "$script")" "$(printf '%s ' "$@" | sed "s|$TMP/||g" | tail -c 200)" $rc \
            "$([ $rc = 124 ] && echo ", timed out after ${limit}s")" "$why" | out "$tags"
    fi
}

has() { [[ " $PEERS " == *" $1 "* ]]; }

# onnxpipe_run TAGS CONFIG RANKS BLAS_THREADS STEPS_RUN PROFILED LAUNCH... -- TRAIN_ARGS...
# (LAUNCH: taskset ..., env, or mpirun ...; PROFILED=1 profiles the last 3 steps, not timed)
onnxpipe_run() {
    local tags=$1 config=$2 ranks=$3 threads=$4 nsteps=$5 profiled=$6
    shift 6
    local launch=()
    while [ "$1" != "--" ]; do launch+=("$1"); shift; done
    shift
    rm -rf "$TMP/run" && mkdir -p "$TMP/run"
    local prof=()
    [ "$profiled" = 1 ] && prof=(--profile-steps "$((nsteps - 2)):$nsteps" --profile "$TMP/run/prof.json")
    local train=(train --model "$TMP/gpt.onnx" --data "$TMP/data" --batch $BATCH --microbatches $MB
                 --steps "$nsteps" --optimizer adamw --lr 1e-3 --weight-decay 0.01 --loss cross_entropy
                 --logits logits --labels labels --losses "$TMP/run/losses.txt" --quiet "${prof[@]}")
    if [ "${launch[0]}" = mpirun ]; then
        OPENBLAS_NUM_THREADS=$threads PP_LOG=info "${launch[@]}" --output-filename "$TMP/run/out" \
            -x OPENBLAS_NUM_THREADS -x PP_LOG "$OP" "${train[@]}" "$@" >/dev/null 2>&1
        cat "$TMP"/run/out/*/rank.*/stderr >"$TMP/run/log" 2>/dev/null
        cp "$TMP"/run/out/*/rank.0/stdout "$TMP/run/stdout0" 2>/dev/null
    else
        python3 "$PEERDIR/cputime.py" "$TMP/run/log" env OPENBLAS_NUM_THREADS="$threads" PP_LOG=info \
            "${launch[@]}" "$OP" "${train[@]}" "$@" >"$TMP/run/stdout0"
    fi
    python3 "$PEERDIR/onnxpipe_line.py" "$TMP/run/log" "$TMP/run/losses.txt" "$config" "$ranks" --batch $BATCH \
        --seq $SEQ --timed-steps "$STEPS" --stdout "$TMP/run/stdout0" \
        --extra "{\"blas_threads_per_rank\": $threads}" | out "$tags"
}

# the simulator's bubble for pp=2 with per-stage costs from the partition's FLOPs
predict() {
    "$OP" schedule --pp 2 --microbatches $MB --kind "$1" --model "$TMP/gpt.onnx" --batch $((BATCH / MB)) --json 2>/dev/null |
        python3 -c 'import json,sys; print(round(json.load(sys.stdin)["bubble"], 4))' 2>/dev/null || echo null
}

PY=
if [ -n "$PEERS" ]; then
    PY=$("$SRC/scripts/bench-venv.sh" 2>"$TMP/venv.err" | tail -1)/bin/python
    if [ ! -x "$PY" ]; then
        printf '{"bench": "peers", "error": "no bench venv (scripts/bench-venv.sh): %s"}\n' \
            "$(tail -c 300 "$TMP/venv.err" | tr '\n"\\' '   ')" | out '{}'
        PEERS=
    fi
fi
versions=$([ -n "$PY" ] && "$PY" -c 'import torch, onnxruntime; print(f"torch {torch.__version__}, onnxruntime {onnxruntime.__version__}")' 2>/dev/null)
printf '{"bench": "peers_machine", "cores": %d, "cpu": "%s", "steps": %d, "rounds": %d, "peers": "%s", "loadavg": "%s"}\n' \
    "$(nproc)" "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$STEPS" "$ROUNDS" "$versions" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | out '{}'

PEER_ARGS=("$TMP/gpt.onnx" "$TMP/data" --steps "$STEPS" --batch $BATCH --microbatches $MB)
one_core_onnxpipe() {   # bound to core 0, bracketed by the GEMM-shape yardstick
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "$BUILD/bench_gemm_mix" "$TMP/gpt.onnx" --batch $((BATCH / MB)) |
        out "{\"round\": $round, \"cores\": 1, \"when\": \"before onnxpipe pp=1\"}"
    onnxpipe_run "$t1" "onnxpipe pp=1 1 core" 1 1 "$STEPS" 0 taskset -c 0 -- --pp 1
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "$BUILD/bench_gemm_mix" "$TMP/gpt.onnx" --batch $((BATCH / MB)) |
        out "{\"round\": $round, \"cores\": 1, \"when\": \"after onnxpipe pp=1\"}"
    # the same shapes on onnxpipe's own products (kernels/cpu/gemm.c on AVX-512 and AVX2 cores)
    OPENBLAS_NUM_THREADS=1 taskset -c 0 "$BUILD/bench_gemm_mix" "$TMP/gpt.onnx" --batch $((BATCH / MB)) --onnxpipe |
        out "{\"round\": $round, \"cores\": 1}"
}
one_core_peers() {      # bound to core 0
    # the same yardstick on PyTorch's GEMM (MKL): is the peers' kernel library the difference?
    has torch && "$BUILD/bench_gemm_mix" "$TMP/gpt.onnx" --batch $((BATCH / MB)) --list |
        taskset -c 0 "$PY" "$PEERDIR/torch_gemm_mix.py" --threads 1 2>/dev/null | out "$t1"
    has torch && run_py "$t1" 600 taskset -c 0 "$PY" "$PEERDIR/torch_eager.py" "${PEER_ARGS[@]}" --threads 1
    has compile && run_py "$t1" 900 taskset -c 0 "$PY" "$PEERDIR/torch_eager.py" "${PEER_ARGS[@]}" --threads 1 --compile
    has ort && run_py "$t1" 600 taskset -c 0 "$PY" "$PEERDIR/ort_train.py" "${PEER_ARGS[@]}" --threads 1
}
two_core_onnxpipe() {
    onnxpipe_run "$t2" "onnxpipe pp=1 2 BLAS threads" 1 2 "$STEPS" 0 env -- --pp 1
    for kind in gpipe 1f1b interleaved zb-h1 zb-v; do
        tags="{\"round\": $round, \"cores\": 2, \"schedule\": \"$kind\", \"bind\": \"core\", \"bubble_predicted_flops\": $(predict $kind)}"
        onnxpipe_run "$tags" "onnxpipe pp=2 $kind" 2 1 $((STEPS + 3)) 1 mpirun -np 2 --bind-to core -- \
            --pp 2 --dp 1 --schedule $kind
    done
    # the job's 16 microbatches of 4, 8 per replica (--microbatches counts per replica)
    onnxpipe_run "{\"round\": $round, \"cores\": 2, \"bind\": \"core\", \"microbatches_per_replica\": $((MB / 2))}" \
        "onnxpipe pp=1 x dp=2" 2 1 "$STEPS" 0 mpirun -np 2 --bind-to core -- --pp 1 --dp 2 --microbatches $((MB / 2))
}
two_core_peers() {
    has torch && run_py "$t2" 600 "$PY" "$PEERDIR/torch_eager.py" "${PEER_ARGS[@]}" --threads 2
    has compile && run_py "$t2" 900 "$PY" "$PEERDIR/torch_eager.py" "${PEER_ARGS[@]}" --threads 2 --compile
    if has pipelining; then
        for s in gpipe 1f1b interleaved-1f1b looped-bfs interleaved-zb zb-v dualpipe-v; do
            run_py "$t2" 600 "$PY" "$PEERDIR/torch_pipe.py" "${PEER_ARGS[@]}" --schedule $s --procs 2 --bind
        done
    fi
    # ORT's intra-op threads spin while they wait (its default); on a shared machine sleeping may do better
    has ort && run_py "$t2" 600 "$PY" "$PEERDIR/ort_train.py" "${PEER_ARGS[@]}" --threads 2
    has ort && run_py "$t2" 600 "$PY" "$PEERDIR/ort_train.py" "${PEER_ARGS[@]}" --threads 2 --spin off
}
for round in $(seq 1 "$ROUNDS"); do
    t1="{\"round\": $round, \"cores\": 1}"
    t2="{\"round\": $round, \"cores\": 2}"
    # odd rounds onnxpipe first, even rounds the peers first: a load that comes and goes
    # with time falls on both sides
    if [ $((round % 2)) = 1 ]; then
        one_core_onnxpipe; one_core_peers; two_core_onnxpipe; two_core_peers
    else
        one_core_peers; one_core_onnxpipe; two_core_peers; two_core_onnxpipe
    fi
done

python3 "$PEERDIR/summary.py" "$LINES_FILE" | tee ${LINES:+-a "$LINES"}
