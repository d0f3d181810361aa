/* Private to the cpu "nn" kernels: the strided N-d loops that the data-movement ops and
 * reductions share. */
#ifndef PP_KERNELS_CPU_NN_UTIL_H
#define PP_KERNELS_CPU_NN_UTIL_H

#include <onnxpipe/backend/kernels_backend.h>

#include "op_args.h"   /* pp_args_fail, pp_args_axis: node-named errors and axes, shared with cuda */

#include <math.h>

/* Checks that two tensors hold the same number of elements (copies of one another). */
pp_status nn_same_numel(const pp_kernel_ctx *c, const pp_tensor *a, const pp_tensor *b, pp_error *err);

/* prod(dims[from..to)) */
int64_t nn_prod(const int64_t *dims, int from, int to);
/* Row-major element strides of dims[rank]. */
void nn_strides(int rank, const int64_t *dims, int64_t *strides);

/* For every index i over dims[rank]: dst[i . dst_st] = src[i . src_st], elements of
 * esize bytes, strides in elements (may be 0 or negative). Dims that are contiguous in
 * both are merged first, and the innermost loop is a memcpy when both are unit-stride. */
void nn_copy_strided(void *dst, const int64_t *dst_st, const void *src, const int64_t *src_st,
                     const int64_t *dims, int rank, size_t esize);
/* Fills the contiguous output y from src read at src_st (Transpose, Expand, Slice:
 * each op only plans src and src_st). */
void nn_fill_output(const pp_tensor *y, const void *src, const int64_t *src_st, size_t esize);
/* The same for floats with dst[...] += alpha * src[...]; a 0 stride in dst sums into it
 * (reductions, broadcast backward), a 0 stride in src broadcasts from it. */
void nn_add_strided(float *dst, const int64_t *dst_st, const float *src, const int64_t *src_st,
                    const int64_t *dims, int rank, float alpha);
/* Row reductions over n floats at stride st, with NN_LANES independent partial results so
 * that they pipeline (and vectorise when st is 1 after inlining). Element i goes to partial
 * i % NN_LANES, those of a last part block too: a row's sum is bitwise that of the row with
 * zeros after it (softmax.c's causal rows against the full rows under the mask). */
#define NN_LANES 32
static inline float nn_row_sum(const float *x, int64_t n, int64_t st)
{
    float acc[NN_LANES] = {0};
    int64_t i = 0;
    for (; i + NN_LANES <= n; i += NN_LANES)
        for (int k = 0; k < NN_LANES; k++) acc[k] += x[(i + k) * st];
    for (int k = 0; i + k < n; k++) acc[k] += x[(i + k) * st];
    float s = 0;
    for (int k = 0; k < NN_LANES; k++) s += acc[k];
    return s;
}
static inline float nn_row_dot(const float *x, const float *y, int64_t n, int64_t st)
{
    float acc[NN_LANES] = {0};
    int64_t i = 0;
    for (; i + NN_LANES <= n; i += NN_LANES)
        for (int k = 0; k < NN_LANES; k++) acc[k] += x[(i + k) * st] * y[(i + k) * st];
    for (int k = 0; i + k < n; k++) acc[k] += x[(i + k) * st] * y[(i + k) * st];
    float s = 0;
    for (int k = 0; k < NN_LANES; k++) s += acc[k];
    return s;
}
/* max, ignoring NaN unless all are (a NaN still poisons the exp that follows) */
static inline float nn_row_max(const float *x, int64_t n, int64_t st)
{
    float acc[NN_LANES];
    for (int k = 0; k < NN_LANES; k++) acc[k] = -INFINITY;
    int64_t i = 0;
    for (; i + NN_LANES <= n; i += NN_LANES)
        for (int k = 0; k < NN_LANES; k++) acc[k] = x[(i + k) * st] > acc[k] ? x[(i + k) * st] : acc[k];
    for (int k = 0; i + k < n; k++) acc[k] = x[(i + k) * st] > acc[k] ? x[(i + k) * st] : acc[k];
    float m = acc[0];
    for (int k = 1; k < NN_LANES; k++) m = acc[k] > m ? acc[k] : m;
    return m;
}

/* y[i] += x[i], n floats (the backward of every copy). */
void nn_add(float *y, const float *x, int64_t n);

#endif
