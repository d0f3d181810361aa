/* cpu MatMul (numpy semantics: batch dims broadcast, 1-D operands promoted and squeezed)
 * and Gemm (transA/transB/alpha/beta, C broadcast) on OpenBLAS sgemm. Backward runs one
 * GEMM per requested gradient with the transposes folded into sgemm's flags. MatMul takes
 * an optional third input, a bias [N] added to every row or [M, N] added to every output
 * matrix (attention's causal mask), and an optional fourth, a float scalar s the product
 * is multiplied by: the stage fuses MatMul + Add of a bias and MatMul + Mul by a constant
 * into it (stage/fuse_epilogue.c), so the sum is sgemm's C and the scale its alpha, with no
 * separate pass. The stage also folds Transposes around it
 * (attention's heads): attributes perm_A / perm_B say input k is the Transpose's input and
 * the operand is Transpose(in k, perm), perm_Y that the output is written as Transpose(Y,
 * perm_Y); each is then a strided matrix per batch (one sgemm each, no copy). Under a
 * causal mask the stage marks the attention products (causal_Y, causal_A: mm_causal
 * below), which then compute only their causal triangle (smat.c). Attribute trans_B says
 * B is stored transposed (Linear's MatMul(x, Transpose(W)) with the Transpose folded):
 * sgemm reads it, and writes its gradient, through the transpose flag. */
#include "broadcast.h"
#include "cpu_math.h"
#include "matmul_batch.h"
#include "smat.h"

#include <string.h>

/* A batch of matrix products Y[b] = A[ia(b)] B[ib(b)] (kernels/matmul_batch.h) and the fused scale. */
typedef struct mm_plan {
    pp_matmul_batch m;
    int64_t bias_rows;              /* 0: no fused bias, else bias_rows() */
    float alpha;                    /* the fused scale, else 1 */
} mm_plan;

/* The rows of the fused bias (input 2) for output matrices (M, N): 1 for [N], M for
 * [M, N] (the last two dims of a tensor of M N elements). */
static pp_status bias_rows(const pp_kernel_ctx *c, int64_t M, int64_t N, int64_t *rows, pp_error *err)
{
    const pp_tensor *b = &c->in[2];
    const int64_t n = pp_tensor_numel(b);
    *rows = n == N ? 1 : M;
    if (b->dtype != PP_DTYPE_F32 || (n != N && (n != M * N || b->rank < 2 || b->dims[b->rank - 1] != N)))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): the fused bias must be float32 [%lld] or "
                            "[%lld, %lld]", c->node, (long long)N, (long long)M, (long long)N);
    return PP_OK;
}

/* Y (M, N) = alpha A B + the fused bias (bias_rows: 1 or M of N floats; NULL: none): a
 * row [N] in sgemm's epilogue (smat_gemm_bias), an [M, N] one filled first and added to
 * with beta 1; either way the roundings of (alpha A B) + bias. */
static void mm_bias(smat_tri tri, int M, int N, int K, float alpha, smat A, smat B, const float *bias,
                    int64_t rows, smat Y)
{
    if (bias && rows == 1 && tri == SMAT_FULL) {
        smat_gemm_bias(M, N, K, alpha, A, B, bias, Y);
        return;
    }
    if (bias) smat_fill_rows(Y, M, N, bias, (int)rows);
    smat_gemm(tri, M, N, K, alpha, A, B, bias ? 1.f : 0.f, Y);
}

/* Matrix ib of B (or of its gradient), stored (K, N) or, under trans_B, (N, K). */
static smat b_mat(const pp_matmul_batch *m, const float *base, int64_t ib)
{
    return (smat){(float *)base + ib * m->K * m->N, m->tb, (int)(m->tb ? m->K : m->N)};
}

/* y: the output, or its gradient in backward (same shape) */
static pp_status mm_plan_make(const pp_kernel_ctx *c, const pp_tensor *y, mm_plan *p, pp_error *err)
{
    PP_CHECK(pp_cpu_want_inputs(c, 2, 4, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_cpu_want_dtype(c, 1, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_matmul_batch_of(c, y, &p->m, err));
    if (p->m.ta)   /* the cpu folds such Transposes as strided operands instead (PP_KCAP_MATMUL_STRIDED) */
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (MatMul): trans_A is not supported on the cpu", c->node);
    p->bias_rows = 0;
    if (c->nin > 2 && c->in[2].data) PP_CHECK(bias_rows(c, p->m.M, p->m.N, &p->bias_rows, err));
    if (c->nin > 3 && (!c->in[3].data || c->in[3].dtype != PP_DTYPE_F32 || pp_tensor_numel(&c->in[3]) != 1))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): the fused scale must be a float32 scalar",
                            c->node);
    p->alpha = c->nin > 3 ? *(const float *)c->in[3].data : 1.f;
    return PP_OK;
}

/* ---------------- the causal triangle (PP_KCAP_MATMUL_CAUSAL) ---------------- */

/* What stage/fuse_causal.c marked on an attention product under a causal mask:
 *  y (attribute causal_Y = 1): the output above its diagonal is the fused bias alone (a
 *    mask under which the Softmax that reads it gives exact zeros there), so the product
 *    is computed on the lower triangle, and backward reads dY there only (the Softmax's
 *    gradient is 0 above);
 *  a (causal_A = 1): input 0 is 0 above its diagonal (that Softmax's output), so products
 *    skip its zeros, and its gradient is computed on the lower triangle only (0 above,
 *    where the Softmax's backward multiplies it by 0). */
typedef struct mm_causal {
    int y, a;
} mm_causal;

static pp_status causal_make(const pp_kernel_ctx *c, int64_t M, int64_t K, int64_t N, mm_causal *z, pp_error *err)
{
    int64_t y, a;
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "causal_Y", 0, &y, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "causal_A", 0, &a, c->node, err));
    *z = (mm_causal){y != 0, a != 0};
    if ((z->y && M != N) || (z->a && M != K))
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): a causal product needs a square %s (%lld x %lld)",
                            c->node, z->y ? "output" : "input 0", (long long)M, (long long)(z->y ? N : K));
    return PP_OK;
}

static smat_tri causal_fwd(mm_causal z) { return z.y ? SMAT_TRI_Z_LOWER : z.a ? SMAT_TRI_X_LOWER : SMAT_FULL; }

/* dA (M, K) = s dY B^T: dY lower under y, the lower triangle of dA under a */
static void grad_a(mm_causal z, int M, int K, int N, float s, smat GY, smat B, float beta, smat G)
{
    smat_gemm(z.y ? SMAT_TRI_X_LOWER : z.a ? SMAT_TRI_Z_LOWER : SMAT_FULL, M, K, N, s, GY, smat_t(B), beta, G);
}

/* dB (K, N) = s A^T dY, A^T upper under a; under y as dB^T = s dY^T A, dY^T upper */
static void grad_b(mm_causal z, int M, int K, int N, float s, smat A, smat GY, float beta, smat G)
{
    if (z.y) smat_gemm(SMAT_TRI_X_UPPER, N, K, M, s, smat_t(GY), A, beta, smat_t(G));
    else smat_gemm(z.a ? SMAT_TRI_X_UPPER : SMAT_FULL, K, N, M, s, smat_t(A), GY, beta, G);
}

/* ---------------- MatMul with folded Transposes ---------------- */

/* One operand seen through its perm: logical dims and element strides. */
typedef struct sview {
    int rank;
    int64_t dims[PP_MAX_RANK], st[PP_MAX_RANK];
} sview;

/* x: the tensor in memory; perm (n entries; NULL: none): logical dim k is x's dim perm[k]
 * (to_mem 0) or x's dim k is logical dim perm[k] (to_mem 1, the output's perm_Y). */
static pp_status sview_make(const pp_tensor *x, const int64_t *perm, int n, int to_mem, sview *v, const char *node,
                            pp_error *err)
{
    int64_t st[PP_MAX_RANK], s = 1;
    for (int d = x->rank - 1; d >= 0; d--) st[d] = s, s *= x->dims[d];
    v->rank = x->rank;
    if (perm && n != x->rank)
        return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (MatMul): a folded perm has %d entries for rank %d",
                            node, n, x->rank);
    for (int k = 0; k < x->rank; k++) {
        int64_t q = perm ? perm[k] : k;
        if (q < 0 || q >= x->rank)
            return pp_error_set(err, PP_ERR_INVALID_ARG, "node '%s' (MatMul): folded perm entry %lld out of range",
                                node, (long long)q);
        if (to_mem) v->dims[q] = x->dims[k], v->st[q] = st[k];
        else v->dims[k] = x->dims[q], v->st[k] = st[q];
    }
    return PP_OK;
}

/* The batch-b matrix of a view with batch strides; a logical matrix with unit column
 * stride is row-major, one with unit row stride transposed. */
static pp_status sview_mat(const sview *v, float *base, const int64_t *idx, smat *m, const char *node, pp_error *err)
{
    const int r = v->rank;
    int64_t off = 0;
    for (int d = 0; d + 2 < r; d++) off += idx[d] * v->st[d];
    if (v->st[r - 1] == 1 && (v->dims[r - 2] == 1 || v->st[r - 2] >= v->dims[r - 1]))
        *m = (smat){base + off, 0, (int)(v->dims[r - 2] == 1 ? v->dims[r - 1] : v->st[r - 2])};
    else if (v->st[r - 2] == 1 && (v->dims[r - 1] == 1 || v->st[r - 1] >= v->dims[r - 2]))
        *m = (smat){base + off, 1, (int)(v->dims[r - 1] == 1 ? v->dims[r - 2] : v->st[r - 1])};
    else
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (MatMul): a folded operand has no unit stride in its "
                            "last two dims", node);
    return PP_OK;
}

typedef struct perm_plan {
    sview a, b, y;
    int64_t M, K, N, batch;
    int64_t bias_rows;              /* 0: no fused bias */
    float alpha;
    mm_causal causal;
} perm_plan;

static int has_perms(const pp_kernel_ctx *c)
{
    return pp_attr_find(c->attrs, c->nattrs, "perm_A") || pp_attr_find(c->attrs, c->nattrs, "perm_B") ||
           pp_attr_find(c->attrs, c->nattrs, "perm_Y");
}

/* y: the output in memory, or its gradient (same shape) */
static pp_status perm_plan_make(const pp_kernel_ctx *c, const pp_tensor *y, perm_plan *p, pp_error *err)
{
    const char *nm[3] = {"perm_A", "perm_B", "perm_Y"};
    const pp_tensor *t[3] = {&c->in[0], &c->in[1], y};
    sview *v[3] = {&p->a, &p->b, &p->y};
    PP_CHECK(pp_cpu_want_inputs(c, 2, 4, err));
    if (c->nin > 2 && c->in[2].data && pp_attr_find(c->attrs, c->nattrs, "perm_Y"))
        return pp_error_set(err, PP_ERR_UNSUPPORTED, "node '%s' (MatMul): a folded output Transpose and a fused bias",
                            c->node);
    for (int i = 0; i < 3; i++) {
        const int64_t *perm;
        int n;
        PP_CHECK(pp_attr_ints(c->attrs, c->nattrs, nm[i], &perm, &n, c->node, err));
        PP_CHECK(sview_make(t[i], perm, n, i == 2, v[i], c->node, err));
    }
    const int r = p->y.rank;
    if (r < 3 || p->a.rank != r || p->b.rank != r)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): folded Transposes need operands of one rank >= 3",
                            c->node);
    p->batch = 1;
    for (int d = 0; d + 2 < r; d++) {
        if (p->a.dims[d] != p->y.dims[d] || p->b.dims[d] != p->y.dims[d])
            return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): folded Transposes need equal batch dims",
                                c->node);
        p->batch *= p->y.dims[d];
    }
    p->M = p->a.dims[r - 2], p->K = p->a.dims[r - 1], p->N = p->b.dims[r - 1];
    if (p->b.dims[r - 2] != p->K || p->y.dims[r - 2] != p->M || p->y.dims[r - 1] != p->N)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (MatMul): folded operands (%lld x %lld) (%lld x %lld) do not "
                            "give the output", c->node, (long long)p->M, (long long)p->K, (long long)p->b.dims[r - 2],
                            (long long)p->N);
    p->alpha = c->nin > 3 && c->in[3].data ? *(const float *)c->in[3].data : 1.f;
    p->bias_rows = 0;
    if (c->nin > 2 && c->in[2].data) PP_CHECK(bias_rows(c, p->M, p->N, &p->bias_rows, err));
    return causal_make(c, p->M, p->K, p->N, &p->causal, err);
}

/* The next batch multi-index (row-major over the batch dims). */
static void next_index(const sview *y, int64_t *idx)
{
    for (int d = y->rank - 3; d >= 0; d--) {
        if (++idx[d] < y->dims[d]) return;
        idx[d] = 0;
    }
}

static pp_status perm_forward(const pp_kernel_ctx *c, pp_error *err)
{
    perm_plan p;
    PP_CHECK(perm_plan_make(c, &c->out[0], &p, err));
    int64_t idx[PP_MAX_RANK] = {0};
    for (int64_t b = 0; b < p.batch; b++, next_index(&p.y, idx)) {
        smat A, B, Y;
        PP_CHECK(sview_mat(&p.a, c->in[0].data, idx, &A, c->node, err));
        PP_CHECK(sview_mat(&p.b, c->in[1].data, idx, &B, c->node, err));
        PP_CHECK(sview_mat(&p.y, c->out[0].data, idx, &Y, c->node, err));
        mm_bias(causal_fwd(p.causal), (int)p.M, (int)p.N, (int)p.K, p.alpha, A, B,
                p.bias_rows ? c->in[2].data : NULL, p.bias_rows, Y);
    }
    return PP_OK;
}

/* dA = s dY B^T, dB = s A^T dY per batch; every batch owns its blocks of dA and dB (no
 * broadcast), so a fresh gradient is assigned by beta 0. */
static pp_status perm_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, pp_error *err)
{
    perm_plan p;
    PP_CHECK(perm_plan_make(c, &grad_out[0], &p, err));
    const float beta_a = c->grad_fresh & 1 ? 0.f : 1.f, beta_b = c->grad_fresh >> 1 & 1 ? 0.f : 1.f;
    int64_t idx[PP_MAX_RANK] = {0};
    for (int64_t b = 0; b < p.batch; b++, next_index(&p.y, idx)) {
        smat A, B, GY, G;
        PP_CHECK(sview_mat(&p.y, grad_out[0].data, idx, &GY, c->node, err));
        if (grad_in[0].data) {
            PP_CHECK(sview_mat(&p.b, (float *)c->in[1].data, idx, &B, c->node, err));
            PP_CHECK(sview_mat(&p.a, grad_in[0].data, idx, &G, c->node, err));
            grad_a(p.causal, (int)p.M, (int)p.K, (int)p.N, p.alpha, GY, B, beta_a, G);
        }
        if (grad_in[1].data) {
            PP_CHECK(sview_mat(&p.a, (float *)c->in[0].data, idx, &A, c->node, err));
            PP_CHECK(sview_mat(&p.b, grad_in[1].data, idx, &G, c->node, err));
            grad_b(p.causal, (int)p.M, (int)p.K, (int)p.N, p.alpha, A, GY, beta_b, G);
        }
    }
    return PP_OK;
}

/* ---------------- MatMul ---------------- */

PP_FWD(pp_cpu_matmul_forward)
{
    if (has_perms(c)) return perm_forward(c, err);
    mm_plan p;
    PP_CHECK(mm_plan_make(c, &c->out[0], &p, err));
    const float *A = c->in[0].data, *B = c->in[1].data, *bias = p.bias_rows ? c->in[2].data : NULL;
    const float alpha = p.alpha;
    float *Y = c->out[0].data;
    int64_t M = p.m.M, K = p.m.K, N = p.m.N;
    mm_causal z;
    PP_CHECK(causal_make(c, M, K, N, &z, err));
    if (p.m.fold_a && !z.y && !z.a) {   /* the batch's rows as one matrix: an [M, N] bias repeats every M rows */
        mm_bias(SMAT_FULL, (int)(p.m.batch * M), (int)N, (int)K, alpha, (smat){(float *)A, 0, (int)K},
                b_mat(&p.m, B, 0), bias, p.bias_rows, (smat){Y, 0, (int)N});
        return PP_OK;
    }
    for (int64_t b = 0; b < p.m.batch; b++) {
        int64_t ia, ib;
        pp_matmul_batch_index(&p.m, b, &ia, &ib);
        mm_bias(causal_fwd(z), (int)M, (int)N, (int)K, alpha, (smat){(float *)A + ia * M * K, 0, (int)K},
                b_mat(&p.m, B, ib), bias, p.bias_rows, (smat){Y + b * M * N, 0, (int)N});
    }
    return PP_OK;
}

/* dA += s dY B^T and dB += s A^T dY (s: the fused scale), each only when asked;
 * broadcast operands accumulate over the output matrices that read them (sgemm beta = 1);
 * a fresh gradient (c->grad_fresh) is assigned by its first product (beta = 0);
 * a fused bias gets dY summed over rows. */
PP_BWD(pp_cpu_matmul_backward)
{
    const float *GY = grad_out[0].data;
    float *GA = grad_in[0].data, *GB = grad_in[1].data;
    if (GY && c->nin > 2 && c->in[2].data && grad_in[2].data)
        PP_CHECK(pp_bcast_reduce_add(&grad_in[2], &grad_out[0], 1.f, c->grad_fresh >> 2 & 1, c->node, err));
    if (!GY || (!GA && !GB)) return PP_OK;
    if (has_perms(c)) return perm_backward(c, grad_out, grad_in, err);
    mm_plan p;
    PP_CHECK(mm_plan_make(c, &grad_out[0], &p, err));
    const float *A = c->in[0].data, *B = c->in[1].data;
    int M = (int)p.m.M, K = (int)p.m.K, N = (int)p.m.N;
    const float s = p.alpha;
    /* beta of the first product into dA and dB; a broadcast one is zeroed, then added to */
    float beta_a = c->grad_fresh & 1 ? 0.f : 1.f, beta_b = c->grad_fresh >> 1 & 1 ? 0.f : 1.f;
    mm_causal z;
    PP_CHECK(causal_make(c, M, K, N, &z, err));
    if (p.m.fold_a && !z.y && !z.a) {
        int MB = (int)(p.m.batch * p.m.M);
        const smat gy = {(float *)GY, 0, N};
        if (GA) smat_gemm(SMAT_FULL, MB, K, N, s, gy, smat_t(b_mat(&p.m, B, 0)), beta_a, (smat){GA, 0, K});
        if (GB) smat_gemm(SMAT_FULL, K, N, MB, s, (smat){(float *)A, 1, K}, gy, beta_b, b_mat(&p.m, GB, 0));
        return PP_OK;
    }
    if (GA && beta_a == 0.f && p.m.a_mats != p.m.batch) {
        memset(GA, 0, (size_t)p.m.a_mats * p.m.M * p.m.K * sizeof *GA);
        beta_a = 1.f;
    }
    if (GB && beta_b == 0.f && p.m.b_mats != p.m.batch) {
        memset(GB, 0, (size_t)p.m.b_mats * p.m.K * p.m.N * sizeof *GB);
        beta_b = 1.f;
    }
    for (int64_t b = 0; b < p.m.batch; b++) {
        int64_t ia, ib;
        pp_matmul_batch_index(&p.m, b, &ia, &ib);
        const smat gy = {(float *)GY + b * p.m.M * p.m.N, 0, N};
        if (GA)
            grad_a(z, M, K, N, s, gy, b_mat(&p.m, B, ib), beta_a, (smat){GA + ia * p.m.M * p.m.K, 0, K});
        if (GB)
            grad_b(z, M, K, N, s, (smat){(float *)A + ia * p.m.M * p.m.K, 0, K}, gy, beta_b, b_mat(&p.m, GB, ib));
    }
    return PP_OK;
}

/* ---------------- Gemm: Y (M, N) = alpha A' B' + beta C ---------------- */

typedef struct gemm_plan {
    int ta, tb;
    float alpha, beta;
    int M, K, N;
    int has_c;
} gemm_plan;

static pp_status gemm_plan_make(const pp_kernel_ctx *c, const pp_tensor *y, gemm_plan *g, pp_error *err)
{
    int64_t ta, tb;
    PP_CHECK(pp_cpu_want_inputs(c, 2, 3, err));
    PP_CHECK(pp_cpu_want_dtype(c, 0, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_cpu_want_dtype(c, 1, PP_DTYPE_F32, 0, err));
    PP_CHECK(pp_cpu_want_dtype(c, 2, PP_DTYPE_F32, 1, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "transA", 0, &ta, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "transB", 0, &tb, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "alpha", 1.f, &g->alpha, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "beta", 1.f, &g->beta, c->node, err));
    const pp_tensor *A = &c->in[0], *B = &c->in[1];
    if (A->rank != 2 || B->rank != 2)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Gemm): A and B must have rank 2 (got %d and %d)", c->node,
                            A->rank, B->rank);
    g->ta = ta != 0;
    g->tb = tb != 0;
    g->M = (int)A->dims[g->ta ? 1 : 0];
    g->K = (int)A->dims[g->ta ? 0 : 1];
    int kb = (int)B->dims[g->tb ? 1 : 0];
    g->N = (int)B->dims[g->tb ? 0 : 1];
    if (kb != g->K)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Gemm): inner dims differ (A' has K=%d, B' has K=%d)",
                            c->node, g->K, kb);
    if (pp_tensor_numel(y) != (int64_t)g->M * g->N)
        return pp_error_set(err, PP_ERR_SHAPE, "node '%s' (Gemm): output has %lld elements, expected %d x %d", c->node,
                            (long long)pp_tensor_numel(y), g->M, g->N);
    g->has_c = c->nin > 2 && c->in[2].data && g->beta != 0.f;
    return PP_OK;
}

PP_FWD(pp_cpu_gemm_forward)
{
    gemm_plan g;
    PP_CHECK(gemm_plan_make(c, &c->out[0], &g, err));
    float *Y = c->out[0].data;
    const smat A = {c->in[0].data, g.ta, g.ta ? g.M : g.K}, B = {c->in[1].data, g.tb, g.tb ? g.K : g.N};
    const pp_tensor *ct = &c->in[2];
    if (g.has_c && g.beta == 1.f && ct->rank <= 2 && pp_tensor_numel(ct) == g.N &&
        (ct->rank == 0 || ct->dims[ct->rank - 1] == g.N)) {   /* Linear's bias row: [N], [1, N] */
        smat_gemm_bias(g.M, g.N, g.K, g.alpha, A, B, c->in[2].data, (smat){Y, 0, g.N});
        return PP_OK;
    }
    if (g.has_c) {
        /* Y = C broadcast to (M, N), then sgemm with beta */
        pp_bcast b = {0};
        const pp_tensor *ins[1] = {&c->in[2]};
        PP_CHECK(pp_bcast_init(&b, &c->out[0], ins, 1, c->node, err));
        const float *C = c->in[2].data;
        for (int64_t r = 0; r < b.rows; r++) {
            int64_t off;
            pp_bcast_row(&b, r, &off);
            for (int64_t j = 0; j < b.inner; j++) Y[r * b.inner + j] = C[off + j * b.inner_stride[0]];
        }
    }
    smat_gemm(SMAT_FULL, g.M, g.N, g.K, g.alpha, A, B, g.has_c ? g.beta : 0.f, (smat){Y, 0, g.N});
    return PP_OK;
}

/* With A' = op(A), B' = op(B): dA' = alpha dY B'^T and dB' = alpha A'^T dY; the stored
 * gradient is the transpose of dA' (dB') when transA (transB) is set; dC is beta dY summed
 * over what C broadcasts. Each adds to its gradient, or assigns a fresh one (grad_fresh). */
PP_BWD(pp_cpu_gemm_backward)
{
    const float *GY = grad_out[0].data;
    if (!GY) return PP_OK;
    gemm_plan g;
    PP_CHECK(gemm_plan_make(c, &grad_out[0], &g, err));
    const smat A = {c->in[0].data, g.ta, g.ta ? g.M : g.K}, B = {c->in[1].data, g.tb, g.tb ? g.K : g.N};
    const smat dy = {(float *)GY, 0, g.N};
    const unsigned fresh = c->grad_fresh;
    if (grad_in[0].data)
        smat_gemm(SMAT_FULL, g.M, g.K, g.N, g.alpha, dy, smat_t(B), fresh & 1 ? 0.f : 1.f,
                  (smat){grad_in[0].data, g.ta, g.ta ? g.M : g.K});
    if (grad_in[1].data)
        smat_gemm(SMAT_FULL, g.K, g.N, g.M, g.alpha, smat_t(A), dy, fresh >> 1 & 1 ? 0.f : 1.f,
                  (smat){grad_in[1].data, g.tb, g.tb ? g.K : g.N});
    if (c->nin > 2 && grad_in[2].data) {
        if (g.beta != 0.f)
            PP_CHECK(pp_bcast_reduce_add(&grad_in[2], &grad_out[0], g.beta, fresh >> 2 & 1, c->node, err));
        else if (fresh >> 2 & 1)   /* C is not read: its gradient is 0 */
            memset(grad_in[2].data, 0, pp_tensor_nbytes(&grad_in[2]));
    }
    return PP_OK;
}
