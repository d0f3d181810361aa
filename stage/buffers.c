/* Where a stage's tensors are in memory: a place in a stash slot or a buffer, the data and
 * gradient of a tensor, the ports' buffers the comm reads and writes, graph outputs, and the
 * BatchNorm statistics a training forward updates. */
#include "stage_run.h"

#include <onnxpipe/graph_ir.h>

void *stage_ptr(pp_stage *s, int slot, place p)
{
    switch (p.loc) {
    case LOC_PARAM: return (char *)s->param_buf + p.offset;
    case LOC_PARAM16: return (char *)s->param16_buf + p.offset;
    case LOC_CONST: return (char *)s->const_buf + p.offset;
    case LOC_SLOT: return (char *)s->slot_buf + (size_t)slot * s->slot_bytes + p.offset;
    case LOC_FWD: return (char *)s->fwd_buf + p.offset;
    case LOC_BWD: return (char *)s->bwd_buf + p.offset;
    case LOC_RECOMP: return (char *)s->recomp_buf + p.offset;
    default: return NULL;
    }
}

void *stage_tensor_data(pp_stage *s, int slot, int t) { return stage_ptr(s, slot, s->t[t].at); }

void *stage_grad_data(pp_stage *s, int slot, int t)
{
    const tslot *ts = &s->t[t];
    if (!ts->needs_grad) return NULL;
    if (ts->grad.loc == LOC_PARAM) return (char *)s->grad_buf + ts->grad.offset;
    return stage_ptr(s, slot, ts->grad);
}

static void *port_buffer(pp_stage *s, int slot, int n, const int *ts, int i, int grad)
{
    if (slot < 0 || slot >= s->opt.slots || i < 0 || i >= n) return NULL;
    return grad ? stage_grad_data(s, slot, ts[i]) : stage_tensor_data(s, slot, ts[i]);
}

void *pp_stage_input_buffer(pp_stage *s, int slot, int i)
{
    return port_buffer(s, slot, s->ninputs, s->input_t, i, 0);
}
void *pp_stage_output_buffer(pp_stage *s, int slot, int i)
{
    return port_buffer(s, slot, s->noutputs, s->output_t, i, 0);
}
void *pp_stage_grad_output_buffer(pp_stage *s, int slot, int i)
{
    return port_buffer(s, slot, s->noutputs, s->output_t, i, 1);
}
void *pp_stage_grad_input_buffer(pp_stage *s, int slot, int i)
{
    return port_buffer(s, slot, s->ninputs, s->input_t, i, 1);
}

void *pp_stage_value_buffer(pp_stage *s, int slot, int value)
{
    if (slot < 0 || slot >= s->opt.slots || value < 0 || value >= s->g->nvalues) return NULL;
    int t = s->t_of_value[value];
    if (t < 0 || !s->g->values[value].is_output || s->t[t].at.loc != LOC_SLOT) return NULL;
    return stage_tensor_data(s, slot, t);
}

pp_dtype pp_stage_value_dtype(const pp_stage *s, int value)
{
    if (value < 0 || value >= s->g->nvalues || s->t_of_value[value] < 0) return PP_DTYPE_UNDEFINED;
    return s->t[s->t_of_value[value]].dtype;
}


/* The running mean (input 3) and variance (input 4) of a BatchNormalization that
 * returns them updated (outputs 1 and 2): run.c copies them back into the constants. */
static int buffer_tslot(const pp_stage *s, int o, int k)
{
    const stage_op *op = &s->ops[o];
    if (op->op != PP_OP_BATCH_NORMALIZATION || op->nin < 5 || op->nout < 3 || op->out[k - 2] < 0) return -1;
    int t = op->in[k];
    return t >= 0 && s->t[t].at.loc == LOC_CONST && s->t[t].value >= 0 ? t : -1;
}

int pp_stage_num_buffers(const pp_stage *s)
{
    int n = 0;
    for (int o = 0; s->opt.training && o < s->nops; o++)
        for (int k = 3; k <= 4; k++) n += buffer_tslot(s, o, k) >= 0;
    return n;
}

pp_status pp_stage_buffer_at(pp_stage *s, int i, pp_stage_buffer *out, pp_error *err)
{
    for (int o = 0; s->opt.training && o < s->nops; o++)
        for (int k = 3; k <= 4; k++) {
            int t = buffer_tslot(s, o, k);
            if (t < 0 || i-- > 0) continue;
            const tslot *ts = &s->t[t];
            const pp_value *v = &s->g->values[ts->value];
            *out = (pp_stage_buffer){.name = v->name, .value = ts->value, .data = stage_ptr(s, 0, ts->at),
                                     .dtype = ts->dtype, .shape = v->shape, .nbytes = ts->nbytes};
            return PP_OK;
        }
    return pp_error_set(err, PP_ERR_INVALID_ARG, "stage buffer %d out of range (0..%d)", i,
                        pp_stage_num_buffers(s) - 1);
}
