#!/usr/bin/env bash
# The GPU checks, run from the bundle folder that scripts/gpu-bundle.sh made (it copies
# this file there): libraries, versions, the gpu-labelled tests, bench_gpu_step (fp32/TF32
# and bf16 at microbatches 8, 16, 32: GPT-2 small, and the Llama export the bundle carries),
# 50 steps of the example GPT on cuda against the cpu (TF32 and bf16; the graph step
# against eager launches), a --profile-steps run's top kernels by CUDA-event time, and the
# NCCL checks where there are two GPUs. Each step has its own timeout and the whole stays
# under 6 minutes on a 16-core machine; a summary and one log per step land in OUTDIR, and
# the summary ends with one table of the figures.
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
    # kept: a sanitizer build's options (its leak suppressions, and the test helper that keeps
    # Open MPI's components mapped so LeakSanitizer can name them: tests/lib/keep_loaded.c),
    # and CUDA_VISIBLE_DEVICES (the tests hide a GPU host's GPUs)
    RUN=(env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR=/tmp "${BASE_ENV[@]}" ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"}
         ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} ${LSAN_OPTIONS:+LSAN_OPTIONS="$LSAN_OPTIONS"}
         ${LD_PRELOAD:+LD_PRELOAD="$LD_PRELOAD"} ${CUDA_VISIBLE_DEVICES+CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"} "$R/run")
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
        nodev=$(grep -m1 -o 'no CUDA device[^"]*' "$LOGS/$name.log" | cut -c1-120 || true)
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

# bench_gpu_step: GPT-2 small (12 layers, C 768, T 1024, 124M parameters) built in memory,
# and the random-init HF Llama export the bundle carries (models/llama.onnx: its matrices
# zeroed so that it packs small, drawn again from N(0, 0.02^2) by the bench), each at
# microbatches 8, 16 and 32 in one process per precision (a configuration that runs out of
# memory prints an error line and fails the step)
BENCH=(env PP_BENCH_STEPS="${GPU_CHECK_BENCH_STEPS:-6}" PP_BENCH_BATCHES=8,16,32)
for p in fp32 bf16; do step "gpu-bench-gpt2-$p" 150 "${BENCH[@]}" PP_BENCH_PRECISIONS=$p bench_gpu_step; done
if [ -f "$R/models/llama.onnx" ]; then
    for p in fp32 bf16; do
        step "gpu-bench-llama-$p" 150 "${BENCH[@]}" PP_BENCH_PRECISIONS=$p bench_gpu_step "$R/models/llama.onnx" 0.02
    done
else
    note "      (no models/llama.onnx in this bundle: gpu-bundle.sh --llama makes it)"
fi

# 50 steps on one GPU (TF32, as users run it; one graph a step from step 2) against the cpu
# run above: per-step losses within 2e-2 relative (TF32 rounds GEMM operands to 10 mantissa
# bits, ~5e-4 each; the loss is a mean over 512 tokens, and 50 AdamW steps let the
# difference grow a little; a wrong kernel moves the loss by far more or makes it NaN); the
# same run with every kernel launched eagerly (PP_CUDA_GRAPHS=0) gives the graph's losses;
# and bf16 on both devices within 1e-2 (both round the same tensors to bfloat16; the GPU's
# GEMMs accumulate in another order)
compare() {  # NAME A B TOLERANCE: per-step relative differences of two --losses files
    local cmp ok
    [ -s "$2" ] && [ -s "$3" ] || return 0
    # a loss that is no finite number (nan, inf: what a broken kernel gives) or a step the
    # other file lacks fails whatever the tolerance: NaN compares false with every maximum
    cmp=$(awk -v tol="$4" 'NR == FNR {c[$1] = $2; next}
               {n++; last = $2}
               !($1 in c) || c[$1] !~ /^-?[0-9]/ || $2 !~ /^-?[0-9]/ || c[$1] == 0 {if (!bad++) badat = $1; next}
               {d = ($2 - c[$1]) / c[$1]; d = d < 0 ? -d : d; if (d > m) {m = d; at = $1}}
               END {printf "%d steps, max rel diff %.2e at step %d, final loss %.4f vs %.4f", n, m, at, c[n], last;
                    if (bad) printf "; %d steps not finite, in one file only or 0 in the first, the first step %d", bad, badat
                    exit !(n == '$TRAIN_STEPS' && m <= tol && !bad)}' "$2" "$3") && ok=PASS || ok=FAIL
    [ $ok = FAIL ] && FAILS=$((FAILS + 1))
    note "$(printf '%-5s %-26s        %s (tolerance %s)' $ok "$1" "$cmp" "$4")"
}
step gpu-train 120 "${TRAIN[@]}" --device cuda --steps $TRAIN_STEPS --losses "$W/cuda.losses"
compare gpu-train-vs-cpu "$W/cpu.losses" "$W/cuda.losses" 2e-2
step gpu-train-eager 120 env PP_CUDA_GRAPHS=0 "${TRAIN[@]}" --device cuda --steps $TRAIN_STEPS --losses "$W/eager.losses"
compare gpu-graph-vs-eager "$W/eager.losses" "$W/cuda.losses" 1e-6
step cpu-train-bf16 180 env OPENBLAS_NUM_THREADS="$NPROC" "${TRAIN[@]}" --precision bf16 --device cpu \
    --steps $TRAIN_STEPS --losses "$W/cpu-bf16.losses"
step gpu-train-bf16 120 "${TRAIN[@]}" --precision bf16 --device cuda --steps $TRAIN_STEPS --losses "$W/cuda-bf16.losses"
compare gpu-bf16-vs-cpu "$W/cpu-bf16.losses" "$W/cuda-bf16.losses" 1e-2

# where a step's time goes: GPT-2 small in bf16, microbatch 8, steps 3 and 4 profiled (each
# kernel timed by a pair of CUDA events); the probe (one step of the small GPT) first, so a
# machine without a GPU skips before writing the 500 MB model
step gpu-profile 150 bash -c 'w=$1 text=$2; shift 2
    "$@" --device cuda --steps 1 --quiet &&
    onnxpipe example gpt --layers 12 --d-model 768 --heads 12 --vocab 50304 --seq 1024 -o "$w/gpt2.onnx" &&
    onnxpipe data text "$text" -o "$w/text1024" --seq 1024 &&
    onnxpipe train --model "$w/gpt2.onnx" --data "$w/text1024" --loss cross_entropy --logits logits --labels labels \
        --batch 8 --steps 4 --precision bf16 --device cuda --profile-steps 3:4 --profile "$w/profile.json"' \
    _ "$W" "$R/data/GPL-3" "${TRAIN[@]}"

# two GPUs: raw NCCL against pp_comm (the layout test above ran its pp=2 and dp=2 layouts);
# with one GPU the bench says so and the step skips
step gpu-p2p-nccl 120 mpirun --oversubscribe --bind-to none -np 2 bench_gpu_p2p_nccl
grep -h '"bench"' "$LOGS/gpu-p2p-nccl.log" 2>/dev/null | grep -v skipped | sed 's/^/== /' | tee -a "$SUMMARY" || true

# --- 5. one table of the figures; where a step gave none of its figures, the table says
# why with the step's line of the summary (a skip, a failure, out of time)
why() {  # STEP: its line in the summary, less the status
    local l
    l=$(grep -m1 -E "^[A-Z]+ +$1 " "$SUMMARY" | cut -c7-120 || true)
    echo "${l:-$1: not run}"
}
{
    echo "== the figures"
    cases=$(grep -ho "[0-9]* of [0-9]* cases differ" "$LOGS/gpu-test_cuda_gpu.log" 2>/dev/null | head -1 || true)
    if [ -n "$cases" ]; then
        echo "$cases" | awk '{printf "op cases (test_cuda_gpu)          %d passed, %d failed\n", $3 - $1, $1}'
    else
        echo "op cases (test_cuda_gpu)          not counted: $(why gpu-test_cuda_gpu)"
    fi
    echo "layouts (test_layout_cuda_gpu)"
    rows=$(grep -h "loss rel diff" "$LOGS"/gpu-test_layout_*.log 2>/dev/null || true)
    if [ -n "$rows" ]; then echo "$rows" | sed 's/^ */  /'; else echo "  not compared: $(why gpu-test_layout_cuda_gpu)"; fi
    echo "bench_gpu_step (tokens/s; MFU of 989.5 TFLOP/s in llm.c's 6N+6LCT and PaLM's 6N+12LCT forms)"
    printf '  %-14s %-9s %5s %10s %9s %9s  %s\n' model precision batch tokens/s "MFU llm.c" "MFU PaLM" steps
    cat "$LOGS"/gpu-bench-*.log 2>/dev/null | awk '
        function num(x, w, d) { return x == "" ? sprintf("%" w "s", "-") : sprintf("%" w "." d "f", x) }
        /"figure":"tokens_per_s"/ || /"figure":"mfu"/ || /"error"/ {
            match($0, /"model":"[^"]*"/); m = substr($0, RSTART + 9, RLENGTH - 10)
            match($0, /"precision":"[^"]*"/); p = substr($0, RSTART + 13, RLENGTH - 14)
            match($0, /"batch":[0-9]*/); b = substr($0, RSTART + 8, RLENGTH - 8)
            k = m " " p " " b; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
            match($0, /"value":[-0-9.e+]*/); v = substr($0, RSTART + 8, RLENGTH - 8)
            if ($0 ~ /"error"/) { match($0, /"error":"[^"]*"/); err[k] = substr($0, RSTART + 9, RLENGTH > 70 ? 60 : RLENGTH - 10) }
            else if ($0 ~ /tokens_per_s/) tps[k] = v
            else if ($0 ~ /6LCT/) m6[k] = v
            else m12[k] = v
            if (match($0, /"steps":"[^"]*"/)) st[k] = substr($0, RSTART + 9, RLENGTH - 10)
        }
        END { for (i = 0; i < n; i++) { k = order[i]; split(k, f, " ")
                  if (k in err) printf "  %-14s %-9s %5s  error: %s\n", f[1], f[2], f[3], err[k]
                  else printf "  %-14s %-9s %5s %s %s %s  %s\n", f[1], f[2], f[3], num(tps[k], 10, 0), num(m6[k], 9, 4),
                              num(m12[k], 9, 4), substr(st[k], 1, 48) } }' || true
    # a bench step with no line of figures (skipped, timed out, failed before its first)
    for s in $(grep -oE '^[A-Z]+ +gpu-bench-[^ ]+' "$SUMMARY" | awk '{print $2}' || true); do
        grep -qE '"figure":"tokens_per_s"|"error":' "$LOGS/$s.log" 2>/dev/null || echo "  no figures: $(why "$s")"
    done
    echo "top 10 kernels by CUDA-event time (GPT-2 small, bf16, microbatch 8, steps 3-4)"
    rows=$(sed -n '/^op type (all ranks)/,/^$/{/^$/d;p}' "$LOGS/gpu-profile.log" 2>/dev/null | head -11 || true)
    if [ -n "$rows" ]; then echo "$rows" | sed 's/^/  /'; else echo "  not profiled: $(why gpu-profile)"; fi
} | tee -a "$SUMMARY"

note "== $FAILS failed, $(( $(date +%s) - START ))s in all; logs in $LOGS"
[ $FAILS = 0 ]
