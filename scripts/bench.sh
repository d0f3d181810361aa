#!/usr/bin/env bash
# Runs every benchmark and prints their JSON lines: bench_partition, bench_schedule, bench_plan,
# bench_comm (mpirun -np 2), bench_step, bench_watch, bench_ckpt, bench/pipeline.sh,
# bench/memory.sh, bench/input.sh, bench/data_start.sh (start-up on 1-32 GiB streams), bench/pack.sh (--pack against --pad), bench/peers.sh (PyTorch 2.x and ONNX Runtime training on the same job, from
# their own venv, which scripts/bench-venv.sh sets up on first use) and bench/paper.sh (the
# simulator on a GPT-2-XL-sized job). A benchmark that is missing or fails prints a JSON line
# saying so, and the others still run.
# Usage: scripts/bench.sh [BUILD_DIR]  (a Release build: cmake -DCMAKE_BUILD_TYPE=Release)
# Env: BENCH_COMM_BYTES (largest bench_comm message, default 64 MiB), STEPS (pipeline.sh,
# peers.sh), ROUNDS and PEERS (peers.sh).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" 2>/dev/null && pwd) || { echo "{\"bench\": \"all\", \"error\": \"no build dir ${1:-$SRC/build}\"}"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

echo "{\"bench\": \"all\", \"build\": \"$BUILD\", \"build_type\": \"$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)\", \"cores\": $(nproc), \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"

# run NAME CMD...: the command's JSON lines, or one line saying why there are none
run() {
    local name=$1
    shift
    if [ ! -x "$1" ] && ! command -v "$1" >/dev/null; then
        echo "{\"bench\": \"$name\", \"error\": \"missing: $1\"}"
        return
    fi
    local out rc
    out=$("$@" 2>/tmp/bench.$$.err)
    rc=$?
    printf '%s\n' "$out" | grep '^{' || true
    if [ $rc -ne 0 ]; then
        local why
        why=$(tail -c 300 /tmp/bench.$$.err | tr '\n"\\' '   ')
        echo "{\"bench\": \"$name\", \"error\": \"exit status $rc\", \"stderr\": \"$why\"}"
    fi
    rm -f /tmp/bench.$$.err
}

run partition "$BUILD/bench_partition"
run schedule "$BUILD/bench_schedule"
if [ -x "$BUILD/bench_comm" ]; then
    run comm mpirun -np 2 --bind-to core -x OPENBLAS_NUM_THREADS "$BUILD/bench_comm" "${BENCH_COMM_BYTES:-67108864}"
else
    echo "{\"bench\": \"comm\", \"error\": \"missing: $BUILD/bench_comm\"}"
fi
run plan "$BUILD/bench_plan"
run step "$BUILD/bench_step"
run watch "$BUILD/bench_watch"
# bench_ckpt writes 1.8 GB checkpoints (about 4 GB free needed) to BENCH_CKPT_DIR
ckdir=${BENCH_CKPT_DIR:-${TMPDIR:-/tmp}/onnxpipe-bench-ckpt}
run ckpt "$BUILD/bench_ckpt" --dir "$ckdir"
rm -rf "$ckdir"
run pipeline "$SRC/bench/pipeline.sh" "$BUILD"
run memory "$SRC/bench/memory.sh" "$BUILD"
run input "$SRC/bench/input.sh" "$BUILD"   # writes and deletes a 1 GiB token stream under TMPDIR
run data_start "$SRC/bench/data_start.sh" "$BUILD"   # streams of 1, 8, 32 GiB (SIZES) one at a time under TMPDIR
run peers "$SRC/bench/peers.sh" "$BUILD"
run hf_peers "$SRC/bench/hf_peers.sh" "$BUILD"   # HF Llama and GPT-2 exports against PyTorch (export venv)
run pack "$SRC/bench/pack.sh" "$BUILD"           # --pack against --pad on a corpus of mixed lengths
run paper "$SRC/bench/paper.sh" "$BUILD"
