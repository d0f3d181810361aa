/* Functors of the cuda elementwise kernels, made from kernels/element_ops.h's lists, so the
 * GPU computes exactly the formulas the cpu kernels and the constant folder use. */
#ifndef PP_KERNELS_CUDA_EW_OPS_CUH
#define PP_KERNELS_CUDA_EW_OPS_CUH

#include <onnxpipe/element_ops.h>
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

/* One functor per row of kernels/element_ops.h: el_unary_<ID> {p; fwd(x); grad(x, y)} with
 * reads, what grad reads of the forward; el_binary_<ID> {fwd, da, db}; el_compare_<ID>; el_int_<ID>; el_int_unary_<ID>; el_predicate_<ID>. */
#define UNARY_FUNCTOR(ID, READS, FWD, GRAD)                                                  \
    struct el_unary_##ID {                                                                   \
        static const int reads = (READS);                                                    \
        pp_el_params p;                                                                      \
        __device__ float fwd(float x) const { return FWD; }                                  \
        __device__ float grad(float x, float y) const { (void)x, (void)y; return GRAD; }      \
    };
PP_EL_UNARY_LIST(UNARY_FUNCTOR)
#undef UNARY_FUNCTOR

#define BINARY_FUNCTOR(ID, FWD, DA, DB)                                                      \
    struct el_binary_##ID {                                                                  \
        __device__ float fwd(float a, float b) const { return FWD; }                         \
        __device__ float da(float a, float b) const { (void)a, (void)b; return DA; }          \
        __device__ float db(float a, float b) const { (void)a, (void)b; return DB; }          \
    };
PP_EL_BINARY_LIST(BINARY_FUNCTOR)
#undef BINARY_FUNCTOR

#define COMPARE_FUNCTOR(ID, PRED)                                                            \
    struct el_compare_##ID {                                                                 \
        template <typename T> __device__ uint8_t operator()(T a, T b) const { return (PRED); } \
    };
PP_EL_COMPARE_LIST(COMPARE_FUNCTOR)
#undef COMPARE_FUNCTOR

/* el_int_<ID> {p; operator()(a, b)}: the binary ops on integers, in int64 (kernels/cuda/logic.cu) */
#define INT_FUNCTOR(ID, EXPR)                                                                \
    struct el_int_##ID {                                                                     \
        pp_el_params p;                                                                      \
        __device__ int64_t operator()(int64_t a, int64_t b) const { (void)p; return (EXPR); } \
    };
PP_EL_INT_LIST(INT_FUNCTOR)
#undef INT_FUNCTOR

/* el_int_unary_<ID> {operator()(x)}: the unary ops on integers, in int64 (kernels/cuda/logic.cu) */
#define INT_UNARY_FUNCTOR(ID, EXPR)                                                          \
    struct el_int_unary_##ID {                                                               \
        __device__ int64_t operator()(int64_t x) const { return (EXPR); }                    \
    };
PP_EL_INT_UNARY_LIST(INT_UNARY_FUNCTOR)
#undef INT_UNARY_FUNCTOR

/* el_predicate_<ID> {p; operator()(x)}: x the element as a float (kernels/cuda/logic.cu) */
#define PREDICATE_FUNCTOR(ID, DT, EXPR)                                                      \
    struct el_predicate_##ID {                                                               \
        pp_el_params p;                                                                      \
        __device__ uint8_t operator()(float x) const { return (EXPR) != 0; }                 \
    };
PP_EL_PREDICATE_LIST(PREDICATE_FUNCTOR)
#undef PREDICATE_FUNCTOR

#endif
