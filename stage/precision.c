/* Mixed precision (--precision bf16 | fp16): which float tensors a stage stores in 16 bits,
 * the 16-bit parameter copies that matrix products read (fp32 master weights stay in the
 * flat buffer, their gradients accumulate there in fp32), the casts that round the other
 * fp32 operands of a matrix product, and each op's kernel for the dtypes it sees. */
#include "stage_places.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <onnxpipe/backend/kernels_backend.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/op_info.h>
#include <onnxpipe/graph_ir.h>
#include <onnxpipe/kernels.h>

static int is_16bit(pp_dtype d) { return d == PP_DTYPE_BF16 || d == PP_DTYPE_F16; }

/* The storage dtype of every graph value under 16-bit precision lp, decided over the whole
 * graph from the op registry's classes (pp_prec), so that a tensor crossing a cut has the
 * same type on both sides and the numerics do not depend on where the cuts are. Weights
 * and constants are "weak" operands, as Python scalars are in torch's type promotion: they
 * never widen an op's 16-bit activations; an op that reads only weights (an embedding
 * lookup) makes 16-bit activations. */
static void value_dtypes(const pp_graph *g, pp_dtype lp, pp_dtype *vd)
{
    for (int v = 0; v < g->nvalues; v++) vd[v] = g->values[v].dtype;
    for (int i = 0; i < g->nnodes; i++) {
        const pp_node *n = &g->nodes[i];
        const pp_op_info *oi = pp_op_get(n->op);
        pp_dtype out = PP_DTYPE_F32;
        if (!oi) continue;
        if ((oi->flags & PP_OPF_VIEW) && n->ninputs > 0 && n->inputs[0] >= 0) {
            out = vd[n->inputs[0]];
        } else if (oi->prec == PP_PREC_LOWP) {
            out = lp;
        } else if (oi->prec == PP_PREC_FOLLOW) {
            int wide = 0, narrow = 0, weights = 0;
            for (int k = 0; k < n->ninputs; k++) {
                int v = n->inputs[k];
                if (v < 0 || !pp_dtype_is_float(vd[v])) continue;
                if (g->values[v].init >= 0) weights |= g->values[v].is_param;
                else if (is_16bit(vd[v])) narrow = 1;
                else wide = 1;
            }
            out = wide ? PP_DTYPE_F32 : narrow || weights ? lp : PP_DTYPE_F32;
        }
        for (int k = 0; k < n->noutputs; k++) {
            int v = n->outputs[k];
            if (v >= 0 && g->values[v].init < 0 && g->values[v].dtype == PP_DTYPE_F32) vd[v] = out;
        }
    }
}

static void set_dtype(tslot *t, pp_dtype d)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    t->dtype = d;
    t->nbytes = (size_t)n * pp_dtype_size(d);
}

/* A new tensor like t (same shape) in dtype d, not a graph value. */
static int new_tslot(pp_stage *s, int like, pp_dtype d)
{
    tslot *t = &s->t[s->nt];
    *t = s->t[like];
    t->value = -1;
    t->view_of = -1;
    t->grad_of = -1;
    t->def_op = t->last_op = -1;
    t->param = -1;
    t->master = -1;
    t->at = t->grad = (place){LOC_NONE, 0};
    set_dtype(t, d);
    return s->nt++;
}

static const pp_attr to_bf16 = {.name = "to", .type = PP_ATTR_INT, .i = PP_DTYPE_BF16};
static const pp_attr to_f16 = {.name = "to", .type = PP_ATTR_INT, .i = PP_DTYPE_F16};

/* A Cast op rounding tslot src into dst, run before the op named `reader`. */
static pp_status make_cast(pp_stage *s, stage_op *op, int src, int dst, const char *reader, pp_error *err)
{
    memset(op, 0, sizeof *op);
    char **names = pp_realloc_array(s->names, (size_t)s->nnames + 1, sizeof *names);
    if (names) s->names = names;
    size_t len = strlen(reader) + 16;
    char *name = names ? malloc(len) : NULL;
    op->in = malloc(sizeof(int));
    op->out = malloc(sizeof(int));
    op->host_in = calloc(1, sizeof *op->host_in);
    if (!name || !op->in || !op->out || !op->host_in) {
        free(name);
        free(op->in);
        free(op->out);
        free(op->host_in);
        memset(op, 0, sizeof *op);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory planning 16-bit casts");
    }
    snprintf(name, len, "%s/to_%s", reader, s->opt.precision == PP_DTYPE_F16 ? "fp16" : "bf16");
    s->names[s->nnames++] = name;
    op->node = -1;
    op->name = name;
    op->op = PP_OP_CAST;
    op->op_type = "Cast";
    op->attrs = s->opt.precision == PP_DTYPE_F16 ? &to_f16 : &to_bf16;
    op->nattrs = 1;
    op->nin = op->nout = 1;
    op->in[0] = src;
    op->out[0] = dst;
    return PP_OK;
}

/* Operands 0 and 1 of the matrix products in 16 bits: a parameter's 16-bit copy, else a
 * cast made once per tensor before its first such reader. ops grows into `ops` (which has
 * room for every cast). */
static pp_status round_operands(pp_stage *s, stage_op *ops, int *copy_of, int *cast_of, pp_error *err)
{
    pp_dtype lp = s->opt.precision;
    int n = 0;
    for (int o = 0; o < s->nops; o++) {
        stage_op op = s->ops[o];
        for (int k = 0; pp_op_get(op.op)->prec == PP_PREC_LOWP && k < 2 && k < op.nin; k++) {
            int t = op.in[k];
            if (t < 0 || s->t[t].dtype != PP_DTYPE_F32) continue;
            if (op.host_in) op.host_in[k] = NULL;   /* the host copy is the fp32 initializer */
            if (s->t[t].view_of < 0 && stage_is_param(s, t)) {
                if (copy_of[t] < 0) {
                    copy_of[t] = new_tslot(s, t, lp);
                    s->t[copy_of[t]].master = t;
                }
                op.in[k] = copy_of[t];
                continue;
            }
            if (cast_of[t] < 0) {
                cast_of[t] = new_tslot(s, t, lp);
                pp_status st = make_cast(s, &ops[n], t, cast_of[t], op.name, err);
                if (st != PP_OK) {   /* free the casts made so far: s->ops still owns the rest */
                    for (int i = 0; i <= n; i++)
                        if (ops[i].node < 0 && ops[i].op == PP_OP_CAST) {
                            free(ops[i].in);
                            free(ops[i].out);
                            free(ops[i].host_in);
                        }
                    free(ops);
                    return st;
                }
                n++;
            }
            op.in[k] = cast_of[t];
        }
        ops[n] = op;
        if (op.attrs == s->ops[o].folded) ops[n].attrs = ops[n].folded;   /* the fusion passes', inside the op */
        n++;
    }
    free(s->ops);
    s->ops = ops;
    s->nops = n;
    return PP_OK;
}

/* Each op's kernel for the dtypes it sees: the 16-bit one when a float tensor it reads or
 * writes is 16-bit (the backend's own, or the fp32 kernel behind kernels/lowp.c's casts). */
static pp_status pick_kernels(pp_stage *s, pp_error *err)
{
    for (int o = 0; o < s->nops; o++) {
        stage_op *op = &s->ops[o];
        int narrow = 0;
        for (int k = 0; k < op->nin; k++) narrow |= op->in[k] >= 0 && is_16bit(s->t[op->in[k]].dtype);
        for (int k = 0; k < op->nout; k++) narrow |= op->out[k] >= 0 && is_16bit(s->t[op->out[k]].dtype);
        if (!narrow) continue;
        op->k = pp_kernel_find(op->op, pp_device_get_kind(s->dev), s->opt.precision);
        if (!op->k)
            return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (%s): no %s kernel computing in %s",
                                op->name, op->op_type, pp_device_kind_name(pp_device_get_kind(s->dev)),
                                pp_dtype_name(s->opt.precision));
    }
    return PP_OK;
}

pp_status stage_place_precision(pp_stage *s, pp_error *err)
{
    pp_dtype lp = s->opt.precision;
    if (lp == PP_DTYPE_UNDEFINED || lp == PP_DTYPE_F32) return PP_OK;
    if (!is_16bit(lp))
        return pp_error_set(err, PP_ERR_INVALID_ARG, "precision %s: use float32, bfloat16 or float16",
                            pp_dtype_name(lp));
    const pp_graph *g = s->g;
    /* room for a 16-bit copy or cast of every tensor, and a cast per op */
    size_t cap = (size_t)s->nt * 2 + 1;
    tslot *t = pp_realloc_array(s->t, cap, sizeof *t);
    if (t) s->t = t;
    pp_dtype *vd = malloc(((size_t)g->nvalues + 1) * sizeof *vd);
    int *copy_of = malloc(cap * sizeof *copy_of), *cast_of = malloc(cap * sizeof *cast_of);
    stage_op *ops = calloc((size_t)s->nops * 3 + 1, sizeof *ops);   /* two casts per op at most */
    pp_status st = PP_OK;
    if (!t || !vd || !copy_of || !cast_of || !ops) {
        free(ops);
        st = pp_error_set(err, PP_ERR_NOMEM, "out of memory planning mixed precision");
        goto done;
    }
    value_dtypes(g, lp, vd);
    for (int i = 0; i < s->nt; i++) {
        tslot *x = &s->t[i];
        if (x->value >= 0 && g->values[x->value].init < 0 && x->dtype != vd[x->value]) set_dtype(x, vd[x->value]);
    }
    for (int i = 0; i < s->nt; i++)   /* the loss's views of the logits */
        if (s->t[i].view_of >= 0 && s->t[i].dtype != s->t[s->t[i].view_of].dtype)
            set_dtype(&s->t[i], s->t[s->t[i].view_of].dtype);
    for (int i = 0; i < s->ninputs; i++)   /* what crosses the cuts: 16 bits where the tensor is */
        s->inputs[i].dtype = s->t[s->input_t[i]].dtype, s->inputs[i].nbytes = s->t[s->input_t[i]].nbytes;
    for (int i = 0; i < s->noutputs; i++)
        s->outputs[i].dtype = s->t[s->output_t[i]].dtype, s->outputs[i].nbytes = s->t[s->output_t[i]].nbytes;
    for (int i = 0; i < s->nt; i++) copy_of[i] = cast_of[i] = -1;
    st = round_operands(s, ops, copy_of, cast_of, err);   /* takes ops */
    if (st == PP_OK) st = pick_kernels(s, err);
done:
    free(vd);
    free(copy_of);
    free(cast_of);
    return st;
}

int pp_precision_parse(const char *name, pp_dtype *out)
{
    static const struct {
        const char *name;
        pp_dtype dtype;
    } names[] = {{"fp32", PP_DTYPE_F32}, {"bf16", PP_DTYPE_BF16}, {"fp16", PP_DTYPE_F16}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name) || pp_dtype_parse(name) == names[i].dtype) {
            *out = names[i].dtype;
            return 1;
        }
    return 0;
}

const char *pp_precision_name(pp_dtype precision)
{
    return precision == PP_DTYPE_BF16 ? "bf16" : precision == PP_DTYPE_F16 ? "fp16" : "fp32";
}
