/* A stage's tensors and ports as the placing makes them: the tslot of a graph value, created
 * on first use, and a port to a neighbouring stage over a tslot (an input, or an output). */
#include "stage_places.h"

#include <string.h>
#include <onnxpipe/core_util.h>
#include <onnxpipe/graph_ir.h>

pp_status stage_tslot_of(pp_stage *s, int v, pp_error *err, int *out)
{
    if (s->t_of_value[v] >= 0) {
        *out = s->t_of_value[v];
        return PP_OK;
    }
    const pp_value *val = &s->g->values[v];
    int64_t numel = pp_shape_numel(&val->shape);
    if (numel < 0) {
        char buf[128];
        return pp_error_set(err, PP_ERR_SHAPE,
                            "value '%s' has shape %s, not fully known; bind symbolic dims with --batch / --dim",
                            val->name, pp_shape_format(&val->shape, buf, sizeof buf));
    }
    tslot *t = &s->t[s->nt];
    memset(t, 0, sizeof *t);
    t->value = v;
    t->view_of = -1;
    t->dtype = val->dtype;
    t->rank = val->shape.rank;
    memcpy(t->dims, val->shape.dims, sizeof t->dims);
    t->nbytes = (size_t)numel * pp_dtype_size(val->dtype);
    t->def_op = -1;
    t->last_op = -1;
    t->param = -1;
    t->master = -1;
    s->t_of_value[v] = s->nt;
    *out = s->nt++;
    return PP_OK;
}

pp_status stage_add_port(pp_stage *s, int input, int t, int is_data, pp_error *err)
{
    pp_stage_port **ports = input ? &s->inputs : &s->outputs;
    int **ts = input ? &s->input_t : &s->output_t;
    int *n = input ? &s->ninputs : &s->noutputs;
    pp_stage_port *p = pp_realloc_array(*ports, (size_t)*n + 1, sizeof *p);
    if (p) *ports = p;
    int *q = pp_realloc_array(*ts, (size_t)*n + 1, sizeof *q);
    if (q) *ts = q;
    if (!p || !q) return pp_error_set(err, PP_ERR_NOMEM, "out of memory placing the stage's tensors");
    const tslot *x = &s->t[t];
    if (x->value >= 0) {
        const pp_value *v = &s->g->values[x->value];
        p[*n] = (pp_stage_port){v->name, x->value, is_data, v->dtype, v->shape, x->nbytes};
    } else {   /* labels the caller names for the loss: not a value of the graph */
        p[*n] = (pp_stage_port){s->opt.loss.labels, -1, is_data, x->dtype, pp_shape_make(x->rank, x->dims),
                                x->nbytes};
    }
    q[*n] = t;
    (*n)++;
    return PP_OK;
}
