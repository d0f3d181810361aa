/* Softmax and LogSoftmax on the cpu: over one axis (opset >= 13, default -1), or over
 * the input coerced to 2-D at `axis` (opset < 13, default 1; kernels/op_args.c). Backward reads the saved
 * output only (and assigns a fresh gradient). Rows along the last axis are contiguous;
 * other axes run strided. A causal Softmax (attribute causal, stage/fuse_causal.c) takes row r of
 * each T x T block over its columns 0..r only: the probabilities past them are 0 and so
 * is their gradient, what exp's underflow under attention's causal mask gives the full row. */
#include <onnxpipe/element_nn.h>
#include "cpu_math.h"
#include "nn_util.h"
#include "op_args.h"

#include <math.h>

/* y, x: n elements at stride st, of which the first w count (w < n: a causal row, y 0 past
 * them); inlined with st = 1 for the contiguous rows. nn_row_sum over w sums as over the
 * whole row with its zeros: the causal probabilities are bitwise the full row's under the mask. */
static inline void row_forward(float *y, const float *x, int64_t n, int64_t w, int64_t st, int log)
{
    const float mx = nn_row_max(x, w, st);
    for (int64_t i = 0; i < w; i++) y[i * st] = pp_softmax_exp(x[i * st], mx);
    for (int64_t i = w; i < n; i++) y[i * st] = 0.f;
    const float sum = nn_row_sum(y, w, st);
    if (log) {
        const float ls = logf(sum);
        for (int64_t i = 0; i < n; i++) y[i * st] = pp_logsoftmax_out(x[i * st], mx, ls);
    } else {
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < w; i++) y[i * st] *= inv;
    }
}

/* dx += d/dx given y, dy: n elements at stride st, of which the first w count (a causal
 * row: dx += 0 past them, dy not read there; bitwise the full row's, as nn_row_dot sums);
 * fresh: dx = 0 + d/dx (dx not read) */
static inline void row_backward(float *dx, const float *y, const float *dy, int64_t n, int64_t w, int64_t st,
                                int log, int fresh)
{
    if (log) {
        const float s = nn_row_sum(dy, n, st);
        for (int64_t i = 0; i < n; i++)
            dx[i * st] = (fresh ? 0.f : dx[i * st]) + pp_logsoftmax_grad(y[i * st], dy[i * st], s);
    } else {
        const float s = nn_row_dot(y, dy, w, st);
        for (int64_t i = 0; i < w; i++)
            dx[i * st] = (fresh ? 0.f : dx[i * st]) + pp_softmax_grad(y[i * st], dy[i * st], s);
        for (int64_t i = w; fresh && i < n; i++) dx[i * st] = 0.f;
    }
}

/* The columns row o (of outer) counts: 1 + its row in its block when causal, else all n. */
static inline int64_t row_width(const pp_rows *s, int causal, int64_t o) { return causal ? o % s->n + 1 : s->n; }

PP_CPU_CLONES pp_status pp_cpu_softmax_forward(const pp_kernel_ctx *c, pp_error *err)
{
    pp_rows s;   /* the input as [outer, n, inner]: softmax over n at stride inner */
    int causal;  /* then inner is 1 */
    PP_CHECK(pp_args_softmax(c, &c->in[0], &s, &causal, err));
    PP_CHECK(nn_same_numel(c, &c->in[0], &c->out[0], err));
    const int log = c->op == PP_OP_LOG_SOFTMAX;
    const float *x = c->in[0].data;
    float *y = c->out[0].data;
    for (int64_t o = 0; o < s.outer; o++) {
        const int64_t base = o * s.n * s.inner;
        if (s.inner == 1)
            row_forward(y + base, x + base, s.n, row_width(&s, causal, o), 1, log);
        else
            for (int64_t j = 0; j < s.inner; j++) row_forward(y + base + j, x + base + j, s.n, s.n, s.inner, log);
    }
    return PP_OK;
}

PP_CPU_CLONES pp_status pp_cpu_softmax_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin,
                                  pp_error *err)
{
    if (!gin[0].data || !gout[0].data) return PP_OK;
    pp_rows s;
    int causal;
    PP_CHECK(pp_args_softmax(c, &c->out[0], &s, &causal, err));
    const int log = c->op == PP_OP_LOG_SOFTMAX;
    const float *y = c->out[0].data, *dy = gout[0].data;
    float *dx = gin[0].data;
    const int fresh = c->grad_fresh & 1;
    for (int64_t o = 0; o < s.outer; o++) {
        const int64_t base = o * s.n * s.inner, w = row_width(&s, causal, o);
        if (s.inner == 1 && fresh)
            row_backward(dx + base, y + base, dy + base, s.n, w, 1, log, 1);
        else if (s.inner == 1)
            row_backward(dx + base, y + base, dy + base, s.n, w, 1, log, 0);
        else
            for (int64_t j = 0; j < s.inner; j++)
                row_backward(dx + base + j, y + base + j, dy + base + j, s.n, s.n, s.inner, log, fresh);
    }
    return PP_OK;
}
