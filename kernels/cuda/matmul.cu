/* cuda MatMul (numpy batch broadcasting) and Gemm on cuBLAS: one
 * cublasSgemmStridedBatched per product when the batch has a uniform stride (attention's
 * (B, H, T, dh) x (B, H, dh, T)), one folded GEMM when B is a shared weight, and a
 * stream-ordered loop of GEMMs otherwise. TF32 tensor-op math is set on the handle. */
#include "cuda_internal.h"

static cublasOperation_t op_of(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* C = alpha op(Y)... in cuBLAS terms: cublas A = yp, cublas B = xp (launch.h) */
static pp_status run_gemm(const pp_kernel_ctx *c, const pp_cu_gemm *g, const float *xp, const float *yp, float *cp,
                          float alpha, float beta, pp_error *err)
{
    cublasHandle_t h = cu_of(c->dev)->blas;
    if (g->batch == 1)
        CUBLAS_TRY(c, cublasSgemm(h, op_of(g->transa), op_of(g->transb), g->m, g->n, g->k, &alpha, yp, g->lda, xp,
                                  g->ldb, &beta, cp, g->ldc));
    else
        CUBLAS_TRY(c, cublasSgemmStridedBatched(h, op_of(g->transa), op_of(g->transb), g->m, g->n, g->k, &alpha, yp,
                                                g->lda, g->stride_a, xp, g->ldb, g->stride_b, &beta, cp, g->ldc,
                                                g->stride_c, g->batch));
    return PP_OK;
}

/* One part of a MatMul: X, Y, C as launch.h's pp_cu_part table says. */
static pp_status mm_part(const pp_kernel_ctx *c, const pp_cu_mm *p, pp_cu_part part, const float *X, const float *Y,
                         float *C, float beta, pp_error *err)
{
    int serial;
    pp_cu_gemm g = pp_cu_mm_gemm(p, part, &serial);
    if (!serial) return run_gemm(c, &g, X, Y, C, 1.f, beta, err);
    for (int64_t b = 0; b < p->batch; b++) {
        int64_t ox, oy, oc;
        pp_cu_mm_offsets(p, part, b, &ox, &oy, &oc);
        PP_CHECK(run_gemm(c, &g, X + ox, Y + oy, C + oc, 1.f, beta, err));
    }
    return PP_OK;
}

static pp_status want_f32(const pp_kernel_ctx *c, int n, pp_error *err)
{
    for (int k = 0; k < n; k++)
        if (c->in[k].dtype != PP_DTYPE_F32)
            return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "input %d has dtype %s, expected float32", k,
                             pp_dtype_name(c->in[k].dtype));
    return PP_OK;
}

PP_CU_FWD(pp_cu_matmul_forward)
{
    pp_cu_mm p;
    PP_CHECK(want_f32(c, 2, err));
    PP_CHECK(pp_mm_plan_make(&c->in[0], &c->in[1], &c->out[0], &p, c->node, err));
    return mm_part(c, &p, PP_CU_Y, (const float *)c->in[0].data, (const float *)c->in[1].data, (float *)c->out[0].data,
                   0.f, err);
}

/* dA += dY B^T, dB += A^T dY (beta 1: backward accumulates) */
PP_CU_BWD(pp_cu_matmul_backward)
{
    const float *GY = (const float *)grad_out[0].data;
    if (!GY || (!grad_in[0].data && !grad_in[1].data)) return PP_OK;
    pp_cu_mm p;
    PP_CHECK(pp_mm_plan_make(&c->in[0], &c->in[1], &grad_out[0], &p, c->node, err));
    if (grad_in[0].data)
        PP_CHECK(mm_part(c, &p, PP_CU_DA, GY, (const float *)c->in[1].data, (float *)grad_in[0].data, 1.f, err));
    if (grad_in[1].data)
        PP_CHECK(mm_part(c, &p, PP_CU_DB, (const float *)c->in[0].data, GY, (float *)grad_in[1].data, 1.f, err));
    return PP_OK;
}

typedef struct gemm_attrs {
    pp_cu_gemm_op g;
    float alpha, beta;
    int has_c;
} gemm_attrs;

static pp_status gemm_plan(const pp_kernel_ctx *c, const pp_tensor *y, gemm_attrs *a, pp_error *err)
{
    int64_t ta, tb;
    PP_CHECK(want_f32(c, 2, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "transA", 0, &ta, c->node, err));
    PP_CHECK(pp_attr_int(c->attrs, c->nattrs, "transB", 0, &tb, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "alpha", 1.f, &a->alpha, c->node, err));
    PP_CHECK(pp_attr_float(c->attrs, c->nattrs, "beta", 1.f, &a->beta, c->node, err));
    const pp_tensor *A = &c->in[0], *B = &c->in[1];
    if (A->rank != 2 || B->rank != 2)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "A and B must have rank 2 (got %d and %d)", A->rank, B->rank);
    a->g.ta = ta != 0;
    a->g.tb = tb != 0;
    a->g.M = A->dims[a->g.ta ? 1 : 0];
    a->g.K = A->dims[a->g.ta ? 0 : 1];
    a->g.N = B->dims[a->g.tb ? 0 : 1];
    if (B->dims[a->g.tb ? 1 : 0] != a->g.K || pp_tensor_numel(y) != a->g.M * a->g.N)
        return pp_args_fail(c, PP_ERR_SHAPE, err, "A' is %lld x %lld, B is [%lld, %lld] (transB %d), Y has %lld elements",
                         (long long)a->g.M, (long long)a->g.K, (long long)B->dims[0], (long long)B->dims[1], a->g.tb,
                         (long long)pp_tensor_numel(y));
    a->has_c = c->nin > 2 && c->in[2].rank >= 0 && a->beta != 0.f;
    return PP_OK;
}

PP_CU_FWD(pp_cu_gemm_forward)
{
    gemm_attrs a;
    PP_CHECK(gemm_plan(c, &c->out[0], &a, err));
    a.has_c = a.has_c && c->in[2].data;
    if (a.has_c) PP_CHECK(pp_cu_broadcast_copy(c, &c->out[0], &c->in[2], err));
    pp_cu_gemm g = pp_cu_gemm_op_gemm(&a.g, PP_CU_Y);
    return run_gemm(c, &g, (const float *)c->in[0].data, (const float *)c->in[1].data, (float *)c->out[0].data, a.alpha,
                    a.has_c ? a.beta : 0.f, err);
}

PP_CU_BWD(pp_cu_gemm_backward)
{
    const float *GY = (const float *)grad_out[0].data;
    if (!GY) return PP_OK;
    gemm_attrs a;
    PP_CHECK(gemm_plan(c, &grad_out[0], &a, err));
    const float *A = (const float *)c->in[0].data, *B = (const float *)c->in[1].data;
    for (int k = 0; k < 2; k++) {
        if (!grad_in[k].data) continue;
        const pp_cu_part part = k ? PP_CU_DB : PP_CU_DA;
        const float *x, *y;
        pp_cu_gemm g = pp_cu_gemm_op_gemm(&a.g, part);
        pp_cu_gemm_op_operands(&a.g, part, A, B, GY, &x, &y);
        PP_CHECK(run_gemm(c, &g, x, y, (float *)grad_in[k].data, a.alpha, 1.f, err));
    }
    if (c->nin > 2 && grad_in[2].data && a.beta != 0.f) PP_CHECK(pp_cu_sum_into(c, &grad_in[2], &grad_out[0], a.beta, err));
    return PP_OK;
}
