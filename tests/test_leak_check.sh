#!/usr/bin/env bash
# The sanitizer build's leak check can fail: tests/lib/leak_probe.c leaks 4242 bytes of its
# own after MPI_Init and MPI_Finalize, run alone (a singleton) and as 2 ranks of mpirun,
# each through tests/lib/sanitized.sh with the tests' ASAN and LSAN options. Each run must
# fail with exactly one report per process, that names the probe's own leak, its function
# and file:line (symbolized by sanitized.sh), and no other leak: Open MPI's, PMIx's and the
# binding report's (tests/lsan.supp, tests/lib/keep_loaded.c) stay suppressed, and are
# reported when the suppressions are left out.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
PROBE=$BUILD_DIR/pp_leak_probe
if [ ! -x "$PROBE" ]; then
    echo "skipped: not the sanitizer build (PP_SANITIZE=OFF builds no pp_leak_probe)"
    exit 77
fi
OUT=$BUILD_DIR/test-out/leak_check
rm -rf "$OUT"
mkdir -p "$OUT"
line=$(grep -n "sink = malloc(n);" "$SRC_DIR/tests/lib/leak_probe.c" | cut -d: -f1)
[ -n "$line" ] || { echo "FAIL tests/lib/leak_probe.c has no line 'sink = malloc(n);' to find in the reports"; exit 1; }
fail=0
check() {  # DESCRIPTION CONDITION...
    if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
probe() {  # TAG PROCESSES COMMAND...
    local tag=$1 n=$2
    shift 2
    # BUILD_DIR unset: the probe's CPU seconds are not a test's (Testing/cpu.txt)
    BUILD_DIR= bash "$SRC_DIR/tests/lib/sanitized.sh" leak_probe "$@" >"$OUT/$tag.log" 2>&1
    local rc=$?
    echo "--- $tag: exit $rc; the reports' leak lines and the probe's frame:"
    grep -E "leak of|leak_probe_lost" "$OUT/$tag.log" | sed 's/^/    /'
    check "$tag: the check fails the run (exit $rc)" [ "$rc" = 1 ]
    check "$tag: $n report(s), one per process" \
        [ "$(grep -c '^== asan\.' "$OUT/$tag.log")" = "$n" ]
    check "$tag: $n leak(s) in all, each the probe's 4242 bytes" \
        [ "$(grep -c 'leak of' "$OUT/$tag.log")" = "$n" -a \
          "$(grep -c 'Direct leak of 4242 byte(s) in 1 object(s)' "$OUT/$tag.log")" = "$n" ]
    check "$tag: frame #1 named leak_probe_lost at leak_probe.c:$line" \
        [ "$(grep -cE "#1 .*leak_probe_lost at .*tests/lib/leak_probe\.c:$line\b" "$OUT/$tag.log")" = "$n" ]
    [ "$fail" = 0 ] || cat "$OUT/$tag.log"
}
probe singleton 1 "$PROBE"
probe mpirun 2 mpirun --oversubscribe --bind-to none -np 2 "$PROBE"
# the suppressions are what hide Open MPI's leaks: without them the singleton reports more
LSAN_OPTIONS= BUILD_DIR= bash "$SRC_DIR/tests/lib/sanitized.sh" leak_probe "$PROBE" >"$OUT/unsuppressed.log" 2>&1
others=$(grep 'leak of' "$OUT/unsuppressed.log" | grep -vc 'Direct leak of 4242 byte')
echo "--- without tests/lsan.supp the singleton reports $others leak(s) beside the probe's"
check "without tests/lsan.supp: leaks of MPI_Init's reported too" [ "$others" -gt 0 ]
exit "$fail"
