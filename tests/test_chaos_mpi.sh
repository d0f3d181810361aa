#!/usr/bin/env bash
# What a cluster does to a long job, in rounds on one save directory (issue 25): a pp 2 x
# dp 2 job of the example GPT saving every step is
# - owned by one job: a second live job is refused naming the owner, a third waits for it
#   to end (preempted) and then trains, and a job whose lock file another job took over
#   stops writing;
# - killed (kill -9 of a random rank or of mpirun) at a random moment, 6 times, each time
#   resubmitted at once into the same directory while the old ranks may still live (the new
#   job waits for the lock); with the default seed mpirun is killed twice and a rank four
#   times, two jobs wait for a killed one's ranks and the others take its lock over (10
#   rounds covered nothing more and took 17 s longer);
# - preempted once (SIGTERM to one rank: every rank finishes the step, saves, exit 75);
# - starved once of disk space (the save directory is a small tmpfs, filled up: the saves
#   fail with a warning, training goes on, the next save after space comes back commits);
# and a last job trains to the end. Every round: no job ended on its own (each was alive
# when it was killed) or was refused by the lock, and `latest` names a checkpoint that
# `ckpt verify` accepts. Then an uninterrupted run of as many steps: every loss any round
# printed equals its loss of that step, bit for bit, and so does the final model.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}" "${ONNXPIPE:?}"
OUT=$BUILD_DIR/test-out/chaos
umount "$OUT/ck" 2>/dev/null || true
rm -rf "$OUT"
mkdir -p "$OUT/ck"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
"$ONNXPIPE" example gpt --layers 2 --d-model 32 --heads 2 --vocab 256 --seq 16 -o "$OUT/gpt.onnx" >/dev/null
"$ONNXPIPE" data text /usr/share/common-licenses/GPL-3 -o "$OUT/text" --seq 16 >/dev/null
CK=$OUT/ck
# a constant LR (after warmup), so the rounds' --steps (never reached) and the last
# job's are the same run
job=(--model "$OUT/gpt.onnx" --data "$OUT/text" --loss cross_entropy --logits logits --labels labels --batch 8
     --microbatches 2 --pp 2 --dp 2 --optimizer adamw --lr 3e-3 --warmup 5 --clip-norm 1.0)
mpi=(mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT)
STEPS=100000

if mount -t tmpfs -o size=48m tmpfs "$CK" 2>/dev/null; then
    trap 'umount "$CK" 2>/dev/null || true' EXIT
    tmpfs=1
else
    tmpfs=0
    echo "(this machine cannot mount a tmpfs: the full-disk round is skipped)"
fi

ranks_of() { for p in $(pgrep -f -- "--save $CK" || true); do [ "$(ps -o comm= -p "$p" 2>/dev/null)" = onnxpipe ] && echo "$p"; done; true; }
fail() { echo "FAILED: $*"; exit 1; }

# After a round: `latest` names a checkpoint that verifies (--keep 50: the ranks of a
# killed job, which live on for a second, and the next job do not prune it meanwhile).
check_round() {  # ROUND WHAT
    local r=$1 latest=none
    if [ -f "$CK/latest" ]; then
        latest=$(cat "$CK/latest")
        "$ONNXPIPE" ckpt verify "$CK/$latest" >/dev/null || fail "round $r: $latest does not verify"
    fi
    steps=$(wc -l <"$OUT/round-$r.losses")
    [ "$steps" = 0 ] || steps="$(head -1 "$OUT/round-$r.losses" | cut -d' ' -f1)..$(tail -1 "$OUT/round-$r.losses" | cut -d' ' -f1)"
    echo "  round $r ($2): trained steps $steps; latest $latest verifies"
}

start_round() {  # ROUND [ARGS]: a job resumed from the directory, in the background (pid in $pid)
    local r=$1
    shift
    : >"$OUT/round-$r.losses"
    "${mpi[@]}" "$ONNXPIPE" train "${job[@]}" --steps $STEPS --save "$CK" --save-every 1 --keep 50 --resume auto \
        --losses "$OUT/round-$r.losses" "$@" >"$OUT/round-$r.log" 2>&1 &
    pid=$!
}

alive_or_fail() {  # ROUND: the job must still be running (it never ends on its own)
    kill -0 "$pid" 2>/dev/null || { cat "$OUT/round-$1.log"; fail "round $1: the job ended before it was killed"; }
}

echo "one owner:"
owner() {  # LOG [ARGS]: a one-process job saving every step into CK, in the background (pid in $pid)
    local log=$1
    shift
    "$ONNXPIPE" train "${job[@]}" --pp 1 --dp 1 --save "$CK" --save-every 1 --keep 2 "$@" >"$OUT/$log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do grep -q "^step " "$OUT/$log" && break; sleep 0.1; done
}
owner owner.log --steps $STEPS
first=$pid
if "$ONNXPIPE" train "${job[@]}" --pp 1 --dp 1 --steps 3 --save "$CK" --lock-wait 1 >"$OUT/second.log" 2>&1; then
    fail "a second job ran in a directory another live job owns"
fi
grep -q "is in use by another job: run .* pid $first" "$OUT/second.log" || { cat "$OUT/second.log"; fail "no owner named"; }
echo "  a second job is refused: $(grep -o "save directory.*pid $first" "$OUT/second.log" | tail -1)"
"$ONNXPIPE" train "${job[@]}" --pp 1 --dp 1 --steps 3 --save "$CK" >"$OUT/third.log" 2>&1 &
third=$!
for i in $(seq 1 100); do grep -q "waiting up to 60 s" "$OUT/third.log" && break; sleep 0.1; done
kill -TERM $first
wait $first 2>/dev/null && fail "a preempted job exited 0"
wait $third || { cat "$OUT/third.log"; fail "the job that waited for the lock failed"; }
grep -q "waiting up to 60 s" "$OUT/third.log" && ! grep -q "taking it over" "$OUT/third.log" ||
    { cat "$OUT/third.log"; fail "the third job did not wait, or warned about a released lock"; }
echo "  a third job waits for the owner to end, then trains"
# the directory taken from under a running job (what a lost NFS lock allows): it stops writing
owner owner2.log --steps $STEPS
sed -i 's/"run_id":"[^"]*"/"run_id":"another-job"/' "$CK/onnxpipe.lock"
wait "$pid" 2>/dev/null && fail "a job went on writing into a directory whose lock names another job"
grep -q "no longer this job's" "$OUT/owner2.log" || { cat "$OUT/owner2.log"; fail "no lost-lock error"; }
echo "  a job whose lock names another stops: $(grep -o "save directory.*this job stops writing there" "$OUT/owner2.log" | head -1)"
rm -rf "${CK:?}"/*

RANDOM=${CHAOS_SEED:-25}
echo "rounds (seed ${CHAOS_SEED:-25}):"
round=0
for k in $(seq 1 6); do
    round=$((round + 1))
    start_round $round
    sleep "$((RANDOM % 2)).$((RANDOM % 10))$((RANDOM % 10))"
    sleep 0.8
    alive_or_fail $round
    ranks=($(ranks_of))
    if [ $((RANDOM % 3)) = 0 ] || [ ${#ranks[@]} = 0 ]; then
        what="kill -9 mpirun"
        kill -9 "$pid"
    else
        victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
        what="kill -9 a rank"
        kill -9 "$victim" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    grep -q "in use by another job" "$OUT/round-$round.log" && fail "round $round: refused by the lock"
    check_round $round "$what"
    # the next round starts at once: the ranks of this one may still be alive
done

round=$((round + 1))
start_round $round
sleep 2.5
alive_or_fail $round
ranks=($(ranks_of))
kill -TERM "${ranks[$((RANDOM % ${#ranks[@]}))]}"
t_sig=$SECONDS
rc=0
wait "$pid" || rc=$?
[ $rc = 75 ] || { cat "$OUT/round-$round.log"; fail "round $round: SIGTERM: exit status $rc, not 75"; }
line=$(grep -m1 "SIGTERM reached rank" "$OUT/round-$round.log") || fail "round $round: no preemption line"
last=$(tail -1 "$OUT/round-$round.losses" | cut -d' ' -f1)
test "$(cat "$CK/latest")" = "step-$last" || fail "round $round: latest is $(cat "$CK/latest"), the last step was $last"
echo "  $line"
check_round $round "SIGTERM to a rank: exit 75 within $((SECONDS - t_sig)) s, saved the step it was in"

if [ $tmpfs = 1 ]; then
    round=$((round + 1))
    free_kb=$(df -k --output=avail "$CK" | tail -1)
    fallocate -l $(((free_kb - 150) * 1024)) "$CK/filler"
    start_round $round
    for i in $(seq 1 100); do grep -q "No space left on device" "$OUT/round-$round.log" && break; sleep 0.1; done
    grep -q "training goes on" "$OUT/round-$round.log" || { cat "$OUT/round-$round.log"; fail "round $round: no full-disk warning"; }
    before=$(cat "$CK/latest")
    "$ONNXPIPE" ckpt verify "$CK/$before" >/dev/null || fail "round $round: $before does not verify on the full disk"
    sleep 0.5
    alive_or_fail $round
    rm "$CK/filler"
    for i in $(seq 1 100); do [ "$(cat "$CK/latest")" != "$before" ] && break; sleep 0.1; done
    [ "$(cat "$CK/latest")" != "$before" ] || fail "round $round: no save committed once the disk had space again"
    alive_or_fail $round
    ranks=($(ranks_of))
    kill -9 "${ranks[$((RANDOM % ${#ranks[@]}))]}"
    wait "$pid" 2>/dev/null || true
    echo "  $(grep -m1 "No space left" "$OUT/round-$round.log" | cut -c1-200)..."
    check_round $round "full disk: $(grep -c 'training goes on' "$OUT/round-$round.log") saves failed with a warning, training went on, $before stayed latest; with space back it saved again"
fi

# the last job trains 10 steps past `latest` to the end, with the export
STEPS=$(($(cat "$CK/latest" | cut -d- -f2) + 10))
round=$((round + 1))
start_round $round --export "$OUT/chaos.onnx"
wait "$pid" || { cat "$OUT/round-$round.log"; fail "round $round: the last job failed"; }
check_round $round "to the end"
test "$(cat "$CK/latest")" = step-$STEPS

t0=$SECONDS
timeout 300 "${mpi[@]}" "$ONNXPIPE" train "${job[@]}" --steps $STEPS --quiet --losses "$OUT/ref.losses" \
    --export "$OUT/ref.onnx" >"$OUT/ref.log" 2>&1 || { cat "$OUT/ref.log"; exit 1; }
echo "the uninterrupted run: $STEPS steps in $((SECONDS - t0)) s"
for r in $(seq 1 $round); do
    bad=$(awk 'NR == FNR { ref[$1] = $2; next } !($1 in ref) || ref[$1] != $2 { print; exit }' \
        "$OUT/ref.losses" "$OUT/round-$r.losses")
    [ -z "$bad" ] || fail "round $r: step ${bad% *} loss ${bad#* } is not the uninterrupted run's"
done
echo "every loss of every round ($(cat "$OUT"/round-*.losses | wc -l) lines, $(cat "$OUT"/round-*.losses | cut -d' ' -f1 | sort -u | wc -l) steps) equals the uninterrupted run's"
cmp "$OUT/ref.onnx" "$OUT/chaos.onnx" || fail "the final weights differ from the uninterrupted run's"
echo "after $round rounds the final model is bitwise the uninterrupted run's"
echo "lock: $(grep -l "taking it over" "$OUT"/round-*.log | wc -l) jobs took the directory over from a killed one, $(grep -l "waiting up to" "$OUT"/round-*.log | wc -l) waited for a killed one's ranks to end"
