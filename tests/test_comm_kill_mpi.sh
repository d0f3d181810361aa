# A rank that dies mid-exchange ends the job: 3 ranks trade 1 MiB messages in a ring
# until rank 1 kills itself with SIGKILL; mpirun must exit non-zero within 30 s (not
# hang) and say which rank was lost.
set -uo pipefail
: "${BUILD_DIR:?}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s.%N)
timeout 60 mpirun --allow-run-as-root --oversubscribe --mca orte_tmpdir_base "$tmp" -np 3 \
    -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS "$BUILD_DIR/test_comm" --kill-rank 1 >"$tmp/out" 2>&1
rc=$?
t1=$(date +%s.%N)
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
cat "$tmp/out"
echo "mpirun exit status $rc after $elapsed s"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "mpirun exited 0 although rank 1 was killed"
[ "$rc" -ne 124 ] || fail "mpirun still ran after 60 s: the job hung"
awk -v e="$elapsed" 'BEGIN { exit !(e < 30) }' || fail "the job took $elapsed s to end (limit 30 s)"
grep -q "killing myself" "$tmp/out" || fail "rank 1 never reached the kill"
grep -Eq "process rank 1 .*(signal 9|Killed)" "$tmp/out" || fail "the output does not name the lost rank 1"
echo "ok: the job ended with status $rc in $elapsed s and named rank 1"
