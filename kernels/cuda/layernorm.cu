/* cuda row normalisations of one row at a time: LayerNormalization, RMSNormalization (its
 * layout with a parameter per element: norm_rows.cu hands it here) and their residual
 * forms SkipLayerNormalization / SkipSimplifiedLayerNormalization (com.microsoft, made by
 * stage/fuse_residual_norm.c), in float32, bfloat16 and float16 (io.cuh: fp32 in
 * registers, one rounding per store), llm.c-style: forward one block per row, 128-bit
 * accesses where the rows allow (launch_io.c), x + skip rounded as the unfused Add
 * would store it; backward in one pass over x and dy per chunk of rows, the input
 * gradient and the chunk's parameter sums together, then the chunks added in order
 * (deterministic). Layouts kernels/op_args*.c, math element_nn.h, as the cpu's
 * layernorm.c, norm_rows.c and skip_norm.c. */
#include "cuda_internal.h"
#include <onnxpipe/element_nn.h>
#include "io.cuh"
#include "lowp.h"
#include "nn_cuda.h"
#include "op_args.h"
#include "op_args_nn.h"
#include "reduce.cuh"

/* What every kernel of a call reads: m rows of d, centred (LayerNorm) or not (RMS). */
struct rn_rows {
    int64_t m, d;
    float eps;
    int center;
    cu_io scale, bias;          /* [d], float32 or the rows' dtype; bias absent for RMS */
};

/* The value as the rows' dtype stores it (the Add's rounding before the norm reads it). */
__device__ inline float rn_round(pp_dtype t, float v)
{
    return t == PP_DTYPE_BF16 ? pp_el_f32_from_bf16(pp_el_bf16_from_f32(v))
         : t == PP_DTYPE_F16  ? pp_el_f32_from_f16(pp_el_f16_from_f32(v)) : v;
}

/* elements i..i+V of the normalised input: x, or x + skip rounded */
template <int V> __device__ inline void rn_input(cu_io x, cu_io skip, int64_t i, float *f)
{
    cu_ldv<V>(x, i, f);
    if (!skip.p) return;
    float g[V];
    cu_ldv<V>(skip, i, g);
    for (int k = 0; k < V; k++) f[k] = rn_round(x.t, f[k] + g[k]);
}

/* The row kernels launch up to 1024 threads a block (pp_cu_rownorm_plan): __launch_bounds__
 * keeps them within 64 registers a thread (k_rn_bwd<8> compiles to exactly 64), so that a
 * block of 1024 always launches. */

/* y, mean[m], rstd[m] (aux) from x (+ skip, then stored to sum when given); out_mean and
 * out_rstd: LayerNorm's outputs 1 and 2, float32 */
template <int V>
__global__ void __launch_bounds__(1024)
    k_rn_fwd(rn_rows a, cu_io x, cu_io skip, cu_io y, cu_io sum, float *mean, float *rstd, float *out_mean,
             float *out_rstd)
{
    const int64_t r = blockIdx.x, o = r * a.d, nv = a.d / V;
    float f[V], s = 0.f;
    for (int64_t v = threadIdx.x; (a.center || sum.p) && v < nv; v += blockDim.x) {
        rn_input<V>(x, skip, o + v * V, f);
        if (sum.p) cu_stv<V>(sum, o + v * V, f);
        for (int k = 0; a.center && k < V; k++) s += f[k];
    }
    const float mu = a.center ? cu_block_reduce(s, cu_sum(), 0.f) / (float)a.d : 0.f;
    float q = 0.f;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        rn_input<V>(x, skip, o + v * V, f);
        for (int k = 0; k < V; k++) q += (f[k] - mu) * (f[k] - mu);
    }
    const float rs = pp_layernorm_rstd(cu_block_reduce(q, cu_sum(), 0.f) / (float)a.d, a.eps);
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        rn_input<V>(x, skip, o + v * V, f);
        for (int k = 0; k < V; k++) {
            const int64_t j = v * V + k;
            f[k] = pp_layernorm_out(pp_layernorm_xhat(f[k], mu, rs), cu_ld(a.scale, j), a.bias.p ? cu_ld(a.bias, j) : 0.f);
        }
        cu_stv<V>(y, o + v * V, f);
    }
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
        if (out_mean) out_mean[r] = mu;
        if (out_rstd) out_rstd[r] = rs;
    }
}

/* What backward reads and writes beyond the rows' parameters. */
struct rn_grads {
    cu_io x;                    /* what was normalised: X, or the residual form's sum (output 3) */
    cu_io dy, dsum;             /* dsum: the sum's gradient from its other readers, or absent */
    const float *mean, *rstd;   /* aux */
    const float *g_mean, *g_rstd;   /* LayerNorm's outputs 1 and 2's gradients, or NULL */
    cu_io dx, dskip;            /* input gradients (dskip: the residual form's second input) */
    int fresh_x, fresh_skip;    /* assigned rather than added (grad_fresh) */
    int params;                 /* dscale or dbias wanted: chunk sums into part */
    int in_smem;                /* the chunk sums in dynamic shared memory, else in part */
};

/* Chunk blockIdx.x: rows [r0, r0 + rows) of dx (and dskip) = dnorm/dx + dsum, and its
 * rows' sums of dy xhat and dy per column into part[chunk][2][d]; thread t owns the columns
 * of its accesses, so the sums need no atomics. */
template <int V> __global__ void __launch_bounds__(1024) k_rn_bwd(rn_rows a, rn_grads g, int64_t rows, float *part)
{
    extern __shared__ float smem[];
    const int64_t nv = a.d / V, r0 = blockIdx.x * rows, r1 = r0 + rows < a.m ? r0 + rows : a.m;
    const int want_dx = g.dx.p || g.dskip.p;
    float *acc = g.in_smem ? smem : part + blockIdx.x * 2 * a.d;
    for (int64_t v = threadIdx.x; g.params && v < nv; v += blockDim.x)
        for (int k = 0; k < V; k++) acc[v * V + k] = acc[a.d + v * V + k] = 0.f;
    const float inv_d = 1.f / (float)a.d;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t o = r * a.d;
        const float mu = g.mean[r], rs = g.rstd[r];
        float f[V], dy[V], sg = 0.f, sgx = 0.f;
        for (int64_t v = threadIdx.x; g.dy.p && v < nv; v += blockDim.x) {
            cu_ldv<V>(g.x, o + v * V, f);
            cu_ldv<V>(g.dy, o + v * V, dy);
            for (int k = 0; k < V; k++) {
                const int64_t j = v * V + k;
                const float xh = pp_layernorm_xhat(f[k], mu, rs), gx = dy[k] * cu_ld(a.scale, j);
                sg += gx;
                sgx += gx * xh;
                if (g.params) {
                    acc[j] += dy[k] * xh;
                    acc[a.d + j] += dy[k];
                }
            }
        }
        if (!want_dx) continue;
        float mg = 0.f, mgx = 0.f;
        if (g.dy.p) {
            mg = a.center ? cu_block_reduce(sg, cu_sum(), 0.f) * inv_d : 0.f;
            mgx = cu_block_reduce(sgx, cu_sum(), 0.f) * inv_d;
        }
        const float gm = g.g_mean ? g.g_mean[r] : 0.f, gr = g.g_rstd ? g.g_rstd[r] : 0.f;
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
            float out[V], ds[V];
            cu_ldv<V>(g.x, o + v * V, f);
            if (g.dy.p) cu_ldv<V>(g.dy, o + v * V, dy);
            if (g.dsum.p) cu_ldv<V>(g.dsum, o + v * V, ds);
            for (int k = 0; k < V; k++) {
                const int64_t j = v * V + k;
                const float xh = pp_layernorm_xhat(f[k], mu, rs);
                float d = g.dy.p ? pp_layernorm_dx(dy[k] * cu_ld(a.scale, j), xh, rs, mg, mgx) : 0.f;
                if (g.g_mean || g.g_rstd) d += pp_layernorm_dx_stats(gm, gr, xh, rs, inv_d);
                out[k] = g.dsum.p ? ds[k] + d : d;
            }
            if (g.dx.p) cu_putv<V>(g.dx, o + v * V, out, !g.fresh_x);
            if (g.dskip.p) cu_putv<V>(g.dskip, o + v * V, out, !g.fresh_skip);
        }
    }
    if (!g.params || !g.in_smem) return;
    float *dst = part + blockIdx.x * 2 * a.d;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x)
        for (int k = 0; k < V; k++) {
            dst[v * V + k] = acc[v * V + k];
            dst[a.d + v * V + k] = acc[a.d + v * V + k];
        }
}

/* dscale[j] += the chunks' sums of dy xhat, in chunk order; dbias[j] += those of dy */
__global__ void k_rn_dparams(const float *part, int64_t chunks, int64_t d, cu_io dscale, cu_io dbias)
{
    CU_FOR(j, d) {
        float ss = 0.f, sb = 0.f;
        for (int64_t ch = 0; ch < chunks; ch++) {
            ss += part[ch * 2 * d + j];
            sb += part[ch * 2 * d + d + j];
        }
        if (dscale.p) cu_put(dscale, j, ss, 1);
        if (dbias.p) cu_put(dbias, j, sb, 1);
    }
}

/* ---------------- the calls ---------------- */

/* One call's tensors: skip, sum, dsum, dskip absent outside the residual forms, the
 * statistics outputs outside LayerNorm. */
struct rn_call {
    rn_rows a;
    cu_io x, skip, y, sum;
    float *out_mean, *out_rstd;
};

/* The rows' tensors share one float dtype; the parameters and their gradients are float
 * (float32 or 16-bit), the statistics float32. Else the call is no native one. */
static int rn_native(const cu_io *rows, int nrows, const cu_io *params, int nparams, const float *const *stats,
                     const pp_tensor *stat_t, int nstats)
{
    pp_dtype t = PP_DTYPE_UNDEFINED;
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].p) continue;
        if (t == PP_DTYPE_UNDEFINED) t = rows[i].t;
        if (rows[i].t != t || !cu_io_float(t)) return 0;
    }
    for (int i = 0; i < nparams; i++)
        if (params[i].p && !cu_io_float(params[i].t)) return 0;
    for (int i = 0; i < nstats; i++)
        if (stats[i] && stat_t[i].dtype != PP_DTYPE_F32) return 0;
    return 1;
}

static pp_status rn_forward(const pp_kernel_ctx *c, const rn_call *k, pp_error *err)
{
    const rn_rows &a = k->a;
    if (!a.m || !a.d) return PP_OK;
    const void *ptrs[4] = {k->x.p, k->skip.p, k->y.p, k->sum.p};
    const pp_cu_rownorm p = pp_cu_rownorm_plan(a.m, a.d, pp_cu_vec_of(a.d, ptrs, 4), 0);
    float *mean = (float *)c->aux;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (p.vec == PP_CU_VEC)
        k_rn_fwd<PP_CU_VEC><<<(unsigned)a.m, p.block, 0, s>>>(a, k->x, k->skip, k->y, k->sum, mean, mean + a.m,
                                                              k->out_mean, k->out_rstd);
    else
        k_rn_fwd<1><<<(unsigned)a.m, p.block, 0, s>>>(a, k->x, k->skip, k->y, k->sum, mean, mean + a.m, k->out_mean,
                                                      k->out_rstd);
    CU_LAUNCHED(c);
    return PP_OK;
}

static pp_status rn_backward(const pp_kernel_ctx *c, const rn_rows &a, rn_grads g, cu_io dscale, cu_io dbias,
                             pp_error *err)
{
    g.params = g.dy.p && (dscale.p || dbias.p);
    if (!a.m || !a.d || (!g.params && !g.dx.p && !g.dskip.p)) return PP_OK;
    if (!g.dy.p && !g.dsum.p && !g.g_mean && !g.g_rstd) {   /* nothing flows: a fresh gradient is 0 */
        const size_t n = (size_t)(a.m * a.d);
        if (g.dx.p && g.fresh_x) PP_CHECK(pp_device_memset(c->dev, g.dx.p, 0, n * pp_dtype_size(g.dx.t), err));
        if (g.dskip.p && g.fresh_skip) PP_CHECK(pp_device_memset(c->dev, g.dskip.p, 0, n * pp_dtype_size(g.dskip.t), err));
        return PP_OK;
    }
    const void *ptrs[5] = {g.x.p, g.dy.p, g.dsum.p, g.dx.p, g.dskip.p};
    const pp_cu_rownorm p = pp_cu_rownorm_plan(a.m, a.d, pp_cu_vec_of(a.d, ptrs, 5), g.params);
    float *part = NULL;
    if (g.params) PP_CHECK(pp_cuda_workspace(c, p.part_bytes, (void **)&part, err));
    g.in_smem = p.smem > 0;
    cudaStream_t s = cu_of(c->dev)->stream;
    if (p.vec == PP_CU_VEC)
        k_rn_bwd<PP_CU_VEC><<<p.grid, p.block, p.smem, s>>>(a, g, p.rows_per_block, part);
    else
        k_rn_bwd<1><<<p.grid, p.block, p.smem, s>>>(a, g, p.rows_per_block, part);
    CU_LAUNCHED(c);
    if (!g.params) return PP_OK;
    pp_cu_launch L = pp_cu_launch_1d(a.d);
    k_rn_dparams<<<L.grid, L.block, 0, s>>>(part, p.grid, a.d, dscale, dbias);
    CU_LAUNCHED(c);
    return PP_OK;
}

PP_CU_AUX(pp_cu_layernorm_aux)
{
    return pp_args_layernorm_aux(c);
}

PP_CU_FWD(pp_cu_layernorm_forward)
{
    pp_ln_args l;
    PP_CHECK(pp_args_layernorm(c, &l, err));
    rn_call k = {{l.m, l.d, l.eps, 1, cu_io_of(c->in[1]), cu_io_at(c->in, 2, c->nin)},
                 cu_io_of(c->in[0]), cu_io{}, cu_io_of(c->out[0]), cu_io{},
                 c->nout > 1 ? (float *)c->out[1].data : NULL, c->nout > 2 ? (float *)c->out[2].data : NULL};
    const cu_io rows[2] = {k.x, k.y}, params[2] = {k.a.scale, k.a.bias};
    const float *stats[2] = {k.out_mean, k.out_rstd};
    if (!rn_native(rows, 2, params, 2, stats, c->out + 1, c->nout > 1 ? c->nout - 1 : 0)) return pp_lowp_forward(c, err);
    return rn_forward(c, &k, err);
}

PP_CU_BWD(pp_cu_layernorm_backward)
{
    pp_ln_args l;
    PP_CHECK(pp_args_layernorm(c, &l, err));
    const rn_rows a = {l.m, l.d, l.eps, 1, cu_io_of(c->in[1]), cu_io_at(c->in, 2, c->nin)};
    rn_grads g = {cu_io_of(c->in[0]), cu_io_of(grad_out[0]), cu_io{}, (const float *)c->aux,
                  (const float *)c->aux + l.m, c->nout > 1 ? (const float *)grad_out[1].data : NULL,
                  c->nout > 2 ? (const float *)grad_out[2].data : NULL, cu_io_of(grad_in[0]), cu_io{},
                  (int)(c->grad_fresh & 1), 0, 0, 0};
    const cu_io dscale = cu_io_at(grad_in, 1, c->nin), dbias = cu_io_at(grad_in, 2, c->nin);
    const cu_io rows[3] = {g.x, g.dy, g.dx}, params[4] = {a.scale, a.bias, dscale, dbias};
    const float *stats[2] = {g.g_mean, g.g_rstd};
    if (!rn_native(rows, 3, params, 4, stats, grad_out + 1, c->nout > 1 ? c->nout - 1 : 0))
        return pp_lowp_backward(c, grad_out, grad_in, err);
    return rn_backward(c, a, g, dscale, dbias, err);
}

/* RMSNormalization with a parameter per element (norm_rows.cu: pp_norm_args prow = pdiv = 1) */
pp_status pp_cu_rms_forward(const pp_kernel_ctx *c, const pp_norm_args *n, pp_error *err)
{
    rn_call k = {{n->m, n->d, n->eps, 0, cu_io_of(c->in[1]), cu_io{}}, cu_io_of(c->in[0]), cu_io{},
                 cu_io_of(c->out[0]), cu_io{}, NULL, NULL};
    const cu_io rows[2] = {k.x, k.y};
    if (!rn_native(rows, 2, &k.a.scale, 1, NULL, NULL, 0)) return pp_lowp_forward(c, err);
    return rn_forward(c, &k, err);
}

pp_status pp_cu_rms_backward(const pp_kernel_ctx *c, const pp_norm_args *n, const pp_tensor *grad_out,
                             pp_tensor *grad_in, pp_error *err)
{
    const rn_rows a = {n->m, n->d, n->eps, 0, cu_io_of(c->in[1]), cu_io{}};
    rn_grads g = {cu_io_of(c->in[0]), cu_io_of(grad_out[0]), cu_io{}, (const float *)c->aux,
                  (const float *)c->aux + n->m, NULL, NULL, cu_io_of(grad_in[0]), cu_io{}, (int)(c->grad_fresh & 1),
                  0, 0, 0};
    const cu_io dscale = cu_io_at(grad_in, 1, c->nin);
    const cu_io rows[3] = {g.x, g.dy, g.dx}, params[2] = {a.scale, dscale};
    if (!rn_native(rows, 3, params, 2, NULL, NULL, 0)) return pp_lowp_backward(c, grad_out, grad_in, err);
    return rn_backward(c, a, g, dscale, cu_io{}, err);
}

/* ---------------- SkipLayerNormalization, SkipSimplifiedLayerNormalization ---------------- */

PP_CU_AUX(pp_cu_skip_norm_aux)
{
    return pp_args_norm_aux(c);
}

PP_CU_FWD(pp_cu_skip_norm_forward)
{
    pp_norm_args n;
    PP_CHECK(pp_args_norm(c, &n, err));
    rn_call k = {{n.m, n.d, n.eps, n.center, cu_io_of(c->in[2]), n.center ? cu_io_at(c->in, 3, c->nin) : cu_io{}},
                 cu_io_of(c->in[0]), cu_io_of(c->in[1]), cu_io_of(c->out[0]), cu_io_at(c->out, 3, c->nout), NULL, NULL};
    const cu_io rows[4] = {k.x, k.skip, k.y, k.sum}, params[2] = {k.a.scale, k.a.bias};
    if (!rn_native(rows, 4, params, 2, NULL, NULL, 0)) return pp_lowp_forward(c, err);
    return rn_forward(c, &k, err);
}

PP_CU_BWD(pp_cu_skip_norm_backward)
{
    pp_norm_args n;
    PP_CHECK(pp_args_norm(c, &n, err));
    const rn_rows a = {n.m, n.d, n.eps, n.center, cu_io_of(c->in[2]), n.center ? cu_io_at(c->in, 3, c->nin) : cu_io{}};
    rn_grads g = {cu_io_at(c->out, 3, c->nout), cu_io_of(grad_out[0]), cu_io_at(grad_out, 3, c->nout),
                  (const float *)c->aux, (const float *)c->aux + n.m, NULL, NULL, cu_io_of(grad_in[0]),
                  cu_io_of(grad_in[1]), (int)(c->grad_fresh & 1), (int)(c->grad_fresh >> 1 & 1), 0, 0};
    if (!g.x.p && (g.dy.p || g.dsum.p))
        return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "backward reads output 3 (input_skip_bias_sum), which the "
                            "node does not have");
    const cu_io dscale = cu_io_of(grad_in[2]), dbias = n.center ? cu_io_at(grad_in, 3, c->nin) : cu_io{};
    const cu_io rows[5] = {g.x, g.dy, g.dsum, g.dx, g.dskip}, params[4] = {a.scale, a.bias, dscale, dbias};
    if (!rn_native(rows, 5, params, 4, NULL, NULL, 0)) return pp_lowp_backward(c, grad_out, grad_in, err);
    return rn_backward(c, a, g, dscale, dbias, err);
}
