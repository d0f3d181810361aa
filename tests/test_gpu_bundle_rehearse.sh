#!/usr/bin/env bash
# The GPU bundle's rehearsal (docs/gpu.md): scripts/gpu-bundle.sh packs this build tree's
# binaries with every non-CUDA library they load and a relocated Open MPI, and the packed
# scripts/gpu-check.sh runs them with a scrubbed environment (env -i, only the bundle and
# the CUDA libraries on the library path) and, as root, with this machine's copies of the
# bundled libraries and of Open MPI hidden. Passes when every ELF file resolves every
# library from the bundle, CUDA or the C/C++ runtime, the cpu steps (singleton and
# two-rank mpirun training) pass and every GPU step skips with "no CUDA device".
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
OUT=$BUILD_DIR/test-out/gpu-bundle
rm -rf "$OUT"
mkdir -p "$OUT"
if [ ! -x "$BUILD_DIR/bench_gpu_p2p_nccl" ]; then
    echo "skipped: this build has no CUDA backend (no nvcc), so there is nothing to bundle"
    exit 77
fi
# the test build carries sanitizer runtimes and larger binaries: no size limit here (the
# Release bundle's 48 MiB limit is gpu-bundle.sh's default)
"$SRC_DIR/scripts/gpu-bundle.sh" --build "$BUILD_DIR" --out "$OUT/bundle" --max-mib 1000
GPU_CHECK_REHEARSE_STEPS=3 GPU_CHECK_DEADLINE_S=900 "$OUT/bundle/gpu-check.sh" --rehearse "$OUT/check" || {
    for f in "$OUT"/check/logs/*.log; do echo "== $f"; tail -n 20 "$f"; done
    exit 1
}
