/* A stage's tensor places: which tensors it touches, where each lives (parameters,
 * constants, stash slot, scratch), which ops run backward and which gradients exist,
 * and the ports to the neighbouring stages (the loss is loss.c's). */
#include "stage_places.h"

#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>

#define ALIGN 64

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int node_in_stage(const pp_stage *s, int node) { return stage_side(s, node) == 0; }

/* A value a later stage reads (so it crosses the boundary after this stage). */
static int read_later(const pp_stage *s, const pp_value *v)
{
    for (int c = 0; c < v->nconsumers; c++)
        if (stage_side(s, v->consumers[c]) > 0) return 1;
    return 0;
}

/* Collects ops and their tslots, and the ports. */
static pp_status collect(pp_stage *s, pp_error *err)
{
    const pp_graph *g = s->g;
    for (int i = s->first; i < s->end; i++) {
        if (!node_in_stage(s, i)) continue;
        const pp_node *n = &g->nodes[i];
        stage_op *op = &s->ops[s->nops];
        memset(op, 0, sizeof *op);
        op->node = i;
        op->name = n->name;
        op->op = n->op;
        op->op_type = n->op_type;
        op->attrs = n->attrs;
        op->nattrs = n->nattrs;
        op->k = pp_kernel_find(n->op, pp_device_get_kind(s->dev), PP_DTYPE_F32);
        if (!op->k)
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s': no %s kernel for op %s",
                                n->name, pp_device_kind_name(pp_device_get_kind(s->dev)), n->op_type);
        op->nin = n->ninputs;
        op->nout = n->noutputs;
        op->in = malloc(((size_t)n->ninputs + 1) * sizeof(int));
        op->out = malloc(((size_t)n->noutputs + 1) * sizeof(int));
        if (!op->in || !op->out) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's tensors");
        s->nops++;
        op->host_in = calloc((size_t)n->ninputs + 1, sizeof *op->host_in);
        if (!op->host_in) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's tensors");
        for (int k = 0; k < n->ninputs; k++) {
            op->in[k] = -1;
            if (n->inputs[k] < 0) continue;
            PP_CHECK(stage_tslot_of(s, n->inputs[k], err, &op->in[k]));
            const pp_const_tensor *c = pp_graph_const(g, n->inputs[k]);
            if (c) op->host_in[k] = c->data;
        }
        for (int k = 0; k < n->noutputs; k++) {
            op->out[k] = -1;
            if (n->outputs[k] >= 0) PP_CHECK(stage_tslot_of(s, n->outputs[k], err, &op->out[k]));
        }
    }
    /* activation inputs: produced before this stage and read here or later (skips pass
     * through); data inputs: graph inputs read here. Sorted by value id. */
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        int here = 0;
        for (int c = 0; c < val->nconsumers; c++) here |= node_in_stage(s, val->consumers[c]);
        if (val->producer >= 0 && stage_side(s, val->producer) < 0 && (here || read_later(s, val))) {
            int t;
            PP_CHECK(stage_tslot_of(s, v, err, &t));
            PP_CHECK(stage_add_port(s, 1, t, 0, err));
        }
    }
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        if (s->t_of_value[v] >= 0) PP_CHECK(stage_add_port(s, 1, s->t_of_value[v], 1, err));
    }
    for (int v = 0; v < g->nvalues; v++) {
        const pp_value *val = &g->values[v];
        if (val->producer >= 0 && stage_side(s, val->producer) <= 0 && read_later(s, val))
            PP_CHECK(stage_add_port(s, 0, s->t_of_value[v], 0, err));
    }
    return PP_OK;
}

static int op_input_diff(const stage_op *op, int k)
{
    return pp_op_input_differentiable(op->op, k);
}

/* needs_grad = reachable from a parameter or activation input AND reaching the loss
 * or an output port. Also decides which ops run backward. */
static pp_status place_grads(pp_stage *s, pp_error *err)
{
    char *req = calloc((size_t)s->nt + 1, 1), *reach = calloc((size_t)s->nt + 1, 1);
    if (!req || !reach) {
        free(req);
        free(reach);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing gradients");
    }
    for (int t = 0; t < s->nt; t++) {
        const tslot *ts = &s->t[t];
        if (pp_dtype_is_float(ts->dtype) && ts->view_of < 0 && stage_is_param(s, t)) req[t] = 1;
    }
    for (int i = 0; i < s->ninputs; i++)
        if (!s->inputs[i].is_data && pp_dtype_is_float(s->t[s->input_t[i]].dtype)) req[s->input_t[i]] = 1;
    for (int o = 0; o < s->nops; o++) {
        stage_op *op = &s->ops[o];
        int any = 0;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0 && op_input_diff(op, k) && req[stage_base(s, op->in[k])]) any = 1;
        for (int k = 0; k < op->nout; k++)
            if (op->out[k] >= 0 && any && pp_dtype_is_float(s->t[op->out[k]].dtype)) req[op->out[k]] = 1;
    }
    if (s->loss_t >= 0) reach[s->loss_t] = 1;
    for (int i = 0; i < s->noutputs; i++) reach[s->output_t[i]] = 1;
    for (int o = s->nops - 1; o >= 0; o--) {
        stage_op *op = &s->ops[o];
        int out_reach = 0, in_req = 0;
        for (int k = 0; k < op->nout; k++)
            if (op->out[k] >= 0 && reach[op->out[k]] && req[stage_base(s, op->out[k])]) out_reach = 1;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0 && op_input_diff(op, k) && req[stage_base(s, op->in[k])]) in_req = 1;
        if (!out_reach || !in_req) continue;
        if (!op->k->backward)
            return free(req), free(reach),
                   pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): no gradient is implemented, but "
                                "a gradient must flow through it", op->name, op->op_type);
        op->backward = 1;
        for (int k = 0; k < op->nin; k++) {
            if (op->in[k] < 0 || !op_input_diff(op, k) || !req[stage_base(s, op->in[k])]) continue;
            reach[op->in[k]] = reach[stage_base(s, op->in[k])] = 1;
            if (stage_is_param(s, stage_base(s, op->in[k])))
                op->has_weight = 1;
            else
                op->has_act = 1;
        }
    }
    for (int t = 0; t < s->nt; t++) s->t[t].needs_grad = req[stage_base(s, t)] && reach[t];
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].view_of >= 0 && s->t[t].needs_grad) s->t[s->t[t].view_of].needs_grad = 1;
    free(req);
    free(reach);
    return PP_OK;
}

/* Parameters into the flat buffer (order of first use), constants into their buffer. */
static pp_status place_persistent(pp_stage *s, pp_error *err)
{
    s->params = calloc((size_t)s->nt + 1, sizeof *s->params);
    if (!s->params) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing parameters");
    int64_t off = 0;
    size_t coff = 0;
    for (int t = 0; t < s->nt; t++) {
        tslot *ts = &s->t[t];
        if (ts->master >= 0) {   /* a 16-bit copy (precision.c): masters come first */
            const pp_stage_param *p = &s->params[s->t[ts->master].param];
            ts->param = s->t[ts->master].param;
            ts->at = (place){LOC_PARAM16, (size_t)p->offset * pp_dtype_size(ts->dtype)};
            ts->grad = (place){LOC_PARAM, (size_t)p->offset * 4};   /* fp32 gradients, with the master's */
            continue;
        }
        if (ts->value < 0 || s->g->values[ts->value].init < 0) continue;
        const pp_value *v = &s->g->values[ts->value];
        if (v->is_param) {
            if (v->dtype != PP_DTYPE_F32)
                return pp_error_set(err, PP_ERR_UNSUPPORTED, "parameter '%s' is %s; only float32 parameters "
                                    "are trained today", v->name, pp_dtype_name(v->dtype));
            pp_stage_param *p = &s->params[s->nparams];
            p->name = v->name;
            p->value = ts->value;
            p->offset = off;
            p->numel = (int64_t)(ts->nbytes / 4);
            p->shape = v->shape;
            ts->param = s->nparams++;
            ts->at = (place){LOC_PARAM, (size_t)off * 4};
            ts->grad = ts->at;
            off += (p->numel + 15) / 16 * 16;
        } else {
            ts->at = (place){LOC_CONST, coff};
            coff += align_up(ts->nbytes);
        }
    }
    s->param_elems = off;
    s->const_bytes = coff;
    return PP_OK;
}

/* When each parameter's gradient is final in a backward: after the last op (in backward
 * order) that accumulates into it, counting only ops that compute weight gradients. */
static pp_status place_param_ready(pp_stage *s, pp_error *err)
{
    s->param_ready = calloc((size_t)s->nparams + 1, sizeof *s->param_ready);
    if (!s->param_ready) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's tensors");
    int done = 0;
    for (int o = s->nops - 1; o >= 0; o--) {
        const stage_op *op = &s->ops[o];
        if (!op->backward || !op->has_weight) continue;
        done++;
        for (int k = 0; k < op->nin; k++)
            if (op->in[k] >= 0 && s->t[op->in[k]].param >= 0 && s->t[op->in[k]].needs_grad)
                s->param_ready[s->t[op->in[k]].param] = done;
    }
    return PP_OK;
}

/* Ops whose input k's gradient is the output gradient itself (d in = d out): the
 * registry's PP_OPF_PASS_GRAD ops at input 0, and Add at an input of the output's shape. */
static int passes_grad(const pp_stage *s, const stage_op *op, int k)
{
    const tslot *x = &s->t[op->in[k]], *y = &s->t[op->out[0]];
    if (op->op == PP_OP_ADD)
        return x->rank == y->rank && !memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims);
    return k == 0 && (pp_op_get(op->op)->flags & PP_OPF_PASS_GRAD);
}

/* An activation read by one op only, which passes its gradient through unchanged, shares
 * that op's output gradient instead of having its own: no zeroing, no accumulation pass
 * (run.c gives the op no gradient to write for it). Ports and views keep their own. */
static pp_status place_grad_aliases(pp_stage *s, pp_error *err)
{
    for (int t = 0; t < s->nt; t++) s->t[t].grad_of = -1;
    char *viewed = calloc((size_t)s->nt + 1, 1);
    if (!viewed) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing gradients");
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].view_of >= 0) viewed[s->t[t].view_of] = 1;
    for (int o = 0; o < s->nops; o++) {
        const stage_op *op = &s->ops[o];
        if (!op->backward || op->nout != 1 || op->out[0] < 0 || s->t[op->out[0]].view_of >= 0) continue;
        for (int k = 0; k < op->nin; k++) {
            int t = op->in[k], once = 1;
            for (int j = 0; j < op->nin; j++) once &= j == k || op->in[j] != t;
            if (t < 0 || !once || !op_input_diff(op, k) || !passes_grad(s, op, k)) continue;
            tslot *x = &s->t[t];
            const pp_value *v = x->value >= 0 ? &s->g->values[x->value] : NULL;
            if (!v || viewed[t] || !x->needs_grad || x->view_of >= 0 || x->dtype != s->t[op->out[0]].dtype ||
                v->nconsumers != 1 || v->is_output || v->producer < 0 || !node_in_stage(s, v->producer))
                continue;
            x->grad_of = op->out[0];
        }
    }
    free(viewed);
    return PP_OK;
}

/* Backward op b reads or writes t's gradient. */
static void touch_grad(tslot *t, int b)
{
    if (t->first_bw < 0 || t->first_bw > b) t->first_bw = b;
    if (t->last_bw < b) t->last_bw = b;
}

/* The tslot whose gradient memory t's gradient lives in. */
static int grad_base(const pp_stage *s, int t)
{
    t = stage_base(s, t);
    while (s->t[t].grad_of >= 0) t = s->t[t].grad_of;
    return t;
}

/* Lifetimes, then places for everything else: the slot holds ports, what backward
 * reads (with recompute: what recompute.c keeps; the rest of it goes to the recompute
 * arena), aux memory, the loss and the gradients that must outlive a backward half;
 * the rest goes to the forward or backward scratch arenas. */
static pp_status place_memory(pp_stage *s, pp_error *err)
{
    char *in_slot = calloc((size_t)s->nt + 1, 1), *grad_in_slot = calloc((size_t)s->nt + 1, 1);
    mem_interval *iv = calloc((size_t)s->nt + 1, sizeof *iv);
    int *who = calloc((size_t)s->nt + 1, sizeof *who);
    pp_status st = PP_OK;
    if (!in_slot || !grad_in_slot || !iv || !who) {
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's buffers");
        goto done;
    }
    for (int t = 0; t < s->nt; t++) s->t[t].first_bw = s->t[t].last_bw = -1;
    for (int o = 0; o < s->nops; o++) {
        stage_op *op = &s->ops[o];
        int b = s->nops - 1 - o;
        for (int k = 0; k < op->nout; k++) {
            if (op->out[k] < 0) continue;
            int t = stage_base(s, op->out[k]), g = grad_base(s, op->out[k]);
            if (s->t[t].def_op < 0) s->t[t].def_op = o;
            if (s->t[t].last_op < o) s->t[t].last_op = o;
            if (op->backward && s->t[t].needs_grad) touch_grad(&s->t[g], b);
        }
        for (int k = 0; k < op->nin; k++) {
            if (op->in[k] < 0) continue;
            int t = stage_base(s, op->in[k]), g = grad_base(s, op->in[k]);
            if (s->t[t].last_op < o) s->t[t].last_op = o;
            if (op->backward && s->t[t].needs_grad) touch_grad(&s->t[g], b);
            if (op->backward && stage_op_saves_in(s, op, k)) in_slot[t] |= KEEP_BW;
        }
        for (int k = 0; k < op->nout; k++)
            if (op->out[k] >= 0 && op->backward && (pp_op_get(op->op)->saves_out >> k & 1))
                in_slot[stage_base(s, op->out[k])] |= KEEP_BW;
        if (op->has_weight && !s->opt.whole_backward)   /* W reads these gradients after other microbatches' B */
            for (int k = 0; k < op->nout; k++)
                if (op->out[k] >= 0) grad_in_slot[grad_base(s, op->out[k])] = 1;
    }
    /* what must outlive forward whatever backward reads: graph outputs (read after
     * forward), the stage's inputs, outputs (sent while later work runs) and loss */
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].value >= 0 && s->g->values[s->t[t].value].is_output) in_slot[t] |= KEEP_LIVE;
    for (int i = 0; i < s->ninputs; i++) {
        in_slot[s->input_t[i]] |= KEEP_LIVE;
        grad_in_slot[s->input_t[i]] = 1;
    }
    for (int i = 0; i < s->noutputs; i++) {
        in_slot[s->output_t[i]] |= KEEP_LIVE;
        grad_in_slot[s->output_t[i]] = 1;
        s->t[s->output_t[i]].grad_received = s->t[s->output_t[i]].needs_grad;
    }
    if (s->loss_t >= 0) {
        in_slot[s->loss_t] |= KEEP_LIVE;
        grad_in_slot[s->loss_t] = 1;
        s->t[s->loss_t].grad_received = 1;   /* seeded, never zeroed */
    }
    PP_CHECK_GOTO(stage_place_recompute(s, in_slot, err), st, done);
    /* slot and recompute arena: sequential */
    size_t off = 0, roff = 0;
    for (int t = 0; t < s->nt; t++) {
        tslot *ts = &s->t[t];
        if (ts->view_of >= 0 || ts->at.loc == LOC_PARAM || ts->at.loc == LOC_PARAM16 ||
            ts->at.loc == LOC_CONST)
            continue;
        if (in_slot[t] == KEEP_ARENA) {
            ts->at = (place){LOC_RECOMP, roff};
            roff += align_up(ts->nbytes);
        } else if (in_slot[t]) {
            ts->at = (place){LOC_SLOT, off};
            off += align_up(ts->nbytes);
        }
        if (ts->needs_grad && ts->grad_of < 0 && grad_in_slot[t]) {
            ts->grad = (place){LOC_SLOT, off};
            off += align_up(ts->nbytes);
        }
    }
    for (int o = 0; o < s->nops; o++) {
        stage_op *op = &s->ops[o];
        if (!op->k->aux_bytes) continue;
        pp_tensor in[16], out[16];
        pp_kernel_ctx c;
        /* aux sizes depend on shapes only */
        memset(&c, 0, sizeof c);
        for (int k = 0; k < op->nin && k < 16; k++) {
            memset(&in[k], 0, sizeof in[k]);
            if (op->in[k] < 0) continue;
            in[k].dtype = s->t[op->in[k]].dtype;
            in[k].rank = s->t[op->in[k]].rank;
            memcpy(in[k].dims, s->t[op->in[k]].dims, sizeof in[k].dims);
            in[k].data = (void *)1;
        }
        for (int k = 0; k < op->nout && k < 16; k++) {
            memset(&out[k], 0, sizeof out[k]);
            if (op->out[k] < 0) continue;
            out[k].dtype = s->t[op->out[k]].dtype;
            out[k].rank = s->t[op->out[k]].rank;
            memcpy(out[k].dims, s->t[op->out[k]].dims, sizeof out[k].dims);
            out[k].data = (void *)1;
        }
        c = (pp_kernel_ctx){.node = op->name, .op = op->op, .op_type = op->op_type, .opset = s->g->opset, .attrs = op->attrs,
                            .nattrs = op->nattrs, .in = in, .nin = op->nin, .out = out, .nout = op->nout,
                            .dev = s->dev, .training = s->opt.training};
        op->aux_bytes = op->k->aux_bytes(&c);
        if (op->aux_bytes && op->rerun) {   /* made again with the op's outputs */
            op->aux = (place){LOC_RECOMP, roff};
            roff += align_up(op->aux_bytes);
        } else if (op->aux_bytes) {
            op->aux = (place){LOC_SLOT, off};
            off += align_up(op->aux_bytes);
        }
    }
    s->slot_bytes = off;
    s->recomp_bytes = roff;
    /* forward scratch */
    int n = 0;
    for (int t = 0; t < s->nt; t++) {
        tslot *ts = &s->t[t];
        if (ts->view_of >= 0 || ts->at.loc != LOC_NONE) continue;
        iv[n] = (mem_interval){ts->nbytes, ts->def_op, ts->last_op > ts->def_op ? ts->last_op : ts->def_op, 0};
        who[n++] = t;
    }
    s->fwd_bytes = stage_memplan(iv, n);
    for (int i = 0; i < n; i++) s->t[who[i]].at = (place){LOC_FWD, iv[i].offset};
    /* backward scratch */
    n = 0;
    for (int t = 0; t < s->nt; t++) {
        tslot *ts = &s->t[t];
        if (ts->view_of >= 0 || ts->grad_of >= 0 || !ts->needs_grad || ts->grad.loc != LOC_NONE) continue;
        iv[n] = (mem_interval){ts->nbytes, ts->first_bw, ts->last_bw, 0};
        who[n++] = t;
    }
    s->bwd_bytes = stage_memplan(iv, n);
    for (int i = 0; i < n; i++) s->t[who[i]].grad = (place){LOC_BWD, iv[i].offset};
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].grad_of >= 0) s->t[t].grad = s->t[grad_base(s, t)].grad;
    for (int t = 0; t < s->nt; t++)
        if (s->t[t].view_of >= 0) {
            s->t[t].at = s->t[s->t[t].view_of].at;
            s->t[t].grad = s->t[s->t[t].view_of].grad;
        }
done:
    free(in_slot);
    free(grad_in_slot);
    free(iv);
    free(who);
    return st;
}

pp_status stage_place_tensors(pp_stage *s, pp_error *err)
{
    const pp_graph *g = s->g;
    /* a tslot per value the stage touches, plus the loss's views, labels and scalar */
    s->t = calloc((size_t)g->nvalues + 4, sizeof *s->t);
    s->t_of_value = malloc(((size_t)g->nvalues + 1) * sizeof(int));
    s->ops = calloc((size_t)(s->end - s->first) + 2, sizeof *s->ops);
    if (!s->t || !s->t_of_value || !s->ops) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's tensors");
    for (int v = 0; v < g->nvalues; v++) s->t_of_value[v] = -1;
    PP_CHECK(collect(s, err));
    PP_CHECK(stage_fuse(s, err));
    s->loss_t = -1;
    if (s->last) PP_CHECK(stage_place_loss(s, err));
    PP_CHECK(stage_place_precision(s, err));
    PP_CHECK(place_grads(s, err));
    PP_CHECK(place_grad_aliases(s, err));
    PP_CHECK(place_persistent(s, err));
    PP_CHECK(stage_place_uses(s, err));
    PP_CHECK(place_param_ready(s, err));
    PP_CHECK(place_memory(s, err));
    for (int o = 0; o < s->nops; o++) {
        s->ops[o].work_bytes = stage_op_work_bytes(s, o);
        if (s->ops[o].work_bytes > s->work_bytes) s->work_bytes = s->ops[o].work_bytes;
    }
    return PP_OK;
}
