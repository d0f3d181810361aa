/* ReduceMax, ReduceMin, ReduceProd, ArgMax and TopK on the cpu, with kernels/index_ops.h's
 * visiting order and comparisons (shared with kernels/cuda/reduce_more.cu). Gradients: Max /
 * Min split dy equally among the elements equal to the result (torch.amax); Prod gives
 * dy * (product of the others), exact when some elements are 0; TopK adds dy back at the
 * picked indices. */
#include "cpu_math.h"
#include "op_args_index.h"

/* ---------------- ReduceMax / ReduceMin / ReduceProd ---------------- */

PP_FWD(pp_cpu_reduce_more_forward)
{
    const pp_tensor *x = &c->in[0];
    pp_ix_red p;
    int kind;
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_args_red_more(c, x, &c->out[0], &p, &kind, err));
    const float *xd = x->data;
    float *y = c->out[0].data;
    for (int64_t o = 0; o < p.nout; o++) {
        const float *xo = xd + pp_ix_red_base(&p, o);
        float acc = pp_ix_red_init(kind);
        for (int64_t r = 0; r < p.nred; r++) acc = pp_ix_red_step(kind, acc, xo[pp_ix_red_off(&p, r)]);
        y[o] = acc;
    }
    return PP_OK;
}

PP_BWD(pp_cpu_reduce_more_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    const pp_tensor *x = &c->in[0];
    pp_ix_red p;
    int kind;
    PP_CHECK(pp_args_red_more(c, x, &grad_out[0], &p, &kind, err));
    const float *xd = x->data, *y = c->out[0].data, *dy = grad_out[0].data;
    float *dx = grad_in[0].data;
    for (int64_t o = 0; o < p.nout; o++) {
        const int64_t b = pp_ix_red_base(&p, o);
        float cnt = 0.f, nz = 1.f;   /* Max / Min: ties; Prod: the product of the non-zeros */
        int zeros = 0;
        for (int64_t r = 0; r < p.nred; r++) {
            const float v = xd[b + pp_ix_red_off(&p, r)];
            if (kind != PP_RED_PROD) cnt += v == y[o];
            else if (v == 0.f) zeros++;
            else nz *= v;
        }
        for (int64_t r = 0; r < p.nred; r++) {
            const int64_t e = b + pp_ix_red_off(&p, r);
            if (kind != PP_RED_PROD) dx[e] += xd[e] == y[o] ? dy[o] / cnt : 0.f;
            else dx[e] += dy[o] * (zeros == 0 ? nz / xd[e] : zeros == 1 && xd[e] == 0.f ? nz : 0.f);
        }
    }
    return PP_OK;
}

/* ---------------- ArgMax ---------------- */

PP_FWD(pp_cpu_argmax_forward)
{
    const pp_tensor *x = &c->in[0];
    pp_rows r;
    int last;
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_args_argmax(c, x, &c->out[0], &r, &last, err));
    const float *xd = x->data;
    int64_t *y = c->out[0].data;
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t in = 0; in < r.inner; in++) {
            const float *row = xd + o * r.n * r.inner + in;
            int64_t best = 0;
            for (int64_t i = 1; i < r.n; i++)
                if (pp_ix_arg_better(row[i * r.inner], row[best * r.inner], last)) best = i;
            y[o * r.inner + in] = best;
        }
    return PP_OK;
}

/* ---------------- TopK ---------------- */

PP_FWD(pp_cpu_topk_forward)
{
    const pp_tensor *x = &c->in[0];
    pp_rows r;
    int64_t k;
    int largest;
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_args_topk(c, x, &r, &k, &largest, err));
    const float *xd = x->data;
    float *vals = c->out[0].data;
    int64_t *ind = c->nout > 1 ? c->out[1].data : NULL;
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t in = 0; in < r.inner; in++) {
            const float *row = xd + o * r.n * r.inner + in;
            int64_t pick = -1;
            for (int64_t j = 0; j < k; j++) {
                pick = pp_ix_topk_next(row, r.n, r.inner, pick >= 0 ? row[pick * r.inner] : 0.f, pick, largest);
                const int64_t at = (o * k + j) * r.inner + in;
                if (vals) vals[at] = row[pick * r.inner];
                if (ind) ind[at] = pick;
            }
        }
    return PP_OK;
}

/* dx[row + idx[j]] += dy[j] */
PP_BWD(pp_cpu_topk_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    pp_rows r;
    int64_t k;
    int largest;
    PP_CHECK(pp_args_topk(c, &grad_in[0], &r, &k, &largest, err));
    if (c->nout < 2 || !c->out[1].data)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "backward needs the indices output");
    const int64_t *ind = c->out[1].data;
    const float *dy = grad_out[0].data;
    float *dx = grad_in[0].data;
    for (int64_t o = 0; o < r.outer; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t in = 0; in < r.inner; in++) {
                const int64_t at = (o * k + j) * r.inner + in;
                dx[(o * r.n + ind[at]) * r.inner + in] += dy[at];
            }
    return PP_OK;
}
