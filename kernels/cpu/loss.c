/* SoftmaxCrossEntropyLoss on the cpu. scores [N, C] or [N, C, d1..dk], labels [N] or
 * [N, d1..dk] (int64 or int32), optional weights [C], ignore_index, reduction
 * none|sum|mean, optional log_prob output [N, C, d1..dk]. Mean divides by the summed
 * weight of the non-ignored labels (ONNX); when that is 0 the loss and its gradient are 0
 * (ONNX would give 0/0). Forward keeps each position's max and log-sum-exp (aux,
 * kernels/xent.h), so backward writes softmax - onehot in one pass over the scores,
 * assigning a fresh gradient (PP_KCAP_ASSIGNS_FRESH) rather than adding to zeros. */
#include "cpu_math.h"   /* PP_CPU_CLONES */
#include <onnxpipe/element_nn.h>
#include "xent.h"
#include "nn_util.h"

#include <math.h>
#include <string.h>

/* the call's shapes and options (kernels/xent.c) and the weights [C] or NULL */
typedef struct xent {
    pp_xent x;
    const float *w;
} xent;

static pp_status setup(const pp_kernel_ctx *c, xent *e, pp_error *err)
{
    PP_CHECK(pp_xent_setup(c, &e->x, err));
    e->w = e->x.weighted ? c->in[2].data : NULL;
    return PP_OK;
}

/* Label at position p (= n * d + s); *w = its weight (0 when ignored). */
static pp_status label_at(const pp_kernel_ctx *c, const xent *e, int64_t p, int64_t *label, float *w, pp_error *err)
{
    const pp_tensor *lab = &c->in[1];
    const int64_t l = lab->dtype == PP_DTYPE_I64 ? ((const int64_t *)lab->data)[p] : ((const int32_t *)lab->data)[p];
    *label = l;
    if (e->x.has_ignore && l == e->x.ignore) {
        *w = 0;
        return PP_OK;
    }
    if (l < 0 || l >= e->x.c)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "label %lld at position %lld is out of range [0, %lld)%s", (long long)l,
                       (long long)p, (long long)e->x.c, e->x.has_ignore ? " and not ignore_index" : "");
    *w = e->w ? e->w[l] : 1.0f;
    return PP_OK;
}

/* max and log-sum-exp of the C scores at x with stride st (the sum in NN_LANES partial
 * sums, so that the exps vectorise); inlined with st = 1 for contiguous rows */
static inline void row_stats(const float *x, int64_t n, int64_t st, float *mx, float *ls)
{
    const float m = nn_row_max(x, n, st);
    float acc[NN_LANES] = {0};
    int64_t i = 0;
    for (; i + NN_LANES <= n; i += NN_LANES)
        for (int k = 0; k < NN_LANES; k++) acc[k] += pp_softmax_exp(x[(i + k) * st], m);
    for (; i < n; i++) acc[0] += pp_softmax_exp(x[i * st], m);
    float s = 0;
    for (int k = 0; k < NN_LANES; k++) s += acc[k];
    *mx = m;
    *ls = logf(s);
}

/* dx (+)= the loss gradient gp (softmax - onehot(l)) over the C scores at stride st
 * (assign: dx is fresh); the label's entry is redone after the loop, which then has no
 * branch and vectorises */
static inline void row_grad(float *dx, const float *x, int64_t n, int64_t st, float mx, float ls, int64_t l, float gp,
                            int assign)
{
    const float dx_l = assign ? 0.0f : dx[l * st];
    if (assign)
        for (int64_t j = 0; j < n; j++) dx[j * st] = pp_xent_grad(pp_logsoftmax_out(x[j * st], mx, ls), 0, gp);
    else
        for (int64_t j = 0; j < n; j++) dx[j * st] += pp_xent_grad(pp_logsoftmax_out(x[j * st], mx, ls), 0, gp);
    dx[l * st] = dx_l + pp_xent_grad(pp_logsoftmax_out(x[l * st], mx, ls), 1, gp);
}

PP_AUX(pp_cpu_xent_aux)
{
    return pp_xent_aux_bytes(c);
}

/* Summed weight of the non-ignored labels (the mean's divisor). */
static pp_status total_weight(const pp_kernel_ctx *c, const xent *e, double *tw, pp_error *err)
{
    *tw = 0;
    for (int64_t p = 0; p < e->x.n * e->x.d; p++) {
        int64_t l = 0;
        float w = 0;
        PP_CHECK(label_at(c, e, p, &l, &w, err));
        *tw += w;
    }
    return PP_OK;
}

PP_CPU_CLONES pp_status pp_cpu_xent_forward(const pp_kernel_ctx *c, pp_error *err)
{
    xent e;
    PP_CHECK(setup(c, &e, err));
    const float *x = c->in[0].data;
    float *out = c->out[0].data, *logp = c->nout > 1 ? c->out[1].data : NULL;
    float *amx = c->aux, *als = amx + e.x.n * e.x.d;
    double total = 0, tw = 0;
    for (int64_t n = 0; n < e.x.n; n++)
        for (int64_t s = 0; s < e.x.d; s++) {
            const int64_t p = n * e.x.d + s, base = n * e.x.c * e.x.d + s;
            int64_t l = 0;
            float w = 0, mx, ls;
            PP_CHECK(label_at(c, &e, p, &l, &w, err));
            if (e.x.d == 1) row_stats(x + base, e.x.c, 1, &mx, &ls);
            else row_stats(x + base, e.x.c, e.x.d, &mx, &ls);
            if (logp)
                for (int64_t j = 0; j < e.x.c; j++) logp[base + j * e.x.d] = pp_logsoftmax_out(x[base + j * e.x.d], mx, ls);
            const float loss = w == 0 ? 0.0f : pp_xent_loss(pp_logsoftmax_out(x[base + l * e.x.d], mx, ls), w);
            if (e.x.reduction == PP_XENT_NONE) out[p] = loss;
            total += loss;
            tw += w;
            amx[p] = mx;
            als[p] = ls;
        }
    als[e.x.n * e.x.d] = (float)tw;
    if (e.x.reduction == PP_XENT_SUM) out[0] = (float)total;
    if (e.x.reduction == PP_XENT_MEAN) out[0] = tw > 0 ? (float)(total / tw) : 0.0f;
    return PP_OK;
}

PP_CPU_CLONES pp_status pp_cpu_xent_backward(const pp_kernel_ctx *c, const pp_tensor *gout, pp_tensor *gin,
                                            pp_error *err)
{
    float *dx = gin[0].data;
    const float *g = gout[0].data, *glp = c->nout > 1 ? gout[1].data : NULL;
    if (!dx || (!g && !glp && !(c->grad_fresh & 1))) return PP_OK;   /* a fresh one is written, 0 at least */
    xent e;
    PP_CHECK(setup(c, &e, err));
    double tw = 1;
    if (g && e.x.reduction == PP_XENT_MEAN) PP_CHECK(total_weight(c, &e, &tw, err));
    const float *x = c->in[0].data, *amx = c->aux, *als = amx + e.x.n * e.x.d;
    for (int64_t n = 0; n < e.x.n; n++)
        for (int64_t s = 0; s < e.x.d; s++) {
            const int64_t p = n * e.x.d + s, base = n * e.x.c * e.x.d + s;
            int64_t l = 0;
            float w = 0;
            const float mx = amx[p], ls = als[p];
            int assign = c->grad_fresh & 1;   /* until something is written into the row */
            PP_CHECK(label_at(c, &e, p, &l, &w, err));
            if (g && w != 0 && tw > 0) {
                const float gp = w * (e.x.reduction == PP_XENT_NONE ? g[p] : (float)(g[0] / tw));
                if (e.x.d == 1) row_grad(dx + base, x + base, e.x.c, 1, mx, ls, l, gp, assign);
                else row_grad(dx + base, x + base, e.x.c, e.x.d, mx, ls, l, gp, assign);
                assign = 0;
            }
            if (glp) {
                float sum = 0;
                for (int64_t j = 0; j < e.x.c; j++) sum += glp[base + j * e.x.d];
                for (int64_t j = 0; j < e.x.c; j++) {
                    const float v =
                        pp_logsoftmax_grad(pp_logsoftmax_out(x[base + j * e.x.d], mx, ls), glp[base + j * e.x.d], sum);
                    dx[base + j * e.x.d] = assign ? v : dx[base + j * e.x.d] + v;
                }
                assign = 0;
            }
            for (int64_t j = 0; assign && j < e.x.c; j++) dx[base + j * e.x.d] = 0.0f;   /* an ignored label */
        }
    return PP_OK;
}
