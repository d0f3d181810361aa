/* GEMMs on cuBLASLt: one handle and one 32 MiB workspace per device, made with it, and a cache
 * of matmul descriptors, layouts and the heuristic's algorithm per GEMM (lt_plan.h's key:
 * shapes, types, transposes, epilogue, pointer alignments), so that a step only looks them up.
 * Where the heuristic finds no algorithm, or cublasLtMatmul refuses the call, the call says so
 * (the caller runs cublasGemmEx; the log says it: once per device for no algorithm, at each
 * refused key as a warning). */
#include "cuda_internal.h"
#include "lt_plan.h"

#include <stdlib.h>
#include <string.h>

static_assert(PP_CU_COMPUTE_32F_FAST_TF32 == CUBLAS_COMPUTE_32F_FAST_TF32, "lt_plan.h's compute type");
static_assert(PP_CU_LT_EPILOGUE_DEFAULT == CUBLASLT_EPILOGUE_DEFAULT && PP_CU_LT_EPILOGUE_BIAS == CUBLASLT_EPILOGUE_BIAS,
              "lt_plan.h's epilogues");

typedef struct cu_lt_entry {
    pp_cu_lt key;
    int ok;                             /* the heuristic gave an algorithm */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lay[3];      /* A, B, C (= D) */
    cublasLtMatmulAlgo_t algo;
} cu_lt_entry;

struct cu_lt {
    cublasLtHandle_t h;
    void *ws;                           /* PP_CU_LT_WORKSPACE bytes */
    cu_lt_entry *e;
    int n, cap;
    int warned;                         /* the fallback to cublasGemmEx was logged */
};

pp_status pp_cu_lt_create(pp_cuda *cu, pp_error *err)
{
    const pp_cublas_api *cb = pp_cublas();
    cu_lt *lt = (cu_lt *)calloc(1, sizeof *lt);
    if (!lt) return pp_error_set(err, PP_ERR_NOMEM, "cuda device %d: out of host memory for cuBLASLt", cu->ordinal);
    cu->lt = lt;
    cublasStatus_t s = cb->cublasLtCreate(&lt->h);
    if (s != CUBLAS_STATUS_SUCCESS) return pp_cu_fail(NULL, err, "cuBLASLt", "cublasLtCreate", cb->cublasGetStatusString(s));
    /* allocated once, with the device, and shared with the cuBLAS handle: no GEMM allocates */
    cudaError_t e = cudaMalloc(&lt->ws, PP_CU_LT_WORKSPACE);
    if (e != cudaSuccess) return pp_cu_fail(NULL, err, "CUDA", "cudaMalloc (cuBLASLt workspace)", cudaGetErrorString(e));
    /* cuBLAS's fallback GEMMs use it too (one stream: never at once), set after cublasSetStream,
     * which resets a handle's workspace: without one, cuBLAS allocates its own inside a
     * captured graph (PyTorch's issue 83461) */
    s = cb->cublasSetWorkspace(cu->blas, lt->ws, PP_CU_LT_WORKSPACE);
    if (s != CUBLAS_STATUS_SUCCESS)
        return pp_cu_fail(NULL, err, "cuBLAS", "cublasSetWorkspace", cb->cublasGetStatusString(s));
    return PP_OK;
}

static void entry_free(cu_lt_entry *x)
{
    const pp_cublas_api *cb = pp_cublas();
    for (int i = 0; i < 3; i++)
        if (x->lay[i]) cb->cublasLtMatrixLayoutDestroy(x->lay[i]);
    if (x->op) cb->cublasLtMatmulDescDestroy(x->op);
}

void pp_cu_lt_destroy(pp_cuda *cu)
{
    const pp_cublas_api *cb = pp_cublas();
    cu_lt *lt = cu->lt;
    if (!lt) return;
    for (int i = 0; i < lt->n; i++) entry_free(&lt->e[i]);
    free(lt->e);
    if (lt->ws) cudaFree(lt->ws);
    if (lt->h) cb->cublasLtDestroy(lt->h);
    free(lt);
    cu->lt = NULL;
}

#define LT_TRY(expr)                                                                        \
    do {                                                                                    \
        cublasStatus_t lt_s_ = (expr);                                                      \
        if (lt_s_ != CUBLAS_STATUS_SUCCESS) return pp_cu_fail(c, err, "cuBLASLt", #expr, pp_cublas()->cublasGetStatusString(lt_s_)); \
    } while (0)

/* The descriptors of key k and the heuristic's best algorithm for them (x->ok 0: none); the
 * bias pointer is set before the heuristic, which reads its alignment from it. */
static pp_status entry_make(const pp_kernel_ctx *c, cu_lt *lt, const pp_cu_lt *k, const void *bias, cu_lt_entry *x,
                            pp_error *err)
{
    const pp_cublas_api *cb = pp_cublas();
    memset(x, 0, sizeof *x);
    x->key = *k;
    LT_TRY(cb->cublasLtMatmulDescCreate(&x->op, (cublasComputeType_t)k->compute, CUDA_R_32F));
    const int32_t ta = k->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t epi = (uint32_t)k->epilogue;
    LT_TRY(cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_TRY(cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const int32_t bt = k->bias_type;
    if (k->epilogue == PP_CU_LT_EPILOGUE_BIAS &&   /* a type it refuses: no algorithm, the caller falls back */
        (cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt) !=
             CUBLAS_STATUS_SUCCESS ||
         cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) !=
             CUBLAS_STATUS_SUCCESS))
        return PP_OK;
    for (int i = 0; i < 3; i++) {
        LT_TRY(cb->cublasLtMatrixLayoutCreate(&x->lay[i], (cudaDataType_t)k->type[i], (uint64_t)k->rows[i],
                                          (uint64_t)k->cols[i], (int64_t)k->ld[i]));
        if (k->batch > 1) {
            const int32_t n = k->batch;
            const int64_t st = k->stride[i];
            LT_TRY(cb->cublasLtMatrixLayoutSetAttribute(x->lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
            LT_TRY(cb->cublasLtMatrixLayoutSetAttribute(x->lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st,
                                                    sizeof st));
        }
    }
    cublasLtMatmulPreference_t pref;
    LT_TRY(cb->cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = PP_CU_LT_WORKSPACE;
    const uint32_t al[4] = {(uint32_t)k->align[0], (uint32_t)k->align[1], (uint32_t)k->align[2],
                            (uint32_t)k->align[2]};
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t s = cb->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cb->cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof al[i]);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)   /* NOT_SUPPORTED or no result: the caller falls back */
        s = cb->cublasLtMatmulAlgoGetHeuristic(lt->h, x->op, x->lay[0], x->lay[1], x->lay[2], x->lay[2], pref, 1, &r,
                                           &found);
    cb->cublasLtMatmulPreferenceDestroy(pref);
    x->ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (x->ok) x->algo = r.algo;
    return PP_OK;
}

pp_status pp_cu_lt_gemm(const pp_kernel_ctx *c, const pp_cu_gemm *g, const void *xp, const void *yp, void *cp,
                        float alpha, float beta, const void *bias, int bias_type, int *done, pp_error *err)
{
    const pp_cublas_api *cb = pp_cublas();
    cu_lt *lt = cu_of(c->dev)->lt;
    *done = !g->m || !g->n;   /* nothing to write; k = 0 (C = beta C) is cuBLAS's */
    if (*done || !g->k) return PP_OK;
    const pp_cu_lt k = pp_cu_lt_of(g, bias ? bias_type : -1, yp, xp, cp, bias);
    cu_lt_entry *x = NULL;
    for (int i = 0; i < lt->n && !x; i++)
        if (!memcmp(&lt->e[i].key, &k, sizeof k)) x = &lt->e[i];
    if (!x) {
        if (lt->n == lt->cap) {
            const int cap = lt->cap ? 2 * lt->cap : 32;
            cu_lt_entry *e = (cu_lt_entry *)realloc(lt->e, (size_t)cap * sizeof *e);
            if (!e) return pp_error_set(err, PP_ERR_NOMEM, "out of host memory for cuBLASLt's plans");
            lt->e = e;
            lt->cap = cap;
        }
        x = &lt->e[lt->n];
        pp_status st = entry_make(c, lt, &k, bias, x, err);
        if (st != PP_OK) {
            entry_free(x);
            return st;
        }
        lt->n++;
    }
    if (bias && x->ok)
        LT_TRY(cb->cublasLtMatmulDescSetAttribute(x->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasStatus_t s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (x->ok)
        s = cb->cublasLtMatmul(lt->h, x->op, &alpha, yp, x->lay[0], xp, x->lay[1], &beta, cp, x->lay[2], cp, x->lay[2],
                               &x->algo, lt->ws, PP_CU_LT_WORKSPACE, cu_of(c->dev)->stream);
    if (s == CUBLAS_STATUS_SUCCESS) {
        *done = 1;
        return PP_OK;
    }
    if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE)
        return pp_cu_fail(c, err, "cuBLASLt", "cublasLtMatmul", cb->cublasGetStatusString(s));
    /* no algorithm (logged once per device), or one the call refuses (an fp32 bias beside a
     * 16-bit D, say; logged for each key, as INVALID_VALUE may also be a bad argument of ours):
     * this key runs on cublasGemmEx from now on */
    if (x->ok || !lt->warned++)
        pp_log(x->ok ? PP_LOG_WARN : PP_LOG_INFO, "cuda device %d: cuBLASLt %s a %lld x %lld x %lld GEMM (node '%s'%s)"
               "%s%s; such GEMMs run on cublasGemmEx", c->dev->index, x->ok ? "refuses" : "has no algorithm for", k.m,
               k.n, k.k, c->node ? c->node : "?", bias ? ", bias epilogue" : "", x->ok ? ": " : "",
               x->ok ? cb->cublasGetStatusString(s) : "");
    x->ok = 0;
    return PP_OK;
}
