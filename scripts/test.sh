#!/usr/bin/env bash
# `make test`'s run of the suite on a built test tree: ctest on every test but the rest of
# the model zoo (label zoo: test_zoo_full_mpi), the ten slowest tests, then that rest when
# the time left in the budget holds it (its last measured time, or 10 minutes before it
# has one), and one closing line counting both runs.
# usage: test.sh BUILD_DIR JOBS BUDGET_S START_EPOCH_S   (BUDGET_S 0: the zoo's rest never)
set -uo pipefail
build=$1 jobs=$2 budget=$3 start=$4
log=$build/Testing/make-test.log
mkdir -p "$build/Testing"
rm -f "$build/Testing/cpu.txt"   # the CPU seconds per test, from tests/lib/sanitized.sh
ctest --test-dir "$build" -LE zoo -j"$jobs" --output-on-failure | tee "$log"
rc=${PIPESTATUS[0]}

# "  3/97 Test #12: test_name ........   Passed   12.34 sec" -> "12.34 test_name"
times() { sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/p' "$@"; }
echo
echo "the ten slowest tests: wall and CPU seconds (all its processes; a loaded machine stretches the wall)"
times "$log" | sort -rn | head -n 10 | while read -r wall name; do
    cpu=$(awk -v n="$name" '$1 == n { print $2 }' "$build/Testing/cpu.txt" 2>/dev/null | tail -n 1)
    printf "  %7.1f  %7s  %s\n" "$wall" "${cpu:--}" "$name"
done

zoo_log=$build/Testing/make-test-zoo.log
: >"$zoo_log"
if [ "$budget" -gt 0 ]; then
    # ctest's record of each test's last time: "name runs seconds"
    est=$(awk '$1 == "test_zoo_full_mpi" { printf "%d", $3 }' "$build/Testing/Temporary/CTestCostData.txt" 2>/dev/null)
    est=${est:-600}
    elapsed=$(($(date +%s) - start))
    if [ $((elapsed + est)) -le "$budget" ]; then
        echo
        echo "the rest of the model zoo: ${elapsed} s so far, about ${est} s more, within the ${budget} s budget"
        ctest --test-dir "$build" -L zoo --output-on-failure | tee "$zoo_log"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    else
        echo "the rest of the model zoo (make test-zoo) left out: ${elapsed} s so far + about ${est} s > the ${budget} s budget"
    fi
fi

passed=$(grep -cE ' Test +#[0-9]+: .* Passed ' "$log" "$zoo_log" | awk -F: '{ n += $2 } END { print n }')
skipped=$(grep -cE ' Test +#[0-9]+: .*\*\*\*(Skipped|Not Run)' "$log" "$zoo_log" | awk -F: '{ n += $2 } END { print n }')
failed=$(grep -cE ' Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$log" "$zoo_log" | awk -F: '{ n += $2 } END { print n }')
echo "tests: $passed passed, $failed failed, $skipped skipped ($(($(date +%s) - start)) s with setup and build)"
exit "$rc"
