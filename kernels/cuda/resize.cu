/* cuda Resize: the host builds kernels/resize_plan.c's tables, uploads them into the
 * workspace, and one thread per output (forward) or input (backward, a gather: no atomics)
 * calls resize_plan.h's element functions, as kernels/cpu/resize.c does. */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "reduce.cuh"
#include "resize_plan.h"

#include <stdlib.h>

__global__ void k_resize(pp_resize_plan p, const float *x, float *y, int64_t n)
{
    CU_FOR(e, n) y[e] = pp_resize_out(&p, p.taps, x, e);
}

__global__ void k_resize_grad(pp_resize_plan p, const float *dy, float *dx, int64_t n)
{
    CU_FOR(e, n) dx[e] += pp_resize_grad(&p, p.taps, p.rng, dy, e);
}

/* the plan with its tables on the device (in the workspace) */
static pp_status plan_on_device(const pp_kernel_ctx *c, pp_resize_plan *p, pp_error *err)
{
    PP_CHECK(pp_resize_plan_make(c, p, err));
    void *dev = NULL;
    pp_status st = pp_cuda_workspace(c, p->bytes + 16, &dev, err);
    if (st == PP_OK) st = pp_device_copy_from_host(c->dev, dev, p->mem, p->bytes, err);
    if (st == PP_OK) {
        p->rng = (int64_t *)((char *)dev + ((char *)p->rng - (char *)p->mem));
        p->taps = (pp_resize_tap *)dev;
    }
    free(p->mem);
    p->mem = NULL;
    return st;
}

PP_CU_FWD(pp_cu_resize_forward)
{
    pp_resize_plan p;
    PP_CHECK(plan_on_device(c, &p, err));
    const int64_t n = pp_tensor_numel(&c->out[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_resize<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(p, (const float *)c->in[0].data, (float *)c->out[0].data,
                                                            n);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_resize_backward)
{
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    pp_resize_plan p;
    PP_CHECK(plan_on_device(c, &p, err));
    const int64_t n = pp_tensor_numel(&grad_in[0]);
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_resize_grad<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(p, (const float *)grad_out[0].data,
                                                                 (float *)grad_in[0].data, n);
    CU_LAUNCHED(c);
    return PP_OK;
}
