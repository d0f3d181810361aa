/* The pp_schedule object: names, construction, argument checks for the generators,
 * the accessors a trainer reads it by, and pp_schedule_create (generate -> lower ->
 * validate). */
#include "sched_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/core_util.h>

static const char *kind_names[PP_SCHED_KIND_COUNT] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "custom"};

static const char *action_names[PP_ACT_KIND_COUNT] = {
    "FORWARD", "BACKWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "SEND_ACT",
    "RECV_ACT", "SEND_GRAD", "RECV_GRAD", "REDUCE_GRADS", "OPTIMIZER_STEP"};

/* PyTorch's short forms (torch.distributed.pipelining _ComputationType), what CSV files,
 * traces and messages show, except REDUCE_GRADS: DESIGN.md's name, where PyTorch writes
 * REDUCE_GRAD (csv.c reads both), and OPTIMIZER_STEP, which PyTorch has not. */
static const char *action_short[PP_ACT_KIND_COUNT] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRADS", "OPTIMIZER_STEP"};

/* Bounds that keep every index in an int and the engine's token table in memory. */
#define MAX_PP 16384
#define MAX_CHUNKS 64
#define MAX_MICROBATCHES (1 << 20)
#define MAX_STAGE_MB (1L << 22)

const char *pp_schedule_kind_name(pp_schedule_kind kind)
{
    return (kind >= 0 && kind < PP_SCHED_KIND_COUNT) ? kind_names[kind] : "?";
}

const char *pp_action_kind_name(pp_action_kind kind)
{
    return (kind >= 0 && kind < PP_ACT_KIND_COUNT) ? action_names[kind] : "?";
}

pp_status pp_schedule_kind_parse(const char *name, pp_schedule_kind *out, pp_error *err)
{
    for (int k = 0; k < PP_SCHED_CUSTOM; k++)
        if (name && !strcmp(name, kind_names[k])) {
            *out = (pp_schedule_kind)k;
            return PP_OK;
        }
    return pp_error_set(err, PP_ERR_INVALID_ARG,
                        "unknown schedule kind '%s' (expected gpipe, 1f1b, interleaved, zb-h1 or zb-v)",
                        name ? name : "");
}

int pp_schedule_default_chunks(pp_schedule_kind kind)
{
    return kind == PP_SCHED_INTERLEAVED || kind == PP_SCHED_ZB_V ? 2 : 1;
}

const char *pp_action_format(const pp_action *a, char *buf, size_t len)
{
    int k = a->kind;
    if (k < 0 || k >= PP_ACT_KIND_COUNT) snprintf(buf, len, "?%d", k);
    else if (k == PP_ACT_OPTIMIZER_STEP) snprintf(buf, len, "%s", action_short[k]);
    else if (k == PP_ACT_REDUCE_GRADS) snprintf(buf, len, "%d%s", a->stage, action_short[k]);
    else snprintf(buf, len, "%d%s%d", a->stage, action_short[k], a->microbatch);
    return buf;
}

pp_status pp_schedule_new(int pp, int num_stages, int microbatches, const int *stage_rank,
                          pp_schedule **out, pp_error *err)
{
    *out = NULL;
    if (pp < 1 || pp > MAX_PP) return pp_error_set(err, PP_ERR_INVALID_ARG, "pp %d out of range (1..%d)", pp, MAX_PP);
    if (num_stages < pp || num_stages > MAX_PP * MAX_CHUNKS)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "%d stages for %d ranks: need at least one stage per rank",
                            num_stages, pp);
    if (microbatches < 1 || microbatches > MAX_MICROBATCHES)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "microbatches %d out of range (1..%d)", microbatches,
                            MAX_MICROBATCHES);
    if ((long)num_stages * microbatches > MAX_STAGE_MB)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "%d stages x %d microbatches is too large (at most %ld (stage, microbatch) pairs)",
                            num_stages, microbatches, MAX_STAGE_MB);
    for (int st = 0; st < num_stages; st++)
        if (stage_rank[st] < 0 || stage_rank[st] >= pp)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "stage %d placed on rank %d, out of range (0..%d)", st,
                                stage_rank[st], pp - 1);
    pp_schedule *s = pp_calloc(1, sizeof *s);
    if (!s) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a schedule");
    s->kind = PP_SCHED_CUSTOM;
    s->pp = pp;
    s->num_stages = num_stages;
    s->chunks = (num_stages + pp - 1) / pp;
    s->microbatches = microbatches;
    s->stage_rank = pp_malloc((size_t)num_stages * sizeof *s->stage_rank);
    s->count = pp_calloc((size_t)pp, sizeof *s->count);
    s->capacity = pp_calloc((size_t)pp, sizeof *s->capacity);
    s->actions = pp_calloc((size_t)pp, sizeof *s->actions);
    if (!s->stage_rank || !s->count || !s->capacity || !s->actions) {
        pp_schedule_destroy(s);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory for a schedule");
    }
    memcpy(s->stage_rank, stage_rank, (size_t)num_stages * sizeof *s->stage_rank);
    *out = s;
    return PP_OK;
}

pp_status schedule_reserve(pp_schedule *s, int rank, int n, pp_error *err)
{
    if (n <= s->capacity[rank]) return PP_OK;
    int cap = s->capacity[rank] ? s->capacity[rank] : 64;
    while (cap < n) cap = cap > INT_MAX / 2 ? n : 2 * cap;
    pp_action *na = pp_realloc_array(s->actions[rank], (size_t)cap, sizeof *na);
    if (!na) return pp_error_set(err, PP_ERR_NOMEM, "out of memory for rank %d's %d actions", rank, n);
    s->actions[rank] = na;
    s->capacity[rank] = cap;
    return PP_OK;
}

pp_status pp_schedule_append(pp_schedule *s, int rank, pp_action a, pp_error *err)
{
    if (rank < 0 || rank >= s->pp)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "rank %d out of range (0..%d)", rank, s->pp - 1);
    if (s->count[rank] == INT_MAX) return pp_error_set(err, PP_ERR_NOMEM, "rank %d has too many actions", rank);
    PP_CHECK(schedule_reserve(s, rank, s->count[rank] + 1, err));
    s->actions[rank][s->count[rank]++] = a;
    return PP_OK;
}

void pp_schedule_destroy(pp_schedule *s)
{
    if (!s) return;
    if (s->actions)
        for (int r = 0; r < s->pp; r++) free(s->actions[r]);
    free(s->actions);
    free(s->count);
    free(s->capacity);
    free(s->stage_rank);
    free(s);
}

const pp_action *pp_schedule_rank_actions(const pp_schedule *s, int rank, int *n)
{
    if (!s || rank < 0 || rank >= s->pp) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = s->count[rank];
    return s->actions[rank];
}

int pp_schedule_num_stages(const pp_schedule *s)
{
    return s->num_stages;
}

int pp_schedule_stage_rank(const pp_schedule *s, int stage)
{
    return stage < 0 || stage >= s->num_stages ? -1 : s->stage_rank[stage];
}

long pp_schedule_action_count(const pp_schedule *s)
{
    long n = 0;
    for (int r = 0; r < s->pp; r++) n += s->count[r];
    return n;
}

/* What each kind requires of (pp, microbatches, chunks), in words a user can act on. */
static pp_status check_args(pp_schedule_kind kind, int pp, int m, int v, pp_error *err)
{
    if (kind < 0 || kind >= PP_SCHED_CUSTOM)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "schedule kind %d cannot be generated", (int)kind);
    if (pp < 1 || pp > MAX_PP) return pp_error_set(err, PP_ERR_INVALID_ARG, "pp %d out of range (1..%d)", pp, MAX_PP);
    if (m < 1 || m > MAX_MICROBATCHES)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "microbatches %d out of range (1..%d)", m, MAX_MICROBATCHES);
    if (kind == PP_SCHED_ZB_V && v != 2)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "zb-v places two stages per rank in a V: chunks must be 2, got %d", v);
    if (kind != PP_SCHED_INTERLEAVED && kind != PP_SCHED_ZB_V && v != 1)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "%s places one stage per rank: chunks must be 1, got %d (chunks > 1 is for interleaved)",
                            kind_names[kind], v);
    if (kind == PP_SCHED_INTERLEAVED) {
        if (v < 2 || v > MAX_CHUNKS)
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "interleaved needs 2..%d chunks (virtual stages per rank), got %d; with 1 chunk "
                                "use 1f1b",
                                MAX_CHUNKS, v);
        if (m % pp != 0)
            return pp_error_set(err, PP_ERR_INVALID_ARG,
                                "interleaved needs microbatches to be a multiple of pp (Megatron's constraint): "
                                "got %d microbatches for pp %d; use %d",
                                m, pp, m > pp ? m / pp * pp : pp);
    }
    if ((long)pp * v * m > MAX_STAGE_MB)
        return pp_error_set(err, PP_ERR_INVALID_ARG,
                            "%d stages x %d microbatches is too large (at most %ld (stage, microbatch) pairs)",
                            pp * v, m, MAX_STAGE_MB);
    return PP_OK;
}

pp_status pp_schedule_generate(pp_schedule_kind kind, int pp, int microbatches, int chunks,
                               pp_schedule **out, pp_error *err)
{
    *out = NULL;
    PP_CHECK(check_args(kind, pp, microbatches, chunks, err));
    int S = pp * chunks;
    int *stage_rank = pp_malloc((size_t)S * sizeof *stage_rank);
    if (!stage_rank) return PP_NOMEM(err);
    for (int st = 0; st < S; st++) stage_rank[st] = generate_stage_rank(kind, pp, st);
    pp_schedule *s = NULL;
    pp_status st = pp_schedule_new(pp, S, microbatches, stage_rank, &s, err);
    free(stage_rank);
    if (st != PP_OK) return st;
    s->kind = kind;
    s->chunks = chunks;
    st = generate_order(s, kind, err);
    if (st != PP_OK) {
        pp_schedule_destroy(s);
        return st;
    }
    *out = s;
    return PP_OK;
}

pp_status pp_schedule_create(pp_schedule_kind kind, int pp, int microbatches, int chunks,
                             pp_schedule **out, pp_error *err)
{
    pp_schedule *s = NULL;
    pp_status st = PP_OK;
    *out = NULL;
    PP_CHECK(pp_schedule_generate(kind, pp, microbatches, chunks, &s, err));
    PP_CHECK_GOTO(pp_schedule_lower(s, err), st, fail);
    PP_CHECK_GOTO(pp_schedule_validate(s, NULL, err), st, fail);
    *out = s;
    return PP_OK;
fail:
    pp_error_prefix(err, "%s schedule (pp %d, microbatches %d, chunks %d): ", kind_names[kind], pp, microbatches,
                    chunks);
    pp_schedule_destroy(s);
    return st;
}
