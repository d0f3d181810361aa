/* Functors of the cuda elementwise kernels: each wraps element.h's PP_HD math, so the GPU
 * computes exactly the formulas the cpu kernels are tested with. Unary: fwd(x), grad(v)
 * with v what the backward reads (src: GRAD_X the saved input, GRAD_Y the saved output,
 * GRAD_NONE nothing: the table saves no tensor for it); binary: fwd(a, b), dx(a, b), dy(a, b). */
#ifndef PP_KERNELS_CUDA_EW_OPS_CUH
#define PP_KERNELS_CUDA_EW_OPS_CUH

#include "element.h"
#include "launch.h"

/* Offsets into each input of output element i under a broadcast plan. */
__device__ inline void bc_offsets(const pp_cu_bcast &b, int64_t i, int64_t *off)
{
    for (int k = 0; k < PP_CU_MAX_IN; k++) off[k] = 0;
    if (b.same) {
        for (int k = 0; k < b.nin; k++) off[k] = i;
        return;
    }
    for (int d = b.rank - 1; d >= 0; d--) {
        int64_t q = i / b.dims[d], idx = i - q * b.dims[d];
        i = q;
        for (int k = 0; k < b.nin; k++) off[k] += idx * b.st[k][d];
    }
}

enum { GRAD_X, GRAD_Y, GRAD_NONE };

#define UNARY_OP(name, SRC, FWD, GRAD)                                    \
    struct name {                                                         \
        static const int src = SRC;                                       \
        __device__ float fwd(float x) const { return FWD; }               \
        __device__ float grad(float v) const { return GRAD; }             \
    };
UNARY_OP(op_sqrt, GRAD_Y, sqrtf(x), 0.5f / v)
UNARY_OP(op_neg, GRAD_NONE, -x, ((void)v, -1.f))
UNARY_OP(op_reciprocal, GRAD_Y, 1.f / x, -v * v)
UNARY_OP(op_relu, GRAD_Y, pp_el_relu(x), pp_el_relu_grad(v))
UNARY_OP(op_sigmoid, GRAD_Y, pp_el_sigmoid(x), pp_el_sigmoid_grad_y(v))
UNARY_OP(op_tanh, GRAD_Y, pp_el_tanh(x), pp_el_tanh_grad_y(v))
UNARY_OP(op_erf, GRAD_X, pp_el_erf(x), pp_el_erf_grad(v))
UNARY_OP(op_gelu, GRAD_X, pp_el_gelu(x), pp_el_gelu_grad(v))
UNARY_OP(op_gelu_tanh, GRAD_X, pp_el_gelu_tanh(x), pp_el_gelu_tanh_grad(v))
UNARY_OP(op_identity, GRAD_NONE, x, ((void)v, 1.f))
#undef UNARY_OP

struct op_leaky {
    static const int src = GRAD_X;
    float alpha;
    __device__ float fwd(float x) const { return pp_el_leaky_relu(x, alpha); }
    __device__ float grad(float v) const { return pp_el_leaky_relu_grad(v, alpha); }
};

#define BINARY_OP(name, FWD, DX, DY)                                      \
    struct name {                                                         \
        __device__ float fwd(float a, float b) const { return FWD; }      \
        __device__ float dx(float a, float b) const { return DX; }        \
        __device__ float dy(float a, float b) const { return DY; }        \
    };
BINARY_OP(op_add, a + b, ((void)a, (void)b, 1.f), 1.f)
BINARY_OP(op_sub, a - b, ((void)a, (void)b, 1.f), -1.f)
BINARY_OP(op_mul, a * b, b, a)
BINARY_OP(op_div, a / b, 1.f / b, -a / (b * b))
BINARY_OP(op_pow, pp_el_pow(a, b), pp_el_pow_grad_base(a, b), pp_el_pow_grad_exp(a, pp_el_pow(a, b)))
#undef BINARY_OP

#endif
