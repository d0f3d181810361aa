/* Activation recomputation: which tensors backward reads a stash slot keeps and which go
 * to the one recompute arena shared by all slots, and which forward ops must run again to
 * refill it (pp_stage_options.recompute); run.c re-runs them before a backward. */
#include "stage_places.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/op_info.h>

static const char *const names[] = {"none", "selective", "full"};

const char *pp_recompute_name(pp_recompute r)
{
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

pp_status pp_recompute_parse(const char *text, pp_recompute *out, pp_error *err)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (text && !strcmp(text, names[i])) {
            *out = (pp_recompute)i;
            return PP_OK;
        }
    return pp_error_set(err, PP_ERR_INVALID_ARG, "recompute '%s' is not one of none, selective, full",
                        text ? text : "(null)");
}

/* Selective recompute keeps what op o makes: it is expensive to run again. */
static int keeps(const pp_stage *s, int o)
{
    return s->opt.recompute == PP_RECOMPUTE_SELECTIVE && (pp_op_get(s->ops[o].op)->flags & PP_OPF_KEEP_ON_RECOMPUTE);
}

/* The slot keeps its inputs and what must outlive forward (KEEP_LIVE: the outputs a send
 * may still be reading, graph outputs read after forward, the loss the step sums), so a
 * re-run needs nothing from a neighbour and an op whose outputs are all kept never runs
 * again (one with several outputs, some in the arena, rewrites the kept ones with the same
 * bits); selective also keeps what its expensive ops make. A tensor backward reads beside those
 * goes to the arena and its maker runs again; then so, transitively, do the makers of
 * whatever a re-run op reads that lives nowhere after forward (forward scratch). Ops run
 * again in forward order with forward's places, so scratch holds what it held then. */
pp_status stage_place_recompute(pp_stage *s, char *in_slot, pp_error *err)
{
    (void)err;
    if (s->opt.recompute == PP_RECOMPUTE_NONE) return PP_OK;
    for (int t = 0; t < s->nt; t++) {
        const tslot *ts = &s->t[t];
        if (in_slot[t] != KEEP_BW || ts->view_of >= 0 || ts->at.loc == LOC_PARAM || ts->at.loc == LOC_CONST ||
            ts->def_op < 0 || keeps(s, ts->def_op))
            continue;
        in_slot[t] = KEEP_ARENA;
        s->ops[ts->def_op].rerun = 1;
    }
    for (int o = s->nops - 1; o >= 0; o--) {   /* makers come before readers: one pass */
        const stage_op *op = &s->ops[o];
        if (!op->rerun) continue;
        for (int k = 0; k < op->nin; k++) {
            if (op->in[k] < 0) continue;
            int t = stage_base(s, op->in[k]);
            const tslot *ts = &s->t[t];
            if (in_slot[t] || ts->at.loc == LOC_PARAM || ts->at.loc == LOC_CONST || ts->def_op < 0) continue;
            if (keeps(s, ts->def_op))
                in_slot[t] = KEEP_LIVE;
            else
                s->ops[ts->def_op].rerun = 1;
        }
    }
    return PP_OK;
}

void pp_stage_recompute_get(const pp_stage *s, pp_stage_recompute_stats *out) { *out = s->recomp_stats; }
