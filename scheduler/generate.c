/* Schedule generators: the compute-only order of FORWARD / BACKWARD (/ BACKWARD_INPUT /
 * BACKWARD_WEIGHT) actions per rank for gpipe, 1f1b, interleaved, zb-h1 and zb-v, and
 * where each kind places its stages. Communication is added afterwards by lowering. */
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

/* ZB-V, in the order of PyTorch's ScheduleZBVZeroBubble (torch.distributed.pipelining;
 * Qi et al., "Zero Bubble Pipeline Parallelism", section 6). Rank r holds chunk 0 =
 * stage r and chunk 1 = stage 2p-1-r. The order is written for n = max(m, 2p-1)
 * microbatches (what fills the V) and the actions of microbatches >= m are left out, as
 * PyTorch does. zbv_push appends one action, or nothing for such a microbatch. */
typedef struct zbv_rank {
    pp_schedule *s;
    int r, stage[2];
    int f[2], b[2], w[2];  /* next microbatch to forward, input-backward, weight-backward per chunk */
} zbv_rank;

static pp_status zbv_push(zbv_rank *z, int kind, int chunk, pp_error *err)
{
    int *next = kind == PP_ACT_FORWARD ? z->f : kind == PP_ACT_BACKWARD_INPUT ? z->b : z->w;
    int mb = next[chunk]++;
    return mb < z->s->microbatches ? push(z->s, z->r, kind, z->stage[chunk], mb, err) : PP_OK;
}

/* One F, I, W of chunk c, the unit of ZB-V's steady state. */
static pp_status zbv_fiw(zbv_rank *z, int c, int forward, pp_error *err)
{
    if (forward) PP_CHECK(zbv_push(z, PP_ACT_FORWARD, c, err));
    PP_CHECK(zbv_push(z, PP_ACT_BACKWARD_INPUT, c, err));
    return zbv_push(z, PP_ACT_BACKWARD_WEIGHT, c, err);
}

static pp_status gen_zbv(pp_schedule *s, int r, pp_error *err)
{
    int p = s->pp, n = s->microbatches > 2 * p - 1 ? s->microbatches : 2 * p - 1;
    zbv_rank z = {s, r, {r, 2 * p - 1 - r}, {0, 0}, {0, 0}, {0, 0}};
    /* warm-up: chunk 0 runs ahead by 2(p-r)-1 forwards, then the two chunks alternate
     * until the first microbatch comes back down the V to chunk 1 */
    for (int k = 0; k < 2 * (p - r) - 1; k++) PP_CHECK(zbv_push(&z, PP_ACT_FORWARD, 0, err));
    for (int k = 0; k < r; k++) {
        PP_CHECK(zbv_push(&z, PP_ACT_FORWARD, 1, err));
        PP_CHECK(zbv_push(&z, PP_ACT_FORWARD, 0, err));
    }
    for (int k = 0; k < p - r; k++) PP_CHECK(zbv_fiw(&z, 1, 1, err));
    /* steady state: F I W of chunk 0, then of chunk 1, until every forward is done */
    while (z.f[1] < z.f[0] || z.f[0] < n) {
        if (z.f[0] < n) PP_CHECK(zbv_push(&z, PP_ACT_FORWARD, 0, err));
        PP_CHECK(zbv_fiw(&z, 0, 0, err));
        PP_CHECK(zbv_fiw(&z, 1, 1, err));
    }
    /* cool-down: input gradients first (they are what the other ranks wait for), the
     * weight passes they leave behind at the end */
    for (int k = 0; k < r; k++) {
        PP_CHECK(zbv_push(&z, PP_ACT_BACKWARD_INPUT, 0, err));
        PP_CHECK(zbv_push(&z, PP_ACT_BACKWARD_INPUT, 1, err));
    }
    for (int k = 0; k < p - r; k++) {
        PP_CHECK(zbv_push(&z, PP_ACT_BACKWARD_INPUT, 0, err));
        PP_CHECK(zbv_push(&z, PP_ACT_BACKWARD_WEIGHT, 0, err));
    }
    for (int c = 1; c >= 0; c--)
        while (z.w[c] < z.b[c]) PP_CHECK(zbv_push(&z, PP_ACT_BACKWARD_WEIGHT, c, err));
    return PP_OK;
}

int generate_stage_rank(pp_schedule_kind kind, int pp, int stage)
{
    if (kind == PP_SCHED_ZB_V && stage >= pp) return 2 * pp - 1 - stage;
    return stage % pp;
}

pp_status generate_order(pp_schedule *s, pp_schedule_kind kind, pp_error *err)
{
    for (int r = 0; r < s->pp; r++) {
        switch (kind) {
        case PP_SCHED_GPIPE: PP_CHECK(gen_gpipe(s, r, err)); break;
        case PP_SCHED_1F1B: PP_CHECK(gen_1f1b(s, r, 0, err)); break;
        case PP_SCHED_ZB_H1: PP_CHECK(gen_1f1b(s, r, 1, err)); break;
        case PP_SCHED_INTERLEAVED: PP_CHECK(gen_interleaved(s, r, err)); break;
        case PP_SCHED_ZB_V: PP_CHECK(gen_zbv(s, r, err)); break;
        default: return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule kind %d cannot be generated", (int)kind);
        }
    }
    return PP_OK;
}
