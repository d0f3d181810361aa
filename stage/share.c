/* Stages of one group of shapes (sequence buckets) sharing one copy of the parameters,
 * gradients and optimizer state, and their activation arenas (pp_stage_options.share):
 * the check that their parameter layouts are the same, the buffers a stage borrows, and
 * the hand-over from the stage that ran last. */
#include "stage_build.h"

#include <string.h>
#include <onnxpipe/graph_ir.h>

/* The parameter tables, gradient uses and weight-gradient order of s and of the stage it
 * shares with agree, or an error names the first difference. */
pp_status stage_check_share(const pp_stage *s, pp_error *err)
{
    const pp_stage *o = s->opt.share;
    if (o->g->nnodes != s->g->nnodes || o->first != s->first || o->end != s->end)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the stage to share buffers with holds nodes [%d, %d) of %d, "
                            "this one [%d, %d) of %d: make its partition with pp_partition_options.same_split",
                            o->first, o->end, o->g->nnodes, s->first, s->end, s->g->nnodes);
    for (int i = 0; i < s->nparams || i < o->nparams; i++) {
        const pp_stage_param *a = i < s->nparams ? &s->params[i] : NULL, *b = i < o->nparams ? &o->params[i] : NULL;
        if (a && b && !strcmp(a->name, b->name) && a->offset == b->offset && a->numel == b->numel &&
            s->param_ready[i] == o->param_ready[i])
            continue;
        return pp_error_set(err, PP_ERR_INVALID_ARG, "parameter %d is '%s' (%lld elements at %lld, final after %d "
                            "weight-gradient ops) at this shape but '%s' (%lld at %lld, after %d) in the stage it "
                            "shares buffers with: the model's parameters or its planned ops depend on the shape",
                            i, a ? a->name : "(none)", (long long)(a ? a->numel : 0), (long long)(a ? a->offset : 0),
                            a ? s->param_ready[i] : 0, b ? b->name : "(none)", (long long)(b ? b->numel : 0),
                            (long long)(b ? b->offset : 0), b ? o->param_ready[i] : 0);
    }
    int same = o->param_elems == s->param_elems && o->use_elems == s->use_elems && o->nuses == s->nuses &&
               o->optim_slots == s->optim_slots;
    for (int u = 0; same && u < s->nuses; u++)
        same = o->uses[u].param == s->uses[u].param && o->uses[u].node == s->uses[u].node &&
               o->uses[u].offset == s->uses[u].offset;
    if (!same)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the gradient layout (%lld + %lld elements, %d uses) differs "
                            "from the stage it shares buffers with (%lld + %lld, %d uses)", (long long)s->param_elems,
                            (long long)s->use_elems, s->nuses, (long long)o->param_elems, (long long)o->use_elems,
                            o->nuses);
    return PP_OK;
}

void *stage_shared_buffer(const pp_stage *s, int which, size_t need)
{
    const pp_stage *o = s->opt.share;
    if (!o) return NULL;
    switch (which) {
    case SHARE_PARAMS: return o->param_buf;
    case SHARE_GRADS: return o->grad_buf;
    case SHARE_OPTIM: return o->optim_buf;
    case SHARE_PARAM16: return o->param16_buf;
    case SHARE_STASH: return need <= o->slot_bytes * (size_t)o->opt.slots ? o->slot_buf : NULL;
    case SHARE_FWD: return need <= o->fwd_bytes ? o->fwd_buf : NULL;
    case SHARE_BWD: return need <= o->bwd_bytes ? o->bwd_buf : NULL;
    case SHARE_RECOMP: return need <= o->recomp_bytes ? o->recomp_buf : NULL;
    default: return NULL;
    }
}

int stage_owns(const pp_stage *s, const void *p)
{
    const pp_stage *o = s->opt.share;
    if (!p) return 0;
    if (!o) return 1;
    const void *theirs[] = {o->param_buf, o->grad_buf, o->optim_buf, o->param16_buf, o->slot_buf, o->fwd_buf,
                            o->bwd_buf, o->recomp_buf};
    for (size_t i = 0; i < sizeof theirs / sizeof theirs[0]; i++)
        if (theirs[i] == p) return 0;
    return 1;
}

pp_status pp_stage_activate(pp_stage *s, pp_stage *prev, pp_error *err)
{
    if (s == prev || !prev) return PP_OK;
    int n = pp_stage_num_buffers(s);
    if (n != pp_stage_num_buffers(prev))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "the stage to run holds %d BatchNorm statistics, the one that ran "
                            "%d", n, pp_stage_num_buffers(prev));
    for (int i = 0; i < n; i++) {
        pp_stage_buffer to, from;
        PP_CHECK(pp_stage_buffer_at(s, i, &to, err));
        PP_CHECK(pp_stage_buffer_at(prev, i, &from, err));
        if (strcmp(to.name, from.name) || to.nbytes != from.nbytes)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "BatchNorm statistic %d is '%s' (%zu bytes) in the stage to "
                                "run but '%s' (%zu bytes) in the one that ran", i, to.name, to.nbytes, from.name,
                                from.nbytes);
        PP_CHECK(pp_device_copy(s->dev, to.data, from.data, to.nbytes, err));
    }
    s->param16_stale = 1;
    s->recomp_owner = -1;
    return PP_OK;
}
