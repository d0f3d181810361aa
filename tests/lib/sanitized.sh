#!/usr/bin/env bash
# Runs one test of the sanitizer build (ctest calls every test through it, CMakeLists.txt)
# with the AddressSanitizer, LeakSanitizer and UBSan reports of all its processes written
# to files, and fails the test when there is any, printing them: a report from a command
# that the test expects to fail, or from a process whose output it does not show, fails it
# all the same. Adds the CPU seconds of the test's processes to BUILD_DIR/Testing/cpu.txt
# ("NAME SECONDS" a line; scripts/test.sh prints the largest).
# usage: sanitized.sh NAME COMMAND [ARGS...]
set -u
name=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/pp-sanitizer.XXXXXX") || exit 1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$dir/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$dir/ubsan:print_stacktrace=1"
"$@"
rc=$?
# The report with each frame "(module+0xoffset)" followed by addr2line's "function at
# file:line": the tests run ASan and LSan with symbolize=0 (tests/lib/keep_loaded.c).
symbolized() {
    local line
    while IFS= read -r line; do
        if [[ $line =~ \#([0-9]+)\ .*\((/[^+\)]+)\+0x([0-9a-f]+)\) ]]; then
            local pc=$((16#${BASH_REMATCH[3]}))
            [ "${BASH_REMATCH[1]}" = 0 ] || pc=$((pc - 1))   # a return address: the call is before it
            line+=" $(addr2line -f -C -p -e "${BASH_REMATCH[2]}" "$(printf '0x%x' "$pc")" 2>/dev/null)"
        fi
        printf '%s\n' "$line"
    done <"$1"
}
reports=("$dir"/*)
if [ -e "${reports[0]}" ]; then
    echo "FAILED: ${#reports[@]} sanitizer report(s) from this test's processes (tests/lsan.supp lists what is not ours):"
    for f in "${reports[@]}"; do
        echo "== ${f##*/} (the process id)"
        symbolized "$f"
    done
    rc=1
fi
rm -rf "$dir"
# bash's times, in this shell (a pipe would run it in a subshell): the shell's, then its
# children's "user sys" (e.g. 1m2.500s 0m0.250s)
times >"$dir.times"
cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, /m|s/); s += t[1] * 60 + t[2] } } END { printf "%.1f", s }' "$dir.times")
rm -f "$dir.times"
[ -n "${BUILD_DIR:-}" ] && mkdir -p "$BUILD_DIR/Testing" && echo "$name $cpu" >>"$BUILD_DIR/Testing/cpu.txt"
exit "$rc"
