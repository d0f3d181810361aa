/* Schedule generators: the compute-only order of FORWARD / BACKWARD (/ BACKWARD_INPUT /
 * BACKWARD_WEIGHT) actions per rank for gpipe, 1f1b, interleaved and zb-h1. Stage s
 * lives on rank s % pp. Communication is added afterwards by the lowering pass. */
#include "sched_internal.h"

static pp_status push(pp_schedule *s, int rank, int kind, int stage, int mb, pp_error *err)
{
    pp_action a = {kind, stage, mb, -1};
    return pp_schedule_append(s, rank, a, err);
}

/* GPipe: every forward, then every backward, in microbatch order. */
static pp_status gen_gpipe(pp_schedule *s, int r, pp_error *err)
{
    for (int mb = 0; mb < s->microbatches; mb++) PP_CHECK(push(s, r, PP_ACT_FORWARD, r, mb, err));
    for (int mb = 0; mb < s->microbatches; mb++) PP_CHECK(push(s, r, PP_ACT_BACKWARD, r, mb, err));
    return PP_OK;
}

/* 1F1B (PipeDream-flush): p-1-r warm-up forwards, then forward/backward pairs, then the
 * remaining backwards; at most min(p-r, m) microbatches stashed on rank r. With split = 1
 * the backward is BACKWARD_INPUT and the weight passes follow the zero-bubble H1 rule:
 * rank r keeps up to r of them deferred, and runs the deferred ones in the cool-down,
 * where 1F1B would wait for gradients (the last stage defers most, since its last input
 * gradients start the longest chain). */
static pp_status gen_1f1b(pp_schedule *s, int r, int split, pp_error *err)
{
    int p = s->pp, m = s->microbatches;
    int warm = p - 1 - r < m ? p - 1 - r : m;
    int bkind = split ? PP_ACT_BACKWARD_INPUT : PP_ACT_BACKWARD;
    int nb = 0, nw = 0;
    for (int mb = 0; mb < warm; mb++) PP_CHECK(push(s, r, PP_ACT_FORWARD, r, mb, err));
    for (int fwd = warm; nb < m;) {
        if (fwd < m) PP_CHECK(push(s, r, PP_ACT_FORWARD, r, fwd++, err));
        PP_CHECK(push(s, r, bkind, r, nb++, err));
        if (split && nb - nw > r) PP_CHECK(push(s, r, PP_ACT_BACKWARD_WEIGHT, r, nw++, err));
    }
    while (split && nw < m) PP_CHECK(push(s, r, PP_ACT_BACKWARD_WEIGHT, r, nw++, err));
    return PP_OK;
}

/* Megatron-LM interleaved 1F1B with v chunks per rank (stage c*p + r is chunk c of rank
 * r). Microbatches go through in groups of p: forward k visits chunk (k / p) % v, and
 * backwards visit the chunks in reverse. Warm-up 2(p-1-r) + (v-1)p forwards, then
 * forward/backward pairs. Needs m % p == 0 (checked by the caller).
 * push_interleaved appends the k-th forward (or backward) of rank r. */
static pp_status push_interleaved(pp_schedule *s, int r, int k, int backward, pp_error *err)
{
    int p = s->pp, v = s->chunks;
    int chunk = k / p % v, mb = k / (p * v) * p + k % p;
    if (backward) chunk = v - 1 - chunk;
    return push(s, r, backward ? PP_ACT_BACKWARD : PP_ACT_FORWARD, chunk * p + r, mb, err);
}

static pp_status gen_interleaved(pp_schedule *s, int r, pp_error *err)
{
    int p = s->pp, total = s->microbatches * s->chunks;
    int warm = 2 * (p - 1 - r) + (s->chunks - 1) * p;
    if (warm > total) warm = total;
    for (int k = 0; k < warm; k++) PP_CHECK(push_interleaved(s, r, k, 0, err));
    for (int k = 0; k < total - warm; k++) {
        PP_CHECK(push_interleaved(s, r, warm + k, 0, err));
        PP_CHECK(push_interleaved(s, r, k, 1, err));
    }
    for (int k = total - warm; k < total; k++) PP_CHECK(push_interleaved(s, r, k, 1, err));
    return PP_OK;
}

pp_status generate_order(pp_schedule *s, pp_schedule_kind kind, pp_error *err)
{
    for (int r = 0; r < s->pp; r++) {
        switch (kind) {
        case PP_SCHED_GPIPE: PP_CHECK(gen_gpipe(s, r, err)); break;
        case PP_SCHED_1F1B: PP_CHECK(gen_1f1b(s, r, 0, err)); break;
        case PP_SCHED_ZB_H1: PP_CHECK(gen_1f1b(s, r, 1, err)); break;
        case PP_SCHED_INTERLEAVED: PP_CHECK(gen_interleaved(s, r, err)); break;
        default: return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule kind %d cannot be generated", (int)kind);
        }
    }
    return PP_OK;
}
