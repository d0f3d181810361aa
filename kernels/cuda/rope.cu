/* cuda RotaryEmbedding (opset 23): one thread per element of X, which reads its pair's
 * partner; layout kernels/op_args_nn.c, math element_nn.h, as in kernels/cpu/rope.c. A
 * position outside the caches (which the cpu reports) gives NaN here: the device cannot
 * stop to name it. X and Y may be bfloat16 or float16 (io.cuh: fp32 math, one rounding). */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "io.cuh"
#include "nn_cuda.h"
#include "op_args_nn.h"
#include "reduce.cuh"

/* y (+)= x turned by the angles of (cos, sin) * sign: forward (sign 1, assign) and
 * backward (sign -1, add); x and y float32, bfloat16 or float16, the caches float */
__global__ void k_rope(cu_io x, cu_io cosc, cu_io sinc, const int64_t *pos, cu_io y, pp_rope_args a, float sign, int add)
{
    const int64_t half = a.rd / 2;
    CU_FOR(e, a.b * a.h * a.s * a.d) {
        int64_t t = e;
        const int64_t i = t % a.d;
        t /= a.d;
        const int64_t s = t % a.s;
        t /= a.s;
        const int64_t h = t % a.h, b = t / a.h, o = b * a.sb + h * a.sh + s * a.ss;
        float out = cu_ld(x, o + i);
        if (i < a.rd) {
            const int64_t k = a.interleaved ? i / 2 : i % half;
            const int first = a.interleaved ? !(i & 1) : i < half;
            const int64_t i1 = a.interleaved ? 2 * k : k, i2 = a.interleaved ? 2 * k + 1 : k + half;
            const int64_t row = pos ? pos[b * a.s + s] : pp_rope_row(&a, b, s);
            if (pos && (row < 0 || row >= a.npos)) {
                out = nanf("");
            } else {
                const float cs = cu_ld(cosc, row * a.crow + k), sn = sign * cu_ld(sinc, row * a.crow + k);
                const float x1 = cu_ld(x, o + i1), x2 = cu_ld(x, o + i2);
                out = first ? pp_rope_re(x1, x2, cs, sn) : pp_rope_im(x1, x2, cs, sn);
            }
        }
        cu_put(y, o + i, out, add);
    }
}

static pp_status run(const pp_kernel_ctx *c, const pp_rope_args *a, const pp_tensor *x, const pp_tensor *y, float sign,
                     int add, pp_error *err)
{
    const int64_t n = a->b * a->h * a->s * a->d;
    if (!cu_io_float(x->dtype) || !cu_io_float(y->dtype) || !cu_io_float(c->in[1].dtype) || !cu_io_float(c->in[2].dtype))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "dtypes %s -> %s (float32, bfloat16 or float16; float caches)",
                            pp_dtype_name(x->dtype), pp_dtype_name(y->dtype));
    if (!n) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(n);
    k_rope<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(cu_io_of(*x), cu_io_of(c->in[1]), cu_io_of(c->in[2]),
                                                           a->npos ? (const int64_t *)c->in[3].data : NULL, cu_io_of(*y),
                                                           *a, sign, add);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_FWD(pp_cu_rope_forward)
{
    pp_rope_args a;
    PP_CHECK(pp_args_rope(c, &a, err));
    return run(c, &a, &c->in[0], &c->out[0], 1.f, 0, err);
}

PP_CU_BWD(pp_cu_rope_backward)
{
    pp_rope_args a;
    PP_CHECK(pp_args_rope(c, &a, err));
    if (!grad_out[0].data || !grad_in[0].data) return PP_OK;
    return run(c, &a, &grad_out[0], &grad_in[0], -1.f, 1, err);
}
