/* Op fusion at plan time: exact GELU as exported below opset 20 (PyTorch's F.gelu, the
 * example GPT) is five elementwise ops, y = (x * (erf(x / sqrt2) + 1)) * 0.5, each a pass
 * over the MLP activation forward and more backward; it becomes one Gelu op. The four
 * intermediates become unused aliases of x. Runs after collect(), before gradients and
 * memory are planned. */
#include "stage_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The op that is the only reader of tslot t (graph-wide, so no later stage reads it
 * either), if it has type op_type and lies in this stage; else -1. */
static int only_reader(const pp_stage *s, const int *op_of_node, int t, const char *op_type)
{
    int v = s->t[t].value;
    if (v < 0) return -1;
    const pp_value *val = &s->g->values[v];
    if (val->nconsumers != 1 || val->is_output) return -1;
    int node = val->consumers[0];
    if (node < s->first || node >= s->end) return -1;
    int o = op_of_node[node - s->first];
    return o >= 0 && !strcmp(s->ops[o].op_type, op_type) ? o : -1;
}

/* A float scalar constant within 1e-6 of want. */
static int is_const(const pp_stage *s, int t, double want)
{
    if (t < 0 || s->t[t].value < 0) return 0;
    const pp_const_tensor *c = pp_graph_const(s->g, s->t[t].value);
    if (!c || c->dtype != PP_DTYPE_F32 || c->nbytes != sizeof(float)) return 0;
    float f;
    memcpy(&f, c->data, sizeof f);
    return fabs((double)f - want) <= 1e-6 * fabs(want);
}

/* The input of binary op o that is not t, or -2 when t is not an input. */
static int other_input(const stage_op *op, int t)
{
    if (op->nin != 2 || op->nout != 1) return -2;
    return op->in[0] == t ? op->in[1] : op->in[1] == t ? op->in[0] : -2;
}

/* If op o starts the GELU pattern, fills chain[5] with its ops (Div Erf Add Mul Mul)
 * and returns x's tslot; else -1. */
static int match_gelu(const pp_stage *s, const int *op_of_node, int o, int chain[5])
{
    const stage_op *div = &s->ops[o];
    if (strcmp(div->op_type, "Div") || div->nin != 2 || div->nout != 1 || div->in[0] < 0 ||
        !is_const(s, div->in[1], sqrt(2.0)))
        return -1;
    int x = div->in[0];
    chain[0] = o;
    if ((chain[1] = only_reader(s, op_of_node, div->out[0], "Erf")) < 0) return -1;
    if ((chain[2] = only_reader(s, op_of_node, s->ops[chain[1]].out[0], "Add")) < 0 ||
        !is_const(s, other_input(&s->ops[chain[2]], s->ops[chain[1]].out[0]), 1.0))
        return -1;
    if ((chain[3] = only_reader(s, op_of_node, s->ops[chain[2]].out[0], "Mul")) < 0 ||
        other_input(&s->ops[chain[3]], s->ops[chain[2]].out[0]) != x)
        return -1;
    if ((chain[4] = only_reader(s, op_of_node, s->ops[chain[3]].out[0], "Mul")) < 0 ||
        !is_const(s, other_input(&s->ops[chain[4]], s->ops[chain[3]].out[0]), 0.5))
        return -1;
    return s->t[x].dtype == PP_DTYPE_F32 ? x : -1;
}

pp_status stage_fuse(pp_stage *s, pp_error *err)
{
    const pp_kernel *gelu = pp_kernel_find("Gelu", s->dev->kind, PP_DTYPE_F32);
    if (!gelu || s->nops < 5) return PP_OK;
    int span = s->end - s->first;
    int *op_of_node = malloc((size_t)span * sizeof *op_of_node);
    char *gone = calloc((size_t)s->nops, 1);
    if (!op_of_node || !gone) {
        free(op_of_node);
        free(gone);
        return pp_error_set(err, PP_ERR_NOMEM, "out of memory fusing ops");
    }
    for (int i = 0; i < span; i++) op_of_node[i] = -1;
    for (int o = 0; o < s->nops; o++)
        if (s->ops[o].node >= s->first && s->ops[o].node < s->end) op_of_node[s->ops[o].node - s->first] = o;
    for (int o = 0; o < s->nops; o++) {
        int chain[5], x = gone[o] ? -1 : match_gelu(s, op_of_node, o, chain);
        if (x < 0) continue;
        /* the last op of the chain becomes Gelu(x): x is defined before the Div, and
         * the readers of the result come after the last Mul */
        stage_op *last = &s->ops[chain[4]];
        last->op_type = "Gelu";
        last->k = gelu;
        last->attrs = NULL;
        last->nattrs = 0;
        last->nin = 1;
        last->in[0] = x;
        if (last->host_in) last->host_in[0] = NULL;
        pp_log(PP_LOG_DEBUG, "stage: fused GELU '%s' .. '%s' into one Gelu", s->ops[chain[0]].name, last->name);
        for (int k = 0; k < 4; k++) {
            gone[chain[k]] = 1;
            s->t[s->ops[chain[k]].out[0]].view_of = x;   /* unused from now on */
        }
    }
    int n = 0;
    for (int o = 0; o < s->nops; o++) {
        if (gone[o]) {
            free(s->ops[o].in);
            free(s->ops[o].out);
            free(s->ops[o].host_in);
            continue;
        }
        s->ops[n++] = s->ops[o];
    }
    s->nops = n;
    free(op_of_node);
    free(gone);
    return PP_OK;
}
