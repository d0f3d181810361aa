/* cuda MatMul (numpy batch broadcasting) and Gemm on cuBLASLt (gemm_lt.cu: descriptors and the
 * heuristic's algorithm cached per GEMM, one 32 MiB workspace per device): one strided-batched
 * GEMM per product when the batch has a uniform stride (attention's (B, H, T, dh) x
 * (B, H, dh, T)), one folded GEMM when B is a shared weight, and a stream-ordered loop of GEMMs
 * otherwise; an A or B stored transposed (attributes trans_A, trans_B) by the transpose flags;
 * Gemm's bias row in the epilogue (CUBLASLT_EPILOGUE_BIAS). Where cuBLASLt's heuristic has no
 * algorithm the same call runs on cuBLAS (cublasSgemm* / cublasGemm*Ex, TF32 tensor-op math on
 * the handle). The bfloat16 / float16 kernels (the 16-bit tables of table.cu) issue the same
 * calls with 16-bit A and B, C in the output's dtype (float32 for a weight gradient accumulated
 * into the fp32 master gradient) and fp32 compute, Gemm's bias included; a dtype mix cuBLAS
 * cannot take goes through the adapter (kernels/lowp.c) on the F32 kernel. */
#include "cuda_internal.h"
#include "lowp.h"
#include "lt_plan.h"
#include <onnxpipe/backend/kernels_backend.h>

static_assert(PP_CU_R_32F == CUDA_R_32F && PP_CU_R_16F == CUDA_R_16F && PP_CU_R_16BF == CUDA_R_16BF,
              "launch.h's cuBLAS data types");
static_assert(PP_CU_COMPUTE_32F == CUBLAS_COMPUTE_32F, "launch.h's cuBLAS compute type");

static cublasOperation_t op_of(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* C = alpha op(Y)... in cuBLAS terms: cublas A = yp, cublas B = xp (launch.h): on cuBLASLt,
 * else (no algorithm) on cuBLAS */
static pp_status run_gemm(const pp_kernel_ctx *c, const pp_cu_gemm *g, const void *xp, const void *yp, void *cp,
                          float alpha, float beta, pp_error *err)
{
    const pp_cublas_api *cb = pp_cublas();
    int done;
    PP_CHECK(pp_cu_lt_gemm(c, g, xp, yp, cp, alpha, beta, NULL, 0, &done, err));
    if (done) return PP_OK;
    cublasHandle_t h = cu_of(c->dev)->blas;
    const cublasOperation_t ta = op_of(g->transa), tb = op_of(g->transb);
    if (g->atype == PP_CU_R_32F && g->ctype == PP_CU_R_32F) {
        const float *y = (const float *)yp, *x = (const float *)xp;
        if (g->batch == 1)
            CUBLAS_TRY(c, cb->cublasSgemm(h, ta, tb, g->m, g->n, g->k, &alpha, y, g->lda, x, g->ldb, &beta, (float *)cp,
                                      g->ldc));
        else
            CUBLAS_TRY(c, cb->cublasSgemmStridedBatched(h, ta, tb, g->m, g->n, g->k, &alpha, y, g->lda, g->stride_a, x,
                                                    g->ldb, g->stride_b, &beta, (float *)cp, g->ldc, g->stride_c,
                                                    g->batch));
        return PP_OK;
    }
    const cudaDataType_t at = (cudaDataType_t)g->atype, bt = (cudaDataType_t)g->btype, ct = (cudaDataType_t)g->ctype;
    const cublasComputeType_t comp = (cublasComputeType_t)g->compute;
    if (g->batch == 1)
        CUBLAS_TRY(c, cb->cublasGemmEx(h, ta, tb, g->m, g->n, g->k, &alpha, yp, at, g->lda, xp, bt, g->ldb, &beta, cp, ct,
                                   g->ldc, comp, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_TRY(c, cb->cublasGemmStridedBatchedEx(h, ta, tb, g->m, g->n, g->k, &alpha, yp, at, g->lda, g->stride_a, xp,
                                                 bt, g->ldb, g->stride_b, &beta, cp, ct, g->ldc, g->stride_c, g->batch,
                                                 comp, CUBLAS_GEMM_DEFAULT));
    return PP_OK;
}

static pp_status bad_types(const pp_kernel_ctx *c, const pp_tensor *X, const pp_tensor *Y, const pp_tensor *C,
                           pp_error *err)
{
    return pp_args_fail(c, PP_ERR_UNSUPPORTED, err, "no cuBLAS GEMM of %s x %s into %s", pp_dtype_name(X->dtype),
                        pp_dtype_name(Y->dtype), pp_dtype_name(C->dtype));
}

/* One part of a MatMul: X, Y, C as launch.h's pp_cu_part table says. */
static pp_status mm_part(const pp_kernel_ctx *c, const pp_cu_mm *p, pp_cu_part part, const pp_tensor *X,
                         const pp_tensor *Y, const pp_tensor *C, float beta, pp_error *err)
{
    int serial;
    pp_cu_gemm g = pp_cu_mm_gemm(p, part, &serial);
    if (!pp_cu_gemm_set_types(&g, X->dtype, Y->dtype, C->dtype)) return bad_types(c, X, Y, C, err);
    if (!serial) return run_gemm(c, &g, X->data, Y->data, C->data, 1.f, beta, err);
    const size_t sx = pp_dtype_size(X->dtype), sy = pp_dtype_size(Y->dtype), sc = pp_dtype_size(C->dtype);
    for (int64_t b = 0; b < p->batch; b++) {
        int64_t ox, oy, oc;
        pp_cu_mm_offsets(p, part, b, &ox, &oy, &oc);
        PP_CHECK(run_gemm(c, &g, (const char *)X->data + ox * sx, (const char *)Y->data + oy * sy,
                          (char *)C->data + oc * sc, 1.f, beta, err));
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

/* Whether cuBLAS takes C = X Y in these dtypes (the 16-bit kernels' test before going native). */
static int gemm_types_ok(const pp_tensor *X, const pp_tensor *Y, const pp_tensor *C)
{
    pp_cu_gemm g = {};
    return pp_cu_gemm_set_types(&g, X->dtype, Y->dtype, C->dtype);
}

static pp_status matmul_forward(const pp_kernel_ctx *c, pp_error *err)
{
    pp_cu_mm p;
    PP_CHECK(pp_matmul_batch_of(c, &c->out[0], &p, err));
    return mm_part(c, &p, PP_CU_Y, &c->in[0], &c->in[1], &c->out[0], 0.f, err);
}

/* dA += dY B^T, dB += A^T dY (beta 1: backward accumulates) */
static pp_status matmul_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, pp_error *err)
{
    if (!grad_out[0].data || (!grad_in[0].data && !grad_in[1].data)) return PP_OK;
    pp_cu_mm p;
    PP_CHECK(pp_matmul_batch_of(c, &grad_out[0], &p, err));
    const pp_tensor *dy = &grad_out[0];
    if (grad_in[0].data)   /* launch.h: under trans_A, X = B and Y = dY */
        PP_CHECK(mm_part(c, &p, PP_CU_DA, p.ta ? &c->in[1] : dy, p.ta ? dy : &c->in[1], &grad_in[0], 1.f, err));
    if (grad_in[1].data)   /* under trans_B, X = dY and Y = A */
        PP_CHECK(mm_part(c, &p, PP_CU_DB, p.tb ? dy : &c->in[0], p.tb ? &c->in[0] : dy, &grad_in[1], 1.f, err));
    return PP_OK;
}

PP_CU_FWD(pp_cu_matmul_forward)
{
    PP_CHECK(want_f32(c, 2, err));
    return matmul_forward(c, err);
}

PP_CU_BWD(pp_cu_matmul_backward)
{
    PP_CHECK(want_f32(c, 2, err));
    return matmul_backward(c, grad_out, grad_in, err);
}

PP_CU_FWD(pp_cu_matmul_lp_forward)
{
    if (!gemm_types_ok(&c->in[0], &c->in[1], &c->out[0])) return pp_lowp_forward(c, err);
    return matmul_forward(c, err);
}

PP_CU_BWD(pp_cu_matmul_lp_backward)
{
    if ((grad_in[0].data && !gemm_types_ok(&grad_out[0], &c->in[1], &grad_in[0])) ||
        (grad_in[1].data && !gemm_types_ok(&c->in[0], &grad_out[0], &grad_in[1])))
        return pp_lowp_backward(c, grad_out, grad_in, err);
    return matmul_backward(c, grad_out, grad_in, err);
}

typedef struct gemm_attrs {
    pp_cu_gemm_op g;
    float alpha, beta;
    int has_c;
} gemm_attrs;

static pp_status gemm_plan(const pp_kernel_ctx *c, const pp_tensor *y, gemm_attrs *a, pp_error *err)
{
    int64_t ta, tb;
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

/* Y = alpha op(A) op(B) + beta C: a bias row C in cuBLASLt's epilogue where it takes it, else C
 * broadcast into Y and added by the GEMM's beta */
static pp_status gemm_forward(const pp_kernel_ctx *c, pp_error *err)
{
    gemm_attrs a;
    PP_CHECK(gemm_plan(c, &c->out[0], &a, err));
    a.has_c = a.has_c && c->in[2].data;
    pp_cu_gemm g = pp_cu_gemm_op_gemm(&a.g, PP_CU_Y);
    if (!pp_cu_gemm_set_types(&g, c->in[0].dtype, c->in[1].dtype, c->out[0].dtype))
        return bad_types(c, &c->in[0], &c->in[1], &c->out[0], err);
    int bias_type, done = 0;
    if (a.has_c && pp_cu_lt_bias_epilogue(&c->in[2], a.g.N, a.beta, c->out[0].dtype, &bias_type))
        PP_CHECK(pp_cu_lt_gemm(c, &g, c->in[0].data, c->in[1].data, c->out[0].data, a.alpha, 0.f, c->in[2].data,
                               bias_type, &done, err));
    if (done) return PP_OK;
    if (a.has_c) PP_CHECK(pp_cu_broadcast_copy(c, &c->out[0], &c->in[2], err));
    return run_gemm(c, &g, c->in[0].data, c->in[1].data, c->out[0].data, a.alpha, a.has_c ? a.beta : 0.f, err);
}

/* dA and dB (those asked for); with_bias: also C's gradient, float32 (dY float32 or 16-bit) */
static pp_status gemm_backward(const pp_kernel_ctx *c, const pp_tensor *grad_out, pp_tensor *grad_in, int with_bias,
                               pp_error *err)
{
    if (!grad_out[0].data) return PP_OK;
    gemm_attrs a;
    PP_CHECK(gemm_plan(c, &grad_out[0], &a, err));
    for (int k = 0; k < 2; k++) {
        if (!grad_in[k].data) continue;
        const pp_cu_part part = k ? PP_CU_DB : PP_CU_DA;
        const void *x, *y;
        pp_cu_gemm g = pp_cu_gemm_op_gemm(&a.g, part);
        if (!pp_cu_gemm_set_types(&g, grad_out[0].dtype, grad_out[0].dtype, grad_in[k].dtype))
            return bad_types(c, &grad_out[0], &c->in[k], &grad_in[k], err);
        pp_cu_gemm_op_operands(&a.g, part, c->in[0].data, c->in[1].data, grad_out[0].data, &x, &y);
        PP_CHECK(run_gemm(c, &g, x, y, grad_in[k].data, a.alpha, 1.f, err));
    }
    if (with_bias && c->nin > 2 && grad_in[2].data && a.beta != 0.f)
        PP_CHECK(pp_cu_sum_into(c, &grad_in[2], &grad_out[0], a.beta, err));
    return PP_OK;
}

PP_CU_FWD(pp_cu_gemm_forward)
{
    PP_CHECK(want_f32(c, 2, err));
    return gemm_forward(c, err);
}

PP_CU_BWD(pp_cu_gemm_backward)
{
    PP_CHECK(want_f32(c, 2, err));
    return gemm_backward(c, grad_out, grad_in, 1, err);
}

/* A, B and dY of one 16-bit dtype */
static int gemm_lp_native(const pp_kernel_ctx *c, const pp_tensor *y)
{
    return gemm_types_ok(&c->in[0], &c->in[1], y) && c->in[0].dtype == y->dtype;
}

/* Y in A's dtype or float32; the bias C (float32 or A's dtype) is broadcast into Y, rounded
 * to Y's dtype (as torch.autocast casts addmm's bias), and the GEMM adds alpha A B to beta
 * times it in fp32, rounding Y once, as the fp32 Gemm does */
PP_CU_FWD(pp_cu_gemm_lp_forward)
{
    const int bias = c->nin > 2 && c->in[2].data;
    if (!gemm_types_ok(&c->in[0], &c->in[1], &c->out[0]) ||
        (bias && c->in[2].dtype != PP_DTYPE_F32 && c->in[2].dtype != c->in[0].dtype))
        return pp_lowp_forward(c, err);
    return gemm_forward(c, err);
}

/* dA, dB native (into 16 bits or float32); C's gradient native into float32 (the 16-bit dY
 * summed in fp32), a 16-bit one (C an activation) through the adapter, alone */
PP_CU_BWD(pp_cu_gemm_lp_backward)
{
    if (!grad_out[0].data) return PP_OK;
    for (int k = 0; k < 2; k++)
        if (grad_in[k].data && (!gemm_lp_native(c, &grad_out[0]) ||
                                (grad_in[k].dtype != PP_DTYPE_F32 && grad_in[k].dtype != grad_out[0].dtype)))
            return pp_lowp_backward(c, grad_out, grad_in, err);
    const int dc16 = c->nin > 2 && grad_in[2].data && grad_in[2].dtype != PP_DTYPE_F32;
    PP_CHECK(gemm_backward(c, grad_out, grad_in, !dc16, err));
    if (!dc16) return PP_OK;
    pp_tensor in[3] = {c->in[0], c->in[1], c->in[2]}, gi[3] = {grad_in[0], grad_in[1], grad_in[2]};
    in[0].data = in[1].data = gi[0].data = gi[1].data = NULL;   /* the F32 kernel then does C's part only */
    pp_kernel_ctx cb = *c;
    cb.in = in;
    return pp_lowp_backward(&cb, grad_out, gi, err);
}
