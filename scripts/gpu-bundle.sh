#!/usr/bin/env bash
# Packs what the GPU checks need into one folder that travels to a lent GPU machine (which
# has CUDA's libraries and glibc, and nothing else of ours: no Open MPI, protobuf-c, hwloc,
# OpenBLAS): the binaries, their data, every non-CUDA shared library they load, Open MPI
# with the components a singleton or a one-node mpirun needs, and the launcher
# (scripts/gpu-run.sh). docs/gpu.md says how to run it; scripts/gpu-check.sh runs it.
#
# usage: scripts/gpu-bundle.sh [--build DIR] [--out DIR] [--max-mib N] [--llama FILE | --no-llama]
#   --build DIR  pack from this CUDA build tree as it is built (the CI rehearsal packs the
#                test build, without the Llama model unless --llama names one); default:
#                build and pack build-bundle, Release for sm_90 + PTX, with the Llama model
#   --out DIR    the bundle folder (default gpu-bundle, git-ignored); replaced
#   --max-mib N  fail when the folder is larger (default 48: the device carry is 64 MiB)
#   --llama FILE the model bench_gpu_step's Llama lines train (models/llama.onnx in the
#                bundle); by default build-bundle/llama/llama.onnx, made once by
#                examples/export/export_model.py in the export venv (scripts/export-venv.sh):
#                an HF LlamaForCausalLM of random init, 12 layers, C 768, 12 heads, SwiGLU
#                2048, vocabulary 32000, T 1024, untied head (134M parameters, GPT-2 small's
#                size), with its matrices zeroed so that it packs to under a MiB (the bench
#                draws them again: bench_gpu_step MODEL 0.02); --no-llama leaves it out
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=
OUT=$SRC/gpu-bundle
MAX_MIB=48
LLAMA=default
while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=$(realpath "$2"); shift 2 ;;
        --out) OUT=$(realpath -m "$2"); shift 2 ;;
        --max-mib) MAX_MIB=$2; shift 2 ;;
        --llama) LLAMA=$(realpath "$2"); shift 2 ;;
        --no-llama) LLAMA=; shift ;;
        *) echo "gpu-bundle.sh: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
    esac
done
[ "$LLAMA" = default ] && { [ -n "$BUILD" ] && LLAMA= || LLAMA=$SRC/build-bundle/llama/llama.onnx; }

# the Llama model of the benchmark, exported once (a few minutes on a small machine)
make_llama() {  # OUT.onnx
    local venv dir
    dir=$(dirname "$1")
    mkdir -p "$dir"
    venv=$("$SRC/scripts/export-venv.sh" | tail -1)
    echo "gpu-bundle.sh: exporting the random-init Llama for bench_gpu_step into $1" >&2
    "$venv/bin/python" "$SRC/examples/export/export_model.py" --model llama --layers 12 --d-model 768 --heads 12 \
        --ffn 2048 --vocab 32000 --seq 1024 --batch 1 --exporter torchscript --no-check -o "$dir/full.onnx" >&2
    # the trained matrices (the recipe's metadata names the parameters) zeroed: they compress
    # to nothing, and the bench draws them again; norms and the rotary tables stay
    "$venv/bin/python" - "$dir/full.onnx" "$1" <<'EOF'
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
params = json.loads({p.key: p.value for p in m.metadata_props}["onnxpipe.parameters"])
zeroed = 0
for t in m.graph.initializer:
    if t.name in params and len(t.dims) >= 2:
        a = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(np.zeros_like(a), t.name))
        zeroed += a.size
onnx.save(m, sys.argv[2])
print(f"gpu-bundle.sh: {sys.argv[2]}: {zeroed} matrix elements zeroed", file=sys.stderr)
EOF
    rm -f "$dir/full.onnx"
}
if [ -n "$LLAMA" ] && [ ! -f "$LLAMA" ]; then
    [ "$LLAMA" = "$SRC/build-bundle/llama/llama.onnx" ] || { echo "gpu-bundle.sh: --llama $LLAMA: no such file" >&2; exit 1; }
    make_llama "$LLAMA"
fi

# the gpu-labelled test programs: names ending in _gpu, as CMakeLists.txt labels them
mapfile -t GPU_TESTS < <(cd "$SRC/tests" && ls test_*_gpu.c | sed 's/\.c$//')

if [ -z "$BUILD" ]; then
    BUILD=$SRC/build-bundle
    launch=()
    command -v ccache >/dev/null && launch=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    # "90": SASS for sm_90 (H100, H200) and compute_90 PTX, which the driver compiles for later chips
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 "${launch[@]}" >/dev/null
    cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target onnxpipe_cli bench_gpu_step bench_gpu_p2p_nccl "${GPU_TESTS[@]}" >/dev/null
fi

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
R=$STAGE/root
mkdir -p "$R"/{bin,lib/openmpi,lib/pmix,share/openmpi,share/pmix,etc,tests/ref,data,models}

# --- our binaries (debug info stripped: an ASan test build carries a lot of it)
# the gpu-labelled tests' programs into bin/, their scripts with the helpers they source or
# run into tests/
for b in onnxpipe bench_gpu_step bench_gpu_p2p_nccl "${GPU_TESTS[@]}"; do
    [ -x "$BUILD/$b" ] || { echo "gpu-bundle.sh: $BUILD/$b was not built (a CUDA build makes it; is nvcc found?)" >&2; exit 1; }
    strip --strip-debug -o "$R/bin/$b" "$BUILD/$b"
done
cp "$SRC/scripts/gpu-run.sh" "$R/run"
cp "$SRC"/tests/test_*_gpu.sh "$R/tests/"
cp -r "$SRC/tests/lib" "$R/tests/"
cp "$SRC"/tests/ref/*.py "$R/tests/ref/"
cp /usr/share/common-licenses/GPL-3 "$R/data/"
[ -z "$LLAMA" ] || cp "$LLAMA" "$R/models/llama.onnx"

# --- Open MPI and PMIx, from the folders this machine's installation reports
ompi_path() { ompi_info --path "$1" | sed 's/.*: *//'; }
OMPI_PKGLIB=$(ompi_path pkglibdir)
cp "$(readlink -f "$(command -v orterun || command -v mpirun)")" "$R/bin/mpirun"
cp "$(readlink -f "$(ompi_path bindir)/orted")" "$R/bin/orted"
cp -r "$(ompi_path pkgdatadir)"/. "$R/share/openmpi/"
cp "$(ompi_path sysconfdir)/openmpi-default-hostfile" "$R/etc/"
# Components: all but those for fabrics a one-node job never uses (and whose libraries
# are large): UCX, libfabric (ofi), verbs (openib), PSM, and the Java and Lustre bits.
FABRIC_LIBS='libuc[pst]|libfabric|libibverbs|librdmacm|libpsm|libjvm|liblustre|libcuda\.so'
for c in "$OMPI_PKGLIB"/*.so; do
    ldd "$c" | grep -qE "$FABRIC_LIBS" || cp "$c" "$R/lib/openmpi/"
done
# The tcp, shared-memory and self transports only; the fabrics' components are not here.
cat >"$R/etc/openmpi-mca-params.conf" <<'EOF'
# onnxpipe GPU bundle (scripts/gpu-bundle.sh): one node, shared memory and TCP
btl = self,vader,tcp
pml = ob1
mtl = ^ofi
osc = sm,rdma
# no cross-memory attach: sandboxed machines (gVisor) may refuse process_vm_readv
btl_vader_single_copy_mechanism = none
btl_base_warn_component_unused = 0
EOF
PMIX_LIB=$(dirname "$(readlink -f "$(ldd "$OMPI_PKGLIB"/mca_pmix_ext*.so | awk '/libpmix\.so/ {print $3; exit}')")")
cp "$PMIX_LIB"/pmix/*.so "$R/lib/pmix/"
cp -r "$PMIX_LIB"/../share/pmix/. "$R/share/pmix/"

# --- every shared library the ELF files above load, except the system's C and C++
# runtimes (glibc, libstdc++, libgcc_s: on every Linux, and a copy older than the
# machine's could break its CUDA libraries) and CUDA's (the GPU machine's own). ldd
# resolves against the bundle first, so one pass per new library. root/system-libs.txt
# is the first list, for gpu-check.sh's library check.
SYSTEM='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libutil\.so|libresolv\.so|libanl\.so|libstdc\+\+\.so|libgcc_s\.so)'
echo "$SYSTEM" >"$R/system-libs.txt"
CUDA='^lib(cublas|cublasLt|cudnn[a-z_]*|nccl|cuda|cudart|nvrtc|nvJitLink)\.so'
: >"$STAGE/cuda-needed"
todo=("$R"/bin/* "$R"/lib/openmpi/*.so "$R"/lib/pmix/*.so)
while [ ${#todo[@]} -gt 0 ]; do
    next=()
    for f in "${todo[@]}"; do
        while read -r soname path; do
            if [[ $soname =~ $SYSTEM ]]; then continue; fi
            if [[ $soname =~ $CUDA ]]; then echo "$soname" >>"$STAGE/cuda-needed"; continue; fi
            [ -e "$R/lib/$soname" ] && continue
            [ -e "$path" ] || { echo "gpu-bundle.sh: $f needs $soname, which this machine lacks" >&2; exit 1; }
            cp -L "$path" "$R/lib/$soname"
            next+=("$R/lib/$soname")
        done < <(LD_LIBRARY_PATH=$R/lib ldd "$f" | awk '$2 == "=>" {print $1, $3}')
    done
    todo=("${next[@]+"${next[@]}"}")
done
# and those the binary dlopens (cuBLAS, on the first CUDA device: cmake/cuda.cmake lists them)
cat "$BUILD/cuda-dlopen.txt" >>"$STAGE/cuda-needed"
sort -u "$STAGE/cuda-needed" >"$R/cuda-needed.txt"

# --- what was packed, for the summary
{
    echo "commit $(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD -- . ':!gpu-bundle' || echo '+changes')"
    echo "build $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt") sanitize=$(sed -n 's/^PP_SANITIZE:BOOL=//p' "$BUILD/CMakeCache.txt")" \
         "cuda_arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
    nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)
    echo "nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    for v in GLIBC GLIBCXX; do
        echo "$v needed $(find "$R" \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null |
                         grep -o "${v}_[0-9.]*" | sort -uV | tail -1 | sed "s/${v}_//" | grep . || echo none)"
    done
    echo "built on glibc $(ldd --version | sed -n '1s/.* //p')"
} >"$R/BUILD-INFO"

# every file, for `run --check` (all there) and the rehearsal (which system copies to hide)
(cd "$R" && find . -type f | sort) >"$STAGE/MANIFEST" && mv "$STAGE/MANIFEST" "$R/"

rm -rf "$OUT"
mkdir -p "$OUT"
tar -C "$STAGE" -czf "$OUT/payload.tar.gz" root
cp "$SRC/scripts/gpu-check.sh" "$OUT/"
mib=$(du -sm "$OUT" | cut -f1)
echo "gpu bundle: $OUT, $(du -sh "$OUT" | cut -f1) ($(du -sh "$R" | cut -f1) unpacked; $(find "$R" -type f | wc -l) files)"
echo "  $(tr '\n' ' ' <"$R/BUILD-INFO")"
echo "  CUDA libraries taken from the GPU machine: $(tr '\n' ' ' <"$R/cuda-needed.txt")"
if [ "$mib" -gt "$MAX_MIB" ]; then
    echo "gpu-bundle.sh: the bundle is $mib MiB, over the $MAX_MIB MiB limit (the device carry is 64 MiB with the tree)" >&2
    exit 1
fi
