#!/usr/bin/env bash
# `onnxpipe place --job --bind` under mpirun -np 2, as train places itself: the job's
# hosts from the shared-memory split, one plan on every rank, and binding that leaves
# mpirun's binding alone, stays off under --bind-to none, and applies with PP_BIND=force.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/place_mpi
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun -np 2 --oversubscribe)
ARGS=(place --pp 2 --dp 1 --param-bytes 1000 --send-bytes 10 --job)

"${MPIRUN[@]}" "$ONNXPIPE" "${ARGS[@]}" --json >plan.json
python3 - <<'PYEOF'
import json
d = json.load(open("plan.json"))   # printed once, by rank 0
assert len(d["hosts"]) == 1 and [r["host"] for r in d["ranks"]] == [0, 0], d
assert [r["local"] for r in d["ranks"]] == [0, 1]
assert d["traffic"]["stage-major"]["pipe_bytes"] == 2 * 10 * 2   # 2 x send x microbatches (default pp)
print("ok: one host, ranks local 0 and 1, pipe bytes", d["traffic"]["stage-major"]["pipe_bytes"])
PYEOF

"${MPIRUN[@]}" --bind-to core "$ONNXPIPE" "${ARGS[@]}" --bind >core.txt
cat core.txt
[ "$(grep -c 'already bound' core.txt)" -ge 2 ] || { echo "mpirun's binding not reported" >&2; exit 1; }

"${MPIRUN[@]}" --bind-to none "$ONNXPIPE" "${ARGS[@]}" --bind >none.txt
cat none.txt
[ "$(grep -c 'not bound, .*binding off' none.txt)" -eq 2 ] || { echo "--bind-to none not respected" >&2; exit 1; }

PP_BIND=force "${MPIRUN[@]}" -x PP_BIND "$ONNXPIPE" "${ARGS[@]}" --bind >force.txt
cat force.txt
for r in 0 1; do
    planned=$(python3 -c "import json; print(json.load(open('plan.json'))['ranks'][$r]['cpus'])")
    grep -q "^rank $r (.*): bound, cores $planned: bound to planned cores $planned" force.txt ||
        { echo "rank $r not bound to its planned cores $planned" >&2; exit 1; }
done
echo "ok: PP_BIND=force binds each rank to its planned cores"

if "${MPIRUN[@]}" "$ONNXPIPE" place --pp 3 --dp 1 --param-bytes 1 --job >bad.txt 2>&1; then
    echo "expected failure for pp 3 on 2 ranks" >&2
    exit 1
fi
grep -q "onnxpipe: error: --pp 3 x --dp 1 = 3 ranks, but the job has 2" bad.txt
echo "ok: wrong rank count fails clearly"
