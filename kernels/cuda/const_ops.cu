/* cuda Shape, ConstantOfShape and Range, which graph loading folds away: when one is
 * left, the cpu kernel computes it from the host copies of its constant inputs and the
 * result is uploaded, as kernels/cpu/const_ops.c computes it. */
#include "cuda_internal.h"
#include "nn_cuda.h"

#include <stdlib.h>

#define FOLD_MAX_IN 3     /* Range's start, limit, delta */

/* ---------------- Shape, ConstantOfShape, Range ---------------- */

/* Runs the cpu kernel on host memory and uploads its one output. values: 1 when the cpu
 * kernel reads the inputs' values (then they must have host copies), 0 when only shapes. */
static pp_status host_fold(const pp_kernel_ctx *c, int values, pp_error *err)
{
    const pp_kernel *k = pp_kernel_find(c->op, PP_DEVICE_CPU, PP_DTYPE_F32);
    if (!k || c->nout != 1 || c->nin > FOLD_MAX_IN)
        return pp_args_fail(c, PP_ERR_INTERNAL, err, "no cpu kernel to fold this node with");
    pp_tensor in[FOLD_MAX_IN], out = c->out[0];
    for (int i = 0; i < c->nin; i++) {
        in[i] = c->in[i];
        if (values && in[i].data) PP_CHECK(pp_cu_host_input(c, i, "a shape-valued input", (const void **)&in[i].data, err));
    }
    const size_t nb = pp_tensor_nbytes(&out);
    void *host = malloc(nb ? nb : 1);
    if (!host) return pp_args_fail(c, PP_ERR_NOMEM, err, "out of host memory");
    out.data = host;
    pp_kernel_ctx h = *c;
    h.in = in;
    h.out = &out;
    h.host_in = NULL;
    h.aux = NULL;
    pp_status st = k->forward(&h, err);
    if (st == PP_OK && nb) st = pp_device_copy_from_host(c->dev, c->out[0].data, host, nb, err);
    free(host);
    return st;
}

PP_CU_FWD(pp_cu_shape_forward) { return host_fold(c, 0, err); }
PP_CU_FWD(pp_cu_constant_of_shape_forward) { return host_fold(c, 1, err); }
PP_CU_FWD(pp_cu_range_forward) { return host_fold(c, 1, err); }
