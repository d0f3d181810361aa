#!/usr/bin/env bash
# The GPU checks, run from the bundle folder that scripts/gpu-bundle.sh made (it copies
# this file there): libraries, versions, the gpu-labelled tests, bench_gpu_step (fp32/TF32
# and bf16), 50 steps of the example GPT on cuda against the cpu, and the NCCL checks
# where there are two GPUs. Each step has its own timeout and the whole stays under 6
# minutes on a 16-core machine; a summary and one log per step land in OUTDIR.
#
# usage: gpu-check.sh [--rehearse] [OUTDIR]      (OUTDIR defaults to $OUT)
#   --rehearse  on a machine without a GPU: run everything with a scrubbed environment
#               (env -i, only the bundle and the CUDA libraries on the library path) and,
#               where unshare works, with this machine's copies of the bundled libraries
#               and Open MPI hidden; the cpu steps must pass and every GPU step must skip
#               with "no CUDA device".
set -euo pipefail
BUNDLE=$(cd "$(dirname "$0")" && pwd)
REHEARSE=0
if [ "${1:-}" = --rehearse ]; then REHEARSE=1; shift; fi
OUTDIR=${1:-${OUT:-}}
[ -n "$OUTDIR" ] || { echo "gpu-check.sh: give an output folder (argument or \$OUT)" >&2; exit 2; }
mkdir -p "$OUTDIR/logs"
OUTDIR=$(cd "$OUTDIR" && pwd)
LOGS=$OUTDIR/logs
SUMMARY=$OUTDIR/summary.txt
START=$(date +%s)
DEADLINE_S=${GPU_CHECK_DEADLINE_S:-340}   # no step runs past this many seconds from the start

# --- a rehearsal hides this machine's copies of what the bundle carries (a private mount
# namespace: empty files over the libraries, empty folders over Open MPI's and PMIx's), so
# that a binary reaching past the bundle fails here as it would on the GPU machine; the
# files to hide are those of the bundle's MANIFEST
MASKED=no
if [ $REHEARSE = 1 ] && [ -z "${GPU_CHECK_MASKED:-}" ] && unshare -m true 2>/dev/null; then
    exec unshare -m env GPU_CHECK_MASKED=1 bash "$0" --rehearse "$OUTDIR"
fi

# --- unpack into a temporary folder, never into the bundle folder, which must stay small
# enough to travel (tar and gzip, or Python's tarfile where they are missing)
UNPACKED=$(mktemp -d "${TMPDIR:-/tmp}/onnxpipe-gpu.XXXXXX")
trap 'rm -rf "$UNPACKED"' EXIT
tar -C "$UNPACKED" -xzf "$BUNDLE/payload.tar.gz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE/payload.tar.gz" "$UNPACKED"
R=$UNPACKED/root
if [ "${GPU_CHECK_MASKED:-}" = 1 ]; then
    # files: /dev/null over them (the loader reads "file too short"); folders: an empty tmpfs
    for f in $(sed -n 's|^\./lib/\([^/]*\.so[^/]*\)$|\1|p' "$R/MANIFEST"); do
        for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
            [ -e "$d/$f" ] && mount --bind /dev/null "$(readlink -f "$d/$f")"
        done
    done
    for d in /usr/lib/x86_64-linux-gnu/{openmpi,pmix2,hwloc} /usr/lib64/openmpi /usr/share/openmpi /etc/openmpi; do
        [ -d "$d" ] && mount -t tmpfs -o size=1m,mode=755 none "$d"
    done
    for f in /usr/bin/{orterun,orted,mpirun,mpiexec,prte,prterun,prted}; do
        [ -e "$f" ] && mount --bind /dev/null "$(readlink -f "$f")"
    done
    MASKED=yes
fi

# --- the environment every step runs in: scrubbed in a rehearsal, then the launcher's
NPROC=$(nproc)
BASE_ENV=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60)
if [ $REHEARSE = 1 ]; then
    # kept: a sanitizer build's options, and CUDA_VISIBLE_DEVICES (the tests hide a GPU host's GPUs)
    RUN=(env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR=/tmp "${BASE_ENV[@]}" ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"}
         ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} ${CUDA_VISIBLE_DEVICES+CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"} "$R/run")
else
    RUN=(env "${BASE_ENV[@]}" "$R/run")
fi

echo "gpu-check $(date -u +%FT%TZ) on $(uname -n), $NPROC cores$([ $REHEARSE = 1 ] && echo ", rehearsal (system copies hidden: $MASKED)")" >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME TIMEOUT_S CMD...: runs CMD (through the launcher) with its log in logs/NAME.log.
# Exit 77, or a line saying "skipped", makes it SKIP with that line as the reason.
FAILS=0
step() {
    local name=$1 limit=$2 t0 rc=0 reason status
    shift 2
    local left=$((START + DEADLINE_S - $(date +%s)))
    if [ "$left" -lt 10 ]; then
        # a rehearsal must run every step
        [ $REHEARSE = 1 ] && FAILS=$((FAILS + 1))
        note "$(printf '%-5s %-26s        out of time (%ss deadline)' "$([ $REHEARSE = 1 ] && echo FAIL || echo SKIP)" "$name" "$DEADLINE_S")"
        return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$(date +%s)
    timeout -k 5 "$limit" "${RUN[@]}" "$@" >"$LOGS/$name.log" 2>&1 || rc=$?
    reason=$(grep -m1 -E '^skipped|"skipped"|\[  SKIPPED \]|device unavailable' "$LOGS/$name.log" | cut -c1-160 || true)
    if [ $rc = 124 ] || [ $rc = 137 ]; then status=FAIL reason="timed out after ${limit}s"
    elif [ $rc = 77 ] || { [ $rc = 0 ] && [ -n "$reason" ]; }; then status=SKIP
    elif [ $rc = 0 ]; then status=PASS reason=
    else status=FAIL reason="exit $rc: $(tail -n 3 "$LOGS/$name.log" | tr '\n' ' ' | cut -c1-200)"
    fi
    # A GPU step that found no GPU: what a rehearsal expects (every GPU step must end so),
    # a failure on the GPU machine.
    if [[ $name == gpu-* ]] && [ $rc != 124 ] && [ $rc != 137 ]; then
        local nodev
        nodev=$(grep -m1 -o "no CUDA device.*" "$LOGS/$name.log" | cut -c1-120 || true)
        if [ $REHEARSE = 1 ]; then
            if [ -n "$nodev" ]; then status=SKIP reason=$nodev
            else status=FAIL reason="expected a skip with 'no CUDA device', got $status: $reason"; fi
        elif [ -n "$nodev" ]; then status=FAIL reason="the GPU did not answer: $nodev"
        fi
    fi
    # Open MPI's help banner: a warning (a component or file it looked for and missed)
    if [ $status = PASS ] && grep -q '^-\{74\}$' "$LOGS/$name.log"; then
        status=WARN reason="Open MPI printed a warning: $(grep -m1 -A1 '^-\{74\}$' "$LOGS/$name.log" | tail -1 | cut -c1-120)"
    fi
    if [ $status = FAIL ] || { [ $status = WARN ] && [ $REHEARSE = 1 ]; }; then FAILS=$((FAILS + 1)); fi
    note "$(printf '%-5s %-26s %4ss  %s' $status "$name" $(( $(date +%s) - t0 )) "$reason")"
}

# --- 1. what this machine has
{
    echo "== bundle: $(tr '\n' ' ' <"$R/BUILD-INFO")"
    echo "== glibc here: $(ldd --version 2>/dev/null | sed -n '1s/.* //p')"
    if command -v nvidia-smi >/dev/null; then
        timeout 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | sed 's/^/== gpu /' || true
    else
        echo "== gpu: no nvidia-smi"
    fi
    timeout 60 "${RUN[@]}" --cuda | sed 's/^/== cuda /' || true
} | tee -a "$SUMMARY"

# --- 2. every binary and component resolves every library from the bundle, the CUDA
# folders the launcher found, or the system's C/C++ runtime (root/system-libs.txt)
step libraries 60 --check

# --- 3. the cpu parts: the binaries start, MPI singleton and a two-rank mpirun train
W=$OUTDIR/work
mkdir -p "$W"
step start-onnxpipe 20 onnxpipe --help
step start-mpirun 20 mpirun --version
step cpu-data 30 bash -c 'onnxpipe data text "$1" -o "$2/text" --seq 64 &&
    onnxpipe example gpt --layers 4 --d-model 256 --heads 4 --vocab 256 --seq 64 -o "$2/gpt.onnx"' _ "$R/data/GPL-3" "$W"
# GPT's usual AdamW (beta2 0.95, clipping): with beta2 0.999 and lr 1e-3 this model's loss
# jumps to 10 at step 15, where a TF32 run could part from the cpu run for that reason alone
TRAIN=(onnxpipe train --model "$W/gpt.onnx" --data "$W/text" --loss cross_entropy --logits logits --labels labels
       --batch 8 --optimizer adamw --lr 3e-4 --beta2 0.95 --clip-norm 1.0 --quiet)
step cpu-mpirun-dp2 90 mpirun --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
    "${TRAIN[@]}" --device cpu --dp 2 --steps 2
TRAIN_STEPS=50
[ $REHEARSE = 1 ] && TRAIN_STEPS=${GPU_CHECK_REHEARSE_STEPS:-5}
step cpu-train 120 env OPENBLAS_NUM_THREADS="$NPROC" "${TRAIN[@]}" --device cpu --steps $TRAIN_STEPS --losses "$W/cpu.losses"

# --- 4. the GPU parts
for t in "$R"/bin/test_*_gpu; do step "gpu-${t##*/}" 150 "$t"; done
PYREF=
for py in ${PP_REF_PYTHON:-} ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python3"} $(command -v -a python3 2>/dev/null || true) \
          /opt/*/bin/python3 /opt/*/{.venv,venv}/bin/python3 "$HOME/.cache/onnxpipe/venv/bin/python"; do
    if [ -x "$py" ] && env -u LD_LIBRARY_PATH "$py" -c 'import numpy, onnx' 2>/dev/null; then PYREF=$py; break; fi
done
# the test's reference comparison runs in Python (numpy, onnx) outside the bundle's libraries
cat >"$W/py" <<EOF
#!/usr/bin/env bash
[ -n "$PYREF" ] || { echo "skipped: trained on cuda but not compared: no python3 with numpy and onnx"; exit 77; }
exec env -u LD_LIBRARY_PATH "$PYREF" "\$@"
EOF
chmod +x "$W/py"
for t in "$R"/tests/test_*_gpu.sh; do
    name=gpu-$(basename "$t" .sh)
    step "$name" 240 env SRC_DIR="$R" BUILD_DIR="$W" ONNXPIPE="$R/bin/onnxpipe" PY="$W/py" \
        PP_TEXT_FILE="$R/data/GPL-3" bash "$t"
    # what a reference comparison printed (tests/ref/compare_runs.py)
    grep -hE "diff|^reference" "$LOGS/$name.log" | sed 's/^/== /' | tee -a "$SUMMARY" || true
done

# bench_gpu_step: the 12-layer GPT-2 small (124M parameters, T=1024), batch 32, which the
# stage planner puts at 56 GiB in fp32 and 42 GiB in bf16 (`onnxpipe partition --stages 1
# --device cuda`); half that batch where the GPU runs out of memory
bench() {  # PRECISION
    local b
    for b in 32 16; do
        step "gpu-bench-$1-b$b" 120 env PP_BENCH_LAYERS=12 PP_BENCH_BATCH=$b PP_BENCH_PRECISION="$1" bench_gpu_step
        grep -qiE "out of memory|ALLOC_FAILED" "$LOGS/gpu-bench-$1-b$b.log" || break
        [ "$b" = 16 ] && break
        FAILS=$((FAILS - 1))
        note "      gpu-bench-$1-b$b ran out of GPU memory: not counted, tried again with batch 16"
    done
    grep -h '"figure"' "$LOGS"/gpu-bench-"$1"-*.log | sed 's/^/== /' | tee -a "$SUMMARY" || true
}
bench fp32
bench bf16

# 50 steps on one GPU (TF32, as users run it) against the cpu run above: per-step losses
# within 2e-2 relative (TF32 rounds GEMM operands to 10 mantissa bits, ~5e-4 each; the
# loss is a mean over 512 tokens, and 50 AdamW steps let the difference grow a little;
# a wrong kernel moves the loss by far more or makes it NaN)
step gpu-train 120 "${TRAIN[@]}" --device cuda --steps $TRAIN_STEPS --losses "$W/cuda.losses"
if [ -s "$W/cuda.losses" ]; then
    cmp=$(awk 'NR == FNR {c[$1] = $2; next}
               {d = ($2 - c[$1]) / c[$1]; d = d < 0 ? -d : d; if (d > m) {m = d; at = $1}; n++; last = $2}
               END {printf "%d steps, max rel diff %.2e at step %d, final loss cpu %.4f cuda %.4f", n, m, at, c[n], last;
                    exit !(n == '$TRAIN_STEPS' && m <= 2e-2)}' "$W/cpu.losses" "$W/cuda.losses") && ok=PASS || ok=FAIL
    [ $ok = FAIL ] && FAILS=$((FAILS + 1))
    note "$(printf '%-5s %-26s        %s' $ok gpu-train-vs-cpu "$cmp")"
fi

# two GPUs: raw NCCL against pp_comm (the layout test above ran its pp=2 and dp=2 layouts)
step gpu-p2p-nccl 120 mpirun --oversubscribe --bind-to none -np 2 bench_gpu_p2p_nccl
grep -h '"bench"' "$LOGS/gpu-p2p-nccl.log" | grep -v skipped | sed 's/^/== /' | tee -a "$SUMMARY" || true

note "== $FAILS failed, $(( $(date +%s) - START ))s in all; logs in $LOGS"
[ $FAILS = 0 ]
