/* Resize on the cpu (opsets 13-19, nearest and linear over any axes): the per-axis tables
 * of kernels/resize_plan.c and its element functions, which the cuda twin calls too;
 * backward gathers each input's gradient from the outputs that read it. */
#include "cpu_math.h"
#include "resize_plan.h"

#include <stdlib.h>

PP_FWD(pp_cpu_resize_forward)
{
    pp_resize_plan p;
    PP_CHECK(pp_resize_plan_make(c, &p, err));
    const float *x = c->in[0].data;
    float *y = c->out[0].data;
    for (int64_t e = 0; e < pp_tensor_numel(&c->out[0]); e++) y[e] = pp_resize_out(&p, p.taps, x, e);
    free(p.mem);
    return PP_OK;
}

PP_BWD(pp_cpu_resize_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    pp_resize_plan p;
    PP_CHECK(pp_resize_plan_make(c, &p, err));
    const float *dy = grad_out[0].data;
    float *dx = grad_in[0].data;
    for (int64_t e = 0; e < pp_tensor_numel(&grad_in[0]); e++) dx[e] += pp_resize_grad(&p, p.taps, p.rng, dy, e);
    free(p.mem);
    return PP_OK;
}
