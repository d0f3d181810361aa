#!/usr/bin/env bash
# One training job across two real hosts: network namespaces h1 and h2 (shared/MULTIHOST.md)
# with 2 ranks each, talking TCP over a bridge. Placement must see 2 hosts, and
# pp=2 x dp=2 must give the single-rank losses. Needs root and ip netns; exit 77 (skipped)
# where namespaces cannot be made.
set -uo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}" "${PY:?}"
OUT=$BUILD_DIR/test-out/multihost
rm -rf "$OUT"
mkdir -p "$OUT"
N=2
BR=br-pp$$
cleanup() {
    for i in $(seq 1 $N); do
        pids=$(ip netns pids h$$-$i 2>/dev/null); [ -n "$pids" ] && kill -9 $pids
        ip link del veth$$-$i 2>/dev/null
        ip netns del h$$-$i 2>/dev/null
    done
    ip link del $BR 2>/dev/null
    rm -rf /dev/shm/vader_segment.h$$-* /tmp/ompi.h$$-*.* 2>/dev/null
}
trap cleanup EXIT
if ! ip link add $BR type bridge 2>/dev/null; then
    echo "SKIPPED: cannot create network namespaces here (needs root and ip netns)"
    exit 77
fi
ip addr add 10.77.$(( $$ % 200 )).1/24 dev $BR && ip link set $BR up || exit 1
NET=10.77.$(( $$ % 200 ))
for i in $(seq 1 $N); do
    ip netns add h$$-$i && ip link add veth$$-$i type veth peer name eth0 netns h$$-$i &&
    ip link set veth$$-$i master $BR up && ip -n h$$-$i addr add $NET.1$i/24 dev eth0 &&
    ip -n h$$-$i link set eth0 up && ip -n h$$-$i link set lo up || exit 1
done
cat > "$OUT/nsrsh" <<NSEOF
#!/bin/sh
# nsrsh HOST COMMAND...: run COMMAND in the namespace that plays HOST, under its own hostname
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host=\$1; shift
ns=h$$-\${host#$NET.1}
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1"; shift; exec sh -c "\$*"' nsrsh "\$ns" "\$@"
NSEOF
chmod +x "$OUT/nsrsh"
for i in $(seq 1 $N); do echo "$NET.1$i slots=2"; done > "$OUT/hosts"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null || exit 1
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null || exit 1
args=(train --model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels
      --batch 16 --microbatches 2 --steps 10 --optimizer adamw --lr 3e-3)
"$ONNXPIPE" "${args[@]}" --quiet --losses "$OUT/ref.losses" >/dev/null || exit 1
timeout 180 mpirun --hostfile "$OUT/hosts" -np 4 --bind-to none \
    --mca plm_rsh_agent "$OUT/nsrsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,vader,self --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 \
    -x OPENBLAS_NUM_THREADS -x PATH "$ONNXPIPE" "${args[@]}" --pp 2 --dp 2 --losses "$OUT/mh.losses" \
    >"$OUT/mh.log" 2>&1
rc=$?
grep -E "placement|host|^ +[0-9]+ +h" "$OUT/mh.log" | head -12
if [ $rc -ne 0 ]; then tail -20 "$OUT/mh.log"; echo "FAIL: the two-host job exited with $rc"; exit 1; fi
grep -q "on 2 hosts" "$OUT/mh.log" || { echo "FAIL: placement did not see 2 hosts"; exit 1; }
"$PY" - "$OUT/ref.losses" "$OUT/mh.losses" <<'PYEOF'
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"2 hosts x 2 ranks (pp=2, dp=2) vs one process, {len(a)} steps: max relative loss diff {rel:.2e}")
sys.exit(0 if len(a) == len(b) and rel <= 1e-5 else 1)
PYEOF
