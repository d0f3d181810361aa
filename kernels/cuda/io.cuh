/* Float tensors as the cuda kernels read and write them: float32, bfloat16 or float16 in
 * memory, fp32 in registers. A load widens exactly and a store rounds once to nearest
 * even, with element.h's conversions (the cpu adapter's bits), so one kernel serves the
 * float32 table and the native 16-bit ones (table.cu). The dtype is a run-time field,
 * the same for every thread of a launch (no divergence); the aligned paths move
 * PP_CU_VEC elements per access: one 128-bit load of a 16-bit tensor, two of a float32
 * one (launch_io.c decides when a call may take them). */
#ifndef PP_KERNELS_CUDA_IO_CUH
#define PP_KERNELS_CUDA_IO_CUH

#include <onnxpipe/element.h>

#include "launch_io.h"

/* A float tensor's data and dtype (data NULL: absent). */
struct cu_io {
    void *p;
    pp_dtype t;
};

static inline cu_io cu_io_of(const pp_tensor &t) { return cu_io{t.data, t.dtype}; }
/* the tensor's data only when the call has it (backward gets NULL for what it does not keep) */
static inline cu_io cu_io_at(const pp_tensor *t, int k, int n) { return k < n ? cu_io_of(t[k]) : cu_io{nullptr, PP_DTYPE_F32}; }

/* the dtypes the io functions take */
static inline int cu_io_float(pp_dtype t) { return t == PP_DTYPE_F32 || t == PP_DTYPE_BF16 || t == PP_DTYPE_F16; }

__device__ inline float cu_ld(cu_io a, int64_t i)
{
    switch (a.t) {
    case PP_DTYPE_BF16: return pp_el_f32_from_bf16(((const uint16_t *)a.p)[i]);
    case PP_DTYPE_F16: return pp_el_f32_from_f16(((const uint16_t *)a.p)[i]);
    default: return ((const float *)a.p)[i];
    }
}

__device__ inline void cu_st(cu_io a, int64_t i, float v)
{
    switch (a.t) {
    case PP_DTYPE_BF16: ((uint16_t *)a.p)[i] = pp_el_bf16_from_f32(v); break;
    case PP_DTYPE_F16: ((uint16_t *)a.p)[i] = pp_el_f16_from_f32(v); break;
    default: ((float *)a.p)[i] = v; break;
    }
}

/* a[i] = v, or a[i] + v (one rounding) when acc: backward's gradients add unless fresh */
__device__ inline void cu_put(cu_io a, int64_t i, float v, int acc) { cu_st(a, i, acc ? cu_ld(a, i) + v : v); }

/* V elements at i into f (V = 1, or PP_CU_VEC with i a multiple of it on an aligned tensor) */
template <int V> __device__ inline void cu_ldv(cu_io a, int64_t i, float *f)
{
    if constexpr (V == 1) {
        f[0] = cu_ld(a, i);
    } else {
        static_assert(V == PP_CU_VEC, "vector accesses are PP_CU_VEC elements");
        if (a.t == PP_DTYPE_F32) {
            const float4 *q = (const float4 *)((const float *)a.p + i);
            const float4 u = q[0], w = q[1];
            f[0] = u.x, f[1] = u.y, f[2] = u.z, f[3] = u.w, f[4] = w.x, f[5] = w.y, f[6] = w.z, f[7] = w.w;
        } else {
            union { uint4 v; uint16_t h[8]; } u;
            u.v = *(const uint4 *)((const uint16_t *)a.p + i);
            for (int k = 0; k < 8; k++)
                f[k] = a.t == PP_DTYPE_BF16 ? pp_el_f32_from_bf16(u.h[k]) : pp_el_f32_from_f16(u.h[k]);
        }
    }
}

template <int V> __device__ inline void cu_stv(cu_io a, int64_t i, const float *f)
{
    if constexpr (V == 1) {
        cu_st(a, i, f[0]);
    } else {
        static_assert(V == PP_CU_VEC, "vector accesses are PP_CU_VEC elements");
        if (a.t == PP_DTYPE_F32) {
            float4 *q = (float4 *)((float *)a.p + i);
            q[0] = make_float4(f[0], f[1], f[2], f[3]);
            q[1] = make_float4(f[4], f[5], f[6], f[7]);
        } else {
            union { uint4 v; uint16_t h[8]; } u;
            for (int k = 0; k < 8; k++)
                u.h[k] = a.t == PP_DTYPE_BF16 ? pp_el_bf16_from_f32(f[k]) : pp_el_f16_from_f32(f[k]);
            *(uint4 *)((uint16_t *)a.p + i) = u.v;
        }
    }
}

/* a[i..i+V) (+)= f, as cu_put */
template <int V> __device__ inline void cu_putv(cu_io a, int64_t i, const float *f, int acc)
{
    float g[V];
    if (acc) {
        cu_ldv<V>(a, i, g);
        for (int k = 0; k < V; k++) g[k] += f[k];
    } else {
        for (int k = 0; k < V; k++) g[k] = f[k];
    }
    cu_stv<V>(a, i, g);
}

#endif
