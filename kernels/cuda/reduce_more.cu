/* cuda ReduceMax, ReduceMin, ReduceProd, ArgMax and TopK, as kernels/cpu/reduce_more.c with
 * the same visiting order and comparisons (kernels/index_ops.h): the reductions run one
 * block per output element (reduce.cuh's block reduction), ArgMax and TopK one thread per
 * row (TopK's k picks cost O(n k) per row, fine for the small k of routing and sampling). */
#include "cuda_internal.h"
#include "nn_cuda.h"
#include "op_args_index.h"
#include "reduce.cuh"

#define RED_THREADS 256

struct red_op {
    int kind;
    __device__ float operator()(float a, float b) const { return pp_ix_red_step(kind, a, b); }
};

/* grid-stride over outputs: one block each */
#define CU_FOR_BLOCKS(o, n) for (int64_t o = blockIdx.x; o < (n); o += gridDim.x)

__global__ void k_red_more(pp_ix_red p, int kind, const float *x, float *y)
{
    CU_FOR_BLOCKS(o, p.nout) {
        const float *xo = x + pp_ix_red_base(&p, o);
        float acc = pp_ix_red_init(kind);
        for (int64_t r = threadIdx.x; r < p.nred; r += blockDim.x)
            acc = pp_ix_red_step(kind, acc, xo[pp_ix_red_off(&p, r)]);
        acc = cu_block_reduce(acc, red_op{kind}, pp_ix_red_init(kind));
        if (threadIdx.x == 0) y[o] = acc;
    }
}

/* Max / Min: dy split among the ties; Prod: dy * the product of the others */
__global__ void k_red_more_back(pp_ix_red p, int kind, const float *x, const float *y, const float *dy, float *dx)
{
    CU_FOR_BLOCKS(o, p.nout) {
        const int64_t b = pp_ix_red_base(&p, o);
        float cnt = 0.f, nz = 1.f, zeros = 0.f;
        for (int64_t r = threadIdx.x; r < p.nred; r += blockDim.x) {
            const float v = x[b + pp_ix_red_off(&p, r)];
            if (kind != PP_RED_PROD) cnt += v == y[o];
            else if (v == 0.f) zeros += 1.f;
            else nz *= v;
        }
        cnt = cu_block_reduce(cnt, cu_sum(), 0.f);
        zeros = cu_block_reduce(zeros, cu_sum(), 0.f);
        nz = cu_block_reduce(nz, red_op{PP_RED_PROD}, 1.f);
        for (int64_t r = threadIdx.x; r < p.nred; r += blockDim.x) {
            const int64_t e = b + pp_ix_red_off(&p, r);
            if (kind != PP_RED_PROD) dx[e] += x[e] == y[o] ? dy[o] / cnt : 0.f;
            else dx[e] += dy[o] * (zeros == 0.f ? nz / x[e] : zeros == 1.f && x[e] == 0.f ? nz : 0.f);
        }
    }
}

static unsigned red_grid(int64_t nout)
{
    return (unsigned)(nout < PP_CU_MAX_GRID ? (nout ? nout : 1) : PP_CU_MAX_GRID);
}

PP_CU_FWD(pp_cu_reduce_more_forward)
{
    pp_ix_red p;
    int kind;
    if (c->in[0].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input dtype %s (float32 is)", pp_dtype_name(c->in[0].dtype));
    PP_CHECK(pp_args_red_more(c, &c->in[0], &c->out[0], &p, &kind, err));
    if (!p.nout) return PP_OK;
    k_red_more<<<red_grid(p.nout), RED_THREADS, 0, cu_of(c->dev)->stream>>>(p, kind, (const float *)c->in[0].data,
                                                                         (float *)c->out[0].data);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_reduce_more_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    pp_ix_red p;
    int kind;
    PP_CHECK(pp_args_red_more(c, &c->in[0], &grad_out[0], &p, &kind, err));
    if (!p.nout) return PP_OK;
    k_red_more_back<<<red_grid(p.nout), RED_THREADS, 0, cu_of(c->dev)->stream>>>(
        p, kind, (const float *)c->in[0].data, (const float *)c->out[0].data, (const float *)grad_out[0].data,
        (float *)grad_in[0].data);
    CU_LAUNCHED(c);
    return PP_OK;
}

/* ---------------- ArgMax and TopK: one thread per row ---------------- */

__global__ void k_argmax(pp_rows r, int last, const float *x, int64_t *y)
{
    CU_FOR(i, r.outer * r.inner) {
        const float *row = x + (i / r.inner) * r.n * r.inner + i % r.inner;
        int64_t best = 0;
        for (int64_t j = 1; j < r.n; j++)
            if (pp_ix_arg_better(row[j * r.inner], row[best * r.inner], last)) best = j;
        y[i] = best;
    }
}

PP_CU_FWD(pp_cu_argmax_forward)
{
    pp_rows r;
    int last;
    if (c->in[0].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input dtype %s (float32 is)", pp_dtype_name(c->in[0].dtype));
    PP_CHECK(pp_args_argmax(c, &c->in[0], &c->out[0], &r, &last, err));
    if (r.outer * r.inner == 0) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(r.outer * r.inner);
    k_argmax<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, last, (const float *)c->in[0].data,
                                                             (int64_t *)c->out[0].data);
    CU_LAUNCHED(c);
    return PP_OK;
}

__global__ void k_topk(pp_rows r, int64_t k, int largest, const float *x, float *vals, int64_t *ind)
{
    CU_FOR(i, r.outer * r.inner) {
        const int64_t o = i / r.inner, in = i % r.inner;
        const float *row = x + o * r.n * r.inner + in;
        int64_t pick = -1;
        for (int64_t j = 0; j < k; j++) {
            pick = pp_ix_topk_next(row, r.n, r.inner, pick >= 0 ? row[pick * r.inner] : 0.f, pick, largest);
            const int64_t at = (o * k + j) * r.inner + in;
            if (vals) vals[at] = row[pick * r.inner];
            if (ind) ind[at] = pick;
        }
    }
}

/* dx[row + idx[j]] += dy[j]: a row's indices are distinct */
__global__ void k_topk_back(pp_rows r, int64_t k, const int64_t *ind, const float *dy, float *dx)
{
    CU_FOR(at, r.outer * k * r.inner) {
        const int64_t in = at % r.inner, o = at / (k * r.inner);
        dx[(o * r.n + ind[at]) * r.inner + in] += dy[at];
    }
}

PP_CU_FWD(pp_cu_topk_forward)
{
    pp_rows r;
    int64_t k;
    int largest;
    if (c->in[0].dtype != PP_DTYPE_F32)
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input dtype %s (float32 is)", pp_dtype_name(c->in[0].dtype));
    PP_CHECK(pp_args_topk(c, &c->in[0], &r, &k, &largest, err));
    if (r.outer * r.inner == 0 || k == 0) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(r.outer * r.inner);
    k_topk<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, k, largest, (const float *)c->in[0].data,
                                                           (float *)c->out[0].data,
                                                           c->nout > 1 ? (int64_t *)c->out[1].data : NULL);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_BWD(pp_cu_topk_backward)
{
    if (!grad_in[0].data || !grad_out[0].data) return PP_OK;
    pp_rows r;
    int64_t k;
    int largest;
    PP_CHECK(pp_args_topk(c, &grad_in[0], &r, &k, &largest, err));
    if (c->nout < 2 || !c->out[1].data)
        return pp_args_fail(c, PP_ERR_INVALID_ARG, err, "backward needs the indices output");
    if (r.outer * k * r.inner == 0) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(r.outer * k * r.inner);
    k_topk_back<<<L.grid, L.block, 0, cu_of(c->dev)->stream>>>(r, k, (const int64_t *)c->out[1].data,
                                                                (const float *)grad_out[0].data,
                                                                (float *)grad_in[0].data);
    CU_LAUNCHED(c);
    return PP_OK;
}
