# test_comm and test_grid on 4 ranks (every (pp, dp) of 4, both orders) and test_grid
# on 3, under mpirun; each program checks on every rank and aborts the job on failure.
set -euo pipefail
: "${BUILD_DIR:?}"
# a private session directory, so concurrent jobs on this host do not race on /tmp/ompi.*
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
    local np=$1; shift
    echo "== mpirun -np $np $*"
    mpirun --allow-run-as-root --oversubscribe --mca orte_tmpdir_base "$tmp" -np "$np" \
        -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS "$@"
}
run 4 "$BUILD_DIR/test_comm"
run 4 "$BUILD_DIR/test_grid"
run 3 "$BUILD_DIR/test_grid"
